"""Relationship row estimates: one whole-table array up to `local_rows.WHOLE_TABLE_ESTIMATE_ROWS` relationships, above
it computed for the rows a question asks for; both must give the formula (token count + 8 + a third of the
source, target and id lengths)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks.synthetic_index import write_synthetic_index
from shared_context import load_index, local_rows
from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.records import text_lengths_of


def _whole_table(index: Index) -> np.ndarray:
    rels = index.relationships
    chars = sum(text_lengths_of(rels, name) for name in ("source", "target", "short_id"))
    return np.asarray(index.relationship_tokens, dtype=np.int64) + 8 + chars // 3


@pytest.mark.parametrize("whole_table_rows", [0, 10**9], ids=["rows-asked-for", "whole-table"])
def test_rows_asked_for_match_the_whole_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, whole_table_rows: int
) -> None:
    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(local_rows, "WHOLE_TABLE_ESTIMATE_ROWS", whole_table_rows)
    write_synthetic_index(tmp_path / "idx", 120, seed=5)
    loaded = load_index(tmp_path / "idx")
    in_memory = index_from_records(  # records as lists: the per-record path
        entities=list(loaded.entities), relationships=list(loaded.relationships), text_units=list(loaded.text_units),
        communities=loaded.communities, community_reports=loaded.community_reports, claims=loaded.claims,
    )  # fmt: skip
    for index in (loaded, in_memory):
        expected = _whole_table(index)
        est = local_rows.row_estimates(index).rel
        assert isinstance(est, np.ndarray) == (whole_table_rows > 0)
        rows = [7, 3, 7, 0, len(expected) - 1]
        assert est[rows].tolist() == expected[rows].tolist()
        assert int(est[11]) == int(expected[11])
        assert est[list(range(len(expected)))].tolist() == expected.tolist()
        assert est[[]].tolist() == []
