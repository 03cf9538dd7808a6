"""A `Reports` table of chosen reports, each cut to its share of a budget: a fold of DRIFT's primer (the
reports most similar to the question), or the one report dynamic community selection rates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shared_context.tables import ContextTables, ReportRecord, Section, columns

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["FOLD_COLUMNS", "reports_fold"]

FOLD_COLUMNS = columns("id", "title", "content")


def reports_fold(index: Index, positions: Sequence[int], budget: int) -> ContextTables:
    """A `Reports` table of the reports at `positions`, in that order, each cut to an equal share of `budget`
    (at least 200 tokens) and marked `truncated` when cut."""
    per_report = max(200, budget // max(len(positions), 1))
    rows = []
    for pos in positions:
        r = index.community_reports[pos]
        content, cut = r.full_content or r.summary, False
        if index.tokenizer.count(content) > per_report:
            content, cut = index.tokenizer.truncate(content, per_report) + " …", True
        rows.append(ReportRecord(r.short_id, r.title, content, r.rank, r.level, truncated=cut, position=pos))
    return ContextTables(reports=Section("Reports", FOLD_COLUMNS, rows))
