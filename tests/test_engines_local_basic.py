"""Local and basic search (offline model and loopback server), streaming, input checks, question generation."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from fixture_paths import CAROL, DULCE
from test_engines_support import (
    last_user,
    load,
    loopback_model,
    requests_for,
    script,
    srv,
    system_of,
)

from engines import (
    AnswerDelta,
    BasicSearch,
    ContextReady,
    DriftSearch,
    Final,
    GlobalSearch,
    LocalSearch,
    Progress,
    QuestionGenerator,
)
from engines.config import BasicSearchConfig, GlobalSearchConfig, LocalSearchConfig
from engines.questions import NO_LABELLER_NOTE

__all__ = ["srv"]


async def test_offline_local_answer_is_cited_resolved_and_accounted() -> None:
    index = load(CAROL)
    engine = LocalSearch(index)
    result = await engine.search("Who is Bob Cratchit?")
    assert "Cratchit" in result.response and result.offline and result.model == "offline-extractive"
    assert result.citations and not result.unresolved_citations
    assert result.document_ids and set(result.text_unit_ids) <= {t.id for t in index.text_units}
    assert {"Entities", "Sources"} <= set(result.context_records)
    assert result.usage.total.llm_calls == 1 == result.usage.stages["answer"].llm_calls
    assert result.usage.stages["build_context"].seconds > 0
    assert result.usage.total.prompt_tokens > index.tokenizer.count(result.context_text)  # system + user counted
    assert not result.empty and result.details["linked_entities"]
    json.dumps(result.to_dict())  # JSON-serialisable as promised
    est = engine.estimate("Who is Bob Cratchit?")
    assert est.llm_calls == 1 and abs(est.prompt_tokens - result.usage.total.prompt_tokens) < 0.1 * est.prompt_tokens


async def test_local_prompt_follows_the_task_contract(srv: Any) -> None:
    script(srv, "local_answer", "Marley is Scrooge's late partner [Data: Entities (2); Sources (1)].")
    history = [{"role": "user", "content": "Tell me about Scrooge"}, {"role": "assistant", "content": "He is a miser."}]
    cfg = LocalSearchConfig(response_type="single paragraph")
    result = await LocalSearch(load(CAROL), loopback_model(srv), config=cfg).search("Who is Marley?", history)
    (req,) = srv.chat_requests
    system = system_of(req)
    assert last_user(req) == "Who is Marley?"
    assert "\nResponse type: single paragraph\n" in system
    assert "-----Entities-----" in system and "-----Conversation History-----" in system
    assert "general knowledge" not in system.lower().replace("do not add knowledge from outside", "")
    titles = [line for line in system.splitlines() if line.startswith("-----")]
    assert set(titles) <= {f"-----{n}-----" for n in ("Conversation History", "Reports", "Entities", "Relationships",
                                                      "Claims", "Sources")}
    assert result.usage.total.prompt_tokens == req.prompt_tokens and result.usage.total.cost > 0
    assert [c.kind for c in result.citations] == ["Entities", "Sources"]


async def test_vector_basic_search_keeps_similarity_order_under_the_budget(srv: Any) -> None:
    index = load(CAROL)
    script(srv, "basic_answer", "Answer [Data: Sources (1)]")
    cfg = BasicSearchConfig(mode="vector", k=8, max_context_tokens=3000)
    result = await BasicSearch(index, loopback_model(srv), config=cfg).search("Tiny Tim and the Cratchit family dinner")
    sims = [r["similarity"] for r in result.context_records["Sources"]]
    assert sims == sorted(sims, reverse=True) and len(sims) >= 1
    assert index.tokenizer.count(result.context_text) <= 3000
    from shared_context.linking import lexical_scores

    best = int(np.argmax(lexical_scores(index, "text_units", "Tiny Tim and the Cratchit family dinner")))
    assert result.context_records["Sources"][0]["id"] == index.text_units[best].short_id  # the best is never dropped
    assert result.response == "Answer [Data: Sources (1)]" and result.usage.total.llm_calls == 1  # awaited (bug 13)
    assert "-----Sources-----" in system_of(requests_for(srv, "basic_answer")[0])


async def test_offline_basic_search_answers_from_sources() -> None:
    result = await BasicSearch(load(DULCE)).search("What happened at the Dulce base?")
    assert result.response and all(c.kind == "Sources" for c in result.citations) and result.citations
    assert not result.empty and result.details["retrieval"] == "hybrid"


@pytest.mark.parametrize("engine_cls", [LocalSearch, GlobalSearch, DriftSearch, BasicSearch])
async def test_stream_yields_progress_then_deltas_then_final_equal_to_search(engine_cls: Any) -> None:
    index = load(DULCE)
    engine = engine_cls(index)
    question = "Who is Alex Mercer?"
    events = [e async for e in engine.stream(question)]
    kinds = [type(e) for e in events]
    assert kinds[-1] is Final and kinds.count(Final) == 1
    first_delta = kinds.index(AnswerDelta)
    assert all(k in (Progress, ContextReady) for k in kinds[:first_delta])
    assert all(k is AnswerDelta for k in kinds[first_delta:-1])
    streamed = "".join(e.text for e in events if isinstance(e, AnswerDelta))
    final = events[-1].result
    assert streamed == final.response
    searched = await engine.search(question)
    assert searched.response == final.response
    assert searched.usage.total.llm_calls == final.usage.total.llm_calls
    if engine_cls is GlobalSearch:
        assert any(isinstance(e, Progress) and e.message.startswith("map batch ") for e in events)
    if engine_cls is DriftSearch:
        assert any(isinstance(e, Progress) and e.message.startswith("DRIFT depth 1 follow-up") for e in events)


@pytest.mark.parametrize("engine_cls", [LocalSearch, GlobalSearch, DriftSearch, BasicSearch])
async def test_bad_questions_are_refused_clearly(engine_cls: Any) -> None:
    engine = engine_cls(load(DULCE))
    with pytest.raises(ValueError, match="question is empty"):
        await engine.search("   ")
    with pytest.raises(ValueError, match="question is too long"):
        await engine.search("word " * 9000)


async def test_long_question_is_cut_for_linking_with_a_note() -> None:
    result = await LocalSearch(load(DULCE)).search("Who is Alex Mercer? " + "please explain in detail " * 300)
    assert any(d.stage == "entity_link" and "first 1000" in d.reason for d in result.degraded)


async def test_usage_totals_equal_sum_of_stages_for_every_engine() -> None:
    index = load(DULCE)
    for engine in (LocalSearch(index), BasicSearch(index), GlobalSearch(index, config=GlobalSearchConfig(
            dynamic_community_selection=True)), DriftSearch(index)):
        result = await engine.search("What is the mission at Dulce?")
        stages = result.usage.stages.values()
        total = result.usage.total
        assert total.llm_calls == sum(s.llm_calls for s in stages) > 0
        assert total.prompt_tokens == sum(s.prompt_tokens for s in stages)
        assert total.output_tokens == sum(s.output_tokens for s in stages)
        assert set(result.usage.stages) <= {"entity_link", "build_context", "rate", "map", "reduce", "primer",
                                            "followups", "answer"}


async def test_question_generator_returns_clean_labelled_candidates(srv: Any) -> None:
    script(srv, "questions", json.dumps({"questions": ["- Who is Fred?", "1. What does Fezziwig do?", "",
                                                      "- who is fred?"]}))
    gen = QuestionGenerator(load(CAROL), loopback_model(srv))
    result = await gen.generate(["Who is Scrooge?", "What about his nephew?"], n=3)
    assert [q.text for q in result.questions] == ["Who is Fred?", "What does Fezziwig do?"]
    (req,) = srv.chat_requests
    assert last_user(req) == "What about his nephew?" and "\nNumber of questions: 3\n" in system_of(req)
    assert "Who is Scrooge?" in system_of(req)  # earlier questions are history
    assert result.usage.total.llm_calls == 1
    # no labeller was given: the questions carry no engine, and the result says why
    assert [q.engine for q in result.questions] == [None, None]
    assert result.notes == [NO_LABELLER_NOTE]


async def test_offline_question_generation_with_and_without_history() -> None:
    gen = QuestionGenerator(load(DULCE))
    with_history = await gen.generate(["Who is Taylor Cruz?"], n=4)
    assert 1 <= len(with_history.questions) <= 4 and all(q.text.endswith("?") for q in with_history.questions)
    cold = await gen.generate([], n=3)
    assert cold.questions and cold.context_text


@pytest.mark.parametrize("engine_cls", [LocalSearch, BasicSearch])
async def test_gibberish_is_empty_even_when_embeddings_return_neighbours(engine_cls: Any) -> None:
    index = load(CAROL)
    nothing = await engine_cls(index).search("Qwxzy plimbok frandle?")
    assert nothing.empty  # the router escalates on this
    something = await engine_cls(index).search("Who is Bob Cratchit?")
    assert not something.empty
