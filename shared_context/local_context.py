"""`LocalContextBuilder`: GraphRAG's mixed local context (history, reports, entities, relationships,
claims, sources), built from the index's precomputed adjacency with GraphRAG's defects fixed.

Budget flow (documented contract): the history table takes at most `conversation_history_prop` of
`max_context_tokens` first; a few tokens are reserved for the blank lines joining sections; the rest
(M) is split like GraphRAG (reports = M·community_prop, local = M·(1 − community_prop − text_unit_prop),
sources = M·text_unit_prop), but what a section leaves unused flows on to the next one:
reports → local (entities + relationships + claims) → sources. The whole text never exceeds
`max_context_tokens` and each section never exceeds its (possibly enlarged) budget.

Shares that follow the linking (`weak_link_text_unit_prop`, off when None): the question's linking
strength s = min(1, entities matched by name / `strong_link_exact_matches`) (`link_strength`). The Sources
share becomes weak_link_text_unit_prop + s·(text_unit_prop − weak_link_text_unit_prop): when no entity is
named (s = 0) the entity tables are guesses and Sources get the weak-link share; when the question names
its entities (s = 1) the entity tables get GraphRAG's share back. The entity tables take what is left.

Sources (`text_unit_strategy`, see `text_unit_selection.py`): candidates are tried in the strategy's
order and added whole wherever they fit (a unit too big for the room left is skipped, a smaller later
one may still fit). With `hybrid`, the candidates also include the units most similar to the question
(`unit_search.py`) and each record says why it is there (`reasons`). By default `hybrid` then shows
excerpts (`excerpt_tokens`, `passages.py`): the question-relevant windows of the best candidates, so the
budget holds many units' evidence instead of a few whole 1,200-token units; a unit shown in part is
marked `truncated` with its `excerpts` offsets, a unit whose every block was chosen is shown whole.
With `excerpt_tokens = 0` whole units go in, and the room left after them goes to the best unit that
did not fit, cut to the window of it that shares the most question terms (`unit_search.best_window`),
marked the same way (only when at least `_MIN_TRIMMED_UNIT_TOKENS` are left).

Fixed GraphRAG defects: entity selection trimmed to `top_k_mapped_entities` (bug 3); no "[]" or empty
sections (bug 4); reports fall back to their summary, or are truncated, when the full text does not fit;
the history table keeps the newest turns (bug 5); relationship `links` are computed per query and never
written into shared objects (bug 6); misspelled parameters are errors (bug 21); candidate reports are
really found (bug 7); text units are cited by `short_id` (bug 23).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from shared_context.excerpt_rows import excerpt_row_tokens, warm_unit_chunks
from shared_context.history import HISTORY_SECTION, build_history_section, recent_user_turns
from shared_context.linking import LinkedEntity, LinkResult, link_entities
from shared_context.passages import excerpt_blocks, select_excerpts
from shared_context.record_table import array_of, field_of, text_lengths_at, text_lengths_of
from shared_context.tables import (
    ContextSection,
    SectionBuilder,
    join_sections,
    joined_tokens,
    per_index_cache,
    render_row,
)
from shared_context.text_unit_selection import (
    DEFAULT_TEXT_UNIT_STRATEGY,
    NO_ENTITY,
    TextUnitStrategy,
    select_text_units,
)
from shared_context.unit_search import QuestionUnits, best_window, question_units

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["LocalContext", "LocalContextBuilder", "LocalContextParams", "link_strength", "select_relationships"]

SECTION_ORDER = (HISTORY_SECTION, "Reports", "Entities", "Relationships", "Claims", "Sources")
# A trimmed unit is only added when at least this much room is left: shorter cuts carry little text.
_MIN_TRIMMED_UNIT_TOKENS = 120
# Excerpt mode scores the blocks of this many of the best candidate units: several times what any Sources
# budget shows, so the budget decides, while a query tokenises (once per index, cached) a bounded set.
_EXCERPT_CANDIDATES = 40
# Up to this many relationships their row estimates are one array made at the first question (tens of ms at
# 500k): a plain array indexes with no per-call work, where the rows-asked-for path costs ~1.5 ms a question.
_WHOLE_TABLE_ESTIMATE_ROWS = 1_000_000
_CLAIM_HEADER = ["id", "entity", "object_id", "status", "start_date", "end_date", "description"]


class LocalContextParams(BaseModel):
    """GraphRAG's local-search context parameters (names, and its defaults except `text_unit_prop`),
    plus strategy and share knobs."""

    # defer_build: validators are built on first use, not when `import router` defines the class (import time)
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    max_context_tokens: int = Field(default=12_000, ge=0)
    # GraphRAG gives Sources 0.5; 0.7 reached more evidence with the hybrid Sources on the tuning half of
    # the GraphRAG-Bench dev questions (benchmarks/evidence_recall.py, README) and is the default here.
    text_unit_prop: float = Field(default=0.7, ge=0.0, le=1.0)
    # GraphRAG: 0.15; 0.1 leaves the entity tables 20 % so relationships and claims still show.
    community_prop: float = Field(default=0.1, ge=0.0, le=1.0)
    top_k_mapped_entities: int = Field(default=10, ge=0)
    top_k_relationships: int = Field(default=10, ge=0)
    conversation_history_max_turns: int = Field(default=5, ge=0)
    conversation_history_user_turns_only: bool = True
    # graphroute extension: cap on the history table's share of max_context_tokens (GraphRAG has none).
    conversation_history_prop: float = Field(default=0.25, ge=0.0, le=1.0)
    include_entity_rank: bool = True
    rank_description: str = "number of relationships"
    include_relationship_weight: bool = True
    include_community_rank: bool = False
    use_community_summary: bool = False
    min_community_rank: float = 0
    return_candidate_context: bool = False
    text_unit_strategy: TextUnitStrategy = DEFAULT_TEXT_UNIT_STRATEGY
    per_entity_cap: int = Field(default=3, ge=1)
    min_units_per_entity: int = Field(default=1, ge=0)
    # hybrid strategy: weight of the question rankings against the entity-linked order, and the RRF
    # constant (see text_unit_selection.py for the formula)
    hybrid_question_weight: float = Field(default=1.0, ge=0.0)
    hybrid_rrf_k: int = Field(default=60, ge=0)
    # hybrid strategy, excerpt mode (shared_context/passages.py): Sources show the question-relevant
    # windows (about this many tokens) of many units instead of a few whole units; 0 = whole units.
    # 200 reached the most evidence among 150/200/300/400 on the tuning half of the GraphRAG-Bench dev
    # questions (benchmarks/evidence_recall.py, README).
    excerpt_tokens: int = Field(default=200, ge=0)
    # weight of the unit-rank prior against a window's own relevance (passages.py formula)
    excerpt_weight: float = Field(default=1.0, ge=0.0)
    # Section shares that follow linking strength (module docstring): the Sources share used when no
    # linked entity matched by name; None keeps text_unit_prop whatever the linking.
    weak_link_text_unit_prop: float | None = Field(default=0.8, ge=0.0, le=1.0)
    strong_link_exact_matches: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _props_fit(self) -> LocalContextParams:
        # the weak-link share is checked only when set: its default yields to a larger community_prop
        names = ["text_unit_prop"]
        if "weak_link_text_unit_prop" in self.model_fields_set:
            names.append("weak_link_text_unit_prop")
        for name in names:
            value = getattr(self, name)
            if value is not None and self.community_prop + value > 1:
                raise ValueError(
                    f"community_prop ({self.community_prop}) + {name} ({value}) must not "
                    "exceed 1: together they are shares of the same context budget"
                )
        return self

    def sources_share(self, link_strength: float) -> float:
        """text_unit_prop after the linking-strength rule (module docstring)."""
        if self.weak_link_text_unit_prop is None:
            return self.text_unit_prop
        s = min(max(link_strength, 0.0), 1.0)
        weak = min(self.weak_link_text_unit_prop, 1.0 - self.community_prop)
        return weak + s * (self.text_unit_prop - weak)


@dataclass
class LocalContext:
    text: str
    tokens: int
    sections: list[ContextSection]
    entities: list[LinkedEntity]
    link: LinkResult
    text_unit_ids: list[str]
    params: LocalContextParams
    budgets: dict[str, int] = field(default_factory=dict)
    link_strength: float = 0.0  # see `link_strength`; drives the Sources share when it is adaptive
    notes: list[str] = field(default_factory=list)  # what the Sources search could not use

    def section(self, name: str) -> ContextSection | None:
        return next((s for s in self.sections if s.name == name), None)

    @property
    def records(self) -> dict[str, list[dict[str, Any]]]:
        return {s.name: s.records for s in self.sections}


def _join_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """The spans of `text` joined by "…", with "…" where the text goes on before or after."""
    parts = [text[a:b].strip() for a, b in spans]
    head = "… " if spans[0][0] > 0 else ""
    tail = " …" if spans[-1][1] < len(text) else ""
    return head + " … ".join(parts) + tail


def _excerpt_line(index: Any, unit: int, unit_id: str, text: str, spans: Sequence[tuple[int, int]], shown: str,
                  block_starts: Sequence[int]) -> tuple[str, int]:
    """An excerpt row (`shown` = `_join_spans(text, spans)`) and its exact count with its line end, from
    per-index counts of the stretches between its unit's block boundaries (`excerpt_rows`)."""
    id_cell = render_row([unit_id])
    line = render_row([unit_id, shown])
    n = excerpt_row_tokens(index, unit, id_cell, text, spans, block_starts,
                           line[len(id_cell) + 1 :] != shown, ROW_CACHE_LIMIT)
    return line, index.tokenizer.count(line + "\n") if n is None else n


def link_strength(link: LinkResult, strong_matches: int) -> float:
    """How firmly the question names its entities: linked entities matched by name (title, alias or
    forced by include) over `strong_matches`, capped at 1. 0 means the entities were only guessed from
    words or vectors, so the entity tables are weak evidence and the Sources share grows."""
    named = sum(1 for e in link.entities if e.exact)
    return min(named / max(strong_matches, 1), 1.0)


# ---------------------------------------------------------------------------- relationships


@dataclass
class _RelArrays:
    combined: np.ndarray
    weight: np.ndarray


def _rel_arrays(index: Any) -> _RelArrays:
    def build() -> _RelArrays:
        rels = index.relationships
        return _RelArrays(array_of(rels, "combined_degree"), array_of(rels, "weight"))

    return per_index_cache(index, "local.rel_arrays", build)


# Entries per per-index row cache (rendered rows, row fields, per-entity relationship arrays): past it a
# row is still rendered, just not kept. Without a bound a long-running service on a large index would keep
# every row any question ever touched; Python strings cost far more than the mapped Arrow columns they
# come from.
ROW_CACHE_LIMIT = 500_000
K = TypeVar("K")
V = TypeVar("V")


def _remember(cache: dict[K, V], key: K, value: V) -> V:
    """`cache[key] = value` while the cache is under `ROW_CACHE_LIMIT`; `value` either way."""
    if len(cache) < ROW_CACHE_LIMIT:
        cache[key] = value
    return value


def _entity_rel_array(index: Any, entity: int) -> np.ndarray:
    cache: dict[int, np.ndarray] = per_index_cache(index, "local.entity_rels", dict)
    arr = cache.get(entity)
    if arr is None:
        arr = _remember(cache, entity, np.asarray(index.entity_relationships[entity], dtype=np.int64))
    return arr


def select_relationships(index: Any, entities: Sequence[int], top_k: int) -> tuple[list[int], list[int]]:
    """(in-network, out-network) relationship positions for the entity set, GraphRAG's ranking:
    in-network (both ends selected) by combined degree; out-network by (links, combined degree, weight),
    where links = how many selected entities the outside endpoint connects to; at most
    `top_k * len(entities)` out-network relationships. Only the entities' own adjacency is read."""
    if not entities:
        return [], []
    parts = [_entity_rel_array(index, e) for e in entities]
    rels = np.unique(np.concatenate(parts)) if len(parts) > 1 else parts[0]
    if len(rels) == 0:
        return [], []
    arrays = _rel_arrays(index)
    selected = np.asarray(sorted(set(entities)), dtype=np.int64)
    ends = index.relationship_endpoints[rels]
    # a handful of selected entities: comparing with each is cheaper than np.isin's sort
    inside = (ends[..., None] == selected).any(axis=-1) if len(selected) <= 32 else np.isin(ends, selected)
    in_net = inside[:, 0] & inside[:, 1]
    out_net = inside[:, 0] ^ inside[:, 1]
    combined, weight = arrays.combined[rels], arrays.weight[rels]
    in_rels = rels[in_net]
    in_order = np.lexsort((in_rels, -weight[in_net], -combined[in_net]))
    in_list = in_rels[in_order].tolist()
    out_rels = rels[out_net]
    if len(out_rels) == 0 or top_k == 0:
        return in_list, []
    o_ends = ends[out_net]
    outside = np.where(inside[out_net][:, 0], o_ends[:, 1], o_ends[:, 0])
    member = np.where(inside[out_net][:, 0], o_ends[:, 0], o_ends[:, 1])
    # links(x): distinct selected entities linked to outside entity x (a dangling end, -1, is its own x)
    pair_codes = np.unique((outside + 1) * (len(index.entities) + 1) + member)
    linked_outside = pair_codes // (len(index.entities) + 1) - 1
    uniq, counts = np.unique(linked_outside, return_counts=True)
    links = counts[np.searchsorted(uniq, outside)]
    order = np.lexsort((out_rels, -weight[out_net], -combined[out_net], -links))
    return in_list, out_rels[order][: top_k * len(entities)].tolist()


# ---------------------------------------------------------------------------- row estimates and caches


@dataclass
class _Estimates:
    """Upper-ish token estimates of rendered rows from the counts precomputed at load (no tokenising):
    used to choose the relationship/claim prefix and to skip rows that cannot fit before counting them
    exactly. Deterministic, so results never depend on what is cached."""

    rel: np.ndarray | _RelationshipEstimates
    claim: np.ndarray
    unit: np.ndarray
    report: np.ndarray
    summary: np.ndarray


class _RelationshipEstimates:
    """`estimates.rel[rows]`, computed for the rows asked for (gathered in Arrow) and kept: a whole-table
    array read three text columns of every relationship (5M at 1M entities, most of a first question)
    for the few thousand rows a question weighs."""

    def __init__(self, index: Any) -> None:
        self._index = index
        self._known = np.zeros(len(index.relationships), dtype=np.int64)  # 0: not yet computed (all >= 8)

    @staticmethod
    def of(index: Any, rows: np.ndarray | None = None) -> np.ndarray:
        """The estimates of `rows` (every row when None): token count + 8 + a third of the source, target
        and id lengths."""
        rels, names = index.relationships, ("source", "target", "short_id")
        if rows is None:
            chars = sum(text_lengths_of(rels, name) for name in names)
            return np.asarray(index.relationship_tokens, dtype=np.int64) + 8 + chars // 3
        chars = sum(text_lengths_at(rels, name, rows) for name in names)
        return np.asarray(index.relationship_tokens[rows], dtype=np.int64) + 8 + chars // 3

    def __getitem__(self, rows: int | Sequence[int]) -> Any:
        if isinstance(rows, int | np.integer) and self._known[rows]:  # one row seen before: the common call
            return self._known[rows]
        at = np.asarray(rows, dtype=np.int64)
        missing = np.unique(at[self._known[at] == 0]) if at.size else at
        if missing.size:
            self._known[missing] = self.of(self._index, missing)
        return self._known[at]


def _estimates(index: Any) -> _Estimates:
    def build() -> _Estimates:
        claims, reports = index.claims, index.community_reports
        return _Estimates(
            rel=_RelationshipEstimates.of(index)
            if len(index.relationships) <= _WHOLE_TABLE_ESTIMATE_ROWS
            else _RelationshipEstimates(index),
            # lengths read column-wise (`text_lengths_of`: code points, as len()), so no record is made
            claim=np.asarray(index.claim_tokens, dtype=np.int64)
            + 12
            + sum(text_lengths_of(claims, f) for f in ("subject", "object", "status", "start_date", "end_date")) // 3,
            unit=np.asarray(index.text_unit_tokens, dtype=np.int64) + 4,
            report=np.asarray(index.report_tokens, dtype=np.int64) + 6 + text_lengths_of(reports, "title") // 3,
            summary=np.asarray(index.report_summary_tokens, dtype=np.int64) + 6 + text_lengths_of(reports, "title") // 3,
        )

    return per_index_cache(index, "local.estimates", build)


def _may_fit(builder: SectionBuilder, estimate: int) -> bool:
    """False when a row estimated at `estimate` tokens surely cannot fit (estimates may be ~20 % high)."""
    return builder.used + int(estimate * 0.8) - 2 <= builder.budget


def _row(index: Any, kind: str, pos: int, variant: tuple[Any, ...], cells: Any) -> tuple[str, int]:
    """Rendered row and its token count (with line end), cached per index: rows only depend on the
    record and the column options, never on the query."""
    cache: dict[tuple[Any, ...], tuple[str, int]] = per_index_cache(index, "local.rows", dict)
    key = (kind, pos, *variant)
    hit = cache.get(key)
    if hit is None:
        line = render_row(cells() if callable(cells) else cells)
        hit = _remember(cache, key, (line, index.tokenizer.count(line + "\n")))
    return hit


FieldReader = Callable[[int], Any]  # row position -> one field's value (`field_of`)


@dataclass(frozen=True)
class _Fields:
    """Readers of the fields a context shows from the large tables' rows (`field_of`), so no record is
    made for a row: a text unit's record builds its id lists too, at many times the cost of its fields."""

    unit_id: FieldReader
    unit_text: FieldReader
    entity_id: FieldReader
    entity_title: FieldReader
    entity_description: FieldReader
    entity_degree: FieldReader
    rel_id: FieldReader
    rel_source: FieldReader
    rel_target: FieldReader
    rel_description: FieldReader
    rel_weight: FieldReader


def _fields(index: Any) -> _Fields:
    def build() -> _Fields:
        units, entities, rels = index.text_units, index.entities, index.relationships
        return _Fields(
            field_of(units, "short_id"), field_of(units, "text"),
            *(field_of(entities, name) for name in ("short_id", "title", "description", "degree")),
            *(field_of(rels, name) for name in ("short_id", "source", "target", "description", "weight")),
        )

    return per_index_cache(index, "local.fields", build)


def _unit_row_overhead(index: Any, unit: int) -> int:
    """Tokens a Sources row costs beyond its text (id cell, separator, line end, 2 for quoting), cached
    per index: a question asks it for each of its candidate units."""
    cache: dict[int, int] = per_index_cache(index, "local.unit_row_overhead", dict)
    n = cache.get(unit)
    if n is None:
        n = _remember(cache, unit, index.tokenizer.count(f"{_fields(index).unit_id(unit)}|\n") + 2)
    return n


class LocalContextBuilder:
    """Builds the local-search context for one query; pure and deterministic (see module docstring)."""

    def __init__(self, index: Index, params: LocalContextParams | Mapping[str, Any] | None = None) -> None:
        self.index = index
        if params is None:
            params = LocalContextParams()
        elif not isinstance(params, LocalContextParams):
            params = LocalContextParams.model_validate(dict(params))
        self.params = params

    def _params(self, overrides: Mapping[str, Any]) -> LocalContextParams:
        if not overrides:
            return self.params
        return LocalContextParams.model_validate({**self.params.model_dump(), **overrides})

    def build(
        self,
        query: str,
        history: Sequence[Mapping[str, Any]] | None = None,
        *,
        query_vector: np.ndarray | None = None,
        include_entity_names: Sequence[str] = (),
        exclude_entity_names: Sequence[str] = (),
        link: LinkResult | None = None,
        **overrides: Any,
    ) -> LocalContext:
        """`link`: entities already linked for exactly this query, history, vector and `k` (the caller's
        QueryPlan), so they are not linked twice; None links here."""
        p = self._params(overrides)
        index = self.index
        tok = index.tokenizer
        turns = recent_user_turns(history, p.conversation_history_max_turns)
        if link is None:
            link = link_entities(
                index,
                query,
                history_turns=turns,
                query_vector=query_vector,
                k=p.top_k_mapped_entities,
                include=include_entity_names,
                exclude=exclude_entity_names,
            )
        sections: list[ContextSection] = []
        budgets: dict[str, int] = {}
        total = p.max_context_tokens
        if history:
            budgets[HISTORY_SECTION] = int(total * p.conversation_history_prop)
            hist = build_history_section(
                history,
                tok,
                budget=budgets[HISTORY_SECTION],
                max_turns=p.conversation_history_max_turns,
                user_turns_only=p.conversation_history_user_turns_only,
            )
            sections.append(hist)
            total -= hist.tokens
        separators = tok.count("\n\n") * (len(SECTION_ORDER) - 1)
        m = max(total - separators, 0)

        strength = link_strength(link, p.strong_link_exact_matches)
        budgets["Reports"] = max(int(m * p.community_prop), 0)
        reports = self._reports(link.entities, budgets["Reports"], p)
        local_budget = max(int(m * (1 - p.community_prop - p.sources_share(strength))), 0)
        local_budget += budgets["Reports"] - reports.tokens
        local_sections = self._local(link.entities, local_budget, p)
        used_local = sum(s.tokens for s in local_sections)
        budgets["Entities"] = local_budget  # entities, relationships and claims share this budget
        budgets["Sources"] = max(m - reports.tokens - used_local, 0)
        notes: list[str] = []
        sources = self._sources(link, budgets["Sources"], p, query_vector, notes)
        sections.extend([reports, *local_sections, sources])
        sections = [s for s in sections if s.text or s.records]

        tokens = joined_tokens(tok, sections)
        while tokens > p.max_context_tokens:  # the separators reserve makes this rare; never overshoot anyway
            victim = next(s for s in reversed(sections) if s.text)
            victim.shrink(tokens - p.max_context_tokens)
            tokens = joined_tokens(tok, sections)
        text = join_sections([s.text for s in sections])
        source_records = sources.in_context if sources.text else []
        return LocalContext(
            text=text,
            tokens=tokens,
            sections=sections,
            entities=list(link.entities),
            link=link,
            text_unit_ids=[str(r["id"]) for r in source_records],
            params=p,
            budgets=budgets,
            link_strength=strength,
            notes=notes,
        )

    # ------------------------------------------------------------------ reports

    def _reports(self, linked: Sequence[LinkedEntity], budget: int, p: LocalContextParams) -> ContextSection:
        index = self.index
        header = ["id", "title", "content"] + (["rank"] if p.include_community_rank else [])
        builder = SectionBuilder("Reports", header, index.tokenizer, budget)
        matches: dict[int, int] = {}
        for e in linked:
            for community in index.entity_communities[e.position]:
                if community in index.report_pos:
                    matches[community] = matches.get(community, 0) + 1
        candidates = []
        for community, count in matches.items():
            report = index.community_reports[index.report_pos[community]]
            if report.rank is not None and report.rank >= p.min_community_rank:
                candidates.append((count, report))
        # (matches, level, rank) descending: among communities holding as many selected entities, the
        # deepest is the most specific, so it beats its ancestors; rank breaks the remaining ties.
        candidates.sort(key=lambda cr: (-cr[0], -cr[1].level, -(cr[1].rank or 0.0), cr[1].community))
        rejected: list[dict[str, Any]] = []
        est = _estimates(index)
        for count, report in candidates:
            pos = index.report_pos[report.community]
            rank_cells = [report.rank] if p.include_community_rank else []
            record = {"id": report.short_id, "title": report.title, "rank": report.rank, "matches": count}
            added = False
            for use_summary in (True,) if p.use_community_summary else (False, True):
                content = report.summary if use_summary else report.full_content
                if not content or not _may_fit(
                    builder, int((est.summary if use_summary else est.report)[pos])
                ):
                    continue
                line, n = self._report_line(pos, use_summary, p)
                if builder.add_line(line, n, dict(record, content=content)):
                    added = True
                    break
            if not added and not len(builder):
                content = report.summary if p.use_community_summary else report.full_content
                added = builder.add_truncated(
                    [report.short_id, report.title, content, *rank_cells], 2, dict(record, content=content)
                )
            if not added:
                rejected.append(
                    dict(record, content=report.summary if p.use_community_summary else report.full_content)
                )
        section = builder.finish()
        if p.return_candidate_context:
            section.records.extend(dict(r, in_context=False) for r in rejected)
        return section

    def _report_line(self, pos: int, use_summary: bool, p: LocalContextParams) -> tuple[str, int]:
        r = self.index.community_reports[pos]
        content = r.summary if use_summary else r.full_content
        rank_cells = [r.rank] if p.include_community_rank else []
        return _row(self.index, "report", pos, (use_summary, p.include_community_rank),
                    lambda: [r.short_id, r.title, content, *rank_cells])

    # ------------------------------------------------------------------ rows ahead of the questions

    def warm_rows(self, limit: int) -> int:
        """Render and count now the rows questions read (`_row`'s per-index cache), so the first
        question about an entity costs what a repeated one does: entities by degree, each with its
        relationships, claims and community reports, then their text units' Sources rows
        (`_warm_sources`), until `limit` rows are cached (the cache keeps a
        line and its count per row: `limit` bounds that memory on a large index). Returns the rows cached.

        What a question would render anyway, with this builder's column options: a context built after
        this is identical to one built without it."""
        index, p = self.index, self.params
        cache: dict[tuple[Any, ...], tuple[str, int]] = per_index_cache(index, "local.rows", dict)
        limit = min(limit, ROW_CACHE_LIMIT)  # the cache keeps no more: past it the loop would run on, keeping nothing
        if limit <= 0 or not len(index.entities):
            return len(cache)
        degree = np.diff(index.entity_relationships.indptr)
        report_variants = (True,) if p.use_community_summary else (False, True)
        for e in np.argsort(-degree, kind="stable").tolist():
            if len(cache) >= limit:
                break
            _row(index, "entity", e, (p.include_entity_rank,), lambda e=e: self._entity_cells(e, p))
            for r in index.entity_relationships[e]:
                self._rel_line(r, p)
            for c in index.entity_claims[e]:
                self._claim_line(c)
            for community in index.entity_communities[e]:
                pos = index.report_pos.get(community)
                if pos is None:
                    continue
                report = index.community_reports[pos]
                if report.rank is None or report.rank < p.min_community_rank:
                    continue  # never a candidate (`_reports`)
                for use_summary in report_variants:
                    if report.summary if use_summary else report.full_content:
                        self._report_line(pos, use_summary, p)
        self._warm_sources(np.argsort(-degree, kind="stable").tolist(), limit)
        return len(cache)

    def _warm_sources(self, entities: list[int], limit: int) -> None:
        """The Sources rows of those entities' text units, in that order, while the row cache is under
        `limit`: each whole-unit row, its row overhead and (in excerpt mode) the token counts of its excerpt
        stretches (`excerpt_rows.warm_unit_chunks`: about 3 ms a unit, most of a first-sight question's
        Sources CPU otherwise)."""
        index, p = self.index, self.params
        rows: dict[tuple[Any, ...], tuple[str, int]] = per_index_cache(index, "local.rows", dict)
        chunks: dict[tuple[int, ...], int] = per_index_cache(index, "local.excerpt_chunks", dict)
        f = _fields(index)
        excerpts = p.text_unit_strategy == "hybrid" and p.excerpt_tokens > 0  # as `_sources` decides
        blocks = excerpt_blocks(index, p.excerpt_tokens) if excerpts else None
        seen: set[int] = set()
        for e in entities:
            for u in index.entity_text_units[e]:
                if len(rows) >= limit or len(chunks) >= ROW_CACHE_LIMIT:
                    return
                if u in seen:
                    continue
                seen.add(u)
                unit_id, text = f.unit_id(u), f.unit_text(u)
                _row(index, "unit", u, (), [unit_id, text])
                _unit_row_overhead(index, u)
                if blocks is not None:
                    lo, hi = int(blocks.unit_ptr[u]), int(blocks.unit_ptr[u + 1])
                    warm_unit_chunks(index, u, render_row([unit_id]), text, blocks.start[lo:hi].tolist(),
                                     blocks.end[lo:hi].tolist(), render_row([text]) != text, ROW_CACHE_LIMIT)

    # ------------------------------------------------------------------ entities, relationships, claims

    def _entity_values(self, pos: int) -> tuple[Any, ...]:
        """(short_id, title, description, degree) of an entity, kept per index as its rendered row is: a
        later question about it then reads no column (its row cells and record both come from these)."""
        cache: dict[int, tuple[Any, ...]] = per_index_cache(self.index, "local.entity_values", dict)
        values = cache.get(pos)
        if values is None:
            f = _fields(self.index)
            values = _remember(cache, pos, (f.entity_id(pos), f.entity_title(pos), f.entity_description(pos),
                                            f.entity_degree(pos)))
        return values

    def _entity_cells(self, pos: int, p: LocalContextParams, values: tuple[Any, ...] | None = None) -> list[Any]:
        short_id, title, description, degree = values if values is not None else self._entity_values(pos)
        return [short_id, title, description] + ([degree] if p.include_entity_rank else [])

    def _entity_record(self, pos: int, p: LocalContextParams, values: tuple[Any, ...] | None = None) -> dict[str, Any]:
        short_id, title, description, degree = values if values is not None else self._entity_values(pos)
        rec = {"id": short_id, "entity": title, "description": description, "position": pos}
        if p.include_entity_rank:
            rec[p.rank_description] = degree
        return rec

    def _rel_line(self, pos: int, p: LocalContextParams, record: dict[str, Any] | None = None) -> tuple[str, int]:
        """The relationship's row and count (cached), its cells from `record` when the caller holds it."""

        def cells() -> list[Any]:
            rec = record if record is not None else self._rel_record(pos, p)
            weight = [rec["weight"]] if p.include_relationship_weight else []
            return [rec["id"], rec["source"], rec["target"], rec["description"], *weight]

        return _row(self.index, "rel", pos, (p.include_relationship_weight,), cells)

    def _rel_record(self, pos: int, p: LocalContextParams) -> dict[str, Any]:
        # the fields are kept per index (as `_entity_values`): a later question reads no column
        cache: dict[int, tuple[Any, ...]] = per_index_cache(self.index, "local.rel_values", dict)
        values = cache.get(pos)
        if values is None:
            f = _fields(self.index)
            values = _remember(cache, pos, (f.rel_id(pos), f.rel_source(pos), f.rel_target(pos),
                                            f.rel_description(pos), f.rel_weight(pos)))
        short_id, source, target, description, weight = values
        rec: dict[str, Any] = {"id": short_id, "source": source, "target": target, "description": description,
                               "position": pos}
        if p.include_relationship_weight:
            rec["weight"] = weight
        return rec

    def _claim_line(self, pos: int) -> tuple[str, int]:
        c = self.index.claims[pos]
        return _row(
            self.index,
            "claim",
            pos,
            (),
            [c.short_id, c.subject, c.object, c.status, c.start_date, c.end_date, c.description],
        )

    def _claim_record(self, pos: int) -> dict[str, Any]:
        c = self.index.claims[pos]
        values = [c.short_id, c.subject, c.object, c.status, c.start_date, c.end_date, c.description]
        return dict(zip(_CLAIM_HEADER, values, strict=True)) | {"position": pos}

    def _local(
        self, linked: Sequence[LinkedEntity], budget: int, p: LocalContextParams
    ) -> list[ContextSection]:
        index = self.index
        tok = index.tokenizer
        ent_header = ["id", "entity", "description"] + ([p.rank_description] if p.include_entity_rank else [])
        ents = SectionBuilder("Entities", ent_header, tok, budget)
        rejected_entities: list[int] = []
        for e in linked:
            values = self._entity_values(e.position)
            line, n = _row(
                index,
                "entity",
                e.position,
                (p.include_entity_rank,),
                lambda e=e, values=values: self._entity_cells(e.position, p, values),
            )
            if not ents.add_line(line, n, self._entity_record(e.position, p, values)):
                rejected_entities.append(e.position)
        ent_section = ents.finish()
        in_table = [int(r["position"]) for r in ent_section.records]
        rel_header = ["id", "source", "target", "description"] + (
            ["weight"] if p.include_relationship_weight else []
        )
        rel_head = tok.count("-----Relationships-----\n" + render_row(rel_header) + "\n")
        claim_head = tok.count("-----Claims-----\n" + render_row(_CLAIM_HEADER) + "\n")

        # GraphRAG's rule: add entities one by one and keep the largest prefix whose relationships and
        # claims fit together with the entity table (costs are estimates from load-time counts).
        remaining = budget - ent_section.tokens
        est = _estimates(index)
        chosen: tuple[list[int], list[int]] = ([], [])
        for size in range(1, len(in_table) + 1):
            prefix = in_table[:size]
            in_rels, out_rels = select_relationships(index, prefix, p.top_k_relationships)
            rels = in_rels + out_rels
            claims = [c for e in prefix for c in index.entity_claims[e]]
            cost = (rel_head + int(est.rel[rels].sum()) if rels else 0) + (
                claim_head + int(est.claim[claims].sum()) if claims else 0
            )
            if cost > remaining:
                if size == 1:  # not even the first entity's rows fit: take what fits of them, in order
                    chosen = (rels, claims)
                break
            chosen = (rels, claims)
        rel_builder = SectionBuilder("Relationships", rel_header, tok, remaining)
        for r in chosen[0]:
            if _may_fit(rel_builder, int(est.rel[r])):
                record = self._rel_record(r, p)
                rel_builder.add_line(*self._rel_line(r, p, record), record)
        rel_section = rel_builder.finish()
        claim_builder = SectionBuilder("Claims", _CLAIM_HEADER, tok, remaining - rel_section.tokens)
        for c in chosen[1]:
            if _may_fit(claim_builder, int(est.claim[c])):
                claim_builder.add_line(*self._claim_line(c), self._claim_record(c))
        claim_section = claim_builder.finish()

        if p.return_candidate_context:
            self._add_local_candidates(linked, ent_section, rel_section, claim_section, p)
        return [ent_section, rel_section, claim_section]

    def _add_local_candidates(
        self,
        linked: Sequence[LinkedEntity],
        ent_section: ContextSection,
        rel_section: ContextSection,
        claim_section: ContextSection,
        p: LocalContextParams,
    ) -> None:
        """GraphRAG's candidate context: every relationship and claim of the selected entities and every
        entity at the end of those relationships, marked in_context=False when not shown."""
        index = self.index
        selected = [e.position for e in linked]
        shown_rels = {int(r["position"]) for r in rel_section.records}
        cand_rels = sorted({r for e in selected for r in index.entity_relationships[e]} - shown_rels)
        rel_section.records.extend(dict(self._rel_record(r, p), in_context=False) for r in cand_rels)
        shown_entities = {int(r["position"]) for r in ent_section.records}
        cand_entities = [e for e in selected if e not in shown_entities]
        ends = index.relationship_endpoints[cand_rels] if cand_rels else np.zeros((0, 2), dtype=np.int64)
        others = sorted(set(ends.ravel().tolist()) - shown_entities - set(cand_entities) - {-1})
        ent_section.records.extend(
            dict(self._entity_record(e, p), in_context=False) for e in [*cand_entities, *others]
        )
        shown_claims = {int(r["position"]) for r in claim_section.records}
        claim_section.records.extend(
            dict(self._claim_record(c), in_context=False)
            for e in selected
            for c in index.entity_claims[e]
            if c not in shown_claims
        )

    # ------------------------------------------------------------------ sources

    def _sources(
        self,
        link: LinkResult,
        budget: int,
        p: LocalContextParams,
        query_vector: np.ndarray | None = None,
        notes: list[str] | None = None,
    ) -> ContextSection:
        index = self.index
        builder = SectionBuilder("Sources", ["id", "text"], index.tokenizer, budget)
        positions = [e.position for e in link.entities]
        est = _estimates(index)
        hybrid = p.text_unit_strategy == "hybrid"
        question = (
            question_units(index, link.query_text, query_vector) if hybrid and budget > 0 else QuestionUnits([], [])
        )
        if notes is not None:
            notes.extend(question.notes)

        f = _fields(index)

        def unit_line(u: int) -> tuple[str, int]:
            return _row(index, "unit", u, (), lambda: [f.unit_id(u), f.unit_text(u)])

        candidates = select_text_units(
            index,
            positions,
            strategy=p.text_unit_strategy,
            scores=[e.score for e in link.entities],
            budget=max(budget - builder.head_tokens, 0),
            unit_cost=lambda u: int(est.unit[u]),
            per_entity_cap=p.per_entity_cap,
            min_units_per_entity=p.min_units_per_entity,
            lexical=question.lexical,
            vector=question.vector,
            question_weight=p.hybrid_question_weight,
            rrf_k=p.hybrid_rrf_k,
        )
        if hybrid and p.excerpt_tokens > 0 and budget > 0:
            return self._excerpt_sources(builder, candidates, link.query_text, p)
        rejected: list[dict[str, Any]] = []
        for cand in candidates:
            unit_id, text = f.unit_id(cand.unit), f.unit_text(cand.unit)
            record: dict[str, Any] = {
                "id": unit_id,
                "text": text,
                "entity": f.entity_title(cand.entity) if cand.entity != NO_ENTITY else "",
                "position": cand.unit,
            }
            if hybrid:
                record["reasons"] = list(cand.reasons)
                record["score"] = cand.score
            if builder.remaining <= 0:
                rejected.append(record)
                continue
            if _may_fit(builder, int(est.unit[cand.unit])):
                line, n = unit_line(cand.unit)
                if builder.add_line(line, n, record):
                    continue
            if not len(builder) and builder.add_truncated([unit_id, text], 1, record):
                continue
            rejected.append(record)
        # Whole units went in wherever they fit; the room left goes to the best unit that did not fit,
        # cut to its most question-like part and marked truncated (only when the room holds a passage).
        if (
            hybrid
            and rejected
            and builder.remaining >= _MIN_TRIMMED_UNIT_TOKENS
            and self._add_excerpt(builder, rejected[0], link.query_text)
        ):
            rejected.pop(0)
        section = builder.finish()
        if p.return_candidate_context:
            shown = {int(r["position"]) for r in section.records}
            section.records.extend(dict(r, in_context=False) for r in rejected if r["position"] not in shown)
        return section

    def _excerpt_sources(
        self, builder: SectionBuilder, candidates: Sequence[Any], query: str, p: LocalContextParams
    ) -> ContextSection:
        """Sources as question-relevant excerpts of the candidates (`passages.py`): whole units where all
        their blocks were chosen, else the chosen spans joined by "…", marked `truncated` with `excerpts`
        (character offsets in the unit's text)."""
        index = self.index
        f = _fields(index)
        cands = {c.unit: c for c in candidates[:_EXCERPT_CANDIDATES]}
        # a little headroom: block counts are exact, the quoting of a joined row is estimated
        room = builder.remaining - max(builder.remaining // 50, 4)
        excerpts = select_excerpts(
            index,
            list(cands),
            query,
            room,
            excerpt_tokens=p.excerpt_tokens,
            weight=p.excerpt_weight,
            rrf_k=p.hybrid_rrf_k,
            row_overhead=lambda u: _unit_row_overhead(index, u),
        )
        blocks = excerpt_blocks(index, p.excerpt_tokens)  # the table select_excerpts cut the spans from

        def starts(unit: int) -> list[int]:
            lo, hi = int(blocks.unit_ptr[unit]), int(blocks.unit_ptr[unit + 1])
            return [int(c) for c in blocks.start[lo:hi]]

        shown_units: set[int] = set()
        for ex in excerpts:
            unit_id, text, cand = f.unit_id(ex.unit), f.unit_text(ex.unit), cands[ex.unit]
            record: dict[str, Any] = {
                "id": unit_id,
                "entity": f.entity_title(cand.entity) if cand.entity != NO_ENTITY else "",
                "position": ex.unit,
                "reasons": list(cand.reasons),
                "score": cand.score,
            }
            spans = list(ex.spans)
            while spans:
                whole = ex.whole and spans == ex.spans
                shown = text if whole else _join_spans(text, spans)
                extra = {} if whole else {"truncated": True, "excerpts": [list(s) for s in spans]}
                # a whole unit is the Sources row of whole-unit mode: its rendering and count are cached
                row = (_row(index, "unit", ex.unit, (), [unit_id, text]) if whole
                       else _excerpt_line(index, ex.unit, unit_id, text, spans, shown, starts(ex.unit)))
                if builder.add_line(*row, dict(record, text=shown, **extra)):
                    shown_units.add(ex.unit)
                    break
                spans.pop()  # the estimate was short: drop the row's last span and retry
        if not len(builder) and candidates:  # not even one block fits: GraphRAG's trimmed first unit
            first = candidates[0]
            unit_id, text = f.unit_id(first.unit), f.unit_text(first.unit)
            builder.add_truncated([unit_id, text], 1, {"id": unit_id, "text": text, "position": first.unit,
                                                     "reasons": list(first.reasons), "score": first.score})
        section = builder.finish()
        if p.return_candidate_context:
            in_context = {int(r["position"]) for r in section.records}
            section.records.extend(
                {"id": f.unit_id(c.unit), "text": f.unit_text(c.unit),
                 "position": c.unit, "reasons": list(c.reasons), "score": c.score, "in_context": False}
                for c in candidates if c.unit not in in_context
            )
        return section

    def _add_excerpt(self, builder: SectionBuilder, record: dict[str, Any], query: str) -> bool:
        """Add the part of a unit the question is about, cut to the room left, marked `truncated` with
        its `excerpt` character offsets in the unit's text."""
        pos = int(record["position"])
        text = _fields(self.index).unit_text(pos)
        tok = self.index.tokenizer
        room = builder.remaining - tok.count(f"{record['id']}|… …\n") - 2
        # The unit's own characters per token (its exact count is known from the index's load).
        chars = int(room * len(text) / max(int(self.index.text_unit_tokens[pos]), 1))
        for _ in range(8):
            if chars < 40:
                return False
            start, end = best_window(text, query, chars)
            cut = text[start:end]
            shown = ("… " if start > 0 else "") + cut + (" …" if end < len(text) else "")
            if builder.add([record["id"], shown], dict(record, text=shown, truncated=True, excerpts=[[start, end]])):
                return True
            chars = int(chars * 0.9)  # quoting or merges made it longer than estimated
        return False
