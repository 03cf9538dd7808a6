"""One QueryPlan per question: checked once, linked once, a context built for the estimate reused."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import shared_context.linking as linking
import shared_context.local_context as local_context
from engines import LocalSearch
from engines.models.offline import OfflineChatModel
from engines.plan import plan_question
from router.classifier import classify
from shared_context import load_index

QUESTION = "Who is Alex Mercer?"


@pytest.fixture(scope="module")
def dulce(dulce_path: Path):
    return load_index(dulce_path)


@pytest.fixture()
def link_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = linking.link_entities

    def counting(index, query, **kwargs):
        calls.append(query)
        return real(index, query, **kwargs)

    monkeypatch.setattr(linking, "link_entities", counting)
    monkeypatch.setattr(local_context, "link_entities", counting)
    return calls


def test_plan_checks_the_question_once_and_rejects_bad_input(dulce) -> None:
    plan = plan_question(f"  {QUESTION}  ", dulce)
    assert plan.question == QUESTION and plan.link_text == QUESTION and plan.note is None
    with pytest.raises(ValueError, match="question is empty"):
        plan_question("   ", dulce)


def test_classifier_and_engine_link_once_through_the_plan(dulce, link_calls: list[str]) -> None:
    plan = plan_question(QUESTION, dulce)
    decision = classify(QUESTION, dulce, linker=plan.linker(dulce))
    assert decision.signals["linked_entities"] >= 1
    assert link_calls == [QUESTION]
    engine = LocalSearch(dulce, OfflineChatModel())  # no embedder: lexical linking, as the classifier's
    result = asyncio.run(engine.search(QUESTION, plan=plan))
    assert link_calls == [QUESTION]  # the engine reused the classifier's linking
    assert "ALEX MERCER" in result.context_text
    without_plan = asyncio.run(LocalSearch(dulce, OfflineChatModel()).search(QUESTION))
    assert without_plan.context_text == result.context_text  # same context either way
    assert link_calls == [QUESTION, QUESTION]


def test_the_estimate_context_is_the_answer_context(dulce, link_calls: list[str]) -> None:
    plan = plan_question(QUESTION, dulce)
    engine = LocalSearch(dulce, OfflineChatModel())
    estimate = engine.estimate(QUESTION, plan)
    assert estimate.llm_calls == 1 and len(link_calls) == 1
    result = asyncio.run(engine.search(QUESTION, plan=plan))
    assert len(link_calls) == 1 and result.details.get("context_reused") is True
    assert plan.context_for("local", QUESTION).text == result.context_text


def test_history_or_a_query_vector_means_a_fresh_context(dulce, link_calls: list[str]) -> None:
    plan = plan_question(QUESTION, dulce)
    engine = LocalSearch(dulce, OfflineChatModel())
    engine.estimate(QUESTION, plan)
    result = asyncio.run(engine.search(QUESTION, ["Tell me about Dulce base."], plan=plan))
    assert "context_reused" not in result.details and len(link_calls) == 2



def test_the_default_offline_router_analyses_a_question_for_linking_once(carol_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline default: the classifier links by text, the engine by text and query vector; the text's
    lexical pass (exact names, terms, BM25) runs once and the engine only adds the vector's scores."""
    from router import Router

    passes: list[str] = []
    real = linking.lexical_pass

    def counting(index, text):
        passes.append(text)
        return real(index, text)

    monkeypatch.setattr(linking, "lexical_pass", counting)
    question = "Who is Bob Cratchit?"
    with Router.from_index(carol_path) as router:
        answer = router.ask(question)
        assert answer.engine == "local" and answer.result is not None
        assert answer.result.details["link_mode"] == "exact+lexical+embedding"  # the engine used the vector
        assert passes == [question]
        # the same entities and scores as the engine linking everything itself, without a plan
        alone = router.run(router.engine("local").search(question))
        assert alone.details["linked_entities"] == answer.result.details["linked_entities"]
        assert passes == [question, question]
