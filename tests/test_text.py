"""shared_context.text: the one home of tokenising, stopwords, stemming and sentence splitting (and BM25, `shared_context.bm25`)."""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np
import pytest

from shared_context.bm25 import BM25
from shared_context.text import STOPWORDS, LazyPattern, plural_stem, split_sentences, stem, tokens


def _plain_bm25(docs: list[list[str]], query: list[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
    """Textbook Okapi BM25 (Robertson idf with +1), written out to check the sparse implementation."""
    n = len(docs)
    avg = sum(len(d) for d in docs) / n
    df = Counter(t for d in docs for t in set(d))
    out = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for t in dict.fromkeys(query):
            if tf[t]:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf[t] * (k1 + 1) / (tf[t] + k1 * (1 - b + b * len(d) / avg))
        out.append(s)
    return out


def test_bm25_matches_the_textbook_formula() -> None:
    docs = [["ghost", "past", "ghost"], ["scrooge", "counting", "house"], [], ["ghost", "scrooge", "bed", "night"]]
    query = ["ghost", "scrooge", "ghost", "absent"]
    assert BM25(docs).scores(query) == pytest.approx(_plain_bm25(docs, query), abs=1e-12)
    small = BM25(docs, dtype=np.float32)
    assert small.scores(query).dtype == np.float32
    assert small.scores(query) == pytest.approx(_plain_bm25(docs, query), rel=1e-6)
    assert list(small.postings("ghost")) == [0, 3]
    assert list(small.postings("absent")) == []


def test_bm25_of_no_documents_or_no_terms_scores_nothing() -> None:
    assert BM25([]).scores(["x"]).shape == (0,)
    assert list(BM25([[], []]).scores(["x"])) == [0.0, 0.0]


def test_stopwords_are_one_data_list() -> None:
    assert {"the", "and", "because", "tell", "s"} <= STOPWORDS
    assert "scrooge" not in STOPWORDS
    assert all(w == w.lower() and not w.startswith("#") for w in STOPWORDS)


def test_stemmers() -> None:
    assert [plural_stem(w) for w in ("cratchits", "stories", "churches", "bus", "ox")] == [
        "cratchit", "story", "church", "bus", "ox"]
    assert [stem(w) for w in ("leader", "led", "children", "kindness", "running")] == [
        "lead", "lead", "child", "kind", "runn"]


def test_tokens_drop_possessives_and_separate_cjk() -> None:
    assert tokens("Scrooge's nephews and the Cratchits' house") == [
        "Scrooge", "nephews", "and", "the", "Cratchits", "house"]
    assert tokens("林黛玉and贾宝玉") == ["林黛玉", "and", "贾宝玉"]


def test_sentences_respect_abbreviations_markdown_and_chinese() -> None:
    text = ("# Title\n\nDr. Amara Osei met J. R. Smith at St. Brigid's. She left, e.g. early.\n"
            "- a list item\n\n北风合作社成立了。李文表示同意！End")
    assert split_sentences(text) == [
        "# Title",
        "Dr. Amara Osei met J. R. Smith at St. Brigid's.",
        "She left, e.g. early.",
        "- a list item",
        "北风合作社成立了。",
        "李文表示同意！",
        "End",
    ]


def test_query_scores_equal_a_full_bm25_over_the_same_documents() -> None:
    """The query-only path is an optimisation: the same numbers as indexing every term."""
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(40)]
    for _ in range(25):
        docs = [list(rng.choice(words, size=int(rng.integers(0, 30)))) for _ in range(int(rng.integers(1, 40)))]
        query = list(rng.choice([*words, "absent"], size=int(rng.integers(1, 6))))
        np.testing.assert_array_equal(BM25.query_scores(docs, query), BM25(docs).scores(query))


def test_lengths_must_match_the_documents() -> None:
    with pytest.raises(ValueError, match="lengths has 1 entries for 2 documents"):
        BM25([["a"], ["b"]], lengths=[3])


def test_lazy_pattern_compiles_on_first_use_and_answers_like_re() -> None:
    source, text = r"(\w+)@(\w+)", "ann@x, bob@y and 中文"
    lazy, eager = LazyPattern(source, re.IGNORECASE), re.compile(source, re.IGNORECASE)
    assert lazy._compiled is None  # nothing compiled by defining it (module import)
    assert lazy.findall(text) == eager.findall(text)
    compiled = lazy.compiled
    assert compiled is lazy.compiled and compiled.flags == eager.flags  # compiled once, with its flags
    match, expected = lazy.search(text, 3), eager.search(text, 3)
    assert match is not None and expected is not None and match.span() == expected.span()
    assert lazy.match(text) is not None and lazy.match(text, 1, 2) is None
    assert lazy.fullmatch("a@b") is not None and lazy.fullmatch(text) is None
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in eager.finditer(text)]
    assert lazy.split(text, 1) == eager.split(text, 1)
    assert lazy.sub(r"\2", text) == eager.sub(r"\2", text)
    assert lazy.subn(lambda m: m.group(1).upper(), text, 1) == ("ANN, bob@y and 中文", 1)


def test_lazy_pattern_calls_go_straight_to_re_after_the_first() -> None:
    # hot loops search the same patterns tens of thousands of times per question: no wrapper call in between
    lazy = LazyPattern(r"b+")
    assert lazy.search("abba") is not None
    assert lazy.search == lazy.compiled.search and lazy.sub == lazy.compiled.sub
    with pytest.raises(AttributeError):
        lazy.no_such_method  # noqa: B018 - only the methods of re.Pattern are bound
