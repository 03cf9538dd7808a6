"""Router end to end on the Christmas Carol index with the offline model: routing, budgets, escalation,
multi-turn rewriting, concurrency."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from router import Budget, BudgetError, Router
from router.router import Done, EngineEvent, RouteDecided


@pytest.fixture(scope="module")
def router(carol_path: Path) -> Iterator[Router]:
    with Router.from_index(carol_path) as r:
        yield r


def test_ask_routes_and_reports_usage(router: Router) -> None:
    answer = router.ask("Who is Bob Cratchit?")
    assert answer.route.engine == "local"
    assert answer.engine == "local"
    assert answer.offline and "offline" in answer.model
    assert "Cratchit" in answer.text
    total = answer.usage.total
    assert total.llm_calls == sum(s.llm_calls for s in answer.usage.stages.values()) == 1
    assert total.prompt_tokens > 0 and total.output_tokens > 0
    assert "classify" in answer.usage.stages and "answer" in answer.usage.stages
    # citations resolve to the one document of the index
    assert answer.citations and answer.document_ids
    assert set(answer.document_ids) <= {d.id for d in router.index.documents}


def test_global_question_goes_global(router: Router) -> None:
    answer = router.ask("What are the main themes of the story as a whole?")
    assert answer.route.engine == "global"
    assert answer.engine == "global"
    assert answer.usage.stages["map"].llm_calls >= 1
    assert answer.route.reasons


def test_mode_forces_engine(router: Router) -> None:
    answer = router.ask("Who is Bob Cratchit?", mode="basic")
    assert answer.engine == "basic"
    with pytest.raises(ValueError, match="unknown mode"):
        router.ask("Who is Bob Cratchit?", mode="fast")


def test_a_forced_mode_runs_no_classifier_and_says_so(router: Router) -> None:
    answer = router.ask("What are the main themes of the story as a whole?", mode="local")
    assert "classify" not in answer.usage.stages  # the classifier's time is recorded whenever it runs
    assert (answer.route.engine, answer.route.method, answer.route.probabilities) == ("local", "forced", {"local": 1.0})
    assert answer.route.reasons == ["mode 'local' forced by the caller (the classifier was not run)"]
    assert router.ask("Who is Bob Cratchit?", mode="basic").route.engine == "basic"

    async def opinion() -> object:
        async for ev in router.astream("What are the main themes of the story as a whole?", mode="local",
                                       classify_forced=True):
            if isinstance(ev, Done):
                return ev.answer
        return None

    asked = router.run(opinion())
    assert "classify" in asked.usage.stages and asked.route.engine == "local"
    assert max(asked.route.probabilities, key=asked.route.probabilities.get) == "global"  # its own opinion


def test_bad_questions_are_clear_errors(router: Router) -> None:
    with pytest.raises(ValueError, match="question is empty"):
        router.ask("   ")
    with pytest.raises(ValueError, match="too long"):
        router.ask("Scrooge " * 5000)


def test_budget_steps_down_before_any_call(router: Router) -> None:
    question = "How did Marley's ghost change the way Scrooge treats Bob Cratchit and Fred?"
    unlimited = router.engine("drift").estimate(question)
    assert unlimited.llm_calls > 6  # DRIFT would not fit the budget below
    answer = router.ask(question, mode="drift", budget=Budget(max_llm_calls=6))
    assert answer.stepped_down_from == "drift"
    # the ladder from DRIFT: DRIFT itself (over budget), then global search with pre-ranking, which fits
    assert answer.engine == "global"
    assert [line.split(":")[0] for line in answer.plan] == ["drift", "global_prerank"]
    assert answer.usage.total.llm_calls <= 6
    assert any("over budget" in line for line in answer.plan)
    # a budget that only local search fits
    answer = router.ask(question, mode="drift", budget=Budget(max_llm_calls=1))
    assert answer.engine == "local" and answer.usage.total.llm_calls == 1


def test_budget_too_small_for_anything(router: Router) -> None:
    with pytest.raises(BudgetError):
        Budget(max_llm_calls=0)
    with pytest.raises(BudgetError, match="deadline"):
        router.ask("What are the main themes of the story?", mode="global", budget=Budget(deadline_s=1e-6))


def test_escalates_when_engine_finds_nothing(router: Router) -> None:
    # No entity of the index is named: local search finds nothing and the router escalates.
    answer = router.ask("Qwxzy plimbok frandle?", mode="local")
    assert answer.escalations, "expected an escalation from an empty local result"
    assert answer.escalations[0].from_engine == "local"
    assert answer.engine != "local"
    assert answer.escalations[0].reason


def test_a_question_the_index_has_no_word_of_stops_at_basic_search(router: Router) -> None:
    # Nothing linked, no document named, no passage sharing a word: global search and DRIFT would map every
    # report for nothing, so the only escalation is the one-call basic search.
    answer = router.ask("Qwxzy plimbok frandle?")
    assert answer.route.signals["unit_hits"] == 0 and answer.route.signals["linked_entities"] == 0
    assert [(e.from_engine, e.to_engine) for e in answer.escalations] == [(answer.route.engine, "basic")]
    assert answer.engine == "basic" and answer.usage.total.llm_calls == 2


def test_follow_up_is_rewritten_before_routing(router: Router) -> None:
    answer = router.ask("And what about his nephew?", history=["Who is Ebenezer Scrooge?"])
    assert answer.standalone_question != answer.question
    assert "Scrooge" in answer.standalone_question
    assert "rewrite" in answer.usage.stages
    # a standalone question is left alone and costs nothing
    answer = router.ask("Who is Tiny Tim?", history=["Who is Ebenezer Scrooge?"])
    assert answer.standalone_question == "Who is Tiny Tim?"


def test_stream_yields_route_progress_and_answer(router: Router) -> None:
    async def collect() -> list[object]:
        return [ev async for ev in router.astream("Who is Bob Cratchit?")]

    events = asyncio.run(collect())
    assert isinstance(events[0], RouteDecided)
    assert isinstance(events[-1], Done)
    deltas = [e.event.text for e in events if isinstance(e, EngineEvent) and hasattr(e.event, "text")]
    assert "".join(deltas) == events[-1].answer.text


def test_32_concurrent_questions_on_one_router(router: Router) -> None:
    questions = ["Who is Bob Cratchit?", "Who is Jacob Marley?", "Who is Fred?", "Who is Tiny Tim?"] * 8

    async def run_all() -> list[object]:
        return await asyncio.gather(*(router.aask(q) for q in questions))

    answers = asyncio.run(run_all())
    assert len(answers) == 32
    sequential = {q: router.ask(q).text for q in set(questions)}
    for q, a in zip(questions, answers, strict=True):
        assert a.text == sequential[q]  # same answer whatever else runs at the same time


def test_vectors_from_a_model_we_cannot_call_are_named(dulce_path: Path) -> None:
    with Router.from_index(dulce_path) as dulce:
        answer = dulce.ask("Who is Alex Mercer?")
    assert answer.engine == "local" and "Mercer" in answer.text
    assert any("dim 3072" in note and "not configured" in note for note in answer.notes)


def test_default_mode_comes_from_config(router: Router) -> None:
    from engines.config import GraphrouteConfig, RouterConfig

    config = GraphrouteConfig(router=RouterConfig(default_mode="basic"))
    basic_router = Router(router.index, config=config, models=router.models)
    assert basic_router.ask("Who is Bob Cratchit?").engine == "basic"
    assert basic_router.ask("Who is Bob Cratchit?", mode="auto").engine == "local"  # the caller's mode wins


def test_history_with_an_unknown_role_names_it(router: Router) -> None:
    with pytest.raises(ValueError, match="unknown role 'bot'"):
        router.ask("And his nephew?", history=[{"role": "bot", "content": "Who is Scrooge?"}])


def _with_http_embedder(base_url: str) -> object:
    from engines.config import GraphrouteConfig
    from engines.models.config import models_config_from_mapping

    models = models_config_from_mapping(
        {"embedding": {"base_url": base_url, "api_key": "test", "model": "text-embedding-3-large"}}, env={}
    )
    return GraphrouteConfig(models=models)


def test_embedder_dimension_must_match_the_stored_vectors(dulce_path: Path) -> None:
    from engines.config import GraphrouteConfig
    from engines.models.config import models_config_from_mapping
    from shared_context import IndexFormatError, load_index
    from testing.model_server import LoopbackServer

    with LoopbackServer(embedding_dim=64) as srv:
        with Router(load_index(dulce_path), config=_with_http_embedder(srv.base_url)) as router:
            assert srv.requests == []  # no network call in the constructor: the size is learned on first use
            for _ in range(2):  # the first question asks for it; later ones keep the answer
                with pytest.raises(IndexFormatError, match=r"dimension 3072 but the configured embedder") as err:
                    router.ask("Who is Alex Mercer?")
                assert "lancedb/" in str(err.value) and "64" in str(err.value)
        assert [r.path for r in srv.requests] == ["/v1/embeddings"]
        models = models_config_from_mapping({"embedding": {"base_url": srv.base_url, "api_key": "test",
                                                           "model": "text-embedding-3-large", "dimensions": 64}}, env={})
        with pytest.raises(IndexFormatError, match=r"dimension 3072 but the configured embedder"):
            Router(load_index(dulce_path), config=GraphrouteConfig(models=models))  # a configured size: at once
        assert len(srv.requests) == 1


def test_matching_embedder_links_with_the_stored_vectors(dulce_path: Path) -> None:
    from shared_context import load_index
    from testing.model_server import LoopbackServer

    with LoopbackServer(embedding_dim=3072) as srv:
        with Router(load_index(dulce_path), config=_with_http_embedder(srv.base_url)) as router:
            assert router.notes == []  # the stored vectors are usable: nothing to warn about
            answer = router.ask("Who is Alex Mercer?")
        assert answer.engine == "local" and "Mercer" in answer.text
        assert answer.usage.stages["entity_link"].embedding_calls == 1
        assert answer.result is not None and "embedding" in answer.result.details["link_mode"]


def test_embedding_endpoint_without_a_key_names_its_own_config_key(dulce_path: Path) -> None:
    from engines.config import GraphrouteConfig
    from engines.models.config import models_config_from_mapping
    from engines.models.errors import ModelConfigError
    from shared_context import load_index

    models = models_config_from_mapping({"embedding": {"base_url": "http://127.0.0.1:9/v1"}}, env={})
    with pytest.raises(ModelConfigError, match=r"models\.embedding\.api_key"):
        Router(load_index(dulce_path), config=GraphrouteConfig(models=models))
