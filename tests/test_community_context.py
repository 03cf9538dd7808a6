"""CommunityContextBuilder: batch budgets, determinism, local RNG, levels, pre-ranking, weights."""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Iterator

import numpy as np
import pytest
from pydantic import ValidationError

from shared_context.boilerplate_marks import boilerplate_weights
from shared_context.community_context import CommunityContextBuilder, CommunityContextParams
from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.records import Community, CommunityReport, Entity, TextUnit
from shared_context.search_backend import SearchParams, VectorTable, configure_search


@pytest.fixture(autouse=True)
def _every_report(carol: Index) -> Iterator[None]:
    """These tests check the batches over all of Carol's reports: licence reports are not left out here
    (`test_licence_reports_left_out` checks that they are by default)."""
    configure_search(carol, SearchParams(down_rank_boilerplate=False))
    yield
    configure_search(carol, SearchParams())


def test_licence_reports_left_out(carol: Index) -> None:
    configure_search(carol, SearchParams())
    ctx = CommunityContextBuilder(carol).build("anything")
    weights = boilerplate_weights(carol)
    assert weights is not None
    left_out = {r.community for pos, r in enumerate(carol.community_reports) if weights.mostly_boilerplate_report(pos)}
    assert len(left_out) == 13
    assert set(ctx.selected_communities) == {r.community for r in carol.community_reports} - left_out
    assert "13 reports built mostly from licence or front/back matter left out" in ctx.notes
    # asked for by number, they are given
    asked = sorted(left_out)[:2]
    assert sorted(CommunityContextBuilder(carol).build("anything", communities=asked).selected_communities) == asked
    # a report partly built from front matter is shown (and ordered) with its rank down-weighted
    partly = next(pos for pos in range(len(carol.community_reports))
                  if 0.2 < weights.shares.reports[pos] < 0.5 and carol.community_reports[pos].rank)
    report = carol.community_reports[partly]
    record = next(r for b in ctx for r in b.reports if r.id == report.short_id)
    assert record.rank == round(report.rank * float(weights.reports[partly]), 2) < report.rank


def _rows(text: str) -> list[list[str]]:
    body = text.split("-----Reports-----\n", 1)[1]
    return list(csv.reader(io.StringIO(body), delimiter="|", quotechar='"'))


@pytest.mark.parametrize("budget", [12_000, 3_000, 600])
def test_batches_within_budget_and_cover_every_report(carol: Index, budget: int) -> None:
    ctx = CommunityContextBuilder(carol, {"max_context_tokens": budget}).build("anything")
    assert len(ctx) >= 1
    seen: list[int] = []
    for number, batch in enumerate(ctx, start=1):
        assert batch.number == number
        assert batch.tokens == carol.tokenizer.count(batch.text) <= budget
        rows = _rows(batch.text)
        assert rows[0] == ["id", "title", "occurrence weight", "content", "rank"]
        assert [int(r[0]) for r in rows[1:]] == batch.communities
        weights = [(float(r[2]), float(r[4])) for r in rows[1:]]
        assert weights == sorted(weights, reverse=True)  # weight then rank, descending
        seen += batch.communities
    assert sorted(seen) == sorted(r.community for r in carol.community_reports)
    assert ctx.total_tokens == sum(b.tokens for b in ctx)
    if budget == 600:  # some reports are larger than a batch: truncated, never oversized
        cut = [r for b in ctx for r in b.reports if r.truncated]
        assert cut and all(len(b.reports) == 1 for b in ctx if b.reports[0].truncated)
        for b in ctx:
            if b.reports[0].truncated:  # the record holds the cut text its row shows
                full = carol.community_reports[b.reports[0].position].full_content
                assert b.reports[0].content.endswith(" …") and len(b.reports[0].content) < len(full)
                assert b.reports[0].content.replace('"', '""') in b.text


def test_shuffle_is_deterministic_and_independent_of_global_random(carol: Index) -> None:
    builder = CommunityContextBuilder(carol)
    random.seed(1)
    a = [b.text for b in builder.build("q")]
    state = random.getstate()
    random.seed(999)
    b = [b.text for b in builder.build("q")]
    assert a == b
    random.seed(999)
    expected_next = random.random()
    random.seed(999)
    builder.build("q")
    assert random.random() == expected_next  # the builder did not touch the global RNG
    random.setstate(state)
    other_seed = builder.build("q", random_state=7)
    assert other_seed.selected_communities != builder.build("q").selected_communities
    unshuffled = builder.build("q", shuffle_data=False)
    assert unshuffled.selected_communities == sorted(unshuffled.selected_communities)


def test_single_level_versus_all_levels(carol: Index) -> None:
    builder = CommunityContextBuilder(carol)
    all_levels = builder.build("q")
    level1 = builder.build("q", community_level=1)
    by_level = {r.community: r.level for r in carol.community_reports}
    assert {by_level[c] for c in level1.selected_communities} == {1}
    assert len(level1.selected_communities) == len(carol.reports_by_level[1])
    upto1 = builder.build("q", community_level=1, include_lower_levels=True)
    assert {by_level[c] for c in upto1.selected_communities} == {0, 1}
    assert len(all_levels.selected_communities) == len(carol.community_reports)
    with pytest.raises(ValueError, match="community_level 9 has no reports"):
        builder.build("q", community_level=9)


def test_min_rank_and_explicit_communities(carol: Index) -> None:
    builder = CommunityContextBuilder(carol)
    ranked = builder.build("q", min_community_rank=8)
    assert ranked.selected_communities
    assert all(carol.community_reports[carol.report_pos[c]].rank >= 8 for c in ranked.selected_communities)
    chosen = builder.build("q", communities=[3, 44, 12345])
    assert sorted(chosen.selected_communities) == [3, 44]
    assert any("12345" in n for n in chosen.notes)


def test_prerank_budget_and_order(carol: Index) -> None:
    builder = CommunityContextBuilder(carol)
    ctx = builder.build("Cratchit family Tiny Tim", prerank=True, max_reports=5)
    assert len(ctx.selected_communities) == 5
    assert ctx.prerank_scores is not None
    scores = [ctx.prerank_scores[c] for c in ctx.selected_communities]
    assert scores == sorted(scores, reverse=True) and scores[0] > 0
    top_title = carol.community_reports[carol.report_pos[ctx.selected_communities[0]]].title
    assert "Cratchit" in top_title
    capped = builder.build("Cratchit family", prerank=True, max_tokens=2_000)
    row_tokens = sum(b.tokens for b in capped)
    assert capped.selected_communities and row_tokens <= 2_000 + 40 * len(capped)
    assert len(capped.selected_communities) < len(carol.community_reports)


def test_max_batches_caps_map_calls(carol: Index) -> None:
    builder = CommunityContextBuilder(carol, {"max_context_tokens": 3000})
    full = builder.build("Scrooge", prerank=True)
    capped = builder.build("Scrooge", prerank=True, max_batches=2)
    assert len(full) > 2 and len(capped) == 2
    assert [b.text for b in capped] == [b.text for b in full[:2]]
    assert set(capped.selected_communities) == {c for b in capped for c in b.communities}
    assert any("dropped" in n for n in capped.notes)


def test_prerank_uses_report_vectors_when_the_query_vector_matches() -> None:
    ents = [Entity(id="e0", short_id="0", title="A", text_unit_ids=["t0"])]
    comms = [Community(id=f"c{i}", community=i, level=0, entity_ids=["e0"]) for i in range(3)]
    reports = [
        CommunityReport(
            id=f"r{i}", community=i, level=0, title=f"R{i}", full_content=f"content {i}", rank=5.0
        )
        for i in range(3)
    ]
    matrix = np.eye(3, dtype=np.float32)
    vectors = [VectorTable.build("community_full_content", [0, 1, 2], matrix, source="test")]
    index = index_from_records(
        entities=ents,
        relationships=[],
        text_units=[TextUnit("t0", "0", "x")],
        communities=comms,
        community_reports=reports,
        vectors=vectors,
    )
    ctx = CommunityContextBuilder(index).build(
        "", query_vector=np.array([0, 0, 1.0]), prerank=True, max_reports=1
    )
    assert ctx.selected_communities == [2]
    wrong = CommunityContextBuilder(index).build(
        "content 1", query_vector=np.ones(5), prerank=True, max_reports=1
    )
    assert wrong.selected_communities == [1] and any("pre-ranked lexically" in n for n in wrong.notes)


def test_occurrence_weights_are_normalised_per_call_without_mutation(carol: Index) -> None:
    before = [(r.title, r.rank, r.full_content) for r in carol.community_reports]
    full = CommunityContextBuilder(carol).build("q")
    top = max(float(r[2]) for b in full for r in _rows(b.text)[1:])
    assert top == pytest.approx(1.0)
    sub = CommunityContextBuilder(carol).build("q", communities=[3, 44])
    assert max(float(r[2]) for b in sub for r in _rows(b.text)[1:]) == pytest.approx(1.0)
    assert [(r.title, r.rank, r.full_content) for r in carol.community_reports] == before


def test_history_prefixed_to_every_batch_and_counted(carol: Index) -> None:
    history = [{"role": "user", "content": "We talked about Scrooge."}]
    ctx = CommunityContextBuilder(carol, {"max_context_tokens": 4000}).build("q", history=history)
    assert ctx.history_text.startswith("-----Conversation History-----")
    for batch in ctx:
        assert batch.text.startswith(ctx.history_text + "\n\n-----Reports-----")
        assert batch.tokens == carol.tokenizer.count(batch.text) <= 4000


def test_no_reports_gives_empty_context() -> None:
    index = index_from_records(
        entities=[Entity(id="e0", short_id="0", title="A")],
        relationships=[],
        text_units=[TextUnit("t", "0", "x")],
    )
    ctx = CommunityContextBuilder(index).build("q")
    assert len(ctx) == 0 and list(ctx) == [] and ctx.notes == ["no community reports"]


def test_params_are_validated(carol: Index) -> None:
    with pytest.raises(ValidationError, match="max_data_tokens"):
        CommunityContextParams.model_validate({"max_data_tokens": 5})
    with pytest.raises(ValidationError):
        CommunityContextBuilder(carol).build("q", max_reports=0)
    with pytest.raises(ValueError, match="too few"):
        CommunityContextBuilder(carol).build("q", max_context_tokens=10)
