"""Where an index's search structures live on disk, and the key that ties them to the index content.

`search_cache_root()` is `$GRAPHROUTE_CACHE_DIR/search` (beside the token cache of
`derived_store.cache_root()`). Each searchable field gets a folder named by `field_key(index, field)`:
- a loaded index is identified by its table files (resolved path, size and mtime of each file the
  loader read, as for the token cache: GraphRAG never edits a table in place, it writes a new one), so
  computing the key costs a few `stat` calls;
- an index built in memory has no files, so its key hashes the very texts being indexed.
The field name and a format number are part of the key: a new tokenisation never reads old tables.
A file key is computed on first use, so each stored table also records `content_check(texts)` and is
rebuilt when the texts in memory differ from the ones it was built from (a file rewritten after load).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from shared_context.records import TextColumn

__all__ = ["content_check", "field_folder", "field_key", "search_cache_root"]

# Bump when lexical_terms, the BM25 layout or the Lance table layout changes.
SEARCH_FORMAT = 1


def search_cache_root() -> Path:
    base = os.environ.get("GRAPHROUTE_CACHE_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "graphroute"
    return root / "search"


def _files_identity(index: object) -> str | None:
    root = getattr(index, "path", None)
    files: dict[str, str] = getattr(index, "source_files", {}) or {}
    if root is None or not files:
        return None
    parts = [str(Path(root).resolve())]
    try:
        for table in sorted(files):
            st = (Path(root) / files[table]).stat()
            parts.append(f"{table}={files[table]}:{st.st_size}:{st.st_mtime_ns}")
    except OSError:  # a file moved away after load: fall back to hashing the texts
        return None
    return "|".join(parts)


def field_key(index: object, field: str, texts: Callable[[], Iterable[str | bytes]]) -> str:
    """Key of `field`'s search structures for this index content (`texts`, the indexed texts or vector
    bytes, is called only for an index that has no files)."""
    h = hashlib.sha256(f"{SEARCH_FORMAT}|{field}|".encode())
    identity = _files_identity(index)
    if identity is not None:
        h.update(identity.encode())
    else:
        for text in texts():
            data = text.encode("utf-8") if isinstance(text, str) else text
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
    return h.hexdigest()[:32]


def field_folder(index: object, field: str, texts: Callable[[], Iterable[str | bytes]]) -> Path:
    """The folder holding `field`'s stored search structures (not created here)."""
    return search_cache_root() / f"{field}-{field_key(index, field, texts)}"


_CHECK_SAMPLES = 64


def content_check(texts: Sequence[str]) -> str:
    """A cheap fingerprint of `texts` (their number, every length and 64 evenly spaced texts), stored
    with each table and compared on reuse. A `TextColumn` (a loaded index's column, memory-mapped) is
    fingerprinted by its UTF-8 byte lengths, read from its offsets: checking a million texts on every
    open must not page them all in. (A list gives character lengths; a folder is only ever checked
    against texts of the same kind, and a mismatch only costs a rebuild.)"""
    h = hashlib.sha256(str(len(texts)).encode())
    lengths = (
        texts.byte_lengths()
        if isinstance(texts, TextColumn)
        else np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
    )
    h.update(lengths.tobytes())
    step = max(1, len(texts) // _CHECK_SAMPLES)
    for i in range(0, len(texts), step):
        h.update(texts[i].encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:32]
