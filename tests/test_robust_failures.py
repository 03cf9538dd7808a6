"""Failures keep their usage and fall back: empty answers are never silent,
a failed rewrite is skipped, an engine whose structured output fails falls back to one that needs no
JSON and says so, and every error raised carries the usage spent. Reasoning blocks never reach answers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from robust_support import loopback_router, responder, script_fault, script_reply

from engines.errors import EngineError
from engines.models.errors import ModelError
from router.router import Done, EngineEvent
from testing.model_server import Fault, LoopbackServer

FOLLOW_UP = ("And what about his nephew?", ["Who is Ebenezer Scrooge?"])


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    with LoopbackServer(default_reply=responder()) as srv:
        yield srv


async def _ask(router: Any, question: str, **kw: Any) -> Any:
    try:
        return await router.aask(question, **kw)
    finally:
        await router.models.aclose()


@pytest.mark.parametrize("task,mode", [("local_answer", "local"), ("global_reduce", "global")])
async def test_empty_answer_is_degraded_and_escalated(server: LoopbackServer, task: str, mode: str) -> None:
    script_reply(server, task, "")
    answer = await _ask(loopback_router(server, warm=()), "Who is Bob Cratchit?", mode=mode)
    assert any("empty answer" in d for d in answer.degraded)
    assert answer.escalations and answer.escalations[0].from_engine == mode
    assert answer.text.strip(), "the engine escalated to answered"


async def test_empty_basic_answer_says_so(server: LoopbackServer) -> None:
    script_reply(server, "basic_answer", "")
    answer = await _ask(loopback_router(server, warm=()), "Who is Bob Cratchit?", mode="basic")
    assert answer.text == "" and any("empty answer" in d for d in answer.degraded)
    assert answer.result is not None and answer.result.empty


async def test_reasoning_blocks_never_reach_the_answer_or_its_stream(server: LoopbackServer) -> None:
    script_reply(server, "local_answer", "<think>secret plan: mention nothing</think>\nBob Cratchit is the clerk.")
    router = loopback_router(server, warm=())
    try:
        events = [ev async for ev in router.astream("Who is Bob Cratchit?", mode="local")]
    finally:
        await router.models.aclose()
    streamed = "".join(e.event.text for e in events if isinstance(e, EngineEvent) and hasattr(e.event, "text"))
    answer = events[-1].answer
    assert isinstance(events[-1], Done)
    assert answer.text == "Bob Cratchit is the clerk." and streamed.strip() == answer.text
    assert "secret" not in streamed


REWRITE_FAULTS = {
    "429": Fault("rate_limit", retry_after=0),
    "500": Fault("server_error"),
    "timeout": Fault("hang", hang_s=8),
}
REWRITE_REPLIES = {
    "invalid json": "I think he means Fred.",
    "wrong schema": '{"answer": "Fred"}',
    "truncated json": '{"question": "Who is Sc',
}


@pytest.mark.parametrize("case", [*REWRITE_FAULTS, *REWRITE_REPLIES])
async def test_a_failed_rewrite_is_skipped(server: LoopbackServer, case: str) -> None:
    if case in REWRITE_FAULTS:
        script_fault(server, "rewrite", REWRITE_FAULTS[case])
    else:
        script_reply(server, "rewrite", REWRITE_REPLIES[case])
    router = loopback_router(server, warm=(), timeout_s=2.5)
    question, history = FOLLOW_UP
    answer = await _ask(router, question, history=history, mode="local")
    assert answer.standalone_question == question  # never "Who is Sc"
    assert any(d.startswith("rewrite: failed") for d in answer.degraded)
    assert answer.text.strip()


async def test_invalid_map_json_falls_back_to_an_engine_without_json(server: LoopbackServer) -> None:
    script_reply(server, "global_map", "Here are my points: the story is about redemption.")
    answer = await _ask(loopback_router(server, warm=()), "What are the main themes of the story?", mode="global")
    assert answer.engine == "local"
    assert answer.escalations[0].from_engine == "global" and "needs no JSON" in answer.escalations[0].reason
    assert any("global search failed" in d for d in answer.degraded)
    map_calls = len([r for r in server.chat_requests if "community reports" in str(r.body["messages"][0])])
    assert answer.usage.stages["map"].llm_calls == map_calls > 0  # the failed engine's calls are kept
    assert answer.usage.total.llm_calls == len(server.chat_requests)


# "{oops" repairs to ['oops'] and "{}" to an object with no field: both used to read as "no points found".
@pytest.mark.parametrize("bad_map_reply", ["no JSON here", "{oops", "{}", '{"points": [{"description": "B'])
async def test_unusable_map_json_is_an_engine_error_carrying_usage(server: LoopbackServer, bad_map_reply: str) -> None:
    from engines import GlobalSearch

    script_reply(server, "global_map", bad_map_reply)
    router = loopback_router(server, warm=())
    try:
        with pytest.raises(EngineError, match=r"all .* map batches failed") as caught:
            await GlobalSearch(router.index, router.models, config=router.config.global_search).search(
                "What are the main themes of the story?")
    finally:
        await router.models.aclose()
    assert caught.value.usage.total.llm_calls == len(server.chat_requests) > 0


async def test_when_every_engine_fails_the_error_carries_all_usage(server: LoopbackServer) -> None:
    script_reply(server, "global_map", "no JSON here")
    script_fault(server, "local_answer", Fault("server_error"))
    script_fault(server, "basic_answer", Fault("server_error"))
    router = loopback_router(server, warm=())
    with pytest.raises((EngineError, ModelError)) as caught:
        await _ask(router, "What are the main themes of the story?", mode="global")
    usage = caught.value.usage
    assert usage is not None and usage.stages["map"].llm_calls > 0
    assert usage.total.llm_calls >= len([r for r in server.chat_requests if r.status == 200])


async def test_truncated_question_list_keeps_only_whole_questions(server: LoopbackServer) -> None:
    from engines import QuestionGenerator

    script_reply(server, "questions", '{"questions": ["Who is Fred?", "Why does Scrooge ch')
    router = loopback_router(server, warm=())
    try:
        result = await QuestionGenerator(router.index, router.models, config=router.config.questions).generate(
            ["Who is Scrooge?"], n=3)
    finally:
        await router.models.aclose()
    assert [q.text for q in result.questions] == ["Who is Fred?"]
