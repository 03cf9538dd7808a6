"""Which text units (the `Sources` table) to show for the selected entities, in priority order.

Every strategy returns candidates in the order the Sources table should try to add them; the builder
adds them greedily under its budget. A text unit is credited to the first selected entity (in link
order) that reaches it, as GraphRAG does. Within one entity, units are ranked by the number of the
entity's relationships found in the unit (GraphRAG's rule), then by position.

- `graphrag`: all units of entity 1, then entity 2, ... — a hot first entity can starve the rest.
- `per_entity_cap`: the same, but at most `per_entity_cap` units per entity.
- `round_robin`: one unit per entity per round, rounds repeated until every list is exhausted.
- `weighted`: each entity first gets a token quota proportional to its link score and fills it with its
  best units; the remaining units then compete in `graphrag` order.
- `min_guarantee`: each entity first gets its best `min_units_per_entity` units (taken round-robin, so
  the guarantee degrades evenly when the budget is tight), then the rest compete in `graphrag` order.
- `hybrid`: the linked units (ordered by coverage: the summed link scores of the selected entities each
  unit mentions, so a unit naming several of the question's entities comes first; ties in `graphrag`
  order) AND the units most similar to the question (a BM25
  ranking and, when vectors are usable, a vector ranking; see `unit_search.py`) fused by reciprocal-rank
  fusion:  score(u) = 1/(k + r_entity(u)) + w * (1/(k + r_lexical(u)) + 1/(k + r_vector(u))),
  ranks 1-based, a list the unit is not in adding nothing; k = `rrf_k` (60, the usual RRF constant),
  w = `question_weight`. Best score first, ties by the entity-side order, then unit position. Each
  candidate records why it is there (`reasons`: "entity", "lexical", "vector").

Whatever the strategy, licence and front/back matter goes down the order (`boilerplate_marks`): a fused
score is multiplied by the unit's boilerplate weight, and without scores units keep their order within
equal weights.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from shared_context.adjacency import Adjacency
from shared_context.boilerplate_marks import boilerplate_weights
from shared_context.tables import per_index_cache

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = [
    "NO_ENTITY",
    "STRATEGIES",
    "TextUnitStrategy",
    "UnitCandidate",
    "entity_units",
    "fuse_rankings",
    "select_text_units",
]

TextUnitStrategy = Literal["graphrag", "per_entity_cap", "round_robin", "weighted", "min_guarantee", "hybrid"]
STRATEGIES: tuple[str, ...] = ("graphrag", "per_entity_cap", "round_robin", "weighted", "min_guarantee", "hybrid")
# The default is the strategy that reached the most evidence in benchmarks/evidence_recall.py
# (GraphRAG-Bench novel and medical development questions, equal token budgets; README): hybrid.
DEFAULT_TEXT_UNIT_STRATEGY: TextUnitStrategy = "hybrid"


@dataclass(frozen=True)
class UnitCandidate:
    unit: int  # text unit position
    entity: int  # entity position it is credited to
    entity_rank: int  # index of that entity in the selection
    relationships: int  # number of the entity's relationships found in the unit
    reasons: tuple[str, ...] = ("entity",)  # why it is a candidate: "entity", "lexical", "vector"
    score: float = 0.0  # the fused score (hybrid only)


NO_ENTITY = -1  # `entity` / `entity_rank` of a unit that is a candidate only through the question


def entity_units(index: Index, entity: int) -> list[tuple[int, int]]:
    """(unit position, relationship count) of one entity, best first. Cached per index."""
    cache: dict[int, list[tuple[int, int]]] = per_index_cache(index, "text_units.by_entity", dict)
    hit = cache.get(entity)
    if hit is not None:
        return hit
    units = np.asarray(index.entity_text_units[entity], dtype=np.int64)
    counts = _relationship_counts(index, entity, units)
    order = np.lexsort((np.arange(len(units)), -counts))  # most relationships first, then the listed order
    result = list(zip(units[order].tolist(), counts[order].tolist(), strict=True))
    cache[entity] = result
    return result


def _relationship_counts(index: Index, entity: int, units: np.ndarray) -> np.ndarray:
    """How many of each unit's relationships have `entity` at one end: for CSR adjacency, one gather of
    every unit's relationship list instead of numpy calls per unit."""
    endpoints = index.relationship_endpoints
    adjacency = index.text_unit_relationships
    if not isinstance(adjacency, Adjacency):
        return np.asarray([int(((endpoints[r, 0] == entity) | (endpoints[r, 1] == entity)).sum()) if r else 0
                           for r in (adjacency[u] for u in units.tolist())], dtype=np.int64)
    lo = np.asarray(adjacency.indptr[units], dtype=np.int64)
    sizes = np.asarray(adjacency.indptr[units + 1], dtype=np.int64) - lo
    starts = np.cumsum(sizes) - sizes
    rels = np.asarray(adjacency.indices[np.repeat(lo - starts, sizes) + np.arange(int(sizes.sum()))], dtype=np.int64)
    ends = endpoints[rels]
    hits = (ends[:, 0] == entity) | (ends[:, 1] == entity)
    owner = np.repeat(np.arange(len(units)), sizes)
    return np.bincount(owner[hits], minlength=len(units)).astype(np.int64)


def _graphrag_order(per_entity: list[list[tuple[int, int]]], entities: Sequence[int]) -> list[UnitCandidate]:
    seen: set[int] = set()
    out: list[UnitCandidate] = []
    for rank, (entity, units) in enumerate(zip(entities, per_entity, strict=True)):
        for unit, n in units:
            if unit not in seen:
                seen.add(unit)
                out.append(UnitCandidate(unit, entity, rank, n))
    return out


def _rounds(
    per_entity: list[list[tuple[int, int]]],
    entities: Sequence[int],
    seen: set[int],
    limit: Sequence[int],
) -> list[UnitCandidate]:
    """Round-robin: each round every entity takes its next unseen unit, up to `limit[i]` units each."""
    cursors = [0] * len(entities)
    taken = [0] * len(entities)
    out: list[UnitCandidate] = []
    progress = True
    while progress:
        progress = False
        for i, units in enumerate(per_entity):
            if taken[i] >= limit[i]:
                continue
            while cursors[i] < len(units) and units[cursors[i]][0] in seen:
                cursors[i] += 1
            if cursors[i] < len(units):
                unit, n = units[cursors[i]]
                seen.add(unit)
                out.append(UnitCandidate(unit, entities[i], i, n))
                taken[i] += 1
                progress = True
    return out


def select_text_units(
    index: Index,
    entities: Sequence[int],
    *,
    strategy: str = "graphrag",
    scores: Sequence[float] | None = None,
    budget: int = 0,
    unit_cost: Callable[[int], int] | None = None,
    per_entity_cap: int = 3,
    min_units_per_entity: int = 1,
    lexical: Sequence[int] = (),
    vector: Sequence[int] = (),
    question_weight: float = 1.0,
    rrf_k: int = 60,
) -> list[UnitCandidate]:
    """Candidate text units for `entities` (positions, in link order), in the order to try them.

    `scores` (link scores) and `budget` / `unit_cost` (tokens of a unit's rendered row) are used by
    `weighted` only; `lexical` / `vector` (unit positions most similar to the question, best first),
    `question_weight` and `rrf_k` by `hybrid` only.
    """
    return _boilerplate_last(index, _select(index, entities, strategy, scores, budget, unit_cost, per_entity_cap,
                                            min_units_per_entity, lexical, vector, question_weight, rrf_k))


def _boilerplate_last(index: Index, candidates: list[UnitCandidate]) -> list[UnitCandidate]:
    """Licence and front/back matter down-ranked (`boilerplate_marks`): a fused score is multiplied by the
    unit's weight; candidates without one keep their order among units of equal weight."""
    weights = boilerplate_weights(index)
    if weights is None or not candidates:
        return candidates
    w = weights.units
    if any(c.score for c in candidates):
        return sorted(candidates, key=lambda c: -c.score * w[c.unit])  # stable: ties keep their order
    return sorted(candidates, key=lambda c: -w[c.unit])


def _select(
    index: Index,
    entities: Sequence[int],
    strategy: str,
    scores: Sequence[float] | None,
    budget: int,
    unit_cost: Callable[[int], int] | None,
    per_entity_cap: int,
    min_units_per_entity: int,
    lexical: Sequence[int],
    vector: Sequence[int],
    question_weight: float,
    rrf_k: int,
) -> list[UnitCandidate]:
    per_entity = [entity_units(index, e) for e in entities]
    n = len(entities)
    if strategy == "graphrag":
        return _graphrag_order(per_entity, entities)
    if strategy == "per_entity_cap":
        seen: set[int] = set()
        out: list[UnitCandidate] = []
        for rank, (entity, units) in enumerate(zip(entities, per_entity, strict=True)):
            taken = 0
            for unit, count in units:
                if taken >= per_entity_cap:
                    break
                if unit not in seen:
                    seen.add(unit)
                    out.append(UnitCandidate(unit, entity, rank, count))
                    taken += 1
        return out
    if strategy == "round_robin":
        return _rounds(per_entity, entities, set(), [len(u) for u in per_entity])
    if strategy == "min_guarantee":
        seen = set()
        first = _rounds(per_entity, entities, seen, [min_units_per_entity] * n)
        return first + [c for c in _graphrag_order(per_entity, entities) if c.unit not in seen]
    if strategy == "weighted":
        return _weighted(per_entity, entities, scores, budget, unit_cost)
    if strategy == "hybrid":
        linked = _by_coverage(index, _graphrag_order(per_entity, entities), entities, scores)
        return fuse_rankings(linked, lexical, vector, question_weight, rrf_k)
    raise ValueError(f"unknown text_unit_strategy {strategy!r}; expected one of {', '.join(STRATEGIES)}")


def _weighted(
    per_entity: list[list[tuple[int, int]]],
    entities: Sequence[int],
    scores: Sequence[float] | None,
    budget: int,
    unit_cost: Callable[[int], int] | None,
) -> list[UnitCandidate]:
    n = len(entities)
    weights = [max(float(s), 0.0) for s in scores] if scores is not None else [1.0] * n
    if len(weights) != n:
        raise ValueError(f"weighted strategy needs one score per entity ({n}), got {len(weights)}")
    total = sum(weights)
    if total <= 0:
        weights, total = [1.0] * n, float(n)
    cost = unit_cost or (lambda _unit: 1)
    seen: set[int] = set()
    first: list[UnitCandidate] = []
    for rank, (entity, units) in enumerate(zip(entities, per_entity, strict=True)):
        quota = budget * weights[rank] / total
        spent = 0
        for unit, count in units:
            if unit in seen:
                continue
            c = cost(unit)
            if spent + c > quota:
                continue  # a smaller unit further down may still fit this entity's quota
            seen.add(unit)
            spent += c
            first.append(UnitCandidate(unit, entity, rank, count))
    return first + [c for c in _graphrag_order(per_entity, entities) if c.unit not in seen]


def _by_coverage(
    index: Index, linked: list[UnitCandidate], entities: Sequence[int], scores: Sequence[float] | None
) -> list[UnitCandidate]:
    """Linked units ordered by the summed link scores of the selected entities each one mentions."""
    weight = dict(zip(entities, scores if scores is not None else [1.0] * len(entities), strict=True))
    cover = {
        c.unit: sum(weight.get(e, 0.0) for e in index.text_unit_entities[c.unit]) for c in linked
    }
    rank = {c.unit: i for i, c in enumerate(linked)}
    return sorted(linked, key=lambda c: (-cover[c.unit], rank[c.unit]))


def fuse_rankings(
    linked: Sequence[UnitCandidate],
    lexical: Sequence[int],
    vector: Sequence[int],
    question_weight: float = 1.0,
    rrf_k: int = 60,
) -> list[UnitCandidate]:
    """Reciprocal-rank fusion of the entity-linked candidates with the question rankings (see the
    module docstring for the formula). Units only the question reaches get entity `NO_ENTITY`."""
    if rrf_k < 0:
        raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")
    if question_weight < 0:
        raise ValueError(f"question_weight must be >= 0, got {question_weight}")
    score: dict[int, float] = {}
    reasons: dict[int, list[str]] = {}
    base: dict[int, UnitCandidate] = {}
    order: dict[int, int] = {}  # tie-break: entity-side rank, then question-only units by position
    for rank, cand in enumerate(linked, start=1):
        if cand.unit in base:
            continue
        base[cand.unit] = cand
        order[cand.unit] = rank
        score[cand.unit] = 1.0 / (rrf_k + rank)
        reasons[cand.unit] = ["entity"]
    for name, ranking in (("lexical", lexical), ("vector", vector)):
        for rank, unit in enumerate(dict.fromkeys(ranking), start=1):
            score[unit] = score.get(unit, 0.0) + question_weight / (rrf_k + rank)
            reasons.setdefault(unit, []).append(name)
    tail = len(base) + 1
    ranked = sorted(score, key=lambda u: (-score[u], order.get(u, tail), u))
    out: list[UnitCandidate] = []
    for unit in ranked:
        cand = base.get(unit) or UnitCandidate(unit, NO_ENTITY, NO_ENTITY, 0)
        out.append(UnitCandidate(cand.unit, cand.entity, cand.entity_rank, cand.relationships,
                                 tuple(reasons[unit]), round(score[unit], 6)))
    return out
