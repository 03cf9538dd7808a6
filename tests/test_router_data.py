"""The router's own labelled questions stay clean of the development questions it is evaluated against:
no GraphRAG-Bench development question is in them, neither as the same string nor reworded (near-duplicates by
TF-IDF similarity, or by the rare names a question shares with one of them)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from fixture_paths import bench_data

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tools" / "routing" / "data"
OWN_SETS = ("questions.jsonl", "handwritten.jsonl", "new_styles.jsonl", "new_styles_2.jsonl", "index_dev.jsonl",
            "index_eval.jsonl", "index_eval_2.jsonl", "new_styles_3.jsonl", "index_eval_3.jsonl")
SIMILAR = 0.45  # TF-IDF cosine (word 1-2 grams, English stopwords out) at which two questions are one reworded
MIN_SHARED = 3  # ... when they also share this many content words
SIMILAR_WITH_NAME = 0.25  # or, sharing a rare name, the cosine of the rest of their words at which they are one
RARE = 15  # a capitalised word in at most this many development questions is a rare name
_CAPITALISED = re.compile(r"(?<=\w )[A-Z][a-z]{2,}\b")  # not the question's first word
# titles and descriptive words that precede names: shared, they do not make two questions about the same people
_HONORIFICS = frozenset({"Professor", "Doctor", "Captain", "Little", "Lady", "Lord", "Sir", "King", "Queen", "Mrs",
                         "Miss", "Mister", "Saint", "Old", "Young", "Great", "General", "Colonel", "Father", "Mother"})


def _own() -> list[str]:
    out: list[str] = []
    for name in OWN_SETS:
        with (DATA / name).open(encoding="utf-8") as fh:
            out += [json.loads(line)["question"] for line in fh if line.strip()]
    return list(dict.fromkeys(out))


def _bench() -> list[str]:
    import pandas as pd

    bench = bench_data("graphrag_bench/questions")
    return [str(q) for s in ("novel", "medical")
            for q in pd.read_parquet(bench / f"{s}_questions_dev.parquet", columns=["question"])["question"]]


def _content_words(text: str, stop: frozenset[str]) -> set[str]:
    return {w for w in re.findall(r"[a-z]{3,}", text.lower()) if w not in stop}


def near_duplicates(own: list[str], bench: list[str]) -> list[tuple[str, str, float]]:
    """(own question, development question, similarity) of every own question that rewords one: TF-IDF cosine
    of at least SIMILAR with at least MIN_SHARED content words in common, or a rare name in common and, with
    the names taken out, a cosine of at least SIMILAR_WITH_NAME (the same question about the same people)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

    stop = frozenset(ENGLISH_STOP_WORDS)
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, stop_words="english").fit(own + bench)
    sims = (vec.transform(own) @ vec.transform(bench).T).toarray()
    unnamed = [_CAPITALISED.sub(" ", q) for q in own + bench]
    vec_unnamed = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, stop_words="english").fit(unnamed)
    names = Counter(w for q in bench for w in set(_CAPITALISED.findall(q)))
    found = []
    for i, question in enumerate(own):
        j = int(np.argmax(sims[i]))
        shared = _content_words(question, stop) & _content_words(bench[j], stop)
        if sims[i, j] >= SIMILAR and len(shared) >= MIN_SHARED:
            found.append((question, bench[j], float(sims[i, j])))
            continue
        rare = {w for w in _CAPITALISED.findall(question) if names[w] <= RARE} - _HONORIFICS
        candidates = np.flatnonzero(sims[i] >= SIMILAR_WITH_NAME / 2)
        for k in candidates[np.argsort(-sims[i, candidates], kind="stable")]:
            if rare & set(_CAPITALISED.findall(bench[k])):
                pair = vec_unnamed.transform([unnamed[i], unnamed[len(own) + k]])
                rest = float((pair[0] @ pair[1].T).toarray()[0, 0])
                if rest >= SIMILAR_WITH_NAME:
                    found.append((question, bench[k], rest))
                    break
    return found


@pytest.mark.bench_data
def test_no_own_question_rewords_a_graphrag_bench_development_question() -> None:
    found = near_duplicates(_own(), _bench())
    assert not found, "\n".join(f"{s:.2f}  {a}  ||  {b}" for a, b, s in found)


@pytest.mark.bench_data
def test_the_check_finds_a_reworded_question() -> None:
    """The check itself: a reworded development question and one sharing its rare names are caught."""
    bench = _bench()
    original = next(q for q in bench if "Hefflefinger" in q and "involvement" in q)
    reworded = "What is Hefflefinger's involvement with Hade, and how do their dealings unfold?"
    unrelated = "Which harbour does the ferry to Penrose leave from?"
    found = near_duplicates([reworded, unrelated], bench)
    assert [(a, b) for a, b, _ in found] == [(reworded, original)]


TRAINING_SETS = ("questions.jsonl", "handwritten.jsonl", "index_dev.jsonl")


def _rows(name: str) -> list[str]:
    with (DATA / name).open(encoding="utf-8") as fh:
        return [json.loads(line)["question"] for line in fh if line.strip()]


@pytest.mark.parametrize("name", ["index_eval_2.jsonl", "index_eval_3.jsonl"])
def test_the_with_index_sets_written_last_reword_no_training_question(name: str) -> None:
    """The questions about the offline indexes written last are no rewording of a question the model or its index
    stage was fitted on, so their figures are on wording it has not seen."""
    training = list(dict.fromkeys(q for name in TRAINING_SETS for q in _rows(name)))
    found = near_duplicates(_rows(name), training)
    assert not found, "\n".join(f"{s:.2f}  {a}  ||  {b}" for a, b, s in found)
    # the check does catch a held-out question reworded from a training one
    reworded = "Are there discussions of layoffs or restructuring in any of the calls?"
    assert [a for a, _, _ in near_duplicates([reworded], training)] == [reworded]


def test_no_training_question_is_about_the_route_bench_book() -> None:
    """route-bench's Christmas Carol questions are reported as questions the router was not trained on: a
    training question may share a generic wording with one of them, never one of the book's names."""
    carol = [json.loads(line)["question"]
             for line in (REPO / "benchmarks" / "queries" / "christmas_carol.jsonl").read_text(encoding="utf-8").splitlines()
             if line.strip()]
    own = _own()
    assert set(carol).isdisjoint(own)
    named = [(o, c) for o, c, _ in near_duplicates(own, carol) if _CAPITALISED.search(c)]
    assert named == [], named
    book = ("Scrooge", "Marley", "Cratchit", "Fezziwig")  # the book's own names, as its questions use them
    assert all(any(name in q for q in carol) for name in book)
    assert [q for q in own if any(name in q for name in book)] == []
