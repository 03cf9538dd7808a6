"""Column-at-a-time lexical terms (`text.lexical_term_ids`) and the BM25 built from them
(`BM25.from_term_ids`, `linking.lexical_index`) are exactly `lexical_terms` text by text and `BM25` over
those term lists: on the index fixtures (tests/fixtures) and on edge cases (punctuation,
Unicode case mappings, final sigma, CJK runs, NUL characters, missing texts, chunk boundaries)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fixture_paths import FIXTURES

from shared_context import text
from shared_context.bm25 import BM25
from shared_context.linking import lexical_index
from shared_context.text import lexical_term_ids, lexical_terms

COLUMNS = [  # (index fixture file, text column)
    ("christmas_carol_graphrag_index/entities.parquet", "title"),
    ("christmas_carol_graphrag_index/entities.parquet", "description"),
    ("christmas_carol_graphrag_index/relationships.parquet", "description"),
    ("christmas_carol_graphrag_index/text_units.parquet", "text"),
    ("christmas_carol_graphrag_index/community_reports.parquet", "full_content"),
    ("operation_dulce/entities.parquet", "description"),
    ("operation_dulce/text_units.parquet", "text"),
    ("christmas_carol_graphrag_index/documents.parquet", "text"),
    ("christmas_carol_graphrag_index/covariates.parquet", "description"),
    ("operation_dulce/community_reports.parquet", "full_content"),
]

EDGE = [
    "",
    None,
    "Scrooge's CAT-cats_dogs 42x the and of",
    "ΟΔΟΣ ΟΔΟΣ'Α ΣΑΣ Σ",  # final sigma depends on the neighbours
    "İstanbul İİ ẞ straße ǅ",  # lower() changes the length
    "中文测试abc日本語のテキスト한국어 灯塔守护者在风暴来临之前修好了灯。",
    "a\x00b the\x00cats",
    "ΣΑΣ\x00ΣΑΣ 中\x00文",  # NUL in a non-ASCII text
    "・ー゠カタカナ 中 文",
    "résumé café naïve e\u0301tude",
    "١٢٣ ٤٥ ۱۲ Ⅻ ⅻ ①② ﬁne ﬂow",
    "a_b__c __ _x_",
    "   \t\n  ",
    "Mr. FEZZIWIG's ball -- and the Ghosts' visits!!! (1843)",
    "word" * 300,
]


def _terms_of(chunks: list[tuple[np.ndarray, np.ndarray]], vocab: dict[str, int]) -> list[list[str]]:
    by_id = [""] * len(vocab)
    for term, i in vocab.items():
        by_id[i] = term
    out: list[list[str]] = []
    for sizes, ids in chunks:
        at = 0
        for size in sizes.tolist():
            out.append([by_id[i] for i in ids[at : at + size].tolist()])
            at += size
        assert at == len(ids)
    return out


def _expected(texts: list[Any]) -> list[list[str]]:
    return [lexical_terms(t) if t else [] for t in texts]


def _real_columns() -> list[tuple[str, pa.ChunkedArray]]:
    return [(f"{file}:{column}", pq.read_table(FIXTURES / file, columns=[column]).column(column))
            for file, column in COLUMNS]


def test_terms_equal_lexical_terms_on_real_corpora() -> None:
    for name, column in _real_columns():
        vocab: dict[str, int] = {}
        got = _terms_of(list(lexical_term_ids(column, vocab)), vocab)
        assert got == _expected(column.to_pylist()), name


@pytest.mark.parametrize("chunk_bytes", [1, 64, 1 << 20])
def test_terms_equal_lexical_terms_on_edge_cases(monkeypatch: pytest.MonkeyPatch, chunk_bytes: int) -> None:
    monkeypatch.setattr(text, "_TEXT_CHUNK_BYTES", chunk_bytes)  # runs mixing ASCII and other texts, or one text
    rng = np.random.default_rng(3)
    texts = [EDGE[i] for i in rng.integers(0, len(EDGE), 200)] + EDGE
    for given in (texts, pa.array(texts, type=pa.string()), pa.chunked_array([pa.array(texts, type=pa.large_string())])):
        vocab: dict[str, int] = {}
        assert _terms_of(list(lexical_term_ids(given, vocab)), vocab) == _expected(texts)


def test_a_sliced_column_reads_only_its_rows() -> None:
    texts = ["alpha beta", "gamma cats", "ΣΑΣ delta", "epsilon"] * 5
    column = pa.array(texts, type=pa.string()).slice(3, 9)
    vocab: dict[str, int] = {}
    assert _terms_of(list(lexical_term_ids(column, vocab)), vocab) == _expected(texts[3:12])


def _postings(bm25: BM25, terms: list[str]) -> dict[str, tuple[list[int], list[float]]]:
    out = {}
    m = bm25.matrix
    for term in terms:
        t = bm25.vocab.get(term)
        assert t is not None
        lo, hi = int(m.indptr[t]), int(m.indptr[t + 1])
        out[term] = (np.asarray(m.indices[lo:hi]).tolist(), np.asarray(m.data[lo:hi]).tolist())
    return out


def test_bm25_from_term_ids_is_bm25_over_the_term_lists() -> None:
    for name, column in _real_columns():
        texts = column.to_pylist()
        expected = BM25(_expected(texts), dtype=np.float32)
        built = lexical_index(column)
        assert built.n_docs == expected.n_docs, name
        vocab = sorted(expected.vocab)  # type: ignore[call-overload]
        assert sorted(built.vocab) == vocab, name  # type: ignore[call-overload]
        assert _postings(built, vocab) == _postings(expected, vocab), name
        for query in (texts[0] or "", "scrooge christmas ghost", "the patient treatment"):
            terms = lexical_terms(query)
            assert np.array_equal(built.scores(terms), expected.scores(terms)), name


def test_lexical_index_of_a_list_equals_the_column() -> None:
    texts = EDGE * 3
    a, b = lexical_index(texts), lexical_index(pa.chunked_array([pa.array(texts, type=pa.string())]))
    vocab = sorted(a.vocab)  # type: ignore[call-overload]
    assert _postings(a, vocab) == _postings(b, vocab)
    assert _postings(a, vocab) == _postings(BM25(_expected(texts), dtype=np.float32), vocab)
