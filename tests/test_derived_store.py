"""The derived-structure store: keys follow only the tables an entry uses; broken entries are never trusted."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from shared_context.derived_store import DerivedStore, table_fingerprint


def _tables(tmp_path: Path) -> dict[str, Path]:
    files = {}
    for name, values in (("entities", ["a", "b"]), ("claims", ["x"])):
        files[name] = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"id": values}), files[name])
    return files


def test_arrays_round_trip_memory_mapped(tmp_path: Path) -> None:
    store = DerivedStore.for_tables(tmp_path, _tables(tmp_path), root=tmp_path / "cache")
    store.save_arrays("graph", ["entities"], {"indptr": np.array([0, 2, 3]), "indices": np.array([5, 6, 7])})
    got = store.load_arrays("graph", ["entities"], ["indptr", "indices"])
    assert got is not None and isinstance(got["indices"].base, np.memmap)  # a plain view of the map
    assert got["indptr"].tolist() == [0, 2, 3] and got["indices"].tolist() == [5, 6, 7]


def test_changing_a_table_invalidates_only_entries_using_it(tmp_path: Path) -> None:
    files = _tables(tmp_path)
    store = DerivedStore.for_tables(tmp_path, files, root=tmp_path / "cache")
    store.save_arrays("graph", ["entities"], {"a": np.arange(3)})
    store.save_table("claims_of", ["claims", "entities"], pa.table({"c": [1]}))
    pq.write_table(pa.table({"id": ["x", "y"]}), files["claims"])
    os.utime(files["claims"], ns=(1, 1))  # even a file with an old mtime is told apart by its footer
    changed = DerivedStore.for_tables(tmp_path, files, root=tmp_path / "cache")
    assert changed.load_arrays("graph", ["entities"], ["a"]) is not None
    assert changed.load_table("claims_of", ["claims", "entities"]) is None


def test_truncated_or_garbled_entry_reads_as_absent_and_is_rewritten(tmp_path: Path) -> None:
    store = DerivedStore.for_tables(tmp_path, _tables(tmp_path), root=tmp_path / "cache")
    store.save_arrays("graph", ["entities"], {"a": np.arange(1000)})
    npy = store.entry_dir("graph", ["entities"]) / "a.npy"
    npy.write_bytes(npy.read_bytes()[:100])  # truncated: size no longer matches meta.json
    assert store.load_arrays("graph", ["entities"], ["a"]) is None
    store.save_table("t", ["entities"], pa.table({"c": [1, 2]}))
    arrow = store.entry_dir("t", ["entities"]) / "table.arrow"
    arrow.write_bytes(b"x" * arrow.stat().st_size)  # same size, garbage content
    assert store.load_table("t", ["entities"]) is None
    store.save_arrays("graph", ["entities"], {"a": np.arange(4)})
    assert store.load_arrays("graph", ["entities"], ["a"])["a"].tolist() == [0, 1, 2, 3]  # type: ignore[index]


def test_failed_write_leaves_no_entry(tmp_path: Path) -> None:
    store = DerivedStore.for_tables(tmp_path, _tables(tmp_path), root=tmp_path / "cache")
    try:
        with store.write_entry("half", ["entities"]) as tmp:
            (tmp / "part.bin").write_bytes(b"1")
            raise RuntimeError("interrupted")
    except RuntimeError:
        pass
    assert not store.entry_dir("half", ["entities"]).exists()
    assert list(store.dir.iterdir()) == []


def test_fingerprint_of_non_parquet_file_hashes_content(tmp_path: Path) -> None:
    f = tmp_path / "t.csv"
    f.write_text("id\na\n")
    before = table_fingerprint(f)
    st = f.stat()
    f.write_text("id\nb\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert table_fingerprint(f) != before
