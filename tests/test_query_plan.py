"""One checked, immutable question: checked once, linked once, a context built for the estimate handed on."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

import shared_context.linking as linking
import shared_context.local_context as local_context
from engines import LocalSearch
from engines.models.offline import OfflineChatModel
from engines.plan import prepare_question
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


def test_a_question_is_checked_once_and_rejects_bad_input(dulce) -> None:
    asked = prepare_question(f"  {QUESTION}  ", dulce, ["Who runs Dulce base?"], deadline_s=5.0)
    assert asked.text == QUESTION and asked.link_text == QUESTION and asked.link_note is None
    assert asked.history == ({"role": "user", "content": "Who runs Dulce base?"},)
    assert asked.deadline is not None and asked.deadline_s == 5.0
    with pytest.raises(ValueError, match="question is empty"):
        prepare_question("   ", dulce)
    with pytest.raises(ValueError, match="history item 0"):
        prepare_question(QUESTION, dulce, [{"role": "robot", "content": "hi"}])


def test_a_question_is_never_filled_in(dulce) -> None:
    asked = prepare_question(QUESTION, dulce)
    with pytest.raises(dataclasses.FrozenInstanceError):
        asked.link = None  # type: ignore[misc]
    linked = asked.with_linking(dulce)
    assert asked.link is None and asked.lexical is None  # a new value; the first one is as it was
    assert linked.link is not None and linked.lexical is not None and linked.link_k == 10


def test_classifier_and_engine_link_once_through_the_question(dulce, link_calls: list[str]) -> None:
    asked = prepare_question(QUESTION, dulce).with_linking(dulce)
    assert link_calls == [QUESTION]
    decision = classify(QUESTION, dulce, linker=asked.linker(dulce))
    assert decision.signals["linked_entities"] >= 1
    assert link_calls == [QUESTION]  # the classifier read the question's linking
    engine = LocalSearch(dulce, OfflineChatModel())  # no embedder: lexical linking, as the classifier's
    result = asyncio.run(engine.search(asked))
    assert link_calls == [QUESTION]  # the engine reused it too
    assert "ALEX MERCER" in result.context_text
    without = asyncio.run(LocalSearch(dulce, OfflineChatModel()).search(QUESTION))
    assert without.context_text == result.context_text  # same context either way
    assert link_calls == [QUESTION, QUESTION]


def test_the_estimate_context_is_the_answer_context(dulce, link_calls: list[str]) -> None:
    asked = prepare_question(QUESTION, dulce).with_linking(dulce)
    engine = LocalSearch(dulce, OfflineChatModel())
    estimate = engine.estimate(asked)
    assert estimate.llm_calls == 1 and len(link_calls) == 1 and estimate.prebuilt is not None
    assert "prebuilt" not in estimate.to_dict()
    result = asyncio.run(engine.search(asked.with_context(estimate.prebuilt)))
    assert len(link_calls) == 1 and result.details.get("context_reused") is True
    assert estimate.prebuilt.context.text == result.context_text
    # the question the estimate read was not changed: answering it alone builds the context again
    again = asyncio.run(engine.search(asked))
    assert "context_reused" not in again.details and again.context_text == result.context_text


def test_history_means_a_fresh_context(dulce, link_calls: list[str]) -> None:
    engine = LocalSearch(dulce, OfflineChatModel())
    plain = prepare_question(QUESTION, dulce).with_linking(dulce)
    prebuilt = engine.estimate(plain).prebuilt
    with_history = prepare_question(QUESTION, dulce, ["Tell me about Dulce base."]).with_context(prebuilt)
    result = asyncio.run(engine.search(with_history))
    assert "context_reused" not in result.details and len(link_calls) == 2


def test_a_checked_question_carries_its_own_history_and_deadline(dulce) -> None:
    engine = LocalSearch(dulce, OfflineChatModel())
    with pytest.raises(ValueError, match="carries its own history and deadline"):
        asyncio.run(engine.search(prepare_question(QUESTION, dulce), ["earlier"]))
