"""Scores kept only for the documents a query reaches give exactly the dense numbers and rankings.

`BM25.sparse_scores` / `top_k` / `scores_at` and entity linking's candidate universe replaced arrays of
every document (a million entities at scale); these tests hold them to the dense definitions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shared_context import bm25 as bm25_module
from shared_context.bm25 import BM25
from shared_context.boilerplate_marks import boilerplate_weights
from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.lexical_store import load_bm25, save_bm25
from shared_context.linking import _entity_index, _exact_strengths, exact_tokens, lexical_terms, link_entities
from shared_context.records import Entity, TextUnit
from shared_context.search_backend import VectorTable

_WORDS = [f"w{i}" for i in range(40)]


def _docs(seed: int, n: int = 300) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    # Zipf-like: a few words in most documents (the dense path), most in a few (the sparse path)
    weights = 1.0 / np.arange(1, len(_WORDS) + 1)
    weights /= weights.sum()
    return [list(rng.choice(_WORDS, size=int(rng.integers(0, 12)), p=weights)) for _ in range(n)]


def _dense_top_k(bm25: BM25, query: list[str], k: int) -> tuple[list[int], list[float]]:
    scores = bm25.scores(query).astype(np.float64)
    order = sorted(np.flatnonzero(scores > 0).tolist(), key=lambda i: (-scores[i], i))[:k]
    return order, [float(scores[i]) for i in order]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_sparse_scores_are_the_dense_scores(dtype: type, tmp_path: Path) -> None:
    docs = _docs(1)
    built = BM25(docs, dtype=dtype)
    save_bm25(built, tmp_path / "bm25")
    stored = load_bm25(tmp_path / "bm25")  # memory-mapped postings and sorted vocabulary
    assert stored is not None
    rng = np.random.default_rng(2)
    queries = [[], ["absent"], ["w0"], ["w39"], ["w1", "w0", "w1"]] + [
        list(rng.choice([*_WORDS, "absent"], size=int(rng.integers(1, 6)))) for _ in range(60)
    ]
    for bm25 in (built, stored):
        for query in queries:
            dense = bm25.scores(query)
            positions, values = bm25.sparse_scores(query)
            assert positions.tolist() == np.flatnonzero(dense > 0).tolist()
            assert values.dtype == dense.dtype and values.tolist() == dense[positions].tolist()
            for k in (0, 1, 5, 1000):
                got_pos, got_scores = bm25.top_k(query, k)
                assert (got_pos.tolist(), got_scores.tolist()) == _dense_top_k(bm25, query, k)
            some = np.array([0, 7, 299, 150, 7], dtype=np.int64)
            assert bm25.scores_at(query, some).tolist() == dense[some].astype(np.float64).tolist()


def test_sparse_and_dense_paths_of_sparse_scores_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    bm25 = BM25(_docs(3))
    query = ["w0", "w5", "w30"]
    monkeypatch.setattr(bm25_module, "_SPARSE_SHARE", 10**9)  # always dense
    dense = bm25.sparse_scores(query)
    monkeypatch.setattr(bm25_module, "_SPARSE_SHARE", 0)  # never dense
    sparse = bm25.sparse_scores(query)
    assert dense[0].tolist() == sparse[0].tolist() and dense[1].tolist() == sparse[1].tolist()


def _reference_link(index: Index, query: str, k: int) -> list[tuple[int, float, bool, float]]:
    """The merge formula of `link_entities` (no vector, nothing included) over dense arrays of every
    entity: what linking computed before it kept only the entities a query reaches."""
    ent = _entity_index(index)
    n = len(index.entities)
    exact = np.zeros(n)
    positions, values = _exact_strengths(ent, exact_tokens(query))
    exact[positions] = values
    terms = lexical_terms(query)
    lexical = 2.0 * ent.titles.scores(terms).astype(np.float64)
    lexical += ent.descriptions.scores(terms)  # type: ignore[attr-defined]
    if lexical.max() > 0:
        lexical = lexical / lexical.max()
    weights = boilerplate_weights(index)  # an entity only licence text supports: its non-exact part weighted
    score = 0.5 * exact + 0.5 * (lexical if weights is None else lexical * weights.entities)
    order = sorted(np.flatnonzero(score > 0).tolist(), key=lambda p: (-score[p], -ent.degree[p], p))[:k]
    return [(p, float(score[p]), bool(exact[p] > 0), float(lexical[p])) for p in order]



def test_linking_ranks_exactly_as_the_dense_formula(carol: Index) -> None:
    titles = [e.title for e in carol.entities]
    rng = np.random.default_rng(4)
    queries = [
        "What does Bob Cratchit earn?",
        "why is scrooge's heart cold?",
        "ghosts and chains",
        "nothing here matches zzzq",
        *(f"What is the relationship between {titles[a].title()} and {titles[b].title()}?"
          for a, b in rng.integers(0, len(titles), size=(25, 2)).tolist()),
        *(" ".join(rng.choice(" ".join(carol.entities[int(i)].description for i in rng.integers(0, len(titles), 3))
                              .split(), size=4)) for _ in range(25)),
    ]
    for query in queries:
        for k in (1, 10, 40):
            got = [(e.position, e.score, e.exact, e.lexical) for e in link_entities(carol, query, k=k).entities]
            assert got == _reference_link(carol, query, k), query


def test_linking_with_a_query_vector_ranks_exactly_as_the_dense_formula() -> None:
    rng = np.random.default_rng(5)
    n = 60
    words = ["harbour", "signal", "river", "market", "winter", "bridge"]
    ents = [Entity(id=f"e{i}", short_id=str(i), title=f"NAME{i}", description=" ".join(rng.choice(words, 3)))
            for i in range(n)]
    with_vectors = rng.permutation(n)[: n - 10]  # some entities have no vector
    table = VectorTable.build("entity_description", with_vectors.tolist(),
                              rng.normal(size=(len(with_vectors), 8)).astype(np.float32), source="test")
    index = index_from_records(entities=ents, relationships=[], text_units=[TextUnit(id="t", short_id="0", text="x")],
                               vectors=[table])
    for query in ("Name3 and the harbour", "winter river", "nothing matches"):
        vector = rng.normal(size=8).astype(np.float32)
        ent = _entity_index(index)
        exact = np.zeros(n)
        positions, values = _exact_strengths(ent, exact_tokens(query))
        exact[positions] = values
        terms = lexical_terms(query)
        lexical = 2.0 * ent.titles.scores(terms).astype(np.float64) + ent.descriptions.scores(terms)  # type: ignore[attr-defined]
        if lexical.max() > 0:
            lexical = lexical / lexical.max()
        semantic = np.zeros(n)
        semantic[table.positions] = np.clip(table.similarities(vector).astype(np.float64), 0.0, None)
        if semantic.max() > 0:
            semantic = semantic / semantic.max()
        score = 0.5 * exact + 0.5 * (0.5 * lexical + 0.5 * semantic)
        want = sorted(np.flatnonzero(score > 0).tolist(), key=lambda p: (-score[p], -ent.degree[p], p))[:10]
        got = link_entities(index, query, query_vector=vector, k=10).entities
        assert [e.position for e in got] == want
        assert [(e.score, e.lexical, e.semantic) for e in got] == [(score[p], lexical[p], semantic[p]) for p in want]
