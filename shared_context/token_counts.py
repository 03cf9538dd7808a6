"""Token counts of whole text fields, counted on background threads while the rest of a load runs.

Counting is most of a first load's CPU (100k entities: ~20 s of ~31 s, tiktoken's BPE). tiktoken
encodes with the GIL released, so the fields are cut into chunks of about equal text volume and the
chunks of *every* field go to one small pool: both cores stay busy until the last chunk, where counting
field after field left one core idle for each field too small to split (a 30k-unit text field was one
50k-row chunk, counted on the main thread alone), and the main thread derives the graph meanwhile.

One text at a time: tiktoken's threaded batch API costs a future per text and was 3-4x slower on many
short descriptions (463k relationship descriptions, 25 s vs 6.8 s).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import pairwise
from typing import Any

import numpy as np

from shared_context.record_table import RecordTable, TextColumn
from shared_context.tokens import Tokenizer

__all__ = ["TokenCounts", "count_strings", "count_texts"]

_CHUNK_BYTES = 2 << 20  # text per chunk: enough work to dwarf a future's cost, small enough to balance
_CHUNK_ROWS = 50_000  # bounds the Python strings one chunk decodes at once
_MAX_WORKERS = 4
_MIN_PART_CHARS = 64 << 10  # `count_strings`: less text than this per thread is not worth a future


def _sizes(records: Sequence[Any], field: str) -> tuple[np.ndarray, Callable[[int, int], list[Any]]]:
    """Each row's text size and a `(start, stop) -> texts` reader: a RecordTable's column is sized
    from its offsets and decoded a chunk at a time (a million texts are never Python strings at once)."""
    if isinstance(records, RecordTable):
        column = records.arrow_column(field)
        sizes = TextColumn(column).byte_lengths()
        return sizes, lambda a, b: column.slice(a, b - a).to_pylist()
    texts = [getattr(r, field) for r in records]
    sizes = np.fromiter((len(t) if t else 0 for t in texts), dtype=np.int64, count=len(texts))
    return sizes, lambda a, b: texts[a:b]


def _bounds(sizes: np.ndarray) -> list[int]:
    """Row boundaries cutting `sizes` into runs of about `_CHUNK_BYTES` and at most `_CHUNK_ROWS` rows."""
    n = len(sizes)
    ends = np.cumsum(sizes)
    total = int(ends[-1]) if n else 0
    cuts = np.searchsorted(ends, np.arange(_CHUNK_BYTES, total, _CHUNK_BYTES), side="right")
    rows = np.arange(_CHUNK_ROWS, n, _CHUNK_ROWS)
    inner = np.union1d(cuts, rows)
    return [0, *(int(c) for c in inner if 0 < c < n), n]


def _count_chunk(tokenizer: Tokenizer, texts: list[Any]) -> np.ndarray:
    count = tokenizer.count
    return np.fromiter((count(t) for t in texts), dtype=np.int32, count=len(texts))


class TokenCounts:
    """Counts in progress: `result()` waits and returns one int32 array per field, `cancel()` drops
    the chunks not started (a load that failed meanwhile)."""

    def __init__(self, pool: ThreadPoolExecutor | None, parts: list[list[Future[np.ndarray]]]) -> None:
        self._pool = pool
        self._parts = parts

    def result(self) -> list[np.ndarray]:
        try:
            return [
                np.concatenate([f.result() for f in futures]) if futures else np.zeros(0, dtype=np.int32)
                for futures in self._parts
            ]
        finally:
            self.cancel()

    def cancel(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def count_texts(tokenizer: Tokenizer, fields: Sequence[tuple[Sequence[Any], str]]) -> TokenCounts:
    """Start counting the tokens of every text of each `(records, field)`; returns at once."""
    jobs: list[list[tuple[Callable[[int, int], list[Any]], int, int]]] = []
    for records, field in fields:
        sizes, read = _sizes(records, field)
        bounds = _bounds(sizes)
        jobs.append([(read, a, b) for a, b in pairwise(bounds)])
    n_chunks = sum(map(len, jobs))
    if not n_chunks:
        return TokenCounts(None, [[] for _ in jobs])
    pool = ThreadPoolExecutor(
        max_workers=min(n_chunks, os.cpu_count() or 1, _MAX_WORKERS), thread_name_prefix="graphroute-tokens"
    )

    def run(read: Callable[[int, int], list[Any]], a: int, b: int) -> np.ndarray:
        return _count_chunk(tokenizer, read(a, b))

    parts = [[pool.submit(run, read, a, b) for read, a, b in field_jobs] for field_jobs in jobs]
    return TokenCounts(pool, parts)


def count_strings(tokenizer: Tokenizer, texts: Sequence[str], pool: ThreadPoolExecutor | None = None) -> np.ndarray:
    """Token counts of `texts` (int32, in order), the chunks counted on `pool`'s threads while the caller
    waits: tiktoken releases the GIL while it encodes, so two threads count twice as fast - as long as
    no other thread runs Python meanwhile, since each encode takes the GIL back after every text."""
    ends = np.cumsum(np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)))
    parts = min(_MAX_WORKERS * 2, int(ends[-1]) // _MIN_PART_CHARS) if len(texts) else 0
    if pool is None or parts <= 1:
        return _count_chunk(tokenizer, list(texts))
    cuts = np.searchsorted(ends, np.linspace(0, int(ends[-1]), parts + 1)[1:-1], side="right")
    bounds = [0, *sorted({int(c) for c in cuts if 0 < c < len(texts)}), len(texts)]
    futures = [pool.submit(_count_chunk, tokenizer, list(texts[a:b])) for a, b in pairwise(bounds)]
    return np.concatenate([f.result() for f in futures])
