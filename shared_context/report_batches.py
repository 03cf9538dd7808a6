"""Global search's map batches: report rows packed into `Reports` sections under the batch budget.

Each row is rendered and counted once per index (`report_row`, with a placeholder weight as wide as any
normalised weight renders); batches are packed greedily, each verified with the tokenizer and rows moved
on when the estimate was short, so no batch exceeds `max_context_tokens`. An oversize report is cut to fit
a batch of its own, never sent as an oversized batch. Inside a batch rows are sorted by (weight, rank)
descending, as GraphRAG does.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from shared_context.boilerplate_marks import shown_rank
from shared_context.community_params import CommunityContextParams
from shared_context.tables import (
    Column,
    ContextTables,
    HistoryRecord,
    ReportRecord,
    Section,
    SectionBuilder,
    columns,
    format_value,
    per_index_cache,
    render_row,
    section_title,
)

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["ReportBatch", "ReportRow", "batch_columns", "pack_batches", "report_row"]

_WIDEST_WEIGHT = "0.1234"


@dataclass
class ReportBatch:
    """One map call's context: the history table (when there is one) and a `Reports` section."""

    tables: ContextTables
    tokens: int  # of the rendered text
    communities: list[int]
    number: int

    @cached_property
    def text(self) -> str:
        """The batch rendered for the prompt."""
        return self.tables.render()

    @property
    def reports(self) -> list[ReportRecord]:
        return [] if self.tables.reports is None else self.tables.reports.rows


@dataclass
class ReportRow:
    pos: int
    community: int
    prefix: str  # "id|title"
    suffix: str  # "content|rank"
    tokens: int  # tokens of the row (line end included) with the widest weight cell, "0.1234"
    content: str


def report_row(index: Index, pos: int, p: CommunityContextParams) -> ReportRow:
    cache: dict[tuple[int, bool, bool, float | None], ReportRow] = per_index_cache(index, "community.rows", dict)
    rank = shown_rank(index, pos)
    key = (pos, p.use_community_summary, p.include_community_rank, rank)
    hit = cache.get(key)
    if hit is None:
        r = index.community_reports[pos]
        content = r.summary if p.use_community_summary else r.full_content
        prefix = render_row([r.short_id, r.title])
        suffix = render_row([content, *([rank] if p.include_community_rank else [])])
        # Count with a placeholder weight as wide as any normalised weight renders ("0.1234"): the
        # weight changes per call, and counting "||" instead would be short ("||" is one token).
        tokens = index.tokenizer.count(f"{prefix}|{_WIDEST_WEIGHT}|{suffix}\n")
        hit = ReportRow(pos, r.community, prefix, suffix, tokens, content)
        cache[key] = hit
    return hit


def batch_columns(p: CommunityContextParams) -> tuple[Column, ...]:
    """GraphRAG's `id|title|occurrence weight|content|rank` (the weight and rank optional, `summary` when the
    summaries are shown)."""
    return (
        *columns("id", "title"),
        *([Column(p.community_weight_name, "weight")] if p.include_community_weight else []),
        Column("summary" if p.use_community_summary else "content", "content"),
        *(columns("rank") if p.include_community_rank else ()),
    )


def _record(index: Index, pos: int, content: str, weight: float | None, truncated: bool = False) -> ReportRecord:
    """The report as the batch shows it: its rank down-weighted by its boilerplate share (`shown_rank`)."""
    r = index.community_reports[pos]
    return ReportRecord(r.short_id, r.title, content, shown_rank(index, pos), r.level, weight=weight,
                        truncated=truncated, position=pos)


def _line(row: ReportRow, weight: float | None) -> str:
    if weight is None:
        return f"{row.prefix}|{row.suffix}"
    return f"{row.prefix}|{format_value(weight)}|{row.suffix}"


def pack_batches(
    index: Index,
    ordered: list[int],
    weights: dict[int, float],
    p: CommunityContextParams,
    history: Section[HistoryRecord] | None,
    budget: int,
) -> list[ReportBatch]:
    """The reports at positions `ordered`, in that order, packed into batches of at most `budget` tokens
    (each batch's text starts with the `history` table, when there is one)."""
    tok = index.tokenizer
    cols = batch_columns(p)
    head = section_title("Reports") + "\n" + render_row([c.label for c in cols])
    head_tokens = tok.count(head + "\n")
    if head_tokens + 20 > budget:
        raise ValueError(
            f"max_context_tokens={p.max_context_tokens} leaves {budget} tokens per batch, too few for the "
            f"Reports header ({head_tokens} tokens) and one report"
        )
    use_weight = p.include_community_weight
    pending = list(ordered)
    groups: list[list[_Packed]] = []
    current: list[_Packed] = []
    used = head_tokens
    for pos in pending:
        row = report_row(index, pos, p)
        w = weights.get(pos, 0.0) if use_weight else None
        packed = _Packed(pos, _line(row, w), row.tokens, _record(index, pos, row.content, w))
        if head_tokens + packed.tokens > budget:  # larger than a whole batch: truncate it into a batch of its own
            cut = _truncated(index, packed.record, cols, budget)
            if cut is None:
                continue
            packed = cut
        if current and used + packed.tokens > budget:
            groups.append(current)
            current, used = [], head_tokens
        current.append(packed)
        used += packed.tokens
    if current:
        groups.append(current)
    return _render(index, groups, weights, cols, head, history, p)


@dataclass
class _Packed:
    pos: int
    line: str
    tokens: int  # of the line with its line end (estimated with the widest weight)
    record: ReportRecord


def _truncated(index: Index, record: ReportRecord, cols: tuple[Column, ...], budget: int) -> _Packed | None:
    """The row with its content cut so that it fits a batch on its own (None if nothing fits)."""
    builder: SectionBuilder[ReportRecord] = SectionBuilder("Reports", cols, index.tokenizer, budget)
    if not builder.add_truncated(record, "content"):
        return None
    return _Packed(record.position, builder.lines[0], builder.used - builder.head_tokens, builder.rows[0])


def _render(
    index: Index,
    groups: list[list[_Packed]],
    weights: dict[int, float],
    cols: tuple[Column, ...],
    head: str,
    history: Section[HistoryRecord] | None,
    p: CommunityContextParams,
) -> list[ReportBatch]:
    tok = index.tokenizer
    reports = index.community_reports
    prefix = history.text + "\n\n" if history is not None and history.text else ""

    def in_order(rows: list[_Packed]) -> list[_Packed]:
        # rows sorted by (weight, rank) descending inside a batch, as GraphRAG does
        return sorted(rows, key=lambda r: (-weights.get(r.pos, 0.0), -(shown_rank(index, r.pos) or 0.0)))

    def text_of(rows: list[_Packed]) -> str:
        return prefix + head + "\n" + "\n".join(r.line for r in in_order(rows))

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
                over -= moved[-1].tokens
            if i + 1 < len(queue):
                queue[i + 1][:0] = moved[::-1]
            else:
                queue.append(moved[::-1])
            text = text_of(rows)
            tokens = tok.count(text)
        ordered = in_order(rows)
        section = Section("Reports", cols, [r.record for r in ordered], lines=[r.line for r in ordered])
        tables = ContextTables(history=history if prefix else None, reports=section)
        batches.append(ReportBatch(tables, tokens, [reports[r.pos].community for r in ordered], len(batches) + 1))
        i += 1
    return batches
