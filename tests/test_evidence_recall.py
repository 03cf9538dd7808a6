"""The evidence benchmark's scoring: what counts as a span shown, the halves, and the plain BM25 row."""

from __future__ import annotations

import pandas as pd
import pytest
from fixture_paths import CAROL

from benchmarks.evidence_recall import (
    PlainBM25,
    context_ranges,
    half_of,
    outside_matter,
    span_hit,
    stratified_sample,
    unit_spans,
)
from shared_context import load_index
from shared_context.basic_context import basic_context, question_basic_context
from shared_context.index import Index


@pytest.fixture(scope="module")
def index() -> Index:
    return load_index(CAROL)


def test_a_span_counts_when_four_fifths_of_it_are_shown() -> None:
    span = ("book", 100, 200)
    assert span_hit(span, [("book", 100, 180)])  # 80 %
    assert not span_hit(span, [("book", 100, 179)])
    assert span_hit(span, [("book", 90, 150), ("book", 150, 190)])  # covered by two ranges together
    assert not span_hit(span, [("other", 0, 1000)])  # another book's characters count for nothing
    assert not span_hit(("book", 5, 5), [("book", 0, 10)])  # an empty span is never shown


def test_front_matter_spans_are_left_out_of_the_story_count() -> None:
    spans = [("a", 0, 50), ("a", 400, 500), ("b", 0, 50)]
    assert outside_matter(spans, {"a": [(0, 120)]}) == [("a", 400, 500), ("b", 0, 50)]


def test_halves_are_stable_and_split_the_questions() -> None:
    ids = [f"q{i}" for i in range(400)]
    halves = [half_of(i) for i in ids]
    assert halves == [half_of(i) for i in ids]  # a hash, not a draw
    assert 150 < halves.count("tune") < 250


def test_sample_keeps_every_question_type() -> None:
    questions = pd.DataFrame({"id": range(100), "question_type": ["fact"] * 90 + ["summary"] * 10})
    sample = stratified_sample(questions, 20)
    assert set(sample["question_type"]) == {"fact", "summary"}
    assert sample["question_type"].value_counts()["fact"] == 18


def test_ranges_of_whole_units_and_excerpts(index: Index) -> None:
    book = "\n".join(u.text for u in index.text_units)
    units = unit_spans(index, {index.documents[0].title: book})
    assert len(units) == len(index.text_units)
    question = "What did Scrooge see with the Ghost of Christmas Yet to Come?"
    ctx = question_basic_context(index, question, 3000)
    rows = ctx.tables.sources.rows if ctx.tables.sources is not None else []
    ranges = context_ranges(ctx, units)
    excerpted = [r for r in rows if r.truncated]
    assert excerpted, "a 3,000-token budget shows excerpts of several units"
    for r in excerpted:  # an excerpt's range is where its characters are in the book
        _, start, _ = units[r.position]
        for a, b in r.excerpts:
            assert (units[r.position][0], start + a, start + b) in ranges
            assert book[start + a : start + b] in index.text_units[r.position].text


def test_plain_bm25_row_ranks_the_matching_unit_first_and_fills_the_budget(index: Index) -> None:
    bm25 = PlainBM25([u.text for u in index.text_units])
    target = next(i for i, u in enumerate(index.text_units) if "Fezziwig" in u.text)
    hits = bm25.top("Fezziwig", 100)
    assert hits and all(s > 0 for _, s in hits)
    assert "Fezziwig" in index.text_units[hits[0][0]].text and target in {p for p, _ in hits}
    ctx = basic_context(index, bm25.top("Scrooge Marley ghost chains", 100), 4000)
    assert 0 < ctx.tokens <= 4000
    assert ctx.tables.sources is not None and not any(r.truncated for r in ctx.tables.sources.rows)


def test_margins_pair_questions_and_bound_the_half_margin() -> None:
    from benchmarks.evidence_recall import margins

    rows = []
    for i in range(60):
        half = "tune" if i % 2 else "confirm"
        local = 1.0 if i % 3 else 0.5  # 20 questions where the local context shows half the spans
        for method, hit in (("local-hybrid", local), ("bm25", 0.5 if i < 30 else 1.0), ("basic", float("nan"))):
            rows.append({"subset": "novel", "budget": 12000, "question": f"q{i}", "half": half,
                         "method": method, "span_hit": hit})
    rows.append({"subset": "novel", "budget": 12000, "question": "q0", "half": "confirm", "method": "bm25",
                 "span_hit": 0.0})  # a repeated row of a question is not a second question
    out = margins(pd.DataFrame(rows)).set_index(["method", "half"])
    assert "basic" not in out.index.get_level_values(0)  # no question has both figures
    overall = out.loc[("local-hybrid", "all")]
    expected = (sum(1.0 if i % 3 else 0.5 for i in range(60)) - (30 * 0.5 + 30 * 1.0)) / 60
    assert overall["questions"] == 60 and overall["margin"] == pytest.approx(expected)
    assert overall["low"] < overall["margin"] < overall["high"]
    for half in ("tune", "confirm"):
        assert out.loc[("local-hybrid", half)]["questions"] == 30
    assert margins(pd.DataFrame(rows)).equals(margins(pd.DataFrame(rows)))  # seeded
