"""Token counts of whole text fields, counted on background threads while the rest of a load runs.

Counting is most of a first load's CPU (100k entities: ~10 s of ~16 s). The fields are cut into chunks
of about equal text volume and the chunks of *every* field go to a few worker threads, so both cores
stay busy until the last chunk while the main thread derives the graph.

tiktoken encodes with the GIL released, so its threads run in parallel with each other and with the
main thread. Workers take the anchored fields first (they need the token ids, not only their count),
then the plain ones.

One text at a time: tiktoken's threaded batch API costs a future per text and was 3-4x slower on many
short descriptions (463k relationship descriptions, 25 s vs 6.8 s).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import pairwise
from typing import cast

import numpy as np

from shared_context.records import RecordTable, TextColumn
from shared_context.tokens import Tokenizer, get_encoding

__all__ = ["TokenAnchors", "TokenCounts", "count_strings", "count_texts"]

_CHUNK_BYTES = 2 << 20  # text per chunk: enough work to dwarf a future's cost, small enough to balance
_CHUNK_ROWS = 50_000  # bounds the Python strings one chunk decodes at once
_MAX_WORKERS = 4
_MIN_PART_CHARS = 64 << 10  # `count_strings`: less text than this per thread is not worth a future


def _sizes(records: Sequence[object], field: str) -> tuple[np.ndarray, Callable[[int, int], list[str | None]]]:
    """Each row's text size and a `(start, stop) -> texts` reader: a RecordTable's column is sized
    from its offsets and decoded a chunk at a time (a million texts are never Python strings at once)."""
    if isinstance(records, RecordTable):
        column = records.arrow_column(field)
        sizes = TextColumn(column).byte_lengths()
        return sizes, lambda a, b: column.slice(a, b - a).to_pylist()
    texts: list[str | None] = [getattr(r, field) for r in records]
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


def _count_chunk(count: Callable[[str], int], texts: Sequence[str | None]) -> np.ndarray:
    return np.fromiter((count(t) if t else 0 for t in texts), dtype=np.int32, count=len(texts))


_ANCHOR_STEP = 32  # at most one anchor per this many characters of a text


@lru_cache(maxsize=4)
def _token_bytes(encoding_name: str) -> np.ndarray:
    """Byte length of every token id of the encoding (0 for ids it does not use)."""
    enc = get_encoding(encoding_name)
    out = np.zeros(enc.n_vocab, dtype=np.int64)
    for t in range(enc.n_vocab):
        with contextlib.suppress(KeyError):
            out[t] = len(enc.decode_single_token_bytes(t))
    return out


_LETTER = np.zeros(256, dtype=bool)
_LETTER[ord("A") : ord("Z") + 1] = True
_LETTER[ord("a") : ord("z") + 1] = True


@dataclass(frozen=True)
class TokenAnchors:
    """Offsets in each text where its encoding may be cut, with the number of tokens before them, so a
    part of the text is counted by encoding only its ends (`span_counts`).

    An anchor is a space between two ASCII letters. tiktoken's pre-tokeniser (cl100k/o200k) never puts a
    letter and a following space in one piece, and a piece starting at such a space reads only the space
    and the letters after it, so the offset is a piece boundary in *any* string holding the letter
    before and the letter after, and the pieces between two anchors read no character outside them.
    Hence for anchors a <= b with s < a and b + 1 < e:
        count(text[s:e]) == count(text[s:a]) + (tokens before b - tokens before a) + count(text[b:e]).
    Only ASCII texts get anchors (offsets are then both characters and bytes); tests compare every
    span count with tiktoken's own."""

    ptr: np.ndarray  # int64 (texts + 1): text i's anchors are [ptr[i]:ptr[i + 1]]
    pos: np.ndarray  # int32 character offsets, ascending within a text
    before: np.ndarray  # int32 tokens of the text before each offset

    def span_counts(
        self, tokenizer: Tokenizer, texts: Sequence[str], first: int, text_of: np.ndarray,
        starts: np.ndarray, ends: np.ndarray,
    ) -> np.ndarray:
        """Token counts of `texts[text_of[k]][starts[k]:ends[k]]` (texts numbered from `first` here)."""
        rows = np.asarray(text_of, dtype=np.int64)
        if not len(rows):
            return np.zeros(0, dtype=np.int64)
        n_texts = int(rows.max()) + 1
        ptr = self.ptr[first : first + n_texts + 1] - self.ptr[first]  # the anchors of these texts only
        pos = self.pos[self.ptr[first] : self.ptr[first + n_texts]].astype(np.int64)
        lo, hi = ptr[rows], ptr[rows + 1]
        key = (np.repeat(np.arange(n_texts, dtype=np.int64), np.diff(ptr)) << 32) | pos
        ia = np.searchsorted(key, (rows << 32) | (starts + 1), side="left")
        ib = np.searchsorted(key, (rows << 32) | np.maximum(ends - 2, 0), side="right") - 1
        cut = (ia < hi) & (ib >= lo) & (ia <= ib) & (ends >= 2)
        out = np.empty(len(rows), dtype=np.int64)
        count, base = tokenizer.count, int(self.ptr[first])
        for k, (t, s, e, ok, i, j) in enumerate(zip(text_of.tolist(), starts.tolist(), ends.tolist(),
                                                    cut.tolist(), ia.tolist(), ib.tolist(), strict=True)):
            text = texts[t]
            if ok:
                a, b = int(pos[i]), int(pos[j])
                skipped = int(self.before[base + j]) - int(self.before[base + i])
                out[k] = count(text[s:a]) + skipped + count(text[b:e])
            else:
                out[k] = count(text[s:e])
        return out

    @classmethod
    def join(cls, parts: Sequence[TokenAnchors]) -> TokenAnchors:
        sizes = np.concatenate([np.diff(p.ptr) for p in parts]) if parts else np.zeros(0, dtype=np.int64)
        ptr = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=ptr[1:])
        pos = np.concatenate([p.pos for p in parts]) if parts else np.zeros(0, dtype=np.int32)
        before = np.concatenate([p.before for p in parts]) if parts else np.zeros(0, dtype=np.int32)
        return cls(ptr, pos.astype(np.int32), before.astype(np.int32))


def _count_anchored(tokenizer: Tokenizer, texts: Sequence[str | None]) -> tuple[np.ndarray, TokenAnchors]:
    """`_count_chunk` plus the texts' `TokenAnchors`, from the same encodings."""
    encode, empty = tokenizer.encode_array, np.zeros(0, dtype=np.uint32)
    encoded = [encode(t) if t else empty for t in texts]
    counts = np.fromiter(map(len, encoded), dtype=np.int32, count=len(texts))
    plain = [i for i, t in enumerate(texts) if t and t.isascii()]
    plain_texts = [cast(str, texts[i]) for i in plain]
    sizes = np.zeros(len(texts), dtype=np.int64)
    if not plain:
        return counts, TokenAnchors(np.zeros(len(texts) + 1, dtype=np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))
    # the texts joined by NUL (neither a letter nor a space, so no anchor spans two texts)
    data = np.frombuffer("\x00".join(plain_texts).encode("ascii"), dtype=np.uint8)
    lengths = np.fromiter(map(len, plain_texts), dtype=np.int64, count=len(plain))
    text_start = np.cumsum(lengths + 1) - (lengths + 1)  # in the joined bytes
    n_tokens = counts[plain].astype(np.int64)
    flat = np.concatenate([encoded[i] for i in plain])
    token_ends = np.cumsum(_token_bytes(tokenizer.encoding_name)[flat])
    at = np.flatnonzero(_LETTER[data[:-2]] & (data[1:-1] == 32) & _LETTER[data[2:]]) + 1
    at = at[np.diff(at // _ANCHOR_STEP, prepend=-1) > 0]  # thinned: the first anchor of each step
    owner = np.searchsorted(text_start, at, side="right") - 1
    local = at - text_start[owner]
    token_start = np.cumsum(n_tokens) - n_tokens
    # tokens ending at or before the anchor, in the texts' bytes without the separators
    before = np.searchsorted(token_ends, at - owner, side="right") - token_start[owner]
    sizes[np.asarray(plain, dtype=np.int64)] = np.bincount(owner, minlength=len(plain))
    ptr = np.zeros(len(texts) + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    return counts, TokenAnchors(ptr, local.astype(np.int32), before.astype(np.int32))


# what a chunk's worker gives: its counts, with their anchors for an anchored field
Counted = np.ndarray | tuple[np.ndarray, "TokenAnchors"]


@dataclass
class _Chunk:
    read: Callable[[int, int], list[str | None]]
    start: int
    stop: int
    anchored: bool
    future: Future[Counted] = field(default_factory=Future)


class _Queue:
    """The chunks not started yet, plain and anchored apart so each worker takes its kind first."""

    def __init__(self, chunks: list[_Chunk]) -> None:
        self._lock = threading.Lock()
        self._plain = deque(c for c in chunks if not c.anchored)
        self._anchored = deque(c for c in chunks if c.anchored)

    def take(self) -> _Chunk | None:
        with self._lock:
            queue = self._anchored or self._plain
            return queue.popleft() if queue else None

    def drop(self) -> None:
        with self._lock:
            left = [*self._plain, *self._anchored]
            self._plain.clear()
            self._anchored.clear()
        for chunk in left:
            chunk.future.cancel()


def _work(tokenizer: Tokenizer, queue: _Queue) -> None:
    """One worker: chunks until none is left."""
    while (chunk := queue.take()) is not None:
        if not chunk.future.set_running_or_notify_cancel():
            continue
        try:
            texts = chunk.read(chunk.start, chunk.stop)
            result: Counted = (_count_anchored(tokenizer, texts) if chunk.anchored
                               else _count_chunk(tokenizer.count, texts))  # fmt: skip
        except BaseException as exc:  # the waiting `result()` raises it
            chunk.future.set_exception(exc)
        else:
            chunk.future.set_result(result)


class TokenCounts:
    """Counts in progress: `result()` waits and returns one int32 array per field, `cancel()` drops
    the chunks not started (a load that failed meanwhile)."""

    def __init__(self, queue: _Queue | None, parts: list[list[Future[Counted]]], threads: list[threading.Thread]) -> None:
        self._queue = queue
        self._parts = parts
        self._threads = threads  # daemons, never joined by a load: kept so a test can wait for them
        self.anchors: dict[int, TokenAnchors] = {}  # field index -> anchors, for the anchored fields

    def result(self) -> list[np.ndarray]:
        try:
            out = []
            for index, futures in enumerate(self._parts):
                done = [f.result() for f in futures]
                counts = [d[0] if isinstance(d, tuple) else d for d in done]
                if done and isinstance(done[0], tuple):
                    self.anchors[index] = TokenAnchors.join([d[1] for d in done if isinstance(d, tuple)])
                out.append(np.concatenate(counts) if counts else np.zeros(0, dtype=np.int32))
            return out
        finally:
            self.cancel()

    def cancel(self) -> None:
        if self._queue is not None:
            self._queue.drop()
            self._queue = None


def count_texts(
    tokenizer: Tokenizer, fields: Sequence[tuple[Sequence[object], str]], anchored: Sequence[int] = ()
) -> TokenCounts:
    """Start counting the tokens of every text of each `(records, field)`; returns at once. The fields
    at the positions `anchored` also get `TokenAnchors` (`TokenCounts.anchors` after `result()`)."""
    parts: list[list[_Chunk]] = []
    for i, (records, name) in enumerate(fields):
        sizes, read = _sizes(records, name)
        parts.append([_Chunk(read, a, b, i in anchored) for a, b in pairwise(_bounds(sizes))])
    chunks = [c for part in parts for c in part]
    futures = [[c.future for c in part] for part in parts]
    if not chunks:
        return TokenCounts(None, futures, [])
    queue = _Queue(chunks)
    n_workers = min(len(chunks), os.cpu_count() or 1, _MAX_WORKERS)
    threads = [threading.Thread(target=_work, args=(tokenizer, queue), name=f"graphroute-tokens-{i}", daemon=True)
               for i in range(n_workers)]
    for thread in threads:
        thread.start()
    return TokenCounts(queue, futures, threads)


def count_strings(tokenizer: Tokenizer, texts: Sequence[str], pool: ThreadPoolExecutor | None = None) -> np.ndarray:
    """Token counts of `texts` (int32, in order), the chunks counted on `pool`'s threads while the caller
    waits: tiktoken releases the GIL while it encodes, so two threads count twice as fast - as long as
    no other thread runs Python meanwhile, since each encode takes the GIL back after every text."""
    ends = np.cumsum(np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts)))
    parts = min(_MAX_WORKERS * 2, int(ends[-1]) // _MIN_PART_CHARS) if len(texts) else 0
    if pool is None or parts <= 1:
        return _count_chunk(tokenizer.count, list(texts))
    cuts = np.searchsorted(ends, np.linspace(0, int(ends[-1]), parts + 1)[1:-1], side="right")
    bounds = [0, *sorted({int(c) for c in cuts if 0 < c < len(texts)}), len(texts)]
    futures = [pool.submit(_count_chunk, tokenizer.count, list(texts[a:b])) for a, b in pairwise(bounds)]
    return np.concatenate([f.result() for f in futures])
