"""Counting a part of a text unit from its `TokenAnchors` (encoding only the part's ends) gives exactly
tiktoken's count of the part, for random spans of real corpora and of texts built to stress the
pre-tokeniser (contractions, runs of spaces, newlines, digits, punctuation, non-ASCII); excerpt blocks
counted that way equal blocks counted by encoding each one."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from fixture_paths import FIXTURES

from shared_context import load_index
from shared_context.passages import build_block_table
from shared_context.token_counts import count_texts
from shared_context.tokens import get_tokenizer

PIECES = [
    *"abcdeXYZ  \n\t.,'!?-/0123456789", "'s", "'t", "'LL", " the", "  ", "\n\n", "https://x.y/z", "...", "A", "I'm", "é", "中文", "—", " \n ",
]  # fmt: skip


def _stress_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 300))) for _ in range(n)]


def _corpus_texts() -> list[str]:
    out = []
    for file, column in (("christmas_carol_graphrag_index/text_units.parquet", "text"),
                         ("operation_dulce/text_units.parquet", "text"),
                         ("christmas_carol_graphrag_index/documents.parquet", "text")):  # fmt: skip
        out += [t for t in pq.read_table(FIXTURES / file, columns=[column]).column(column).to_pylist()[:40] if t]
    return out


@pytest.mark.parametrize("source", ["stress", "corpora"])
def test_span_counts_equal_the_encoder(source: str) -> None:
    texts = _stress_texts(400, 5) if source == "stress" else _corpus_texts()
    tokenizer = get_tokenizer()
    counting = count_texts(tokenizer, [([_Row(t) for t in texts], "text")], anchored=[0])
    (counts,) = counting.result()
    anchors = counting.anchors[0]
    assert counts.tolist() == [tokenizer.count(t) for t in texts]
    assert len(anchors.pos) > 0
    rng = np.random.default_rng(11)
    rows = rng.integers(0, len(texts), 3000)
    lengths = np.asarray([len(texts[r]) for r in rows])
    starts = (rng.random(len(rows)) * lengths).astype(np.int64)
    ends = np.minimum(lengths, starts + rng.integers(1, 3000, len(rows)))
    rows, starts, ends = rows[ends > starts], starts[ends > starts], ends[ends > starts]
    got = anchors.span_counts(tokenizer, texts, 0, rows, starts, ends)
    want = [tokenizer.count(texts[r][s:e]) for r, s, e in zip(rows.tolist(), starts.tolist(), ends.tolist(), strict=True)]
    assert got.tolist() == want
    later = rows >= 3  # the same spans counted from a run of texts that starts later
    again = anchors.span_counts(tokenizer, texts[3:], 3, rows[later] - 3, starts[later], ends[later])
    assert again.tolist() == got[later].tolist()


class _Row:
    def __init__(self, text: str) -> None:
        self.text = text


@pytest.mark.parametrize("block_tokens", [20, 150])
def test_blocks_counted_from_anchors_equal_blocks_counted_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                block_tokens: int) -> None:
    path = FIXTURES / "christmas_carol_graphrag_index"
    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(tmp_path))
    index = load_index(path)
    assert len(index.text_unit_token_anchors.ptr) == len(index.text_units) + 1
    fast = build_block_table(index.text_units, index.text_unit_tokens, block_tokens, index.tokenizer,
                             index.text_unit_token_anchors)
    whole = build_block_table(index.text_units, index.text_unit_tokens, block_tokens, index.tokenizer)
    assert np.array_equal(fast.start, whole.start) and np.array_equal(fast.end, whole.end)
    assert np.array_equal(fast.tokens, whole.tokens)
    again = load_index(path)  # the anchors are read back from the derived store
    assert np.array_equal(again.text_unit_token_anchors.pos, index.text_unit_token_anchors.pos)
    assert np.array_equal(again.text_unit_token_anchors.before, index.text_unit_token_anchors.before)
