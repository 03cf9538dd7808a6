"""Global search's map batches: report rows packed into `Reports` sections under the batch budget.

Each row is rendered and counted once per index (`report_row`, with a placeholder weight as wide as any
normalised weight renders); batches are packed greedily, each verified with the tokenizer and rows moved
on when the estimate was short, so no batch exceeds `max_context_tokens`. An oversize report is cut to fit
a batch of its own, never sent as an oversized batch. Inside a batch rows are sorted by (weight, rank)
descending, as GraphRAG does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from shared_context.boilerplate_marks import shown_rank
from shared_context.community_params import CommunityContextParams
from shared_context.index_cache import per_index_cache
from shared_context.table_format import format_value, render_row, section_title
from shared_context.tables import SectionBuilder

__all__ = ["ReportBatch", "ReportRow", "pack_batches", "report_row"]

_WIDEST_WEIGHT = "0.1234"


@dataclass
class ReportBatch:
    text: str
    tokens: int
    communities: list[int]
    number: int
    records: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ReportRow:
    pos: int
    community: int
    prefix: str  # "id|title"
    suffix: str  # "content|rank"
    tokens: int  # tokens of the row (line end included) with the widest weight cell, "0.1234"
    content: str


def report_row(index: Any, pos: int, p: CommunityContextParams) -> ReportRow:
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


def _header(p: CommunityContextParams) -> list[str]:
    return (
        ["id", "title"]
        + ([p.community_weight_name] if p.include_community_weight else [])
        + ["summary" if p.use_community_summary else "content"]
        + (["rank"] if p.include_community_rank else [])
    )


def _line(row: ReportRow, weight: float | None) -> str:
    if weight is None:
        return f"{row.prefix}|{row.suffix}"
    return f"{row.prefix}|{format_value(weight)}|{row.suffix}"


def pack_batches(
    index: Any,
    ordered: list[int],
    weights: dict[int, float],
    p: CommunityContextParams,
    prefix: str,
    budget: int,
) -> list[ReportBatch]:
    """The reports at positions `ordered`, in that order, packed into batches of at most `budget` tokens
    (each batch's text starts with `prefix`, the history table, when there is one)."""
    tok = index.tokenizer
    header = _header(p)
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
        row = report_row(index, pos, p)
        w = weights.get(pos, 0.0) if use_weight else None
        line = _line(row, w)
        n = row.tokens
        if head_tokens + n > budget:  # larger than a whole batch: truncate it into a batch of its own
            line, n = _truncated(index, row, w, header, budget, p)
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
    return _render(index, groups, weights, truncated, head, prefix, p)


def _truncated(
    index: Any, row: ReportRow, weight: float | None, header: list[str], budget: int, p: CommunityContextParams
) -> tuple[str, int]:
    """The row with its content cut so that it fits a batch on its own ("", 0 if nothing fits)."""
    builder = SectionBuilder("Reports", header, index.tokenizer, budget)
    r = index.community_reports[row.pos]
    cells: list[Any] = [r.short_id, r.title, *([weight] if weight is not None else []), row.content]
    content_at = len(cells) - 1
    if p.include_community_rank:
        cells.append(shown_rank(index, row.pos))
    if not builder.add_truncated(cells, content_at):
        return "", 0
    return builder.lines[0], builder.used - builder.head_tokens


def _render(
    index: Any,
    groups: list[list[tuple[int, str, int]]],
    weights: dict[int, float],
    truncated: set[int],
    head: str,
    prefix: str,
    p: CommunityContextParams,
) -> list[ReportBatch]:
    tok = index.tokenizer
    reports = index.community_reports

    def text_of(rows: list[tuple[int, str, int]]) -> str:
        # rows sorted by (weight, rank) descending inside a batch, as GraphRAG does
        ordered = sorted(rows, key=lambda r: (-weights.get(r[0], 0.0), -(shown_rank(index, r[0]) or 0.0)))
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
        ordered = sorted(rows, key=lambda r: (-weights.get(r[0], 0.0), -(shown_rank(index, r[0]) or 0.0)))
        records = [
            {
                "id": reports[pos].short_id,
                "title": reports[pos].title,
                p.community_weight_name: weights.get(pos),
                "rank": shown_rank(index, pos),
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
