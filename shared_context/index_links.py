"""Graph derivation at load: relationship endpoints, per-entity relationship lists, entity <-> text unit
links, claims and community membership per entity, and each text unit's document.

Pure functions of the record tables (`LoadTables`), returning arrays the derived store can keep
(`shared_context.derived_entries`); what a table lacked (degrees, link lists of one side, document ids)
is filled into its records. Every dangling reference is counted into `LoadNotes`, naming the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import TypeAlias

import numpy as np
import pyarrow as pa

from shared_context import arrow_keys
from shared_context.errors import IndexFormatError
from shared_context.index import ID_MAPS, Adjacency, group
from shared_context.records import (
    Claim,
    Community,
    CommunityReport,
    Document,
    Entity,
    RecordTable,
    Relationship,
    TextUnit,
    array_of,
    numeric_view,
    string_array,
    values_of,
)

__all__ = [
    "Keys",
    "LoadNotes",
    "LoadTables",
    "claim_arrays",
    "entity_communities",
    "graph_arrays",
    "set_values",
    "text_unit_documents",
    "text_unit_link_arrays",
]

Keys: TypeAlias = "dict[str, int] | pa.Array | pa.ChunkedArray"
Values: TypeAlias = "Sequence[str] | pa.Array | pa.ChunkedArray"



class LoadNotes:
    """What a load repaired or skipped (it becomes `Index.warnings`), each note naming its source file."""

    def __init__(self, source_files: dict[str, str], warnings: list[str]) -> None:
        self.source_files = source_files
        self.warnings = warnings

    def file(self, table: str) -> str:
        return self.source_files.get(table, table)

    def add(self, note: str) -> None:
        self.warnings.append(note)

    def dangling(self, count: int, table: str, column: str, what: str) -> None:
        if count:
            self.warnings.append(f"{self.file(table)}: column {column!r}: {count} ids name no {what}; ignored")


@dataclass
class LoadTables:
    """The record tables being loaded, with the id maps of those held as plain lists."""

    entities: Sequence[Entity]
    relationships: Sequence[Relationship]
    text_units: Sequence[TextUnit]
    communities: Sequence[Community]
    community_reports: Sequence[CommunityReport]
    claims: Sequence[Claim]
    documents: Sequence[Document]
    notes: LoadNotes
    id_maps: dict[str, dict[str, int]] = field(default_factory=dict)  # ID_MAPS attribute -> map (lists only)

    def table(self, name: str) -> Sequence[object]:
        """A record table by its attribute name ("entities", "community_reports", ...)."""
        records: Sequence[object] = getattr(self, name)
        return records

    def keys(self, table: str, field: str) -> Keys:
        """The values of one unique field of a large table, for `positions` / `lookup_lists`."""
        records = self.table(table)
        if isinstance(records, RecordTable):
            keys: Keys = records.arrow_column(field)
            return keys
        return self.id_maps[next(a for a, spec in ID_MAPS.items() if spec[:2] == (table, field))]


def column(records: Sequence[object], name: str) -> Values:
    """One field of every record: the Arrow column of a `RecordTable` (no Python object per row at load),
    else a list."""
    return records.arrow_column(name) if isinstance(records, RecordTable) else values_of(records, name)


def positions(values: Values, pos: Keys) -> np.ndarray:
    """Position of each value among the keys (-1 when absent), hashed in Arrow rather than per-item
    dict lookups (2x faster on millions of ids). `pos` is the Arrow array of the unique keys in row
    order, or a dict mapping them to 0..n-1 in insertion order."""
    if not len(values):
        return np.zeros(0, dtype=np.int64)
    keys = pos if isinstance(pos, pa.Array | pa.ChunkedArray) else string_array(list(pos))
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    arrow = values if isinstance(values, pa.Array | pa.ChunkedArray) else string_array(values)
    return arrow_keys.index_in(arrow, keys)


def lookup_lists(lists: Values | Sequence[Sequence[str]], pos: Keys) -> tuple[np.ndarray, np.ndarray, int]:
    """Flatten id lists (Python lists, or an Arrow list column flattened in Arrow) into (row, target
    position) pairs; returns also the number of unknown ids."""
    if isinstance(lists, pa.ChunkedArray):
        import pyarrow.compute as pc  # imported on first use: ~50 ms at import time

        lengths = np.asarray(numeric_view(pc.list_value_length(lists), fill=0), dtype=np.int64)
        flat: Values = pa.chunked_array([chunk.flatten() for chunk in lists.chunks], type=lists.type.value_type)
    else:
        lengths = np.array(list(map(len, lists)), dtype=np.int64)
        flat = list(chain.from_iterable(lists))
    rows = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    del lengths
    targets = positions(flat, pos)  # the flattened ids are read in place: no copy of the list column
    del flat
    ok = targets >= 0
    return rows[ok], targets[ok], int((~ok).sum())


def _unique_pairs(a: np.ndarray, b: np.ndarray, n_b: int) -> tuple[np.ndarray, np.ndarray]:
    if len(a) == 0:
        return a, b
    codes = np.sort(a * max(n_b, 1) + b)  # sort-based dedupe: faster than np.unique's hashing here
    keep = np.ones(len(codes), dtype=bool)
    keep[1:] = codes[1:] != codes[:-1]
    codes = codes[keep]
    return codes // max(n_b, 1), codes % max(n_b, 1)


def set_values(records: Sequence[object], name: str, values: Sequence[object] | np.ndarray) -> None:
    """Set one field of every record (load-time repairs), column-wise for a RecordTable."""
    if isinstance(records, RecordTable):
        records.with_column(name, values)
        return
    if isinstance(values, np.ndarray):
        values = values.tolist()
    for record, value in zip(records, values, strict=True):
        setattr(record, name, value)


# ---------------------------------------------------------------------------- relationships


def graph_arrays(t: LoadTables) -> dict[str, np.ndarray]:
    """Relationship endpoints and per-entity relationship lists (sorted by combined_degree desc, weight
    desc, position), plus the degrees filled in when the tables lacked them."""
    n_ent, n_rel = len(t.entities), len(t.relationships)
    titles = t.keys("entities", "title")
    src = positions(column(t.relationships, "source"), titles)
    tgt = positions(column(t.relationships, "target"), titles)
    both = (src < 0) & (tgt < 0)
    if both.any():
        bad = [t.relationships[i].source for i in np.flatnonzero(both)[:1]]
        raise IndexFormatError(
            f"{int(both.sum())} relationships name no entity at either end (e.g. {bad[0]!r}); "
            "source/target must be entity titles",
            file=t.notes.file("relationships"),
            column="source",
        )
    for col, arr, attr in (("source", src, "source"), ("target", tgt, "target")):
        missing = np.flatnonzero(arr < 0)
        if len(missing):
            example = getattr(t.relationships[int(missing[0])], attr)
            t.notes.add(
                f"{t.notes.file('relationships')}: column {col!r}: {len(missing)} values name no entity "
                f"(e.g. {example!r}); those relationships are kept and listed under their other endpoint"
            )
    endpoints = np.stack([src, tgt], axis=1) if n_rel else np.zeros((0, 2), dtype=np.int64)
    entity_degree, combined_degree = _derive_degrees(t, src, tgt)
    combined = array_of(t.relationships, "combined_degree").reshape(n_rel)
    weight = array_of(t.relationships, "weight").reshape(n_rel)
    rows = np.arange(n_rel, dtype=np.int64)
    rank = np.empty(n_rel, dtype=np.int64)
    rank[np.lexsort((rows, -weight, -combined))] = rows
    self_loop = src == tgt
    keys = np.concatenate([src, tgt[~self_loop]])
    rels = np.concatenate([rows, rows[~self_loop]])
    ok = keys >= 0
    adjacency = group(keys[ok], rels[ok], n_ent, order=rank[rels[ok]])
    return {
        "endpoints": endpoints,
        **adjacency.arrays("er"),
        "entity_degree": entity_degree,
        "combined_degree": combined_degree,
    }


def _derive_degrees(t: LoadTables, src: np.ndarray, tgt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fill entity degree / relationship combined_degree when the tables lacked them (all zero);
    returns the filled arrays (empty when the table had the column) for the derived store."""
    none = np.zeros(0, dtype=np.int64)
    if not t.relationships:
        return none, none
    need_entity = bool(len(t.entities)) and not array_of(t.entities, "degree").any()
    need_combined = not array_of(t.relationships, "combined_degree").any()
    if not (need_entity or need_combined):
        return none, none
    n_ent = len(t.entities)
    ok = (src >= 0) & (tgt >= 0) & (src != tgt)
    lo, hi = np.minimum(src[ok], tgt[ok]), np.maximum(src[ok], tgt[ok])
    a, b = _unique_pairs(lo, hi, n_ent)
    degree = np.bincount(np.concatenate([a, b]), minlength=n_ent) if n_ent else np.zeros(0, dtype=np.int64)
    entity_degree, combined_degree = none, none
    if need_entity:
        entity_degree = degree.astype(np.int64)
        set_values(t.entities, "degree", degree)
    if need_combined:
        deg = array_of(t.entities, "degree", np.int64).reshape(n_ent)
        combined_degree = np.where(src >= 0, deg[np.maximum(src, 0)], 0) + np.where(
            tgt >= 0, deg[np.maximum(tgt, 0)], 0
        )
        set_values(t.relationships, "combined_degree", combined_degree)
        t.notes.add(f"{t.notes.file('relationships')}: column 'combined_degree' missing; derived from entity degrees")
    return entity_degree, combined_degree


def apply_degrees(t: LoadTables, found: dict[str, np.ndarray]) -> None:
    """The degrees `graph_arrays` filled in, set again on a load that read them from the store."""
    if len(found["entity_degree"]) and t.entities:
        set_values(t.entities, "degree", found["entity_degree"])
    if len(found["combined_degree"]) and t.relationships:
        set_values(t.relationships, "combined_degree", found["combined_degree"])


# ---------------------------------------------------------------------------- text units


def text_unit_link_arrays(t: LoadTables) -> dict[str, np.ndarray]:
    """entity <-> text unit and text unit -> relationship links, the union of both sides' id lists, and
    which sides a table did not carry (`fill`, set by `fill_link_lists`)."""
    # One side of the links at a time, grouped and its scratch arrays freed before the next: at 1M
    # entities each id list holds millions of entries.
    n_ent, n_tu = len(t.entities), len(t.text_units)
    ents, tus, from_entities, from_units = _link_pairs(
        t, ("entities", "text_unit_ids", "text unit"), ("text_units", "entity_ids", "entity"), "entities"
    )
    fill = [not from_units and len(ents) > 0, not from_entities and len(ents) > 0]
    out = {**group(ents, tus, n_ent).arrays("etu"), **group(tus, ents, n_tu).arrays("tue")}
    del ents, tus
    rels, tus2, from_relationships, from_units = _link_pairs(
        t, ("relationships", "text_unit_ids", "text unit"), ("text_units", "relationship_ids", "relationship"),
        "relationships",
    )
    fill += [not from_units and len(rels) > 0, not from_relationships and len(rels) > 0]
    out.update(group(tus2, rels, n_tu).arrays("tur"))
    return {**out, "fill": np.array(fill, dtype=np.int8)}


def _link_pairs(
    t: LoadTables, owner: tuple[str, str, str], units: tuple[str, str, str], target: str
) -> tuple[np.ndarray, np.ndarray, bool, bool]:
    """Unique (record position, text unit position) pairs from both sides: the records' unit id lists
    and the units' record id lists; plus whether each side named any."""
    table, col, what = owner
    rows, tus, bad = lookup_lists(column(t.table(table), col), t.keys("text_units", "id"))
    t.notes.dangling(bad, table, col, what)
    u_table, u_column, u_what = units
    u_rows, targets, u_bad = lookup_lists(column(t.text_units, u_column), t.keys(target, "id"))
    t.notes.dangling(u_bad, u_table, u_column, u_what)
    named = (len(rows) > 0, len(u_rows) > 0)
    a, b = np.concatenate([rows, targets]), np.concatenate([tus, u_rows])
    del rows, tus, u_rows, targets
    pairs = _unique_pairs(a, b, len(t.text_units))
    return pairs[0], pairs[1], named[0], named[1]


def fill_link_lists(t: LoadTables, fill: list[int], entity_units: Adjacency, unit_entities: Adjacency,
                    unit_relationships: Adjacency) -> None:
    """Fill the id-list fields a table did not carry (e.g. LightRAG text units have no entity_ids)."""
    fill_tu_entities, fill_entity_tus, fill_tu_rels, fill_rel_tus = fill
    if not (fill_tu_entities or fill_entity_tus or fill_tu_rels or fill_rel_tus):
        return
    entity_ids, unit_ids = values_of(t.entities, "id"), values_of(t.text_units, "id")
    if fill_tu_entities:
        set_values(t.text_units, "entity_ids", [[entity_ids[i] for i in m] for m in unit_entities])
    if fill_entity_tus:
        set_values(t.entities, "text_unit_ids", [[unit_ids[j] for j in u] for u in entity_units])
    if fill_tu_rels:
        rel_ids = values_of(t.relationships, "id")
        set_values(t.text_units, "relationship_ids", [[rel_ids[i] for i in m] for m in unit_relationships])
    if fill_rel_tus:
        units_of = np.repeat(np.arange(len(unit_relationships), dtype=np.int64), unit_relationships.lengths())
        rel_units = group(np.asarray(unit_relationships.indices), units_of, len(t.relationships))
        set_values(t.relationships, "text_unit_ids", [[unit_ids[j] for j in u] for u in rel_units])


def text_unit_documents(t: LoadTables, document_pos: dict[str, int]) -> list[int]:
    """Each text unit's document position (-1 when unknown); a unit naming no document takes the
    document whose `text_unit_ids` lists it, and its `document_id` is filled in."""
    named_in_place = positions(column(t.text_units, "document_id"), document_pos)
    if "" not in document_pos and (not len(named_in_place) or int(named_in_place.min()) >= 0):
        # every unit names a known document (a stored table has them filled): nothing to repair,
        # and no Python string per unit
        found: list[int] = named_in_place.tolist()
        return found
    doc_of: dict[str, int] = {}
    for d_pos, doc in enumerate(t.documents):
        for tu_id in doc.text_unit_ids:
            doc_of.setdefault(tu_id, d_pos)
    unit_docs = values_of(t.text_units, "document_id", str)
    named = positions(unit_docs, document_pos).tolist()
    result: list[int] = []
    filled: list[str] = []
    unknown = 0
    unit_ids = values_of(t.text_units, "id", str) if doc_of else None
    for j, (doc_id, pos) in enumerate(zip(unit_docs, named, strict=True)):
        if not doc_id:
            pos = -1
        if pos < 0:
            pos = doc_of.get(unit_ids[j], -1) if unit_ids is not None else -1
            if doc_id and t.documents:
                unknown += 1
        filled.append(doc_id if doc_id or pos < 0 else t.documents[pos].id)
        result.append(pos)
    if filled != unit_docs:
        set_values(t.text_units, "document_id", filled)
    t.notes.dangling(unknown, "text_units", "document_id", "document")
    return result


# ---------------------------------------------------------------------------- claims and communities


def claim_arrays(t: LoadTables) -> dict[str, np.ndarray]:
    """Claims per subject entity."""
    n = len(t.claims)
    subj = positions([c.subject for c in t.claims], t.keys("entities", "title"))
    ok = subj >= 0
    unit_of = positions([c.text_unit_id for c in t.claims], t.keys("text_units", "id"))
    bad_units = sum(1 for c, u in zip(t.claims, unit_of.tolist(), strict=True) if c.text_unit_id and u < 0)
    t.notes.dangling(bad_units, "covariates", "text_unit_id", "text unit")
    return group(subj[ok], np.arange(n, dtype=np.int64)[ok], len(t.entities)).arrays("ec")


def entity_communities(t: LoadTables) -> dict[str, np.ndarray]:
    """Each entity's community numbers at every level, shallowest first."""
    rows, members, bad = lookup_lists([c.entity_ids for c in t.communities], t.keys("entities", "id"))
    t.notes.dangling(bad, "communities", "entity_ids", "entity")
    numbers = np.fromiter((c.community for c in t.communities), dtype=np.int64, count=len(t.communities))
    levels = np.fromiter((c.level for c in t.communities), dtype=np.int64, count=len(t.communities))
    span = int(numbers.max()) + 1 if len(numbers) else 1
    comm_numbers = numbers[rows]
    order = levels[rows] * span + comm_numbers
    return group(members, comm_numbers, len(t.entities), order=order).arrays("ecm")
