"""The `hybrid` Sources strategy: linked units fused with question-similar units (BM25 and vectors),
records that say why each unit is there, whole units first and a marked trimmed one, budgets kept,
and section shares that follow how firmly the question names its entities."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engines.config import load_config
from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.local_context import LocalContext, LocalContextBuilder
from shared_context.records import Entity, Relationship, TextUnit
from shared_context.search_backend import VectorTable
from shared_context.tables import SourceRecord
from shared_context.text_unit_selection import NO_ENTITY, UnitCandidate, fuse_rankings

FILLER = "plain words about the weather and the market town " * 12


def _index(with_vectors: bool = False, filler: str = FILLER) -> Index:
    """ALPHA and BETA are linked to units 0-5; unit 6 mentions no entity but holds the question's
    rare words ("lighthouse keeper"); unit 7 is reachable only through its vector."""
    units = [TextUnit(id=f"t{j}", short_id=str(j), text=f"Alpha and Beta meet, part {j}. {filler}") for j in range(6)]
    units.append(TextUnit(id="t6", short_id="6", text=f"The lighthouse keeper saw the ship. {filler}"))
    units.append(TextUnit(id="t7", short_id="7", text=f"An unrelated passage. {filler}"))
    entities = [
        Entity(id="a", short_id="0", title="ALPHA", description="alpha person", text_unit_ids=[f"t{j}" for j in range(6)]),
        Entity(id="b", short_id="1", title="BETA", description="beta person", text_unit_ids=["t0", "t1"]),
    ]
    rels = [Relationship(id="r0", short_id="0", source="ALPHA", target="BETA", description="meet",
                         text_unit_ids=["t0"])]
    vectors = None
    if with_vectors:
        matrix = np.eye(len(units), dtype=np.float32)
        vectors = [VectorTable.build("text_unit_text", list(range(len(units))), matrix, source="test")]
    return index_from_records(entities=entities, relationships=rels, text_units=units, vectors=vectors)


def _sources(ctx: LocalContext) -> list[SourceRecord]:
    section = ctx.tables.sources
    return [] if section is None else list(section.rows)


def test_hybrid_adds_a_question_similar_unit_no_linked_entity_points_to() -> None:
    index = _index()
    query = "What did Alpha see from the lighthouse keeper's window?"
    graphrag = LocalContextBuilder(index).build(query, text_unit_strategy="graphrag", max_context_tokens=3000)
    assert "6" not in graphrag.text_unit_ids  # only units of linked entities are candidates there
    hybrid = LocalContextBuilder(index).build(query, text_unit_strategy="hybrid", max_context_tokens=3000)
    assert "6" in hybrid.text_unit_ids
    record = next(r for r in _sources(hybrid) if r.id == "6")
    assert record.reasons == ("lexical",) and record.entity == ""
    linked = next(r for r in _sources(hybrid) if r.id == "0")
    assert linked.reasons[0] == "entity" and linked.entity == "ALPHA"


def test_hybrid_uses_text_unit_vectors_when_the_query_vector_fits() -> None:
    index = _index(with_vectors=True)
    qv = np.zeros(8, dtype=np.float32)
    qv[7] = 1.0  # nearest: unit 7, which shares no word with the question and no entity
    ctx = LocalContextBuilder(index).build("Alpha", text_unit_strategy="hybrid", query_vector=qv,
                                           max_context_tokens=3000)
    record = next(r for r in _sources(ctx) if r.id == "7")
    assert "vector" in record.reasons
    # a vector of another size is not used, and the context says so
    other = LocalContextBuilder(index).build("Alpha", text_unit_strategy="hybrid", query_vector=np.ones(3),
                                             max_context_tokens=3000)
    assert all("vector" not in r.reasons for r in _sources(other))
    assert any("dim 8" in n for n in other.notes)


@pytest.mark.parametrize("budget", [150, 400, 900, 1600, 3000])
def test_hybrid_never_exceeds_the_budget_and_marks_a_trimmed_unit(budget: int) -> None:
    index = _index(with_vectors=True)
    qv = np.ones(8, dtype=np.float32)
    ctx = LocalContextBuilder(index).build("Alpha and the lighthouse keeper", text_unit_strategy="hybrid",
                                           query_vector=qv, max_context_tokens=budget, excerpt_tokens=0)
    assert ctx.tokens == index.tokenizer.count(ctx.text) <= budget
    sources = ctx.tables.sources
    if sources is not None:
        assert sources.tokens <= sources.budget
        records = sources.rows
        trimmed = [r for r in records if r.truncated]
        assert len(trimmed) <= 1 and (not trimmed or records[-1] is trimmed[0])
        for r in records:
            whole = index.text_units[r.position].text
            assert f"{r.id}|{r.text}" in sources.text  # the record is what its row shows
            assert (r.text == whole) != r.truncated  # whole units verbatim; the trimmed one is cut


def test_room_left_after_whole_units_goes_to_one_trimmed_unit() -> None:
    index = _index(filler=FILLER * 4)  # units of ~480 tokens
    ctx = LocalContextBuilder(index).build("Alpha and the lighthouse keeper", text_unit_strategy="hybrid",
                                           max_context_tokens=2000, text_unit_prop=0.8, community_prop=0.0,
                                           excerpt_tokens=0)  # whole-unit mode
    records = _sources(ctx)
    flags = [r.truncated for r in records]
    assert len(flags) >= 3 and flags[-1] and not any(flags[:-1])
    assert ctx.tokens <= 2000
    [(start, end)] = records[-1].excerpts
    unit_text = index.text_units[records[-1].position].text
    assert 0 <= start < end < len(unit_text) and unit_text[start:end] in ctx.text


def test_a_trimmed_unit_keeps_the_part_the_question_is_about() -> None:
    from shared_context.text_unit_selection import best_window

    text = "Opening words about nothing much. " * 30 + "The lighthouse keeper rang the bell. " + "Closing. " * 40
    start, end = best_window(text, "Why did the lighthouse keeper ring?", 200)
    assert "lighthouse keeper" in text[start:end] and end - start <= 200 and text[start - 1] == " "
    assert best_window("short", "anything", 200) == (0, 5)


def test_fusion_formula_and_ties() -> None:
    linked = [UnitCandidate(10, 0, 0, 2), UnitCandidate(11, 0, 0, 1), UnitCandidate(12, 1, 1, 0)]
    fused = fuse_rankings(linked, lexical=[12, 30], vector=[30], question_weight=1.0, rrf_k=60)
    by_unit = {c.unit: c for c in fused}
    # in two lists beats first in one: 30 = 1/62 + 1/61 (lexical 2nd, vector 1st) > 12 = 1/63 + 1/61
    assert [c.unit for c in fused[:2]] == [30, 12]
    assert by_unit[12].score == pytest.approx(1 / 63 + 1 / 61, abs=1e-6)
    assert by_unit[30].entity == NO_ENTITY and by_unit[30].reasons == ("lexical", "vector")
    assert [c.unit for c in fused[2:]] == [10, 11]
    only_entities = fuse_rankings(linked, lexical=[30], vector=[], question_weight=0.0)
    assert [c.unit for c in only_entities] == [10, 11, 12, 30]
    with pytest.raises(ValueError, match="question_weight"):
        fuse_rankings(linked, [], [], question_weight=-1)


def test_weak_linking_moves_budget_to_sources() -> None:
    index = _index()
    params = {"text_unit_strategy": "hybrid", "max_context_tokens": 2000, "text_unit_prop": 0.4,
              "weak_link_text_unit_prop": 0.8, "fact_text_unit_prop": None}
    named = LocalContextBuilder(index).build("ALPHA and BETA", **params)
    assert named.link_strength == 1.0
    unnamed = LocalContextBuilder(index).build("a person at the lighthouse", **params)
    assert unnamed.link_strength == 0.0
    assert unnamed.budgets["Entities"] < named.budgets["Entities"]
    # the rule off (None): the share is text_unit_prop whatever the linking
    fixed = LocalContextBuilder(index).build("a person at the lighthouse",
                                             **(params | {"weak_link_text_unit_prop": None}))
    assert fixed.budgets["Entities"] > unnamed.budgets["Entities"]
    with pytest.raises(ValueError, match="weak_link_text_unit_prop"):
        LocalContextBuilder(index, {"community_prop": 0.5, "text_unit_prop": 0.4, "weak_link_text_unit_prop": 0.8})
    # left at its default, the weak-link share yields to a larger community_prop instead of failing
    roomy = LocalContextBuilder(index, {"community_prop": 0.3})
    assert roomy.params.sources_share(0.0) == pytest.approx(0.7)
    # and it is off while the user wrote the text_unit_prop it refines: their value applies to every question
    written = LocalContextBuilder(index, {"community_prop": 0.3, "text_unit_prop": 0.5})
    assert written.params.sources_share(0.0) == pytest.approx(0.5)


def test_fact_question_gets_more_sources_and_relation_question_keeps_graph_rows() -> None:
    index = _index()
    params = {"text_unit_strategy": "hybrid", "text_unit_prop": 0.4, "fact_text_unit_prop": 0.85}
    builder = LocalContextBuilder(index)
    for budget in (600, 2000, 8000):
        relation = builder.build("What is the relationship between ALPHA and BETA?", max_context_tokens=budget,
                                 **params)
        fact = builder.build("Where did ALPHA and BETA meet?", max_context_tokens=budget, **params)
        assert (relation.need, fact.need) == ("relation", "fact")
        assert fact.budgets["Entities"] < relation.budgets["Entities"]
        assert fact.budgets["Sources"] >= relation.budgets["Sources"]  # what the tables leave flows on
        for ctx in (relation, fact):  # the adaptive split never exceeds the budget
            assert ctx.tokens <= budget
            assert ctx.tokens == index.tokenizer.count(ctx.text)
    # a relation word without two named entities is still a fact question
    assert builder.build("Who is related to the lighthouse keeper?", **params).need == "fact"
    # the rules off: both questions get the same split
    off = params | {"fact_text_unit_prop": None, "fact_community_prop": None}
    a = builder.build("What is the relationship between ALPHA and BETA?", max_context_tokens=2000, **off)
    b = builder.build("Where did ALPHA and BETA meet?", max_context_tokens=2000, **off)
    assert a.budgets["Entities"] == b.budgets["Entities"]


def test_hybrid_and_share_rule_settable_in_graphroute_toml(tmp_path: Path) -> None:
    cfg_file = tmp_path / "graphroute.toml"
    cfg_file.write_text('[local]\ntext_unit_strategy = "hybrid"\nhybrid_question_weight = 0.5\n'
                        'weak_link_text_unit_prop = 0.75\n[drift]\nlocal_search_text_unit_strategy = "hybrid"\n')
    cfg = load_config(cfg_file, env={})
    assert cfg.local.text_unit_strategy == "hybrid" and cfg.local.hybrid_question_weight == 0.5
    assert cfg.local.weak_link_text_unit_prop == 0.75
    assert cfg.drift.local_context().text_unit_strategy == "hybrid"


def test_fact_floor_keeps_graph_rows_and_the_budget() -> None:
    index = _index()
    builder = LocalContextBuilder(index)  # defaults: the fact floor is on, capped by min_graph_prop
    p = builder.params
    for budget in (2000, 8000, 12000):
        fact = builder.build("Where did ALPHA and BETA meet?", max_context_tokens=budget)
        assert fact.need == "fact"
        assert fact.tokens <= budget and fact.tokens == index.tokenizer.count(fact.text)
        # the entity tables keep at least min_graph_prop of the room, and show relationship rows
        assert fact.budgets["Entities"] >= int(budget * p.min_graph_prop) - 20
        assert fact.section("Entities") is not None and fact.section("Relationships") is not None
    # no graph minimum: the floor may take everything but the reports' share
    bare = builder.build("Where did ALPHA and BETA meet?", max_context_tokens=8000, min_graph_prop=0.0,
                         fact_text_unit_prop=0.9)
    assert bare.params.sources_share(bare.link_strength, "fact") == pytest.approx(0.9)
    # the default floor: 0.9, all but the entity tables' least share (no reports by default)
    assert builder.params.sources_share(1.0, "fact") == pytest.approx(0.9)


def test_fact_floor_off_at_zero_and_entity_share_settable() -> None:
    index = _index()
    builder = LocalContextBuilder(index)
    question = "Where did ALPHA and BETA meet?"
    off_zero = builder.build(question, max_context_tokens=8000, fact_text_unit_prop=0.0)
    off_none = builder.build(question, max_context_tokens=8000, fact_text_unit_prop=None)
    assert off_zero.text == off_none.text and off_zero.budgets == off_none.budgets
    on = builder.build(question, max_context_tokens=8000)
    assert on.budgets["Entities"] < off_none.budgets["Entities"]  # the floor took room from the entity tables
    small = builder.build(question, max_context_tokens=8000, fact_entity_share=0.2)
    entities = small.section("Entities")
    assert entities is not None and entities.tokens <= int(small.budgets["Entities"] * 0.2)
