"""The router earns its cost: it commits to DRIFT or global search only when sure enough for what they cost here,
asks the chat model once below that, starts local offline, escalates on an insufficient answer only where the index
holds evidence, fails fast when the model endpoint is down, and keeps questions about one document local.

Two small offline indexes are built here from documents written for these tests (`tests/data/routing_corpus`):
one earnings-call transcript (built with `graphroute index`, as a user would), and five short news articles whose
people and events connect across them. The questions were written for these tests as well.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engines.config import GraphrouteConfig, LocalSearchConfig, RouterConfig
from engines.estimate import CostEstimate
from engines.models.base import INSUFFICIENT_MARKER, MarkerFilter, split_marker
from engines.prompts import TASK_MARKERS, PromptTemplate
from router import Router
from router.budget import Budget
from router.classifier import ONE_SOURCE, RouteDecision, classify
from router.commitment import START_LOCAL, Verdict, commit, threshold
from router.router import Done, EngineEvent
from shared_context.index import Index
from testing.model_server import Fault, LoopbackServer

CORPUS = Path(__file__).resolve().parent / "data" / "routing_corpus"
ROUTE_MARKER = r"Engines: local, global, drift"
# An expensive route is always below the threshold: the tests of what happens below it need no particular wording.
# The index rule for DRIFT is off there: it would commit the spanning question whatever its threshold.
ALWAYS_BELOW = {"commit_cost_slack": 0.001, "commit_ceiling": 0.999, "commit_drift_on_index_evidence": False}

# Questions about one call, of the kinds that used to go to DRIFT: one speaker on a topic against an earlier
# period, two speakers answering an analyst, one unit's course, one segment's revenue and outlook in two clauses,
# and the impact of one acquisition on one measure.
ONE_CALL_QUESTIONS = [
    "What does Dana Whitfield say about component costs this quarter compared with the previous quarter?",
    "How did Dana Whitfield and Marcus Lee respond to Priya Raman's question about pricing pressure?",
    "How is the Home Robotics unit performing and how is it evolving?",
    "What was the revenue of the Cloud Services segment, and how fast do they expect it to grow?",
    "Discuss the impact of the Kestrel Vision acquisition on gross margin.",
    "How does Marcus Lee's view of the margin outlook compare with what he said about integration costs?",
    "Dana Whitfield 对零部件成本的看法与上一季度相比有什么变化？",
    "Dana Whitfield 和 Marcus Lee 如何回答 Priya Raman 关于价格压力的问题？",
    "Home Robotics 部门的表现如何，它正在如何发展？",
    "请讨论 Kestrel Vision 收购对毛利率的影响。",
]
# Needs the chain strike -> rerouted ships -> ore shortage, told in three different articles.
SPANNING = "How did Alice Moreau's strike lead to Bruno Tanaka's hiring freeze at Osterfeld Steelworks?"
# Names two people of the index, but most of what it asks about is in no article: local's context cannot cover it.
THIN = ("How did Alice Moreau's picket tactics influence Bruno Tanaka's pension negotiations and maintenance "
        "schedule?")
NONSENSE = "Purple giraffes compute the velocity of Tuesday's melodies?"


@pytest.fixture(scope="module")
def one_call(tmp_path_factory: pytest.TempPathFactory) -> Index:
    from router.cli import main
    from shared_context import load_index

    out = tmp_path_factory.mktemp("one_call") / "index"
    assert main(["index", str(CORPUS / "one_call"), "--out", str(out), "--no-progress"]) == 0
    return load_index(out)


@pytest.fixture(scope="module")
def harbour(tmp_path_factory: pytest.TempPathFactory) -> Index:
    from indexer import build_index
    from shared_context import load_index

    out = tmp_path_factory.mktemp("harbour") / "index"
    build_index(CORPUS / "harbour", out, progress=False)
    return load_index(out)


@pytest.fixture
def server() -> Iterator[LoopbackServer]:
    from benchmarks.bench_mock import OfflineResponder

    with LoopbackServer(default_reply=OfflineResponder()) as srv:
        yield srv


def _online(index: Index, base_url: str, *, timeout_s: float = 10.0, **router: Any) -> Router:
    """A Router whose every model call goes to `base_url` (the loopback server answers like the offline model)."""
    from pydantic import SecretStr

    from benchmarks.bench_mock import RelayedModels
    from engines.models.config import ModelEndpoint, ModelsConfig
    from engines.models.factory import build_embedder
    from engines.models.limiter import LimiterRegistry

    endpoint = ModelEndpoint(provider="openai", base_url=base_url, api_key=SecretStr("test"), model="gpt-4.1-mini",
                             timeout_s=timeout_s, max_retries=0, total_deadline_s=timeout_s)
    config = GraphrouteConfig(models=ModelsConfig(chat=endpoint), router=RouterConfig(**router))
    models = RelayedModels(config.models, index=index, embedder=build_embedder(ModelsConfig(), index),
                           limiter_registry=LimiterRegistry())
    return Router(index, config=config, models=models)


def _offline(index: Index, **router: Any) -> Router:
    return Router(index, config=GraphrouteConfig(router=RouterConfig(**router)))


async def _ask(router: Router, question: str, **kw: Any) -> Any:
    try:
        return await router.aask(question, **kw)
    finally:
        await router.models.aclose()


def _requests(server: LoopbackServer, marker: str) -> int:
    return sum(1 for r in server.chat_requests
               if any(m.get("role") == "system" and re.search(marker, str(m.get("content")))
                      for m in r.body["messages"]))


# ---- the commitment rule ------------------------------------------------------------------------------------


def test_the_threshold_grows_with_the_cost_ratio() -> None:
    config = RouterConfig()
    assert threshold(1.0, config) == config.llm_classifier_threshold  # as cheap as local: never held back
    assert threshold(11.0, config) == pytest.approx(1 - 2 / 11)
    assert threshold(21.0, config) == config.commit_ceiling == 0.9
    assert threshold(200.0, config) == config.commit_ceiling
    assert threshold(3.0, config) == config.llm_classifier_threshold  # 1 - 2/3 is below the floor


def _decision(engine: str, confidence: float) -> RouteDecision:
    rest = (1 - confidence) / 2
    return RouteDecision(engine=engine, confidence=confidence,  # type: ignore[arg-type]
                         probabilities={e: confidence if e == engine else rest for e in ("local", "global", "drift")},
                         reasons=["test"])


COSTS = {"local": CostEstimate(1, 3000, 500, 0.002, 2.0), "drift": CostEstimate(21, 90000, 9000, 0.05, 40.0)}


def test_commitment_commits_asks_or_starts_local_by_expected_cost() -> None:
    config = RouterConfig()
    needed = threshold(0.05 / 0.002, config)  # priced: the ratio of dollars (25x)
    assert needed == config.commit_ceiling
    sure = commit(_decision("drift", 0.95), COSTS, config, can_ask=True, budget=None)
    assert sure.verdict is Verdict.COMMIT and sure.decision.engine == "drift" and sure.ratio == 25
    unsure = _decision("drift", 0.8)
    asked = commit(unsure, COSTS, config, can_ask=True, budget=None)
    assert asked.verdict is Verdict.ASK and asked.decision.engine == "drift"
    offline = commit(unsure, COSTS, config, can_ask=False, budget=None)
    assert offline.verdict is Verdict.START_LOCAL and offline.decision.engine == "local"
    assert offline.decision.fallbacks == ("drift",) and "saving about 20 calls" in offline.decision.reasons[-1]
    tight = commit(unsure, COSTS, config, can_ask=True, budget=Budget(max_llm_calls=21))  # no room for the vote
    assert tight.verdict is Verdict.START_LOCAL and "budget leaves no room" in tight.decision.reasons[-1]
    cheap = commit(_decision("local", 0.5), COSTS, config, can_ask=False, budget=None)
    assert cheap.verdict is Verdict.COMMIT and cheap.decision.engine == "local"
    assert commit(_decision("local", 0.5), COSTS, config, can_ask=True, budget=None).verdict is Verdict.ASK


@pytest.mark.parametrize("question", ONE_CALL_QUESTIONS)
def test_questions_about_one_call_route_local_on_its_index(one_call: Index, question: str) -> None:
    decision = classify(question, one_call)
    assert decision.engine == "local", (question, decision.probabilities, decision.reasons)
    router = _offline(one_call)
    try:
        routed, _ = router.run(router.aroute(question))
    finally:
        router.close()
    assert routed.engine == "local"


def test_drift_wording_over_one_document_says_why_it_stays_local(one_call: Index) -> None:
    decision = classify(ONE_CALL_QUESTIONS[1], one_call)
    assert decision.method == ONE_SOURCE and decision.probabilities["drift"] == 0.0
    assert "the index holds one document" in decision.reasons[0]


async def test_a_question_whose_evidence_spans_documents_still_gets_drift(harbour: Index) -> None:
    decision = classify(SPANNING, harbour)
    assert decision.engine == "drift" and decision.signals["document_groups"] > 1
    answer = await _ask(_offline(harbour), SPANNING)
    assert answer.engine == "drift" and answer.route.method.endswith("+committed")
    assert "committed to drift" in answer.route.reasons[-1]
    assert answer.usage.total.llm_calls > 1 and not answer.escalations


async def test_the_index_commits_drift_below_its_threshold_when_evidence_spreads(harbour: Index) -> None:
    above_every_confidence = {k: v for k, v in ALWAYS_BELOW.items() if k != "commit_drift_on_index_evidence"}
    router = _offline(harbour, **above_every_confidence)
    router.config.drift.k_followups, router.config.drift.n_depth = 2, 1
    answer = await _ask(router, SPANNING)
    assert answer.engine == "drift" and answer.route.method.endswith("+committed") and not answer.escalations
    why = answer.route.reasons[-1]
    assert re.search(r"the index shows evidence spread over [2-9] documents", why), why
    assert "below the 1.00 of an engine" in why  # the wording's confidence did not reach the threshold


def test_the_index_rule_needs_two_named_things_and_spread_evidence(harbour: Index) -> None:
    from router.evidence_spread import drift_needed

    signals = classify(SPANNING, harbour).signals
    assert signals["specific_entities"] >= 2 and drift_needed(signals)
    assert not drift_needed({**signals, "specific_entities": 1.0, "named_documents": 0.0})
    assert not drift_needed({**signals, "unit_best_group_share": 0.8})  # the evidence sits in one document
    assert not drift_needed({**signals, "unit_groups": 1.0})
    assert not drift_needed({**signals, "document_groups": 1.0})  # a one-document index
    assert not drift_needed({k: v for k, v in signals.items() if k != "document_groups"})  # no index probed


# ---- the second opinion, where it pays --------------------------------------------------------------------


async def test_an_expensive_route_below_its_threshold_asks_once_and_is_corrected(
        harbour: Index, server: LoopbackServer) -> None:
    server.add_rule(None, system=ROUTE_MARKER, reply=json.dumps({"engine": "local", "reason": "one chain of facts"}))
    server.add_rule(None, system=TASK_MARKERS["local_answer"],
                    reply="The strike stopped the ore ships, so Bruno Tanaka froze hiring. [Data: Sources (1)]")
    answer = await _ask(_online(harbour, server.base_url, **ALWAYS_BELOW), SPANNING)
    assert _requests(server, ROUTE_MARKER) == 1
    assert answer.engine == "local" and answer.route.engine == "local"
    assert any("chat model was asked to confirm or correct" in r for r in answer.route.reasons)
    assert answer.route.reasons[-1] == "second opinion corrected drift to local"
    assert answer.usage.total.llm_calls == len(server.chat_requests) == 2 and not answer.escalations


async def test_a_confirmed_expensive_route_runs(harbour: Index, server: LoopbackServer) -> None:
    server.add_rule(None, system=ROUTE_MARKER, reply=json.dumps({"engine": "drift"}))
    router = _online(harbour, server.base_url, **ALWAYS_BELOW)
    router.config.drift.k_followups, router.config.drift.n_depth = 2, 1  # a handful of calls
    answer = await _ask(router, SPANNING)
    assert _requests(server, ROUTE_MARKER) == 1
    assert answer.engine == "drift" and answer.route.reasons[-1] == "second opinion confirmed drift"


# ---- offline: start local, escalate on an insufficient answer ---------------------------------------------


async def test_offline_an_expensive_route_below_threshold_starts_local_and_escalates(harbour: Index) -> None:
    router = _offline(harbour, **ALWAYS_BELOW)
    router.config.drift.k_followups, router.config.drift.n_depth = 2, 1
    answer = await _ask(router, THIN, budget=Budget(max_llm_calls=40))
    assert answer.route.engine == "local" and START_LOCAL in answer.route.method
    assert "started with local search" in answer.route.reasons[-1]
    step = answer.escalations[0]
    assert (step.from_engine, step.to_engine, step.calls) == ("local", "drift", 1)
    assert "does not answer the question" in step.reason
    assert answer.engine == "drift" and answer.usage.total.llm_calls > 1


async def test_a_custom_prompt_without_the_instruction_escalates_only_on_empty(harbour: Index) -> None:
    custom = PromptTemplate.checked("local", "Answer from these tables.\n\n{context_data}\n\n{response_type}")
    config = GraphrouteConfig(router=RouterConfig(**ALWAYS_BELOW), local=LocalSearchConfig(prompt=custom))
    answer = await _ask(Router(harbour, config=config), THIN)
    assert answer.engine == "local" and not answer.escalations  # the same question escalated with the default prompt
    assert answer.result is not None and not answer.result.insufficient


async def test_an_insufficient_answer_escalates_within_the_budget_and_both_steps_are_recorded(
        harbour: Index, server: LoopbackServer) -> None:
    server.add_rule(None, system=TASK_MARKERS["local_answer"],
                    reply=f"The tables only name her role.\n{INSUFFICIENT_MARKER}")
    router = _online(harbour, server.base_url)
    try:
        events = [ev async for ev in router.astream("Who is Rosa Lindqvist?", budget=Budget(max_llm_calls=30))]
    finally:
        await router.models.aclose()
    answer = events[-1].answer
    assert isinstance(events[-1], Done)
    streamed = "".join(e.event.text for e in events if isinstance(e, EngineEvent) and hasattr(e.event, "text"))
    assert INSUFFICIENT_MARKER not in streamed and "CONTEXT_INSUFFICIENT" not in answer.text
    assert [(e.from_engine, e.calls) for e in answer.escalations] == [("local", 1)]
    assert answer.escalations[0].to_engine in ("drift", "global") and answer.engine == answer.escalations[0].to_engine
    assert answer.usage.total.llm_calls == len(server.chat_requests) <= 30


def test_the_marker_filter_takes_the_mark_out_however_it_is_split() -> None:
    text = f"Answer text [Data: Sources (1)].\n{INSUFFICIENT_MARKER}\n"
    for size in (1, 3, 8, len(text)):
        marks = MarkerFilter()
        out = "".join(marks.feed(text[i:i + size]) for i in range(0, len(text), size)) + marks.flush()
        assert out == "Answer text [Data: Sources (1)].\n\n" and marks.found
    plain = MarkerFilter()
    assert plain.feed("a [[b") == "a [[b" and plain.feed(" [[CONT") == " " and plain.flush() == "[[CONT"
    assert not plain.found
    assert split_marker("no mark") == ("no mark", False)


# ---- escalation that spends only where it can help -------------------------------------------------------


@pytest.mark.parametrize("index_name", ["harbour", "one_call"])
async def test_a_question_the_index_has_no_evidence_for_costs_at_most_two_calls(
        index_name: str, request: pytest.FixtureRequest) -> None:
    index = request.getfixturevalue(index_name)
    answer = await _ask(_offline(index), NONSENSE)
    assert answer.usage.total.llm_calls <= 2
    assert all(e.to_engine == "basic" for e in answer.escalations)
    assert any("holds no evidence" in n for n in answer.notes)


async def test_an_endpoint_that_fails_fails_fast_naming_the_engine(harbour: Index, server: LoopbackServer) -> None:
    for mode in ("local", "auto"):
        server.reset()
        server.add_rule(None, fault=Fault("server_error"), reply="unused")
        started = time.perf_counter()
        with pytest.raises(Exception, match=r"local search") as caught:
            await _ask(_online(harbour, server.base_url), "Who is Rosa Lindqvist?", mode=mode)
        assert time.perf_counter() - started < 10
        assert len(server.chat_requests) == 1  # never retried through another engine on the same endpoint
        assert caught.value.usage is not None


async def test_an_unreachable_endpoint_fails_fast_naming_the_engine(harbour: Index) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.perf_counter()
    with pytest.raises(Exception, match=r"local search"):
        await _ask(_online(harbour, f"http://127.0.0.1:{port}/v1", timeout_s=2.0), "Who is Rosa Lindqvist?",
                   mode="local")
    assert time.perf_counter() - started < 10


def test_next_engines_spend_only_where_the_index_has_evidence() -> None:
    from router.escalation import has_evidence, next_engines

    named = replace(_decision("local", 0.9), signals={"specific_entities": 1.0})
    nothing = replace(_decision("local", 0.9), signals={"specific_entities": 0.0, "named_documents": 0.0})
    document = replace(nothing, signals={"named_documents": 1.0})
    assert has_evidence(document, 0.0)[0] and has_evidence(nothing, 1.0)[0]
    found, why = has_evidence(named, 0.67)  # one linked name whose words meet nothing else in one passage
    assert not found and "holds no evidence" in why
    assert has_evidence(replace(named, signals={"specific_entities": 2.0}), 0.0)[0]  # how two named things connect
    assert next_engines("local", named, empty=False, insufficient=True, evidence=True) == ("global_prerank",)
    held = replace(named, fallbacks=("drift",))
    assert next_engines("local", held, empty=False, insufficient=True, evidence=True) == ("drift",)
    assert next_engines("local", held, empty=False, insufficient=True, evidence=False) == ()
    assert next_engines("local", nothing, empty=True, insufficient=False, evidence=False) == ("basic",)
    assert next_engines("drift", named, empty=False, insufficient=True, evidence=True) == ()  # not a cheap step


def test_a_down_endpoint_is_told_from_a_reply_another_engine_could_fix() -> None:
    from engines.errors import EngineError
    from engines.models.errors import ModelResponseError, ModelUnavailableError, StructuredOutputError
    from router.escalation import endpoint_failure, worth_falling_back

    down = ModelUnavailableError("connection refused", base_url="http://x", model="m")
    try:
        raise EngineError("all 3 map batches failed", stage="map", engine="global") from down
    except EngineError as err:
        wrapped = err
    assert endpoint_failure(wrapped) and not worth_falling_back(wrapped)
    assert endpoint_failure(ModelResponseError("bad gateway", status_code=502))
    bad_json = StructuredOutputError("no JSON", completions=[], last_error="x")
    assert not endpoint_failure(bad_json) and worth_falling_back(bad_json)
    assert not worth_falling_back(ModelResponseError("no key", status_code=401))
