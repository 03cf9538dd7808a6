"""The lexical tables of an index on disk: BM25 postings written once per index content, memory-mapped.

Building the BM25 tables of a 100k-entity index tokenises every description and text unit (seconds);
reading them back is a few `np.load(mmap_mode="r")` calls. Each table is a folder of `.npy` files:

- `indptr.npy`, `indices.npy`, `data.npy`: the CSC postings of `bm25.BM25` (term columns, document rows);
- `vocab_offsets.npy`, `vocab_bytes.npy`: the terms, sorted, as UTF-8 bytes with offsets, so a term is
  found by binary search without building a Python dict of a million strings;
- `impact_*.npy`: each term's largest weight and the common terms' postings in weight order
  (`pruned_lexical.Impacts`, what entity linking reads instead of a common word's whole list; a folder
  written without them builds them in memory on first use);
- `meta.json` (written last, so a folder without it is an interrupted write and is rebuilt).

Folders live under `search_cache_root()/<key>/`, where the key names the index content (see
`search_store.content_key`); a changed index gets a new key, so stale tables are never read.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from shared_context.bm25 import BM25, Postings
from shared_context.pruned_lexical import Impacts, attach_impacts

__all__ = ["SortedVocab", "load_bm25", "save_bm25", "stored_bm25"]

_FORMAT = 1
_IMPACT_FIELDS = ("term_max", "terms", "indptr", "docs", "weights")
# `SortedVocab.get` keeps every this-many-th key in memory (a million keys: 62,500 short bytes objects)
_SAMPLE_STEP = 16


class SortedVocab:
    """Sorted terms stored as UTF-8 bytes + offsets; `get(term)` is a binary search (a `TermLookup`)."""

    def __init__(self, offsets: np.ndarray, data: np.ndarray, columns: np.ndarray) -> None:
        self._offsets = offsets
        self._data = data
        self._columns = columns  # postings column of the i-th sorted term
        self._views: tuple[memoryview, memoryview, list[bytes]] | None = None  # built on first `get`

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, i: int) -> str:
        lo, hi = int(self._offsets[i]), int(self._offsets[i + 1])
        return bytes(self._data[lo:hi]).decode("utf-8")

    def get(self, term: str, /) -> int | None:
        # UTF-8 byte order is the code-point order the terms were sorted in, so the search compares bytes:
        # first among every `_SAMPLE_STEP`-th key (a short list, searched by `bisect` in C), then within
        # the step, so a probe reads a few keys instead of decoding one per halving (questions look up
        # dozens of terms and title n-grams in tables of up to millions of keys).
        if self._views is None:
            offsets = np.ascontiguousarray(self._offsets, dtype=np.int64).data
            data = np.ascontiguousarray(self._data, dtype=np.uint8).data
            sample = [data[offsets[i] : offsets[i + 1]].tobytes() for i in range(0, len(self), _SAMPLE_STEP)]
            self._views = (offsets, data, sample)
        offsets, data, sample = self._views
        key = term.encode("utf-8", "surrogatepass")  # a lone surrogate matches nothing, as before
        j = bisect.bisect_left(sample, key)  # sample[j - 1] < key <= sample[j]
        lo, hi = max(j - 1, 0) * _SAMPLE_STEP, min(j * _SAMPLE_STEP, len(self))
        while lo < hi:  # the first key >= `key` lies in [lo, hi]
            mid = (lo + hi) // 2
            if data[offsets[mid] : offsets[mid + 1]].tobytes() < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self) and data[offsets[lo] : offsets[lo + 1]] == key:
            return int(self._columns[lo])
        return None


def _replace_dir(tmp: Path, folder: Path) -> None:
    """Move the finished `tmp` to `folder`, replacing a stale copy; a concurrent writer's copy wins."""
    if folder.exists():
        shutil.rmtree(folder, ignore_errors=True)  # open memory maps of it stay valid (POSIX)
    try:
        os.replace(tmp, folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def save_bm25(bm25: BM25, folder: Path, check: str = "") -> None:
    """Write `bm25` into `folder` atomically (a temporary sibling renamed into place)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    matrix = bm25.matrix
    np.save(tmp / "indptr.npy", np.asarray(matrix.indptr, dtype=np.int64))
    np.save(tmp / "indices.npy", np.asarray(matrix.indices, dtype=np.int32))
    np.save(tmp / "data.npy", np.asarray(matrix.data))
    vocab = bm25.vocab
    assert isinstance(vocab, dict), "only a freshly built BM25 is saved"
    terms = sorted(vocab)
    encoded = [t.encode("utf-8") for t in terms]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    np.save(tmp / "vocab_offsets.npy", offsets)
    np.save(tmp / "vocab_bytes.npy", np.frombuffer(b"".join(encoded), dtype=np.uint8))
    np.save(tmp / "vocab_columns.npy", np.asarray([vocab[t] for t in terms], dtype=np.int64))
    impacts = Impacts.build(np.asarray(matrix.indptr), np.asarray(matrix.indices), np.asarray(matrix.data))
    for name in _IMPACT_FIELDS:
        np.save(tmp / f"impact_{name}.npy", getattr(impacts, name))
    meta = {"format": _FORMAT, "n_docs": bm25.n_docs, "shape": list(matrix.shape), "check": check}
    (tmp / "meta.json").write_text(json.dumps(meta))
    _replace_dir(tmp, folder)


def load_bm25(folder: Path, check: str = "") -> BM25 | None:
    """The BM25 stored in `folder`, memory-mapped; None when absent, interrupted, of another format or
    written for texts with another `check` (`search_store.content_check`)."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        if meta.get("format") != _FORMAT or meta.get("check", "") != check:
            return None

        def arr(name: str) -> np.ndarray:  # an ndarray view of the map: np.memmap indexing is slow
            loaded: np.ndarray = np.asarray(np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False))
            return loaded

        n_docs, n_terms = (int(v) for v in meta["shape"])
        matrix = Postings(arr("indptr"), arr("indices"), arr("data"), (n_docs, n_terms))
        vocab = SortedVocab(arr("vocab_offsets"), arr("vocab_bytes"), arr("vocab_columns"))
        impacts = (Impacts(*(arr(f"impact_{name}") for name in _IMPACT_FIELDS))
                   if (folder / "impact_term_max.npy").exists() else None)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    bm25 = BM25.from_postings(vocab, matrix, int(meta["n_docs"]))
    if impacts is not None:
        attach_impacts(bm25, impacts)
    return bm25


def stored_bm25(folder: Path | None, build: Callable[[], BM25], check: str = "") -> BM25:
    """The BM25 in `folder` when present and written for the same `check`, else `build()` and store it.

    A cache that cannot be written (read-only home, full disk) only costs the rebuild next time.
    """
    if folder is not None:
        found = load_bm25(folder, check)
        if found is not None:
            return found
    bm25 = build()
    if folder is not None:
        with contextlib.suppress(OSError):
            save_bm25(bm25, folder, check)
        # write-then-map: the built matrix is freed; the process keeps only the postings queries read
        return load_bm25(folder, check) or bm25
    return bm25



# ---------------------------------------------------------------------------- phrase tables


class StoredPhrases:
    """Phrase -> record positions, read from disk: sorted phrases (binary search) + CSR position lists.
    Behaves like the `dict[str, list[int]]` it was written from for `get` and `in`."""

    def __init__(self, keys: SortedVocab, indptr: np.ndarray, positions: np.ndarray) -> None:
        self._keys = keys
        self._indptr = indptr
        self._positions = positions

    def get(self, key: str, /) -> list[int] | None:
        group = self._keys.get(key)
        if group is None:
            return None
        found: list[int] = self._positions[self._indptr[group] : self._indptr[group + 1]].tolist()
        return found

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._keys.get(key) is not None


def _write_phrases(folder: Path, prefix: str, phrases: dict[str, list[int]]) -> None:
    keys = sorted(phrases)
    encoded = [k.encode("utf-8") for k in keys]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    indptr = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum([len(phrases[k]) for k in keys], out=indptr[1:])
    flat = [p for k in keys for p in phrases[k]]
    np.save(folder / f"{prefix}_offsets.npy", offsets)
    np.save(folder / f"{prefix}_bytes.npy", np.frombuffer(b"".join(encoded), dtype=np.uint8))
    np.save(folder / f"{prefix}_indptr.npy", indptr)
    np.save(folder / f"{prefix}_positions.npy", np.asarray(flat, dtype=np.int64))


def _read_phrases(folder: Path, prefix: str) -> StoredPhrases:
    def arr(name: str) -> np.ndarray:
        loaded: np.ndarray = np.asarray(np.load(folder / f"{prefix}_{name}.npy", mmap_mode="r", allow_pickle=False))
        return loaded

    offsets = arr("offsets")
    keys = SortedVocab(offsets, arr("bytes"), np.arange(len(offsets) - 1, dtype=np.int64))
    return StoredPhrases(keys, arr("indptr"), arr("positions"))


PhraseTables = dict[str, "dict[str, list[int]] | StoredPhrases"]


def stored_phrases(
    folder: Path | None, build: Callable[[], tuple[dict[str, dict[str, list[int]]], int]], check: str = ""
) -> tuple[PhraseTables, int]:
    """Named phrase tables plus one integer (linking: exact and alias titles, longest title), read from
    `folder` when stored there, else `build()` and stored."""
    if folder is not None:
        try:
            meta = json.loads((folder / "meta.json").read_text())
            if meta.get("format") == _FORMAT and meta.get("check", "") == check:
                return {name: _read_phrases(folder, name) for name in meta["tables"]}, int(meta["value"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    tables, value = build()
    if folder is not None:
        with contextlib.suppress(OSError):
            folder.parent.mkdir(parents=True, exist_ok=True)
            tmp = folder.with_name(f".{folder.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            for name, phrases in tables.items():
                _write_phrases(tmp, name, phrases)
            meta = {"format": _FORMAT, "tables": list(tables), "value": value, "check": check}
            (tmp / "meta.json").write_text(json.dumps(meta))
            _replace_dir(tmp, folder)
    return dict(tables), value
