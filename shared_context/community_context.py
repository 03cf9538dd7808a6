"""`CommunityContextBuilder`: community reports in token-budgeted batches for global search's map step.

Each batch is one `Reports` section with GraphRAG's columns `id|title|occurrence weight|content|rank`
(optionally prefixed by the conversation-history table). GraphRAG's defects fixed (bug 18 and 1):
- budgets are counted on the rendered (quoted) text and every batch is verified with the tokenizer,
  so no batch exceeds `max_context_tokens`; an oversize report is truncated to fit, never sent as an
  oversized batch;
- the shuffle uses a local `random.Random(random_state)`, never the process-global RNG;
- occurrence weights are computed per call (raw counts cached beside the index, normalised over the
  reports of this call) and never written into the report objects;
- `community_level=L` means that single level (GraphRAG silently uses every level <= L; set
  `include_lower_levels=True` for that behaviour).
Occurrence weights are `report_weights.py`; packing and rendering the batches `report_batches.py`.
Licence and edition boilerplate (`boilerplate_marks`): a report built mostly from it is left out of the
batches (unless asked for by number, or every candidate is one), and any other report shows and is
ordered by its rank times its boilerplate weight (`shown_rank`).
Optional pre-ranking scores reports against the query (report vectors when a matching query vector is
given, else BM25) and keeps the best within `max_reports` / `max_tokens` before any model call.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from shared_context.boilerplate_marks import boilerplate_weights, shown_rank
from shared_context.community_params import CommunityContextParams
from shared_context.history import build_history_section
from shared_context.linking import lexical_scores
from shared_context.report_batches import ReportBatch, pack_batches, report_row
from shared_context.report_weights import occurrence_counts
from shared_context.search_backend import vector_table

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["CommunityContext", "CommunityContextBuilder", "CommunityContextParams", "ReportBatch"]


class CommunityContext(list[ReportBatch]):
    """The batches (iterate / len() like a list) plus what was selected and why."""

    def __init__(
        self,
        batches: Sequence[ReportBatch] = (),
        *,
        selected_communities: Sequence[int] = (),
        prerank_scores: Mapping[int, float] | None = None,
        history_text: str = "",
        notes: Sequence[str] = (),
    ) -> None:
        super().__init__(batches)
        self.selected_communities = list(selected_communities)
        self.prerank_scores = dict(prerank_scores) if prerank_scores is not None else None
        self.history_text = history_text
        self.notes = list(notes)

    @property
    def total_tokens(self) -> int:
        return sum(b.tokens for b in self)


class CommunityContextBuilder:
    """Builds the global-search batches; pure and deterministic (see module docstring)."""

    def __init__(self, index: Index, params: CommunityContextParams | Mapping[str, object] | None = None) -> None:
        self.index = index
        if params is None:
            params = CommunityContextParams()
        elif not isinstance(params, CommunityContextParams):
            params = CommunityContextParams.model_validate(dict(params))
        self.params = params

    def _params(self, overrides: Mapping[str, object]) -> CommunityContextParams:
        if not overrides:
            return self.params
        return CommunityContextParams.model_validate({**self.params.model_dump(), **overrides})

    # ------------------------------------------------------------------ selection

    def _candidates(
        self, p: CommunityContextParams, communities: Sequence[int] | None, notes: list[str]
    ) -> list[int]:
        index = self.index
        if communities is not None:
            unknown = [c for c in communities if c not in index.report_pos]
            if unknown:
                notes.append(f"{len(unknown)} requested communities have no report (e.g. {unknown[0]})")
            positions = [index.report_pos[c] for c in dict.fromkeys(communities) if c in index.report_pos]
        elif p.community_level is None:
            positions = list(range(len(index.community_reports)))
        else:
            if p.community_level not in index.reports_by_level:
                levels = ", ".join(str(lvl) for lvl in index.reports_by_level) or "none"
                raise ValueError(
                    f"community_level {p.community_level} has no reports; levels with reports: {levels}"
                )
            wanted = [
                lvl
                for lvl in index.reports_by_level
                if lvl == p.community_level or (p.include_lower_levels and lvl <= p.community_level)
            ]
            positions = sorted(pos for lvl in wanted for pos in index.reports_by_level[lvl])
        reports = index.community_reports
        kept = [
            pos
            for pos in positions
            if reports[pos].rank is not None and reports[pos].rank >= p.min_community_rank
        ]
        weights = boilerplate_weights(index)
        if weights is None or communities is not None:
            return kept
        story = [pos for pos in kept if not weights.mostly_boilerplate_report(pos)]
        if story and len(story) < len(kept):
            notes.append(f"{len(kept) - len(story)} reports built mostly from licence or front/back matter left out")
            return story
        return kept

    def _prerank(
        self, positions: list[int], query: str, query_vector: np.ndarray | None, notes: list[str]
    ) -> dict[int, float]:
        index = self.index
        table = vector_table(index, "community_full_content")
        scores: np.ndarray | None = None
        if query_vector is not None and table is not None:
            q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
            if q.shape[0] == table.dim:
                scores = np.zeros(len(index.community_reports), dtype=np.float64)
                scores[table.positions] = table.similarities(q)
            else:
                notes.append(
                    f"report vectors have dim {table.dim} but the query vector has {q.shape[0]}; pre-ranked lexically"
                )
        if scores is None:
            scores = lexical_scores(index, "reports", query).astype(np.float64)
        return {pos: float(scores[pos]) for pos in positions}

    # ------------------------------------------------------------------ build

    def build(
        self,
        query: str = "",
        *,
        query_vector: np.ndarray | None = None,
        history: Sequence[Mapping[str, object]] | None = None,
        communities: Sequence[int] | None = None,
        **overrides: object,
    ) -> CommunityContext:
        p = self._params(overrides)
        index = self.index
        tok = index.tokenizer
        notes: list[str] = []
        if not index.community_reports:
            return CommunityContext(notes=["no community reports"])
        positions = self._candidates(p, communities, notes)

        history_text, hist = "", None
        if history:
            hist = build_history_section(
                history,
                tok,
                budget=int(p.max_context_tokens * p.conversation_history_prop),
                max_turns=p.conversation_history_max_turns,
                user_turns_only=p.conversation_history_user_turns_only,
            )
            history_text = hist.text
        prefix = history_text + "\n\n" if history_text else ""
        batch_budget = p.max_context_tokens - (tok.count(prefix) if prefix else 0)

        reports = index.community_reports
        rank_order = sorted(positions, key=lambda pos: (-(shown_rank(index, pos) or 0.0), reports[pos].community))
        scores: dict[int, float] | None = None
        if p.prerank:
            scores = self._prerank(positions, query, query_vector, notes)
            ordered = sorted(
                positions, key=lambda pos: (-scores[pos], -(shown_rank(index, pos) or 0.0), reports[pos].community)
            )
        elif p.max_reports is not None or p.max_tokens is not None:
            ordered = rank_order  # caps without pre-ranking keep the highest-rank reports
        else:
            ordered = sorted(positions, key=lambda pos: reports[pos].community)
        ordered = self._cap(ordered, p)
        if not p.prerank:
            ordered.sort(key=lambda pos: reports[pos].community)
            if p.shuffle_data:
                random.Random(p.random_state).shuffle(ordered)

        weights = self._weights(ordered, p)
        batches = pack_batches(index, ordered, weights, p, hist, batch_budget)
        selected = [reports[pos].community for pos in ordered]
        if p.max_batches is not None and len(batches) > p.max_batches:
            dropped = batches[p.max_batches :]
            batches = batches[: p.max_batches]
            kept = {c for b in batches for c in b.communities}
            selected = [c for c in selected if c in kept]
            notes.append(
                f"max_batches={p.max_batches}: dropped {len(dropped)} batches "
                f"({sum(len(b.communities) for b in dropped)} reports)"
                + (
                    ""
                    if p.prerank
                    else "; without prerank the dropped reports are an arbitrary (shuffled) subset"
                )
            )
        return CommunityContext(
            batches,
            selected_communities=selected,
            prerank_scores={reports[pos].community: s for pos, s in scores.items()}
            if scores is not None
            else None,
            history_text=history_text,
            notes=notes,
        )

    def _cap(self, ordered: list[int], p: CommunityContextParams) -> list[int]:
        kept: list[int] = []
        spent = 0
        for pos in ordered:
            if p.max_reports is not None and len(kept) >= p.max_reports:
                break
            cost = report_row(self.index, pos, p).tokens
            if p.max_tokens is not None and spent + cost > p.max_tokens:
                continue  # a shorter report further down may still fit
            kept.append(pos)
            spent += cost
        return kept

    def _weights(self, ordered: list[int], p: CommunityContextParams) -> dict[int, float]:
        if not p.include_community_weight or not ordered:
            return {}
        raw = occurrence_counts(self.index)
        values = raw[ordered]
        top = float(values.max()) if len(values) else 0.0
        if p.normalize_community_weight and top > 0:
            values = values / top
        return {pos: float(v) for pos, v in zip(ordered, values.tolist(), strict=True)}
