"""Token estimates of local-context rows from the counts precomputed at load (no tokenising).

Used to choose the relationship/claim prefix and to skip rows that cannot fit before counting them exactly.
Deterministic, so results never depend on what is cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from shared_context.index_cache import per_index_cache
from shared_context.records import text_lengths_at, text_lengths_of

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["RelationshipEstimates", "RowEstimates", "may_fit", "row_estimates"]

# Up to this many relationships their row estimates are one array made at the first question (tens of ms at
# 500k): a plain array indexes with no per-call work, where the rows-asked-for path costs ~1.5 ms a question.
WHOLE_TABLE_ESTIMATE_ROWS = 1_000_000


@dataclass
class RowEstimates:
    """Upper-ish token estimates of rendered rows from the counts precomputed at load (no tokenising):
    used to choose the relationship/claim prefix and to skip rows that cannot fit before counting them
    exactly. Deterministic, so results never depend on what is cached."""

    rel: np.ndarray | RelationshipEstimates
    claim: np.ndarray
    unit: np.ndarray
    report: np.ndarray
    summary: np.ndarray


class RelationshipEstimates:
    """`estimates.rel[rows]`, computed for the rows asked for (gathered in Arrow) and kept: a whole-table
    array read three text columns of every relationship (5M at 1M entities, most of a first question)
    for the few thousand rows a question weighs."""

    def __init__(self, index: Index) -> None:
        self._index = index
        self._known = np.zeros(len(index.relationships), dtype=np.int64)  # 0: not yet computed (all >= 8)

    @staticmethod
    def of(index: Index, rows: np.ndarray | None = None) -> np.ndarray:
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


def row_estimates(index: Index) -> RowEstimates:
    def build() -> RowEstimates:
        claims, reports = index.claims, index.community_reports
        return RowEstimates(
            rel=RelationshipEstimates.of(index)
            if len(index.relationships) <= WHOLE_TABLE_ESTIMATE_ROWS
            else RelationshipEstimates(index),
            # lengths read column-wise (`text_lengths_of`: code points, as len()), so no record is made
            claim=np.asarray(index.claim_tokens, dtype=np.int64)
            + 12
            + sum(text_lengths_of(claims, f) for f in ("subject", "object", "status", "start_date", "end_date")) // 3,
            unit=np.asarray(index.text_unit_tokens, dtype=np.int64) + 4,
            report=np.asarray(index.report_tokens, dtype=np.int64) + 6 + text_lengths_of(reports, "title") // 3,
            summary=np.asarray(index.report_summary_tokens, dtype=np.int64) + 6 + text_lengths_of(reports, "title") // 3,
        )

    return per_index_cache(index, "local.estimates", build)


class Budgeted(Protocol):
    """What `may_fit` reads of a `tables.SectionBuilder`."""

    used: int
    budget: int


def may_fit(builder: Budgeted, estimate: int) -> bool:
    """False when a row estimated at `estimate` tokens surely cannot fit (estimates may be ~20 % high)."""
    return builder.used + int(estimate * 0.8) - 2 <= builder.budget
