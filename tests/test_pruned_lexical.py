"""Linking's pruned lexical top-k: the unpruned numbers wherever pruning cannot change the top k, and
work that does not grow with the posting list of a word in most titles (counted, not timed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shared_context import lexical_store
from shared_context.bm25 import BM25
from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.lexical_store import load_bm25, pruned_top, save_bm25, scores_at
from shared_context.linking import _entity_index, _exact_strengths, exact_tokens, lexical_terms, link_entities
from shared_context.records import Entity, TextUnit


@pytest.fixture
def small_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    """Common lists from 64 documents on, so small indexes exercise every path."""
    monkeypatch.setattr(lexical_store, "COMMON_POSTINGS", 64)
    monkeypatch.setattr(lexical_store, "IMPACT_PREFIX", 96)
    monkeypatch.setattr(lexical_store, "QUERY_BUDGET", 160)


def _dense(parts: list[tuple[float, BM25]], query: list[str]) -> np.ndarray:
    total = np.zeros(parts[0][1].n_docs, dtype=np.float64)
    for weight, bm25 in parts:
        total += weight * bm25.scores(query).astype(np.float64)
    return total


def _zipf_docs(seed: int, n: int, words: int = 60) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, words + 1) ** 1.1
    return [list(rng.choice([f"w{i}" for i in range(words)], size=int(rng.integers(1, 9)), p=p / p.sum()))
            for _ in range(n)]


@pytest.mark.usefixtures("small_lists")
def test_pruned_top_k_is_the_unpruned_top_k_whenever_it_says_so(tmp_path: Path) -> None:
    titles = BM25(_zipf_docs(1, 1500), dtype=np.float32)
    save_bm25(BM25(_zipf_docs(2, 1500), dtype=np.float32), tmp_path / "d")
    descriptions = load_bm25(tmp_path / "d")  # stored: impact prefixes read from disk
    assert descriptions is not None
    parts = [(2.0, titles), (1.0, descriptions)]
    rng = np.random.default_rng(3)
    exact_seen = pruned_seen = 0
    for _ in range(150):
        query = list(rng.choice([f"w{i}" for i in range(70)], size=int(rng.integers(1, 5))))
        dense = _dense(parts, query)
        for k in (1, 5, 16):
            got = pruned_top(parts, query, k)
            # the scores it returns are always the unpruned ones
            assert got.scores.tolist() == dense[got.positions].tolist()
            assert np.all(dense[np.setdiff1d(np.flatnonzero(dense > 0), got.positions)] <= got.unseen * (1 + 1e-6))
            if not got.exact:
                pruned_seen += 1
                continue
            exact_seen += 1
            positive = np.flatnonzero(dense > 0)
            kth = np.sort(dense[positive])[::-1][min(k, len(positive)) - 1] if len(positive) else 0.0
            want = positive[dense[positive] >= kth]  # the k best and every tie with the k-th
            assert set(want.tolist()) <= set(got.positions.tolist()), query
    assert exact_seen > 100 and pruned_seen > 0  # both outcomes were exercised
    some = np.array([5, 0, 1499, 5], dtype=np.int64)
    assert scores_at(parts, ["w0", "w3"], some).tolist() == _dense(parts, ["w0", "w3"])[some].tolist()


def _index(n_group: int, names: int = 300) -> Index:
    """`names` entities named by rare shared words and `n_group` entities whose title is "GROUP <number>":
    the word GROUP is in most titles."""
    rng = np.random.default_rng(7)
    words = [f"name{i}" for i in range(40)]
    ents = [Entity(id=f"n{i}", short_id=str(i), title=f"GROUP {words[i % 40].upper()} {words[i // 40].upper()}",
                   description=f"a group of {words[i % 40]} harbour", degree=int(rng.integers(0, 9)))
            for i in range(names)]
    ents += [Entity(id=f"g{i}", short_id=str(names + i), title=f"GROUP {100000 + i}",
                    description="a group in the harbour", degree=int(rng.integers(0, 9)))
             for i in range(n_group)]
    return index_from_records(entities=ents, relationships=[], text_units=[TextUnit(id="t", short_id="0", text="x")])


def _reference_link(index: Index, query: str, k: int) -> list[tuple[int, float, bool, float]]:
    """`link_entities`' merge formula (no vector) over dense arrays of every entity."""
    ent = _entity_index(index)
    n = len(index.entities)
    exact = np.zeros(n)
    positions, values = _exact_strengths(ent, exact_tokens(query))
    exact[positions] = values
    terms = lexical_terms(query)
    lexical = 2.0 * ent.titles.scores(terms).astype(np.float64) + ent.descriptions.scores(terms)  # type: ignore[attr-defined]
    if lexical.max() > 0:
        lexical = lexical / lexical.max()
    score = 0.5 * exact + 0.5 * lexical
    order = sorted(np.flatnonzero(score > 0).tolist(), key=lambda p: (-score[p], -ent.degree[p], p))[:k]
    return [(p, float(score[p]), bool(exact[p] > 0), float(lexical[p])) for p in order]


@pytest.mark.usefixtures("small_lists")
def test_a_word_in_most_titles_links_as_unpruned_and_costs_the_same_at_any_length() -> None:
    queries = ["What does the Group Name3 Name21 do?", "group name5 and name12", "Name7 in the harbour group"]
    read: dict[int, list[int]] = {}
    for n_group in (1_000, 4_000):
        index = _index(n_group)
        ent = _entity_index(index)
        parts = [(2.0, ent.titles), (1.0, ent.descriptions)]
        assert len(ent.titles.postings("group")) == 300 + n_group  # the word is in every title
        for query in queries:
            for k in (1, 10):
                got = [(e.position, e.score, e.exact, e.lexical) for e in link_entities(index, query, k=k).entities]
                assert got == _reference_link(index, query, k), query
            pruned = pruned_top(parts, lexical_terms(query), 10)  # type: ignore[arg-type]
            assert pruned.exact  # the rare names decide the top: pruning cannot change it
            read.setdefault(n_group, []).append(pruned.postings_read)
    # four times the GROUP postings (the unpruned computation reads each of its 4,300 title and
    # description entries): the same entries read but for two more binary-search steps per probe
    for small, large in zip(read[1_000], read[4_000], strict=True):
        assert large <= small * 1.25 and large < 4_300 / 2, (small, large)
