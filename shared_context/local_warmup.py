"""Rows rendered ahead of the questions: `graphroute serve` warms the local context's row caches before it
listens (`router.service.warmup`), so the first question about an entity costs what a repeated one does."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from shared_context import local_rows
from shared_context.local_rows import (
    cached_row,
    claim_line,
    entity_cells,
    fields,
    rel_line,
    report_line,
    unit_row_overhead,
    warm_unit_chunks,
)
from shared_context.passages import excerpt_blocks
from shared_context.tables import per_index_cache, render_row

if TYPE_CHECKING:
    from shared_context.local_context import LocalContextBuilder

__all__ = ["warm_local_rows"]


def warm_local_rows(builder: LocalContextBuilder, limit: int) -> int:
    """Render and count now the rows questions read (`local_rows.cached_row`'s per-index cache), so the first
    question about an entity costs what a repeated one does: entities by degree, each with its
    relationships, claims and community reports, then their text units' Sources rows
    (`_warm_sources`), until `limit` rows are cached (the cache keeps a
    line and its count per row: `limit` bounds that memory on a large index). Returns the rows cached.

    What a question would render anyway, with this builder's column options: a context built after
    this is identical to one built without it."""
    index, p = builder.index, builder.params
    cache: dict[tuple[Any, ...], tuple[str, int]] = per_index_cache(index, "local.rows", dict)
    limit = min(limit, local_rows.ROW_CACHE_LIMIT)  # the cache keeps no more: past it the loop would run on, keeping nothing
    if limit <= 0 or not len(index.entities):
        return len(cache)
    degree = np.diff(index.entity_relationships.indptr)
    report_variants = (True,) if p.use_community_summary else (False, True)
    for e in np.argsort(-degree, kind="stable").tolist():
        if len(cache) >= limit:
            break
        cached_row(index, "entity", e, (p.include_entity_rank,), lambda e=e: entity_cells(index, e, p))
        for r in index.entity_relationships[e]:
            rel_line(index, r, p)
        for c in index.entity_claims[e]:
            claim_line(index, c)
        for community in index.entity_communities[e]:
            pos = index.report_pos.get(community)
            if pos is None:
                continue
            report = index.community_reports[pos]
            if report.rank is None or report.rank < p.min_community_rank:
                continue  # never a candidate (`local_context.reports_section`)
            for use_summary in report_variants:
                if report.summary if use_summary else report.full_content:
                    report_line(index, pos, use_summary, p)
    _warm_sources(builder, np.argsort(-degree, kind="stable").tolist(), limit)
    return len(cache)


def _warm_sources(builder: LocalContextBuilder, entities: list[int], limit: int) -> None:
    """The Sources rows of those entities' text units, in that order, while the row cache is under
    `limit`: each whole-unit row, its row overhead and (in excerpt mode) the token counts of its excerpt
    stretches (`local_rows.warm_unit_chunks`: about 3 ms a unit, most of a first-sight question's
    Sources CPU otherwise)."""
    index, p = builder.index, builder.params
    rows: dict[tuple[Any, ...], tuple[str, int]] = per_index_cache(index, "local.rows", dict)
    chunks: dict[tuple[int, ...], int] = per_index_cache(index, "local.excerpt_chunks", dict)
    f = fields(index)
    excerpts = p.text_unit_strategy == "hybrid" and p.excerpt_tokens > 0  # as `local_sources` decides
    blocks = excerpt_blocks(index, p.excerpt_tokens) if excerpts else None
    seen: set[int] = set()
    for e in entities:
        for u in index.entity_text_units[e]:
            if len(rows) >= limit or len(chunks) >= local_rows.ROW_CACHE_LIMIT:
                return
            if u in seen:
                continue
            seen.add(u)
            unit_id, text = f.unit_id(u), f.unit_text(u)
            cached_row(index, "unit", u, (), [unit_id, text])
            unit_row_overhead(index, u)
            if blocks is not None:
                lo, hi = int(blocks.unit_ptr[u]), int(blocks.unit_ptr[u + 1])
                warm_unit_chunks(index, u, render_row([unit_id]), text, blocks.start[lo:hi].tolist(),
                                 blocks.end[lo:hi].tolist(), render_row([text]) != text, local_rows.ROW_CACHE_LIMIT)
