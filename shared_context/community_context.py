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
Licence and edition boilerplate (`boilerplate_marks`): a report built mostly from it is left out of the
batches (unless asked for by number, or every candidate is one), and any other report shows and is
ordered by its rank times its boilerplate weight.
Optional pre-ranking scores reports against the query (report vectors when a matching query vector is
given, else BM25) and keeps the best within `max_reports` / `max_tokens` before any model call.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from shared_context.adjacency import Adjacency
from shared_context.boilerplate_marks import boilerplate_weights
from shared_context.history import build_history_section
from shared_context.linking import lexical_scores
from shared_context.tables import SectionBuilder, format_value, per_index_cache, render_row, section_title
from shared_context.vectors import vector_table

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["CommunityContext", "CommunityContextBuilder", "CommunityContextParams", "ReportBatch"]


_WIDEST_WEIGHT = "0.1234"


class CommunityContextParams(BaseModel):
    """GraphRAG's global-search context parameters (effective defaults) plus level and pre-ranking knobs."""

    # defer_build: validators are built on first use, not when `import router` defines the class (import time)
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    max_context_tokens: int = Field(default=12_000, ge=1)  # per batch
    community_level: int | None = None  # None: every level; L: level L only (see include_lower_levels)
    include_lower_levels: bool = False  # with community_level=L, use levels 0..L like GraphRAG
    use_community_summary: bool = False
    include_community_rank: bool = True
    include_community_weight: bool = True
    community_weight_name: str = "occurrence weight"
    normalize_community_weight: bool = True
    min_community_rank: float = 0
    shuffle_data: bool = True
    random_state: int = 86
    conversation_history_max_turns: int = Field(default=5, ge=0)
    conversation_history_user_turns_only: bool = True
    conversation_history_prop: float = Field(default=0.25, ge=0.0, le=1.0)
    prerank: bool = False
    max_reports: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)  # report rows only, headers excluded
    max_batches: int | None = Field(default=None, ge=1)  # hard cap on map calls; later batches dropped


@dataclass
class ReportBatch:
    text: str
    tokens: int
    communities: list[int]
    number: int
    records: list[dict[str, Any]] = field(default_factory=list)


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


def _raw_weights(index: Any) -> np.ndarray:
    """|⋃ text units of the entities in community c| for every report (GraphRAG's occurrence count)."""

    def build() -> np.ndarray:
        n_reports, n_units = len(index.community_reports), max(len(index.text_units), 1)
        memberships = Adjacency.of(index.entity_communities)
        numbers = np.asarray(memberships.indices, dtype=np.int64)
        members = np.repeat(np.arange(len(memberships), dtype=np.int64), memberships.lengths())
        known = np.fromiter(index.report_pos.keys(), dtype=np.int64, count=len(index.report_pos))
        report_of = np.fromiter(index.report_pos.values(), dtype=np.int64, count=len(index.report_pos))
        order = np.argsort(known, kind="stable")
        known, report_of = known[order], report_of[order]
        at = np.minimum(np.searchsorted(known, numbers), max(len(known) - 1, 0))
        hit = (known[at] == numbers) if len(known) else np.zeros(len(numbers), dtype=bool)
        ent_rows, rep_rows = members[hit], report_of[at[hit]]
        if not len(ent_rows) or not n_reports:
            return np.zeros(n_reports, dtype=np.float64)
        units_of = Adjacency.of(index.entity_text_units)
        lengths = units_of.lengths()
        indptr = np.asarray(units_of.indptr, dtype=np.int64)
        flat = np.asarray(units_of.indices, dtype=np.int64)
        ents = np.asarray(ent_rows, dtype=np.int64)
        reps = np.asarray(rep_rows, dtype=np.int64)
        counts = lengths[ents]
        starts = np.repeat(indptr[ents], counts)
        offsets = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        units = flat[starts + offsets]
        codes = np.unique(np.repeat(reps, counts) * n_units + units)
        return np.bincount(codes // n_units, minlength=n_reports).astype(np.float64)

    return per_index_cache(index, "community.weights", build)


@dataclass
class _Row:
    pos: int
    community: int
    prefix: str  # "id|title"
    suffix: str  # "content|rank"
    tokens: int  # tokens of the row (line end included) with the widest weight cell, "0.1234"
    content: str


class CommunityContextBuilder:
    """Builds the global-search batches; pure and deterministic (see module docstring)."""

    def __init__(self, index: Index, params: CommunityContextParams | Mapping[str, Any] | None = None) -> None:
        self.index = index
        if params is None:
            params = CommunityContextParams()
        elif not isinstance(params, CommunityContextParams):
            params = CommunityContextParams.model_validate(dict(params))
        self.params = params

    def _params(self, overrides: Mapping[str, Any]) -> CommunityContextParams:
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

    def _rank(self, pos: int) -> float:
        """The report's rank, down-weighted when it is built mostly from licence or front/back matter
        (`boilerplate_marks`); the rank the batches show and order by."""
        rank = self.index.community_reports[pos].rank or 0.0
        weights = boilerplate_weights(self.index)
        return rank if weights is None else round(rank * float(weights.reports[pos]), 2)

    def _row(self, pos: int, p: CommunityContextParams) -> _Row:
        cache: dict[tuple[int, bool, bool, float], _Row] = per_index_cache(self.index, "community.rows", dict)
        key = (pos, p.use_community_summary, p.include_community_rank, self._rank(pos))
        hit = cache.get(key)
        if hit is None:
            r = self.index.community_reports[pos]
            content = r.summary if p.use_community_summary else r.full_content
            prefix = render_row([r.short_id, r.title])
            rank = r.rank if r.rank is None else self._rank(pos)
            suffix = render_row([content, *([rank] if p.include_community_rank else [])])
            # Count with a placeholder weight as wide as any normalised weight renders ("0.1234"): the
            # weight changes per call, and counting "||" instead would be short ("||" is one token).
            tokens = self.index.tokenizer.count(f"{prefix}|{_WIDEST_WEIGHT}|{suffix}\n")
            hit = _Row(pos, r.community, prefix, suffix, tokens, content)
            cache[key] = hit
        return hit

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
        history: Sequence[Mapping[str, Any]] | None = None,
        communities: Sequence[int] | None = None,
        **overrides: Any,
    ) -> CommunityContext:
        p = self._params(overrides)
        index = self.index
        tok = index.tokenizer
        notes: list[str] = []
        if not index.community_reports:
            return CommunityContext(notes=["no community reports"])
        positions = self._candidates(p, communities, notes)

        history_text = ""
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
        rank_order = sorted(positions, key=lambda pos: (-self._rank(pos), reports[pos].community))
        scores: dict[int, float] | None = None
        if p.prerank:
            scores = self._prerank(positions, query, query_vector, notes)
            ordered = sorted(positions, key=lambda pos: (-scores[pos], -self._rank(pos), reports[pos].community))
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
        batches = self._batches(ordered, weights, p, prefix, batch_budget)
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
            cost = self._row(pos, p).tokens
            if p.max_tokens is not None and spent + cost > p.max_tokens:
                continue  # a shorter report further down may still fit
            kept.append(pos)
            spent += cost
        return kept

    def _weights(self, ordered: list[int], p: CommunityContextParams) -> dict[int, float]:
        if not p.include_community_weight or not ordered:
            return {}
        raw = _raw_weights(self.index)
        values = raw[ordered]
        top = float(values.max()) if len(values) else 0.0
        if p.normalize_community_weight and top > 0:
            values = values / top
        return {pos: float(v) for pos, v in zip(ordered, values.tolist(), strict=True)}

    def _header(self, p: CommunityContextParams) -> list[str]:
        return (
            ["id", "title"]
            + ([p.community_weight_name] if p.include_community_weight else [])
            + ["summary" if p.use_community_summary else "content"]
            + (["rank"] if p.include_community_rank else [])
        )

    def _line(self, row: _Row, weight: float | None) -> str:
        if weight is None:
            return f"{row.prefix}|{row.suffix}"
        return f"{row.prefix}|{format_value(weight)}|{row.suffix}"

    def _batches(
        self,
        ordered: list[int],
        weights: dict[int, float],
        p: CommunityContextParams,
        prefix: str,
        budget: int,
    ) -> list[ReportBatch]:
        tok = self.index.tokenizer
        header = self._header(p)
        head = section_title("Reports") + "\n" + render_row(header)
        head_tokens = tok.count(head + "\n")
        if head_tokens + 20 > budget:
            raise ValueError(
                f"max_context_tokens={p.max_context_tokens} leaves {budget} tokens per batch, too few for the "
                f"Reports header ({head_tokens} tokens) and one report"
            )
        use_weight = p.include_community_weight
        pending = list(ordered)
        groups: list[list[tuple[int, str, int]]] = []
        current: list[tuple[int, str, int]] = []
        used = head_tokens
        truncated: set[int] = set()
        for pos in pending:
            row = self._row(pos, p)
            w = weights.get(pos, 0.0) if use_weight else None
            line = self._line(row, w)
            n = row.tokens
            if head_tokens + n > budget:  # larger than a whole batch: truncate it into a batch of its own
                line, n = self._truncated(row, w, header, budget, p)
                if not line:
                    continue
                truncated.add(pos)
            if current and used + n > budget:
                groups.append(current)
                current, used = [], head_tokens
            current.append((pos, line, n))
            used += n
        if current:
            groups.append(current)
        return self._render(groups, weights, truncated, head, prefix, p)

    def _truncated(
        self, row: _Row, weight: float | None, header: list[str], budget: int, p: CommunityContextParams
    ) -> tuple[str, int]:
        """The row with its content cut so that it fits a batch on its own ("", 0 if nothing fits)."""
        builder = SectionBuilder("Reports", header, self.index.tokenizer, budget)
        r = self.index.community_reports[row.pos]
        cells: list[Any] = [r.short_id, r.title, *([weight] if weight is not None else []), row.content]
        content_at = len(cells) - 1
        if p.include_community_rank:
            cells.append(r.rank if r.rank is None else self._rank(row.pos))
        if not builder.add_truncated(cells, content_at):
            return "", 0
        return builder.lines[0], builder.used - builder.head_tokens

    def _render(
        self,
        groups: list[list[tuple[int, str, int]]],
        weights: dict[int, float],
        truncated: set[int],
        head: str,
        prefix: str,
        p: CommunityContextParams,
    ) -> list[ReportBatch]:
        tok = self.index.tokenizer
        reports = self.index.community_reports

        def text_of(rows: list[tuple[int, str, int]]) -> str:
            # rows sorted by (weight, rank) descending inside a batch, as GraphRAG does
            ordered = sorted(rows, key=lambda r: (-weights.get(r[0], 0.0), -self._rank(r[0])))
            return prefix + head + "\n" + "\n".join(line for _, line, _ in ordered)

        batches: list[ReportBatch] = []
        queue = [list(g) for g in groups]
        i = 0
        while i < len(queue):
            rows = queue[i]
            text = text_of(rows)
            tokens = tok.count(text)
            while tokens > p.max_context_tokens and len(rows) > 1:
                # the estimate was short: move rows worth the overshoot to the next batch, then recount
                over, moved = tokens - p.max_context_tokens, []
                while rows and len(rows) > 1 and over > 0:
                    moved.append(rows.pop())
                    over -= moved[-1][2]
                if i + 1 < len(queue):
                    queue[i + 1][:0] = moved[::-1]
                else:
                    queue.append(moved[::-1])
                text = text_of(rows)
                tokens = tok.count(text)
            ordered = sorted(rows, key=lambda r: (-weights.get(r[0], 0.0), -self._rank(r[0])))
            records = [
                {
                    "id": reports[pos].short_id,
                    "title": reports[pos].title,
                    p.community_weight_name: weights.get(pos),
                    "rank": reports[pos].rank if reports[pos].rank is None else self._rank(pos),
                    "level": reports[pos].level,
                    "in_context": True,
                    "truncated": pos in truncated,
                }
                for pos, _, _ in ordered
            ]
            batches.append(
                ReportBatch(
                    text, tokens, [reports[pos].community for pos, _, _ in ordered], len(batches) + 1, records
                )
            )
            i += 1
        return batches
