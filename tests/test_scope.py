"""`ask(..., scope=...)`: by title, id, glob and metadata, every engine answers from the scope only (a property
test over random scopes: no citation, text unit or document from outside), the answer says what the scope held,
and an empty scope is answered without a model call. Over an index with document metadata built here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexer import IndexerConfig, SourceDocument, build_index_from_documents
from router import Router
from shared_context.scope import Scope, ScopeError, in_scope_documents

ENGINES = ("local", "global", "drift", "basic")
TOPICS = [
    ("lighthouse-2019", 2019, "north", "The Carrow Point lighthouse keeper Ida Brenn logged forty ships in the "
     "winter storms. The lamp failed twice and the coastguard sent Rolf Amsel to repair the lens."),
    ("lighthouse-2021", 2021, "north", "Ida Brenn retired from the Carrow Point lighthouse. Rolf Amsel automated "
     "the lamp with solar panels, and the harbour council paid for a new fog horn."),
    ("bakery-2019", 2019, "south", "The Pelham Street bakery of Marta Quill sold rye loaves to the harbour workers. "
     "Her oven burned wood from the Ashby forest until the council banned open fires."),
    ("bakery-2021", 2021, "south", "Marta Quill opened a second bakery near the Ashby forest and trained four "
     "apprentices. Her sourdough won the county fair prize against Tobias Rind."),
    ("ferry-2020", 2020, "north", "The Carrow ferry of captain Tobias Rind crossed to the island twice a day. In "
     "the storms of 2020 the ferry stayed in harbour and Ida Brenn guided it home by lamp signals."),
    ("ferry-2022", 2022, "south", "Tobias Rind sold the ferry to the harbour council. The council hired Rolf "
     "Amsel to fit an electric engine, and Marta Quill supplied bread for the opening voyage."),
]
QUESTIONS = {"local": "What did Ida Brenn do?", "global": "What are the main themes of these records?",
             "drift": "How did the storms affect the harbour and its people?", "basic": "Who repaired the lamp?"}


@pytest.fixture(scope="module")
def town(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Router]:
    docs = [SourceDocument(title=t, text=x, metadata={"year": y, "area": a}) for t, y, a, x in TOPICS]
    out = tmp_path_factory.mktemp("town") / "index"
    build_index_from_documents(docs, out, config=IndexerConfig(chunk_size=120, chunk_overlap=10), progress=False)
    with Router.from_index(out) as router:
        yield router


def _scope_units(router: Router, scope: Scope) -> tuple[set[str], set[str]]:
    ix = router.index
    docs = in_scope_documents(ix, scope)
    units = {ix.text_units[j].id for j, d in enumerate(ix.text_unit_document) if d in set(docs)}
    return {ix.documents[d].id for d in docs}, units


def _assert_inside(router: Router, scope: Scope, engine: str) -> None:
    doc_ids, unit_ids = _scope_units(router, scope)
    answer = router.ask(QUESTIONS[engine], mode=engine, scope=scope)
    assert set(answer.text_unit_ids) <= unit_ids, (engine, scope)
    assert set(answer.document_ids) <= doc_ids, (engine, scope)
    for c in answer.citations:
        assert set(c.text_unit_ids) <= unit_ids and set(c.document_ids) <= doc_ids, (engine, scope, c)
    if answer.result is not None:
        shown = {router.index.text_units[router.index.text_unit_pos[u]].short_id for u in unit_ids}
        for row in answer.result.context_records.get("Sources", []):
            assert str(row.get("id")) in shown, (engine, scope, row)
    if unit_ids:
        assert answer.notes[0].startswith("scope (") and f"{len(doc_ids)} of 6 documents" in answer.notes[0]


TITLES = [t for t, _, _, _ in TOPICS]
scopes = st.one_of(
    st.lists(st.sampled_from(TITLES), min_size=1, max_size=3, unique=True).map(lambda t: Scope(documents=tuple(t))),
    st.sampled_from(["lighthouse-*", "*-2019", "ferry*", "*-202?", "BAKERY-*"]).map(lambda g: Scope(globs=(g,))),
    st.builds(lambda y, a: Scope(where={"year": y, "area": a} if a else {"year": y}),
              st.sampled_from([2019, 2020, 2021, 2022, [2019, 2022]]), st.sampled_from(["", "north", "south"])),
)


@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(scope=scopes, engine=st.sampled_from(ENGINES))
def test_no_evidence_from_outside_the_scope(town: Router, scope: Scope, engine: str) -> None:
    _assert_inside(town, scope, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_every_engine_by_title_glob_and_metadata(town: Router, engine: str) -> None:
    for scope in (Scope(documents=("bakery-2019",)), Scope(globs=("ferry-*",)), Scope(where={"area": "north"})):
        _assert_inside(town, scope, engine)


def test_unscoped_answers_reach_outside_such_a_scope(town: Router) -> None:
    """What the scoped tests rule out does happen without a scope (so they can fail)."""
    doc_ids, _ = _scope_units(town, Scope(globs=("ferry-*",)))
    answer = town.ask(QUESTIONS["global"], mode="global")
    assert set(answer.document_ids) - doc_ids


def test_scope_selects_by_title_id_glob_and_metadata(town: Router) -> None:
    ix = town.index
    titles = lambda s: sorted(ix.documents[d].title for d in in_scope_documents(ix, s))  # noqa: E731
    assert titles(Scope(documents=("ferry-2020", ix.documents[0].id))) == sorted(["ferry-2020", ix.documents[0].title])
    assert titles(Scope(globs=("*-2021",))) == ["bakery-2021", "lighthouse-2021"]
    assert titles(Scope(where={"year": [2019, 2020], "area": "north"})) == ["ferry-2020", "lighthouse-2019"]
    assert titles(Scope(globs=("lighthouse-*",), where={"year": 2021})) == ["lighthouse-2021"]
    with pytest.raises(ScopeError, match="where\\['year'\\]"):
        Scope(where={"year": {"from": 2019}})  # type: ignore[dict-item]


def test_an_empty_scope_is_said_and_costs_nothing(town: Router) -> None:
    answer = town.ask("What did Ida Brenn do?", scope=Scope(where={"year": 1999}))
    assert answer.usage.total.llm_calls == 0 and not answer.citations
    assert "no document of the index is in it" in answer.text and answer.route.method == "empty-scope"
