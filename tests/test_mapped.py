"""`mapped`: maps advised for random access read back exactly what was written; `will_need` accepts any
buffer (a map, heap memory, none) and changes no value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from shared_context import mapped
from shared_context.derived_store import DerivedStore


def test_random_maps_read_back_what_was_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapped, "_RANDOM_FROM", 1024)  # advise this small array too
    table = pa.table({"id": ["a", "bé", ""], "n": [1, 2, 3], "ids": [["x"], [], ["y", "z"]]})
    with pa.OSFile(str(tmp_path / "t.arrow"), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    for random in (False, True):
        assert mapped.map_ipc(tmp_path / "t.arrow", random).equals(table)
    big = np.arange(10_000, dtype=np.int64)
    np.save(tmp_path / "a.npy", big)
    loaded = mapped.load_npy(tmp_path / "a.npy")
    assert type(loaded) is np.ndarray and np.array_equal(loaded, big)
    for column in (mapped.map_ipc(tmp_path / "t.arrow", True).column("id"), pa.chunked_array([pa.array(["q"])])):
        mapped.will_need_column(column)
        mapped.will_need_column(column, offsets_only=True)
    mapped.will_need(None)


def test_store_tables_opened_for_random_reads_equal_plain_ones(tmp_path: Path) -> None:
    (tmp_path / "e.parquet").write_bytes(b"x")
    store = DerivedStore.for_tables(tmp_path, {"entities": tmp_path / "e.parquet"}, root=tmp_path / "cache")
    table = pa.table({"title": [f"t{i}" for i in range(1000)]})
    store.save_table("records", ["entities"], table)
    assert store.load_table("records", ["entities"], random=True).equals(store.load_table("records", ["entities"]))
