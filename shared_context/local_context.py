"""`LocalContextBuilder`: GraphRAG's mixed local context (history, reports, entities, relationships,
claims, sources), built from the index's precomputed adjacency with GraphRAG's defects fixed.

The builder links the question's entities and lets each section take its budget in turn (the budget flow,
`local_budget.py`). The graph sections are built here, below the builder: Reports (the community reports of the
linked entities' communities), then the entity tables: Entities, and the Relationships and Claims of the largest
prefix of them that fits (GraphRAG's rule), with GraphRAG's candidate context on request; relationships are
selected as GraphRAG does for a set of entities, read from their own adjacency only. Sources are built in
`local_sources.py`. Rows are rendered and counted once per index (`local_rows.py`, which also estimates them
before they are counted), and can be rendered ahead of the questions (`local_warmup.py`).

Fixed GraphRAG defects: entity selection trimmed to `top_k_mapped_entities` (bug 3); no "[]" or empty
sections (bug 4); reports fall back to their summary, or are truncated, when the full text does not fit;
the history table keeps the newest turns (bug 5); relationship `links` are computed per query and never
written into shared objects (bug 6); misspelled parameters are errors (bug 21); candidate reports are
really found (bug 7); text units are cited by `short_id` (bug 23).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from shared_context.history import HISTORY_SECTION, build_history_section, recent_user_turns
from shared_context.linking import LinkedEntity, LinkResult, link_entities
from shared_context.local_budget import (
    LocalContextParams,
    QuestionNeed,
    entity_tables_budget,
    fact_floor_applies,
    link_strength,
    question_need,
    reports_budget,
    section_room,
)
from shared_context.local_rows import (
    CLAIM_COLUMNS,
    cached_row,
    claim_line,
    claim_record,
    entity_cells,
    entity_columns,
    entity_record,
    entity_values,
    may_fit,
    rel_columns,
    rel_line,
    rel_record,
    remember,
    report_line,
    row_estimates,
)
from shared_context.local_sources import sources_section
from shared_context.records import array_of
from shared_context.tables import (
    AnySection,
    ClaimRecord,
    Column,
    ContextTables,
    EntityRecord,
    RelationshipRecord,
    ReportRecord,
    Section,
    SectionBuilder,
    columns,
    joined_tokens,
    per_index_cache,
    render_row,
)

if TYPE_CHECKING:
    from shared_context.index import Index
    from shared_context.records import CommunityReport

__all__ = [
    "LocalContext",
    "LocalContextBuilder",
    "LocalContextParams",
    "entity_tables",
    "link_strength",
    "report_columns",
    "reports_section",
    "select_relationships",
]


@dataclass
class LocalContext:
    """The typed tables of one question's local context, how they were chosen, and their exact token count."""

    tables: ContextTables
    tokens: int  # of the rendered text
    entities: list[LinkedEntity]  # the linked entities, best first (the Entities table shows those that fit)
    link: LinkResult
    params: LocalContextParams
    budgets: dict[str, int] = field(default_factory=dict)
    link_strength: float = 0.0  # see `link_strength`; drives the Sources share when it is adaptive
    need: QuestionNeed = "relation"  # see `local_budget.question_need`; a fact question gets more Sources
    notes: list[str] = field(default_factory=list)  # what the Sources search could not use

    @cached_property
    def text(self) -> str:
        """The tables rendered for the prompt."""
        return self.tables.render()

    @property
    def sections(self) -> list[AnySection]:
        """The sections with rows shown or candidates, in prompt order."""
        return [s for s in self.tables.sections() if s.rows or s.candidates]

    def section(self, name: str) -> AnySection | None:
        return next((s for s in self.sections if s.name == name), None)

    @property
    def text_unit_ids(self) -> list[str]:
        """Citation ids of the text units shown as Sources."""
        sources = self.tables.sources
        return [] if sources is None else [r.id for r in sources.rows]

    @property
    def records(self) -> dict[str, list[dict[str, object]]]:
        """Each section's records as JSON-ready fields (`ContextTables.to_dict`)."""
        return self.tables.to_dict()


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
        # only the fields set so far: a default Sources share keeps yielding to a larger community_prop
        return LocalContextParams.model_validate({**self.params.model_dump(exclude_unset=True), **overrides})

    def build(
        self,
        query: str,
        history: Sequence[Mapping[str, Any]] | None = None,
        *,
        query_vector: np.ndarray | None = None,
        include_entity_names: Sequence[str] = (),
        exclude_entity_names: Sequence[str] = (),
        linker: Callable[[int], LinkResult] | None = None,
        **overrides: Any,
    ) -> LocalContext:
        """`linker(k)`: links exactly this query and vector (no history, no include/exclude names) to `k`
        entities on a lexical pass the caller already made (the router's checked `Question`), so the text is
        not analysed twice; None links here."""
        p = self._params(overrides)
        index = self.index
        tok = index.tokenizer
        turns = recent_user_turns(history, p.conversation_history_max_turns) if history else []
        if linker is not None and not turns and not include_entity_names and not exclude_entity_names:
            link = linker(p.top_k_mapped_entities)
        else:
            link = link_entities(
                index,
                query,
                history_turns=turns,
                query_vector=query_vector,
                k=p.top_k_mapped_entities,
                include=include_entity_names,
                exclude=exclude_entity_names,
            )
        tables = ContextTables()
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
            tables.history = hist
            total -= hist.tokens
        m = section_room(tok, total)

        strength = link_strength(link, p.strong_link_exact_matches)
        need = question_need(link)
        budgets["Reports"] = reports_budget(m, p, need)
        tables.reports = reports_section(index, link.entities, budgets["Reports"], p)
        # what a fact question's smaller Reports share frees is not added here: it goes to Sources
        local_budget = entity_tables_budget(m, p, strength, budgets["Reports"] - tables.reports.tokens, need)
        # when the fact floor shrank the entity tables, the Entities table takes at most fact_entity_share of
        # them, so the context keeps relationship rows (answers, citations and the graph view rely on them)
        share = p.fact_entity_share if fact_floor_applies(p, strength, need) else 1.0
        tables.entities, tables.relationships, tables.claims = entity_tables(
            index, link.entities, local_budget, p, share)
        used_local = tables.entities.tokens + tables.relationships.tokens + tables.claims.tokens
        budgets["Entities"] = local_budget  # entities, relationships and claims share this budget
        budgets["Sources"] = max(m - tables.reports.tokens - used_local, 0)
        notes: list[str] = []
        tables.sources = sources_section(index, link, budgets["Sources"], p, query_vector, notes)

        shown = [s for s in tables.sections() if s.rows]
        tokens = joined_tokens(tok, shown)
        while tokens > p.max_context_tokens:  # the separators reserve makes this rare; never overshoot anyway
            victim = next(s for s in reversed(shown) if s.rows)
            victim.shrink(tokens - p.max_context_tokens)
            tokens = joined_tokens(tok, shown)
        return LocalContext(
            tables=tables,
            tokens=tokens,
            entities=list(link.entities),
            link=link,
            params=p,
            budgets=budgets,
            link_strength=strength,
            need=need,
            notes=notes,
        )


# The graph sections: Reports, then the entity tables (Entities, Relationships, Claims).


def report_columns(p: LocalContextParams) -> tuple[Column, ...]:
    return columns("id", "title", "content", *(["rank"] if p.include_community_rank else []))


def reports_section(
    index: Index, linked: Sequence[LinkedEntity], budget: int, p: LocalContextParams
) -> Section[ReportRecord]:
    """Reports of the communities holding the most linked entities, the full text where it fits, else the
    summary, else (for the first report only) the text cut to fit."""
    builder: SectionBuilder[ReportRecord] = SectionBuilder("Reports", report_columns(p), index.tokenizer, budget)
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
    rejected: list[ReportRecord] = []
    est = row_estimates(index)
    for count, report in candidates:
        pos = index.report_pos[report.community]

        def record(content: str, report: CommunityReport = report, count: int = count, pos: int = pos) -> ReportRecord:
            return ReportRecord(report.short_id, report.title, content, report.rank, report.level, count,
                                position=pos)

        added = False
        for use_summary in (True,) if p.use_community_summary else (False, True):
            content = report.summary if use_summary else report.full_content
            if not content or not may_fit(
                builder, int((est.summary if use_summary else est.report)[pos])
            ):
                continue
            line, n = report_line(index, pos, use_summary, p)
            if builder.add_line(line, n, record(content)):
                added = True
                break
        default_content = report.summary if p.use_community_summary else report.full_content
        if not added and not len(builder):
            added = builder.add_truncated(record(default_content), "content")
        if not added:
            rejected.append(record(default_content))
    section = builder.finish()
    if p.return_candidate_context:
        section.candidates.extend(rejected)
    return section


@dataclass
class _RelArrays:
    combined: np.ndarray
    weight: np.ndarray


def _rel_arrays(index: Index) -> _RelArrays:
    def build() -> _RelArrays:
        rels = index.relationships
        return _RelArrays(array_of(rels, "combined_degree"), array_of(rels, "weight"))

    return per_index_cache(index, "local.rel_arrays", build)


def _entity_rel_array(index: Index, entity: int) -> np.ndarray:
    cache: dict[int, np.ndarray] = per_index_cache(index, "local.entity_rels", dict)
    arr = cache.get(entity)
    if arr is None:
        arr = remember(cache, entity, np.asarray(index.entity_relationships[entity], dtype=np.int64))
    return arr


def select_relationships(
    index: Index, entities: Sequence[int], top_k: int, ranking: str = "rank"
) -> tuple[list[int], list[int]]:
    """(in-network, out-network) relationship positions for the entity set, GraphRAG's ranking with its
    `relationship_ranking_attribute` (`ranking`): "rank" orders by combined degree, then weight; "weight" by
    weight, then combined degree. In-network relationships (both ends selected) by that order; out-network by
    links first, where links = how many selected entities the outside endpoint connects to; at most
    `top_k * len(entities)` out-network relationships. Only the entities' own adjacency is read."""
    if ranking not in ("rank", "weight"):
        raise ValueError(f"relationship ranking {ranking!r}: 'rank' or 'weight'")
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
    first, second = (combined, weight) if ranking == "rank" else (weight, combined)
    in_rels = rels[in_net]
    in_order = np.lexsort((in_rels, -second[in_net], -first[in_net]))
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
    order = np.lexsort((out_rels, -second[out_net], -first[out_net], -links))
    return in_list, out_rels[order][: top_k * len(entities)].tolist()


def entity_tables(
    index: Any, linked: Sequence[LinkedEntity], budget: int, p: LocalContextParams, entity_share: float = 1.0
) -> tuple[Section[EntityRecord], Section[RelationshipRecord], Section[ClaimRecord]]:
    """(Entities, Relationships, Claims) sharing `budget`. `entity_share` < 1 caps the Entities table at that
    share of `budget`, so a small budget (a fact question's, `local_budget.py`) still leaves room for the
    relationships and claims of the first entities."""
    tok = index.tokenizer
    ents: SectionBuilder[EntityRecord] = SectionBuilder("Entities", entity_columns(p), tok,
                                                        int(budget * entity_share))
    for e in linked:
        values = entity_values(index, e.position)
        line, n = cached_row(
            index,
            "entity",
            e.position,
            (p.include_entity_rank,),
            lambda e=e, values=values: entity_cells(index, e.position, p, values),
        )
        ents.add_line(line, n, entity_record(index, e.position, values))
    ent_section = ents.finish()
    in_table = [r.position for r in ent_section.rows]
    rel_cols = rel_columns(p)
    rel_head = tok.count("-----Relationships-----\n" + render_row([c.label for c in rel_cols]) + "\n")
    claim_head = tok.count("-----Claims-----\n" + render_row([c.label for c in CLAIM_COLUMNS]) + "\n")

    # GraphRAG's rule: add entities one by one and keep the largest prefix whose relationships and
    # claims fit together with the entity table (costs are estimates from load-time counts).
    remaining = budget - ent_section.tokens
    est = row_estimates(index)
    chosen: tuple[list[int], list[int]] = ([], [])
    for size in range(1, len(in_table) + 1):
        prefix = in_table[:size]
        in_rels, out_rels = select_relationships(index, prefix, p.top_k_relationships,
                                                 p.relationship_ranking_attribute)
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
    rel_builder: SectionBuilder[RelationshipRecord] = SectionBuilder("Relationships", rel_cols, tok, remaining)
    for r in chosen[0]:
        if may_fit(rel_builder, int(est.rel[r])):
            record = rel_record(index, r)
            rel_builder.add_line(*rel_line(index, r, p, record), record)
    rel_section = rel_builder.finish()
    claim_builder: SectionBuilder[ClaimRecord] = SectionBuilder("Claims", CLAIM_COLUMNS, tok,
                                                                remaining - rel_section.tokens)
    for c in chosen[1]:
        if may_fit(claim_builder, int(est.claim[c])):
            claim_builder.add_line(*claim_line(index, c), claim_record(index, c))
    claim_section = claim_builder.finish()

    if p.return_candidate_context:
        _add_candidates(index, linked, ent_section, rel_section, claim_section)
    return ent_section, rel_section, claim_section


def _add_candidates(
    index: Any,
    linked: Sequence[LinkedEntity],
    ent_section: Section[EntityRecord],
    rel_section: Section[RelationshipRecord],
    claim_section: Section[ClaimRecord],
) -> None:
    """GraphRAG's candidate context: every relationship and claim of the selected entities and every
    entity at the end of those relationships, marked in_context=False when not shown."""
    selected = [e.position for e in linked]
    shown_rels = {r.position for r in rel_section.rows}
    cand_rels = sorted({r for e in selected for r in index.entity_relationships[e]} - shown_rels)
    rel_section.candidates.extend(rel_record(index, r) for r in cand_rels)
    shown_entities = {r.position for r in ent_section.rows}
    cand_entities = [e for e in selected if e not in shown_entities]
    ends = index.relationship_endpoints[cand_rels] if cand_rels else np.zeros((0, 2), dtype=np.int64)
    others = sorted(set(ends.ravel().tolist()) - shown_entities - set(cand_entities) - {-1})
    ent_section.candidates.extend(entity_record(index, e) for e in [*cand_entities, *others])
    shown_claims = {r.position for r in claim_section.rows}
    claim_section.candidates.extend(
        claim_record(index, c)
        for e in selected
        for c in index.entity_claims[e]
        if c not in shown_claims
    )
