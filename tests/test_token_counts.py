"""Token counts of whole fields, counted in chunks on a thread pool, are exactly the encoder's counts in row
order, whatever the chunking; a load that fails meanwhile cancels the chunks not started."""

from __future__ import annotations

import threading
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pytest

from shared_context import token_counts
from shared_context.records import RecordTable, TextUnit
from shared_context.tokens import get_tokenizer


def _units(texts: list[str]) -> RecordTable[TextUnit]:
    n = len(texts)
    table = pa.table({
        "id": [f"u{i}" for i in range(n)], "short_id": [str(i) for i in range(n)], "text": texts,
        "n_tokens": [0] * n, "document_id": [""] * n, "entity_ids": [[] for _ in range(n)],
        "relationship_ids": [[] for _ in range(n)], "covariate_ids": [[] for _ in range(n)],
    })  # fmt: skip
    return RecordTable(TextUnit, table)


@pytest.mark.parametrize(("chunk_bytes", "chunk_rows"), [(1, 1), (50, 3), (1 << 20, 7), (1 << 20, 50_000)])
def test_counts_equal_the_encoder_in_row_order(monkeypatch, chunk_bytes: int, chunk_rows: int) -> None:
    monkeypatch.setattr(token_counts, "_CHUNK_BYTES", chunk_bytes)
    monkeypatch.setattr(token_counts, "_CHUNK_ROWS", chunk_rows)
    tok = get_tokenizer()
    texts = [f"Unit {i}: " + "the harbour trust met the council " * (i % 5) + "é" * (i % 3) for i in range(40)]
    texts[7] = ""
    units = _units(texts)
    as_list = list(units)
    counting = token_counts.count_texts(tok, [(units, "text"), (as_list, "text"), ([], "text")])
    from_table, from_list, empty = counting.result()
    expected = [len(tok.encode(t)) for t in texts]
    assert from_table.tolist() == expected and from_list.tolist() == expected
    assert from_table.dtype == np.int32 and len(empty) == 0


def test_bounds_cover_every_row_once(monkeypatch) -> None:
    monkeypatch.setattr(token_counts, "_CHUNK_BYTES", 10)
    monkeypatch.setattr(token_counts, "_CHUNK_ROWS", 4)
    sizes = np.array([3, 30, 0, 0, 1, 9, 9, 9, 2, 0, 0], dtype=np.int64)
    bounds = token_counts._bounds(sizes)
    assert bounds[0] == 0 and bounds[-1] == len(sizes) and bounds == sorted(set(bounds))
    assert all(b - a <= 4 for a, b in pairwise(bounds))
    assert token_counts._bounds(np.zeros(0, dtype=np.int64)) == [0, 0]


def test_cancel_drops_the_chunks_not_started(monkeypatch) -> None:
    monkeypatch.setattr(token_counts, "_CHUNK_ROWS", 1)
    monkeypatch.setattr(token_counts, "_MAX_WORKERS", 1)
    release, started = threading.Event(), []
    tok = get_tokenizer()

    class Slow:
        encoding_name = tok.encoding_name

        def count(self, text: str) -> int:
            started.append(text)
            release.wait(10)
            return 1

    units = [TextUnit(id=str(i), short_id=str(i), text=f"t{i}") for i in range(20)]
    counting = token_counts.count_texts(Slow(), [(units, "text")])  # type: ignore[arg-type]
    counting.cancel()
    release.set()
    for thread in counting._threads:
        thread.join(10)
    assert len(started) <= 1  # only the chunk already running when cancelled
