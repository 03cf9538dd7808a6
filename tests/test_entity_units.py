"""`entity_units`: an entity's text units ranked by how many of its relationships each one holds (GraphRAG's
rule), ties in the entity's own listed order - the gathered-array count against a per-unit reference."""

from __future__ import annotations

import random

from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.records import Entity, Relationship, TextUnit
from shared_context.text_unit_selection import entity_units


def _index(seed: int) -> Index:
    rng = random.Random(seed)
    names = [f"E{i}" for i in range(12)]
    units = [TextUnit(id=f"u{j}", short_id=str(j), text=f"unit {j}") for j in range(15)]
    rels = []
    for i in range(40):
        source, target = rng.sample(names, 2)
        rels.append(Relationship(id=f"r{i}", short_id=str(i), source=source, target=target,
                                 text_unit_ids=[u.id for u in rng.sample(units, rng.randint(0, 3))]))
    entities = [Entity(id=n, short_id=str(i), title=n, text_unit_ids=[u.id for u in rng.sample(units, rng.randint(0, 8))])
                for i, n in enumerate(names)]
    return index_from_records(entities=entities, relationships=rels, text_units=units)


class _Plain:  # weak-referenceable, as `per_index_cache` needs
    def __init__(self, entity_text_units: list[list[int]], text_unit_relationships: list[list[int]],
                 relationship_endpoints: object) -> None:
        self.entity_text_units = entity_text_units
        self.text_unit_relationships = text_unit_relationships
        self.relationship_endpoints = relationship_endpoints


def _reference(index: Index, entity: int) -> list[tuple[int, int]]:
    ends = index.relationship_endpoints
    scored = []
    for order, unit in enumerate(index.entity_text_units[entity]):
        n = sum(1 for r in index.text_unit_relationships[unit] if entity in (int(ends[r, 0]), int(ends[r, 1])))
        scored.append((-n, order, unit))
    return [(unit, -neg) for neg, _, unit in sorted(scored)]


def test_entity_units_rank_like_the_per_unit_count() -> None:
    for seed in range(5):
        index = _index(seed)
        for entity in range(len(index.entities)):
            expected = _reference(index, entity)
            assert entity_units(index, entity) == expected
            # the same from plain lists of lists (duck-typed indexes have no CSR arrays)
            plain = _Plain(list(index.entity_text_units), list(index.text_unit_relationships),
                           index.relationship_endpoints)
            assert entity_units(plain, entity) == expected
