"""Deadlines are a contract: every stage stops at the deadline, the rewrite and the
routing second opinion included; the answer is then the best partial result marked degraded, or a
`DeadlineExceeded` that carries the usage spent. Budget values that mean nothing are refused clearly."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from robust_support import loopback_router, responder, script_fault

from engines.errors import DeadlineExceeded
from router import Budget, BudgetError
from testing.model_server import Fault, LoopbackServer

# Seconds past the deadline a question may take to hand back: the router's own grace (1 s) plus CPU work that
# cannot be interrupted mid-way (context building), which is slow on a loaded 2-core machine.
GRACE = 2.5


@pytest.fixture
async def slow() -> AsyncIterator[LoopbackServer]:
    """Answers like the offline model, streaming slowly (about 15 s for a typical answer)."""
    with LoopbackServer(default_reply=responder(), tokens_per_s=15, stream_chunk_chars=4) as server:
        yield server


async def _ask(router: Any, question: str, **kw: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    try:
        return await router.aask(question, **kw), time.perf_counter() - t0
    finally:
        await router.models.aclose()


async def test_slow_answer_is_cut_at_the_deadline_and_marked_degraded(slow: LoopbackServer) -> None:
    router = loopback_router(slow)
    answer, took = await _ask(router, "Who is Bob Cratchit?", mode="local", budget=Budget(deadline_s=6.0))
    assert took < 6.0 + GRACE
    assert answer.text.strip(), "the part of the answer written before the deadline is kept"
    assert any("deadline" in d for d in answer.degraded)
    assert answer.usage.total.llm_calls == 1 and answer.usage.total.estimated  # the cut call is still counted


async def test_nothing_by_the_deadline_is_deadline_exceeded_with_usage() -> None:
    with LoopbackServer(default_reply=responder()) as server:
        script_fault(server, "local_answer", Fault("hang", hang_s=10))
        script_fault(server, "basic_answer", Fault("hang", hang_s=10))
        router = loopback_router(server)
        t0 = time.perf_counter()
        with pytest.raises(DeadlineExceeded) as caught:
            await _ask(router, "Who is Bob Cratchit?", mode="local", budget=Budget(deadline_s=1.0))
    assert time.perf_counter() - t0 < 1.0 + GRACE
    assert caught.value.usage is not None and caught.value.usage.total.llm_calls == 1
    assert "deadline of 1 s" in str(caught.value)


async def test_drift_keeps_its_findings_when_the_deadline_cuts_it() -> None:
    with LoopbackServer(default_reply=responder(), latency_ms=300) as server:
        router = loopback_router(server, concurrency=2)
        answer, took = await _ask(router, "How does Scrooge change over the story?", mode="drift",
                                  budget=Budget(deadline_s=4.0))
    assert took < 4.0 + GRACE
    assert answer.engine == "drift" and answer.text.strip()
    assert any("deadline" in d for d in answer.degraded)
    assert answer.usage.total.llm_calls >= 3  # the calls made before the deadline are not thrown away


async def test_follow_up_rewrite_stops_at_the_deadline() -> None:
    with LoopbackServer(default_reply=responder()) as server:
        script_fault(server, "rewrite", Fault("hang", hang_s=10))
        router = loopback_router(server)
        t0 = time.perf_counter()
        with pytest.raises(DeadlineExceeded) as caught:
            await _ask(router, "And what about his nephew?", history=["Who is Ebenezer Scrooge?"],
                       budget=Budget(deadline_s=1.0))
    assert time.perf_counter() - t0 < 1.0 + GRACE
    assert caught.value.usage is not None


async def test_routing_second_opinion_stops_at_the_deadline() -> None:
    with LoopbackServer(default_reply=responder()) as server:
        script_fault(server, "route", Fault("hang", hang_s=10))
        router = loopback_router(server, llm_classifier_threshold=1.0)  # always ask the model
        t0 = time.perf_counter()
        with pytest.raises(DeadlineExceeded):
            await _ask(router, "Who is Bob Cratchit?", budget=Budget(deadline_s=1.0))
    assert time.perf_counter() - t0 < 1.0 + GRACE


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, 0, "1", True, [1]])
def test_meaningless_budget_values_are_refused(bad: Any) -> None:
    for field in ("max_cost", "deadline_s", "max_llm_calls"):
        if field == "max_cost" and bad == 0:
            continue  # a zero cost budget is meaningful: offline only
        with pytest.raises(BudgetError, match=field):
            Budget(**{field: bad})
    assert Budget(max_cost=0, max_llm_calls=3, deadline_s=0.5).deadline_s == 0.5


def test_cli_deadline_is_one_line_and_non_zero(capsys: pytest.CaptureFixture[str], monkeypatch: Any,
                                              tmp_path: Any) -> None:
    from robust_support import CAROL

    from router.cli import main

    with LoopbackServer(default_reply=responder()) as server:
        script_fault(server, "local_answer", Fault("hang", hang_s=10))
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("GRAPHROUTE_CHAT_MODEL", "gpt-4.1-mini")
        config = tmp_path / "graphroute.toml"
        config.write_text('[models.embedding]\nprovider = "offline"\n', encoding="utf-8")
        code = main(["ask", "Who is Bob Cratchit?", "--index", str(CAROL), "--mode", "local", "--deadline", "1",
                     "--config", str(config)])
    err = capsys.readouterr().err.strip()
    assert code == 1, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "deadline of 1 s" in err
    # (the usage figure, when the call started before the deadline, is on the same line)
    assert "spent:" not in err or "spent: 1 model calls" in err
    assert main(["ask", "Who?", "--index", str(CAROL), "--deadline", "nan"]) == 2
    assert "finite" in capsys.readouterr().err


async def test_latency_estimate_learns_from_the_endpoint() -> None:
    from engines.latency import LATENCY, latency_key

    question = "Who is Bob Cratchit?"
    with LoopbackServer(default_reply=responder()) as server:
        router = loopback_router(server, warm=("local",))
        engine = router.engine("local")
        guess = engine.estimate(question)
        assert not guess.latency_known and guess.seconds_guess > 5  # the default figure for a remote model
        assert router.plan(question, "local", Budget(deadline_s=3.0))[0].chosen == "local"  # not refused on a guess
        await _ask(router, question, mode="local")
        learnt = engine.estimate(question)
        assert learnt.latency_known and learnt.seconds_guess < 3.0  # a loopback call takes well under a second
        key = latency_key(router.models.chat("answer"))
        for _ in range(64):  # the same endpoint turns slow: 30 s per answer
            LATENCY.observe(key, 30.0, 600)
        with pytest.raises(BudgetError, match="deadline"):
            router.plan(question, "local", Budget(deadline_s=3.0))
