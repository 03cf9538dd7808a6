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
  order; with `linked_order = "question"`, the default, the linked units the question's lexical ranking also
  holds come first, in that ranking's order, so a named entity's passages about other things do not take the
  first places) AND the units most similar to the question (a BM25
  ranking and, when vectors are usable, a vector ranking; see `question_units` below) fused by reciprocal-rank
  fusion:  score(u) = 1/(k + r_entity(u)) + w * (1/(k + r_lexical(u)) + 1/(k + r_vector(u))),
  ranks 1-based, a list the unit is not in adding nothing; k = `rrf_k` (60, the usual RRF constant),
  w = `question_weight`. Best score first, ties by the entity-side order, then unit position. Each
  candidate records why it is there (`reasons`: "entity", "lexical", "vector").

Whatever the strategy, licence and front/back matter goes down the order (`boilerplate_marks`): a fused
score is multiplied by the unit's boilerplate weight, all but the part the lexical ranking gave it (the
question's own words picking a contents list or title page keep it where they put it), and without scores
units keep their order within equal weights.

The question side of `hybrid` (`question_units`): the text units most similar to the question.

Two rankings, each cut to the best `depth` units:
- lexical: BM25 over the units' text. This is the project's one BM25 (`linking.lexical_top` on the
  `text_units` table: stored postings, or Lance full-text search above the size threshold of
  `search_backend.SearchParams`); a query reads only the posting lists of its own terms. Its best
  `_WINDOW_POOL` x `depth` units are then re-ranked by their best window (`passages.best_window_order`: BM25
  of the question over windows of about `window_tokens`, idf from all the index's blocks), so a unit that
  has a passage about the question comes before one whose question words are scattered through it; this
  reached more evidence than the unit-level order for the local context on the GraphRAG-Bench novel dev
  questions and as much for basic search (benchmarks/evidence_recall.py); with the local context's shares
  changed at the same time, both found as much as before on the medical ones.
- vector: cosine with the index's `text_unit_text` vectors, only when a query vector of the same
  dimension is given (the engine embeds the question once, with the embedder the index was built with).
Pure and deterministic: ties go to the lower unit position.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from shared_context.boilerplate_marks import boilerplate_weights
from shared_context.index import Adjacency
from shared_context.linking import lexical_top
from shared_context.passages import best_window_order
from shared_context.search_backend import VectorTable, vector_search, vector_table
from shared_context.tables import per_index_cache
from shared_context.text import lexical_terms, word_terms

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = [
    "DEFAULT_LINKED_UNIT_ORDER",
    "NO_ENTITY",
    "STRATEGIES",
    "LinkedUnitOrder",
    "QuestionUnits",
    "TextUnitStrategy",
    "UnitCandidate",
    "best_window",
    "entity_units",
    "fuse_rankings",
    "question_units",
    "select_text_units",
    "top_positions",
]

TextUnitStrategy = Literal["graphrag", "per_entity_cap", "round_robin", "weighted", "min_guarantee", "hybrid"]
STRATEGIES: tuple[str, ...] = ("graphrag", "per_entity_cap", "round_robin", "weighted", "min_guarantee", "hybrid")
# The default is the strategy that reached the most evidence in benchmarks/evidence_recall.py
# (GraphRAG-Bench novel and medical development questions, equal token budgets; README): hybrid.
DEFAULT_TEXT_UNIT_STRATEGY: TextUnitStrategy = "hybrid"
# How `hybrid` orders the linked units before fusing (module docstring). "question" reached more of the gold
# evidence than "coverage" for local search on the tuning half of route-bench's GraphRAG-Bench novel questions
# (benchmarks/router_frontier.py, suite novel-tune); the other halves were measured once afterwards.
LinkedUnitOrder = Literal["question", "coverage"]
DEFAULT_LINKED_UNIT_ORDER: LinkedUnitOrder = "question"


@dataclass(frozen=True)
class UnitCandidate:
    unit: int  # text unit position
    entity: int  # entity position it is credited to
    entity_rank: int  # index of that entity in the selection
    relationships: int  # number of the entity's relationships found in the unit
    reasons: tuple[str, ...] = ("entity",)  # why it is a candidate: "entity", "lexical", "vector"
    score: float = 0.0  # the fused score (hybrid only)
    lexical_score: float = 0.0  # the part of `score` the lexical ranking gave (hybrid only)


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
    linked_order: LinkedUnitOrder = DEFAULT_LINKED_UNIT_ORDER,
) -> list[UnitCandidate]:
    """Candidate text units for `entities` (positions, in link order), in the order to try them.

    `scores` (link scores) and `budget` / `unit_cost` (tokens of a unit's rendered row) are used by
    `weighted` only; `lexical` / `vector` (unit positions most similar to the question, best first),
    `question_weight`, `rrf_k` and `linked_order` by `hybrid` only.
    """
    return _boilerplate_last(index, _select(index, entities, strategy, scores, budget, unit_cost, per_entity_cap,
                                            min_units_per_entity, lexical, vector, question_weight, rrf_k,
                                            linked_order))


def _boilerplate_last(index: Index, candidates: list[UnitCandidate]) -> list[UnitCandidate]:
    """Licence and front/back matter down-ranked (`boilerplate_marks`): a fused score is multiplied by the
    unit's weight, except the part the question's own words gave it (`lexical_score`): a contents list or title
    page the question's words select stays where they put it, while one reached only through linked entities
    or vector similarity goes down. Candidates without a score keep their order among units of equal weight."""
    weights = boilerplate_weights(index)
    if weights is None or not candidates:
        return candidates
    w = weights.units
    if any(c.score for c in candidates):
        def shown(c: UnitCandidate) -> float:
            return (c.score - c.lexical_score) * float(w[c.unit]) + c.lexical_score

        return sorted(candidates, key=lambda c: -shown(c))  # stable: ties keep their order
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
    linked_order: LinkedUnitOrder = DEFAULT_LINKED_UNIT_ORDER,
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
        if linked_order == "question":
            linked = _by_question(linked, lexical)
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


def _by_question(linked: list[UnitCandidate], lexical: Sequence[int]) -> list[UnitCandidate]:
    """Linked units the question's lexical ranking also holds first, in that ranking's order; the rest keep their
    order. A named entity's units are mostly about other things than the question: ranked by coverage alone, its
    unrelated units take the fused order's first places from passages about the question."""
    rank = {unit: i for i, unit in enumerate(lexical)}
    tail = len(rank)
    return sorted(linked, key=lambda c: rank.get(c.unit, tail))  # stable: the rest keep the coverage order


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
    lexical_score: dict[int, float] = {}
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
            share = question_weight / (rrf_k + rank)
            score[unit] = score.get(unit, 0.0) + share
            if name == "lexical":
                lexical_score[unit] = share
            reasons.setdefault(unit, []).append(name)
    tail = len(base) + 1
    ranked = sorted(score, key=lambda u: (-score[u], order.get(u, tail), u))
    out: list[UnitCandidate] = []
    for unit in ranked:
        cand = base.get(unit) or UnitCandidate(unit, NO_ENTITY, NO_ENTITY, 0)
        out.append(UnitCandidate(cand.unit, cand.entity, cand.entity_rank, cand.relationships,
                                 tuple(reasons[unit]), round(score[unit], 6), round(lexical_score.get(unit, 0.0), 6)))
    return out


# ---------------------------------------------------------------------------- the question side

# How deep each question ranking goes. Far more units than any Sources budget holds at usual chunk
# sizes (12k tokens / 300-token chunks = 40), so the budget, not this cut, decides what is shown.
DEFAULT_DEPTH = 60
# The lexical side re-ranks this many times `depth` of BM25's best units by their best window: deep enough
# for a unit with one passage about the question among long unrelated text, bounded so a question scores
# the windows of a few hundred units at most.
_WINDOW_POOL = 3
# Window size of that re-ranking when the caller has none (the default excerpt size, whose blocks are shared)
DEFAULT_WINDOW_TOKENS = 200
_GAP_RE = re.compile(r"([\W_]+)")  # between the words `lexical_terms` reads from plain (non-CJK) text


@dataclass(frozen=True)
class QuestionUnits:
    lexical: list[int]  # unit positions, best BM25 first (only units sharing a term with the question)
    vector: list[int]  # unit positions, best cosine first; [] when no usable vector
    notes: list[str] = field(default_factory=list)


def top_positions(scores: np.ndarray, depth: int, *, positive_only: bool) -> list[int]:
    """Positions of the `depth` highest scores, best first, ties by position."""
    if depth <= 0 or scores.size == 0:
        return []
    candidates = np.flatnonzero(scores > 0) if positive_only else np.arange(scores.size)
    if len(candidates) > depth:
        cut = np.partition(scores[candidates], len(candidates) - depth)[len(candidates) - depth]
        candidates = candidates[scores[candidates] >= cut]
    order = np.lexsort((candidates, -scores[candidates]))
    best: list[int] = candidates[order][:depth].tolist()
    return best


def question_units(
    index: Index,
    query: str,
    query_vector: np.ndarray | None = None,
    depth: int = DEFAULT_DEPTH,
    window_tokens: int = DEFAULT_WINDOW_TOKENS,
) -> QuestionUnits:
    """The lexical and (when usable) vector rankings of the index's text units for `query` (module
    docstring); `window_tokens` sizes the windows that re-rank the lexical side."""
    notes: list[str] = []
    if not index.text_units or not query.strip():
        return QuestionUnits([], [], notes)
    pool: list[int] = lexical_top(index, "text_units", query, _WINDOW_POOL * depth)[0].tolist()
    lexical = best_window_order(index, pool, query, window_tokens)[:depth]
    vector: list[int] = []
    table = vector_table(index, "text_unit_text")
    if query_vector is None:
        notes.append("no query vector: question-similar units found lexically only")
    elif table is None or len(table) == 0:
        notes.append("the index has no text_unit_text vectors: question-similar units found lexically only")
    elif np.asarray(query_vector).reshape(-1).shape[0] != table.dim:
        notes.append(
            f"text unit vectors have dim {table.dim} but the query vector has "
            f"{np.asarray(query_vector).reshape(-1).shape[0]}: question-similar units found lexically only"
        )
    else:
        search = vector_search(index, "text_unit_text")
        if isinstance(search, VectorTable):
            sims = np.asarray(search.similarities(query_vector), dtype=np.float64)
            vector = [int(search.positions[r]) for r in top_positions(sims, depth, positive_only=True)]
        elif search is not None:  # ANN above the size threshold (search_backend)
            vector = [pos for pos, sim in search.search(query_vector, depth) if sim > 0]
    return QuestionUnits(lexical, vector, notes)


def best_window(text: str, query: str, chars: int) -> tuple[int, int]:
    """(start, end) character offsets of the `chars`-long window of `text` sharing the most distinct
    question terms (first such window on ties), starting on a word boundary. Used to trim a unit to the
    part the question is about rather than to its head."""
    if chars <= 0:
        return 0, 0
    if len(text) <= chars:
        return 0, len(text)
    wanted = set(lexical_terms(query))
    step = max(chars // 4, 1)
    starts = [min(start, len(text) - chars) for start in range(0, len(text) - chars + step, step)]
    # Plain ASCII text (lower-casing maps character to character, no CJK runs): score every window from one
    # pass over the words; anything else re-reads each window. Both give the same scores.
    score = _window_scorer(text, wanted, chars) if text.isascii() else None
    best_score, best_start = -1, 0
    for start in starts:
        found = (
            score(start)
            if score is not None
            else len(wanted.intersection(lexical_terms(text[start : start + chars])))
        )
        if found > best_score:
            best_score, best_start = found, start
    if best_start > 0:  # do not open on half a word
        space = text.find(" ", best_start, best_start + 40)
        best_start = space + 1 if space >= 0 else best_start
    return best_start, min(best_start + chars, len(text))


def _window_scorer(text: str, wanted: set[str], chars: int) -> Callable[[int], int]:
    """`score(start)` == len(wanted & set(lexical_terms(text[start:start + chars]))) for ASCII `text`.

    Words wholly inside a window count with their term; a word cut by either window edge counts with the
    term of the part inside, exactly as `lexical_terms` sees the slice.
    """
    lowered = text.lower()
    # [word, gap, word, gap, ..., word] (first/last word may be ""): offsets from the cumulative lengths, all
    # in C, rather than a match object per word.
    parts = _GAP_RE.split(lowered)
    offsets = list(itertools.accumulate(map(len, parts), initial=0))
    spans = list(zip(offsets[0::2], offsets[1::2], strict=False))
    word_starts = offsets[0::2]
    terms = word_terms(parts[0::2])
    hits = [(a, b, t) for (a, b), t in zip(spans, terms, strict=True) if t in wanted]
    hit_starts = [a for a, _, _ in hits]

    def term_of(piece: str) -> str | None:
        term = word_terms([piece])[0]
        return term if term in wanted else None

    def score(start: int) -> int:
        end = start + chars
        found: set[str] = set()
        lo = bisect.bisect_left(hit_starts, start)
        for _, b, term in hits[lo : bisect.bisect_left(hit_starts, end)]:
            if b <= end:
                found.add(term)
        # a word running into the window from the left, and one running out of it on the right
        i = bisect.bisect_left(word_starts, start) - 1
        if i >= 0 and spans[i][1] > start:
            edge = term_of(lowered[start : min(spans[i][1], end)])
            if edge:
                found.add(edge)
        j = bisect.bisect_left(word_starts, end) - 1
        if j >= 0 and spans[j][0] >= start and spans[j][1] > end:
            edge = term_of(lowered[spans[j][0] : end])
            if edge:
                found.add(edge)
        return len(found)

    return score
