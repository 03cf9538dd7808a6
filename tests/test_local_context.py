"""LocalContextBuilder on the real dulce and Christmas Carol indexes and on constructed indexes."""

from __future__ import annotations

import csv
import io
import re

import pytest
from fixture_paths import FIXTURES
from pydantic import ValidationError

from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.local_context import LocalContextBuilder, LocalContextParams, select_relationships
from shared_context.local_warmup import warm_local_rows
from shared_context.records import Claim, Community, CommunityReport, Entity, Relationship, TextUnit

ORDER = ["Conversation History", "Reports", "Entities", "Relationships", "Claims", "Sources"]
QUERIES = {
    "operation_dulce": [
        "Who is Alex Mercer?",
        "What happened at Dulce base?",
        "Taylor Cruz and Jordan Hayes",
    ],
    "christmas_carol_graphrag_index": [
        "What does Scrooge's nephew Fred think of Christmas?",
        "How does Bob Cratchit's family celebrate?",
        "Tell me about Marley's ghost",
        "",
    ],
}


def _load(name: str) -> Index:
    path = FIXTURES / name
    from shared_context import load_index

    return load_index(path)


@pytest.fixture(scope="module", params=list(QUERIES))
def real(request: pytest.FixtureRequest) -> tuple[str, Index]:
    return request.param, _load(request.param)


def _parse(section_text: str) -> list[list[str]]:
    body = section_text.split("\n", 1)[1]
    return list(csv.reader(io.StringIO(body), delimiter="|", quotechar='"'))


def _ids(index: Index) -> dict[str, set[str]]:
    return {
        "Reports": {str(r.community) for r in index.community_reports},
        "Entities": {e.short_id for e in index.entities},
        "Relationships": {r.short_id for r in index.relationships},
        "Claims": {c.short_id for c in index.claims},
        "Sources": {t.short_id for t in index.text_units},
    }


HISTORY = [
    {"role": "user", "content": "Who is the oldest character?"},
    {"role": "assistant", "content": "It is hard to say."},
    {"role": "user", "content": "And who is Scrooge?"},
    {"role": "assistant", "content": "A miser."},
]


@pytest.mark.parametrize("max_tokens", [12_000, 3_000, 800])
def test_budgets_ids_and_order_on_real_indexes(real: tuple[str, Index], max_tokens: int) -> None:
    name, index = real
    tok = index.tokenizer
    valid = _ids(index)
    builder = LocalContextBuilder(index, {"max_context_tokens": max_tokens})
    for query in QUERIES[name]:
        for history in (None, HISTORY):
            ctx = builder.build(query, history)
            assert ctx.tokens == tok.count(ctx.text) <= max_tokens
            assert "[]" not in ctx.text.split("\n")
            names = [s.name for s in ctx.sections if s.text]
            assert names == [n for n in ORDER if n in names]
            assert ctx.text == "\n\n".join(s.text for s in ctx.sections if s.text)
            for section in ctx.sections:
                if not section.text:
                    continue
                assert section.tokens == tok.count(section.text) <= section.budget
                rows = _parse(section.text)
                assert rows[0][0] in ("id", "turn")
                assert len(rows) >= 2, f"{section.name} rendered without rows"
                if section.name in valid:
                    shown = {r[0] for r in rows[1:]}
                    assert shown <= valid[section.name], f"{section.name} cites unknown ids"
                    assert shown == {r.id for r in section.rows}
            assert len(ctx.entities) <= builder.params.top_k_mapped_entities


def test_default_layout_on_dulce_matches_graphrag_headers() -> None:
    index = _load("operation_dulce")
    # no Reports by default (community_prop = 0), nor for a fact question when community_prop is set
    # (fact_community_prop = 0): the room goes to Sources
    assert LocalContextBuilder(index).build("Who is Alex Mercer?").section("Reports") is None
    assert LocalContextBuilder(index, {"community_prop": 0.1}).build("Who is Alex Mercer?").section("Reports") is None
    ctx = LocalContextBuilder(index, {"community_prop": 0.1, "fact_community_prop": None}).build("Who is Alex Mercer?")
    assert ctx.text.startswith("-----Reports-----\nid|title|content\n")
    assert "-----Entities-----\nid|entity|description|number of relationships\n" in ctx.text
    assert "-----Relationships-----\nid|source|target|description|weight\n" in ctx.text
    assert "-----Sources-----\nid|text\n" in ctx.text
    assert "links" not in ctx.section("Relationships").text.split("\n")[1]  # type: ignore[union-attr]
    assert ctx.entities[0].title == "ALEX MERCER"
    assert ctx.text_unit_ids and set(ctx.text_unit_ids) <= {t.short_id for t in index.text_units}
    # the split (reports 0.1 as set, sources 0.8 when an entity is named) on what is left after
    # reserving the blank lines between the six sections
    assert ctx.link_strength == 1.0
    assert ctx.budgets["Reports"] == int((12_000 - 5 * index.tokenizer.count("\n\n")) * 0.1)


def test_unused_budget_flows_to_sources() -> None:
    index = _load("christmas_carol_graphrag_index")
    # the shares of every question kind (a fact question's larger Sources share off)
    ctx = LocalContextBuilder(index).build("Bob Cratchit", fact_text_unit_prop=None, fact_community_prop=None,
                                           community_prop=0.1, text_unit_prop=0.7)
    m = 12_000 - 5 * index.tokenizer.count("\n\n")
    reports = ctx.section("Reports")
    assert reports is not None and reports.budget == int(m * 0.1)
    # local gets its own 20 % plus what Reports left unused
    assert ctx.budgets["Entities"] == int(m * 0.2) + (reports.budget - reports.tokens)
    local_used = sum(s.tokens for s in ctx.sections if s.name in ("Entities", "Relationships", "Claims"))
    assert local_used < ctx.budgets["Entities"]
    # Sources gets everything the earlier sections did not use, i.e. more than its fixed 70 %
    assert ctx.budgets["Sources"] == m - reports.tokens - local_used > int(m * 0.7)


def test_drift_props_still_show_entities() -> None:
    # GraphRAG's DRIFT settings (0.1 / 0.9) leave local_prop = 0: no entities at all there (bug 8).
    index = _load("christmas_carol_graphrag_index")
    ctx = LocalContextBuilder(index, {"community_prop": 0.1, "text_unit_prop": 0.9}).build("Tiny Tim")
    assert ctx.tokens <= 12_000
    assert ctx.section("Sources") is not None


def test_params_validation_errors_are_clear() -> None:
    with pytest.raises(ValidationError, match="must not exceed 1"):
        LocalContextParams(community_prop=0.6, text_unit_prop=0.5)
    with pytest.raises(ValidationError, match="max_tokens"):
        LocalContextParams.model_validate({"max_tokens": 12_000})  # GraphRAG notebook's silent typo
    index = _load("operation_dulce")
    builder = LocalContextBuilder(index)
    with pytest.raises(ValidationError, match="top_k_entites"):
        builder.build("Alex", top_k_entites=3)
    with pytest.raises(ValidationError, match="text_unit_strategy"):
        builder.build("Alex", text_unit_strategy="random")
    assert (
        len(
            builder.build("Alex Mercer Taylor Cruz Jordan Hayes Sam Rivera", top_k_mapped_entities=2).entities
        )
        == 2
    )


def test_history_table_keeps_newest_turns() -> None:
    index = _load("operation_dulce")
    history = []
    for i in range(8):
        history += [
            {"role": "user", "content": f"question number {i}"},
            {"role": "assistant", "content": f"a{i}"},
        ]
    ctx = LocalContextBuilder(index).build("Alex Mercer", history, conversation_history_max_turns=3)
    hist = ctx.section("Conversation History")
    assert hist is not None
    rows = _parse(hist.text)
    assert rows[0] == ["turn", "content"]
    assert [r[1] for r in rows[1:]] == ["question number 5", "question number 6", "question number 7"]
    both = LocalContextBuilder(index).build(
        "Alex", history, conversation_history_max_turns=1, conversation_history_user_turns_only=False
    )
    assert _parse(both.section("Conversation History").text)[1:] == [  # type: ignore[union-attr]
        ["user", "question number 7"],
        ["assistant", "a7"],
    ]
    with pytest.raises(ValueError, match="role"):
        LocalContextBuilder(index).build("Alex", [{"role": "robot", "content": "x"}])


def test_deterministic_and_no_state_leak() -> None:
    index = _load("christmas_carol_graphrag_index")
    builder = LocalContextBuilder(index)
    q1, q2 = "Scrooge and Marley", "Fezziwig's ball"
    first = [builder.build(q1).text, builder.build(q2).text]
    other = LocalContextBuilder(index)
    second = [other.build(q2).text, other.build(q1).text]
    assert first == second[::-1]
    assert builder.build(q1).text == first[0]
    # no record mutated (GraphRAG writes `links` into relationship attributes)
    assert not any(hasattr(r, "attributes") for r in index.relationships[:5])


def test_candidate_context_marks_records_not_in_context() -> None:
    index = _load("christmas_carol_graphrag_index")
    # GraphRAG's shares, so that every section has rows both shown and left out at this budget
    params = {"max_context_tokens": 8000, "text_unit_prop": 0.5, "community_prop": 0.15, "fact_text_unit_prop": None,
              "fact_community_prop": None}
    ctx = LocalContextBuilder(index, params).build("Scrooge", return_candidate_context=True)
    for name in ("Entities", "Relationships", "Sources", "Reports"):
        section = ctx.section(name)
        assert section is not None
        assert section.rows and section.candidates, name  # shown and left out
        shown = {r[0] for r in _parse(section.text)[1:]}
        assert shown == {r.id for r in section.rows}
        assert not shown & {r.id for r in section.candidates}
        flags = {(r["id"], r["in_context"]) for r in ctx.records[name]}  # the JSON-ready records say the same
        assert flags == {(i, True) for i in shown} | {(r.id, False) for r in section.candidates}
    scrooge = index.entity_by_title["SCROOGE"]
    relationships = ctx.section("Relationships")
    assert relationships is not None
    rel_ids = {r.id for r in relationships.rows + relationships.candidates}
    assert {index.relationships[r].short_id for r in index.entity_relationships[scrooge]} <= rel_ids


def test_relationships_in_network_first_then_by_links() -> None:
    ents = [Entity(id=f"e{i}", short_id=str(i), title=t) for i, t in enumerate("ABCDE")]
    pairs = [("A", "B", 1), ("A", "C", 9), ("B", "C", 9), ("A", "D", 50), ("B", "E", 2)]
    rels = [
        Relationship(id=f"r{i}", short_id=str(i), source=s, target=t, combined_degree=d)
        for i, (s, t, d) in enumerate(pairs)
    ]
    index = index_from_records(entities=ents, relationships=rels, text_units=[TextUnit("t", "0", "x")])
    a, b = index.entity_by_title["A"], index.entity_by_title["B"]
    in_net, out_net = select_relationships(index, [a, b], top_k=10)
    assert in_net == [0]
    # C links to both A and B (links=2) so its edges beat A-D despite D's higher combined degree
    assert out_net[:2] == [1, 2] and out_net[2] == 3 and out_net[3] == 4
    assert select_relationships(index, [a, b], top_k=1)[1] == [1, 2]


def _hot_index() -> Index:
    """One hot entity in 50 text units; four minor entities in 2-4 units each."""
    names = ["HOT", "MINOR ONE", "MINOR TWO", "MINOR THREE", "MINOR FOUR"]
    units: list[TextUnit] = []
    mentions: dict[str, list[str]] = {n: [] for n in names}
    for j in range(50):
        tid = f"hot{j}"
        units.append(
            TextUnit(id=tid, short_id=str(len(units)), text=f"Hot unit {j}. " + "filler words " * 40)
        )
        mentions["HOT"].append(tid)
    for m, name in enumerate(names[1:]):
        for j in range(2 + m % 3):
            tid = f"m{m}_{j}"
            units.append(
                TextUnit(id=tid, short_id=str(len(units)), text=f"{name} unit {j}. " + "other words " * 40)
            )
            mentions[name].append(tid)
    entities = [
        Entity(
            id=f"e{i}", short_id=str(i), title=n, description=f"{n.lower()} entity", text_unit_ids=mentions[n]
        )
        for i, n in enumerate(names)
    ]
    rels = [
        Relationship(id=f"r{i}", short_id=str(i), source="HOT", target=n, text_unit_ids=mentions[n][:1])
        for i, n in enumerate(names[1:])
    ]
    claims = [Claim(id="c0", short_id="0", subject="HOT", object="MINOR ONE", description="hot claim")]
    return index_from_records(entities=entities, relationships=rels, text_units=units, claims=claims)


def test_hot_entity_graphrag_starves_minor_entities_min_guarantee_does_not() -> None:
    index = _hot_index()
    query = "HOT and MINOR ONE, MINOR TWO, MINOR THREE, MINOR FOUR"
    params = {"max_context_tokens": 4000, "include_entity_names": ["HOT"]}
    starved = LocalContextBuilder(index).build(query, text_unit_strategy="graphrag", **params)
    credited = {r.entity for r in starved.section("Sources").rows}  # type: ignore[union-attr]
    assert credited == {"HOT"}
    fair = LocalContextBuilder(index).build(query, text_unit_strategy="min_guarantee", **params)
    sources = fair.tables.sources
    assert sources is not None and sources.tokens <= sources.budget
    credited = {r.entity for r in sources.rows}
    assert credited == {"HOT", "MINOR ONE", "MINOR TWO", "MINOR THREE", "MINOR FOUR"}
    for strategy in ("round_robin", "per_entity_cap", "weighted"):
        ctx = LocalContextBuilder(index).build(query, text_unit_strategy=strategy, **params)
        got = [r.entity for r in ctx.section("Sources").rows]  # type: ignore[union-attr]
        assert len(set(got)) >= 3, strategy
        assert ctx.tokens <= 4000
    capped = LocalContextBuilder(index).build(
        query, text_unit_strategy="per_entity_cap", per_entity_cap=2, **params
    )
    got = [r.entity for r in capped.section("Sources").rows]  # type: ignore[union-attr]
    assert max(got.count(n) for n in set(got)) <= 2


def test_report_falls_back_to_summary_then_truncation() -> None:
    ents = [Entity(id="e0", short_id="0", title="ALPHA", description="the alpha")]
    community = Community(id="c", community=0, level=0, entity_ids=["e0"])
    long_text = "A very long finding. " * 400
    report = CommunityReport(
        id="r", community=0, level=0, title="Alpha", summary="Short summary.", full_content=long_text
    )
    index = index_from_records(
        entities=ents,
        relationships=[],
        text_units=[TextUnit("t", "0", "x")],
        communities=[community],
        community_reports=[report],
    )
    shares = {"community_prop": 0.1, "fact_community_prop": None}
    ctx = LocalContextBuilder(index, {"max_context_tokens": 2000, **shares}).build("alpha")
    reports = ctx.section("Reports")
    assert reports is not None and "Short summary." in reports.text and reports.tokens <= reports.budget
    no_summary = CommunityReport(id="r", community=0, level=0, title="Alpha", full_content=long_text)
    index2 = index_from_records(
        entities=ents,
        relationships=[],
        text_units=[TextUnit("t", "0", "x")],
        communities=[community],
        community_reports=[no_summary],
    )
    ctx2 = LocalContextBuilder(index2, {"max_context_tokens": 2000, **shares}).build("alpha")
    rep2 = ctx2.section("Reports")
    assert rep2 is not None and rep2.rows[0].truncated and rep2.tokens <= rep2.budget
    assert re.search(r"A very long finding\.", rep2.text)


def test_no_entities_gives_no_empty_sections() -> None:
    index = _load("operation_dulce")
    ctx = LocalContextBuilder(index).build("zzzz qqqq")
    assert ctx.entities == []
    assert ctx.text == "" and ctx.tokens == 0
    assert "no entity matched the query" in ctx.link.notes


def test_text_unit_strategies_orders() -> None:
    from shared_context.text_unit_selection import select_text_units

    index = _hot_index()
    hot, one, two = (index.entity_by_title[n] for n in ("HOT", "MINOR ONE", "MINOR TWO"))
    graphrag = select_text_units(index, [hot, one, two], strategy="graphrag")
    assert [c.entity for c in graphrag] == [hot] * 50 + [one] * 2 + [two] * 3
    # within an entity, units holding its relationships come first (GraphRAG's rule)
    first_one = next(c for c in graphrag if c.entity == one)
    assert first_one.relationships == 1 and index.text_units[first_one.unit].id == "m0_0"
    robin = select_text_units(index, [hot, one, two], strategy="round_robin")
    assert [c.entity for c in robin[:6]] == [hot, one, two, hot, one, two]
    guaranteed = select_text_units(index, [hot, one, two], strategy="min_guarantee", min_units_per_entity=2)
    assert [c.entity for c in guaranteed[:6]] == [hot, one, two, hot, one, two]
    assert len(guaranteed) == len(graphrag) and {c.unit for c in guaranteed} == {c.unit for c in graphrag}
    capped = select_text_units(index, [hot, one, two], strategy="per_entity_cap", per_entity_cap=1)
    assert [c.entity for c in capped] == [hot, one, two]
    # weighted: token quotas follow the link scores (1:1:2 of 40 -> 10/10/20, each unit costing 1)
    weighted = select_text_units(
        index, [hot, one, two], strategy="weighted", scores=[1, 1, 2], budget=40, unit_cost=lambda _u: 1
    )
    head = weighted[:15]  # hot's quota 10, one's 2 (all it has), two's 3 (all it has)
    assert [c.entity for c in head].count(hot) == 10
    assert {c.entity for c in head} == {hot, one, two}
    with pytest.raises(ValueError, match="unknown text_unit_strategy"):
        select_text_units(index, [hot], strategy="random")


def test_warm_rows_renders_ahead_what_questions_read_and_changes_no_context() -> None:
    """`warm_local_rows` (run by `graphroute serve` before it listens) leaves a question nothing to render of
    its entities, relationships, claims and reports, and the context is the one a cold builder makes."""
    from shared_context.tables import per_index_cache

    cold, warm = _load("christmas_carol_graphrag_index"), _load("christmas_carol_graphrag_index")
    assert cold is not warm
    builder = LocalContextBuilder(warm)
    cached = warm_local_rows(builder, 1_000_000)
    assert cached >= len(warm.entities) + len(warm.relationships)
    rows = per_index_cache(warm, "local.rows", dict)
    chunks = per_index_cache(warm, "local.excerpt_chunks", dict)
    before, chunks_before = set(rows), dict(chunks)
    assert any(key[0] == "unit" for key in before) and chunks_before  # the Sources rows and excerpt stretches
    queries = [q for q in QUERIES["christmas_carol_graphrag_index"] if q]
    texts = [builder.build(q).text for q in queries]
    rendered = {key[0] for key in set(rows) - before}
    assert not rendered & {"entity", "rel", "claim", "report", "unit"}, rendered
    # an excerpt row finds its stretches counted (a few rows quoted otherwise than their unit may not)
    assert len(chunks) - len(chunks_before) <= len(queries), set(chunks) - set(chunks_before)
    assert texts == [LocalContextBuilder(cold).build(q).text for q in queries]
    cold_chunks = per_index_cache(cold, "local.excerpt_chunks", dict)
    assert all(chunks[k] == n for k, n in cold_chunks.items())  # counted ahead = counted by a question
    # the bound: rows of the highest-degree entities first, stopping once `limit` rows are cached
    small = _load("christmas_carol_graphrag_index")
    n = warm_local_rows(LocalContextBuilder(small), 10)
    assert 10 <= n < cached
    top = max(range(len(small.entities)), key=lambda i: len(small.entity_relationships[i]))
    assert ("entity", top, True) in per_index_cache(small, "local.rows", dict)


def test_row_caches_stop_growing_at_their_limit_and_contexts_stay_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long-running service must not keep every row any question touched: past `ROW_CACHE_LIMIT` rows
    are rendered per question and not kept, and the context text is the one an unbounded builder makes."""
    import shared_context.local_rows as local_rows
    from shared_context.tables import per_index_cache

    queries = [q for q in QUERIES["christmas_carol_graphrag_index"] if q]
    unbounded = _load("christmas_carol_graphrag_index")
    expected = [LocalContextBuilder(unbounded).build(q).text for q in queries]
    assert len(per_index_cache(unbounded, "local.rows", dict)) > 40
    monkeypatch.setattr(local_rows, "ROW_CACHE_LIMIT", 40)
    bounded = _load("christmas_carol_graphrag_index")
    builder = LocalContextBuilder(bounded)
    assert warm_local_rows(builder, 1_000_000) <= 40  # warm-up stops at the bound instead of running through every entity
    assert [builder.build(q).text for q in queries] == expected
    for name in ("local.rows", "local.entity_values", "local.rel_values", "local.entity_rels",
                 "local.unit_row_overhead"):
        assert len(per_index_cache(bounded, name, dict)) <= 40, name


@pytest.mark.parametrize("budget", [8000, 12000])
def test_excerpt_sources_fill_their_budget_on_a_real_index(budget: int) -> None:
    index = _load("christmas_carol_graphrag_index")
    builder = LocalContextBuilder(index)
    for query in QUERIES["christmas_carol_graphrag_index"][:3]:
        ctx = builder.build(query, max_context_tokens=budget)
        sources = ctx.section("Sources")
        assert sources is not None
        assert ctx.tokens == index.tokenizer.count(ctx.text) <= budget
        # the room the first excerpt pass leaves (headroom, short estimates) goes to more excerpts
        assert sources.tokens >= 0.98 * ctx.budgets["Sources"]


def test_fact_question_reports_share_goes_to_sources() -> None:
    index = _load("christmas_carol_graphrag_index")
    builder = LocalContextBuilder(index, {"community_prop": 0.1})  # reports are shown only when set
    query = "Tell me about Marley's ghost"
    base = builder.build(query, max_context_tokens=8000, fact_community_prop=None)
    small = builder.build(query, max_context_tokens=8000, fact_community_prop=0.02)
    assert base.need == small.need == "fact"
    assert small.budgets["Reports"] < base.budgets["Reports"]
    reports = small.section("Reports")
    assert reports is None or reports.tokens <= small.budgets["Reports"]
    freed = base.budgets["Reports"] - small.budgets["Reports"]
    # the entity tables keep their share (they lose at most what the larger Reports share left unused)
    base_reports = base.section("Reports")
    unused = base.budgets["Reports"] - (base_reports.tokens if base_reports else 0)
    assert small.budgets["Entities"] >= base.budgets["Entities"] - unused
    assert small.budgets["Sources"] >= base.budgets["Sources"] + freed - unused
    assert small.tokens == index.tokenizer.count(small.text) <= 8000
    # a relation question keeps community_prop
    relation = "What is the relationship between Scrooge and Marley?"
    rel_base = builder.build(relation, max_context_tokens=8000, fact_community_prop=None)
    rel_small = builder.build(relation, max_context_tokens=8000, fact_community_prop=0.02)
    if rel_base.need == "relation":
        assert rel_small.budgets == rel_base.budgets
