"""`LocalContextBuilder`: GraphRAG's mixed local context (history, reports, entities, relationships,
claims, sources), built from the index's precomputed adjacency with GraphRAG's defects fixed.

The builder links the question's entities and lets each section take its budget in turn (the budget flow,
`local_budget.py`). The graph sections, Reports and the entity tables (Entities, Relationships with GraphRAG's
relationship ranking, Claims), are built in `local_tables.py`; Sources in `local_sources.py`. Rows are rendered and counted once per index
(`local_rows.py`, which also estimates them before they are counted), and can be rendered ahead of the
questions (`local_warmup.py`).

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
from shared_context.local_sources import sources_section
from shared_context.local_tables import entity_tables, reports_section, select_relationships
from shared_context.tables import AnySection, ContextTables, joined_tokens

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["LocalContext", "LocalContextBuilder", "LocalContextParams", "link_strength", "select_relationships"]


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
