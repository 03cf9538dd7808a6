"""GraphRAG's occurrence weight of a community report: how many distinct text units its entities come from."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from shared_context.index import Adjacency
from shared_context.tables import per_index_cache

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["occurrence_counts"]


def occurrence_counts(index: Index) -> np.ndarray:
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
