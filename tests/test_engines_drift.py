"""DRIFT search: score-ordered follow-ups, call bounds, independence between queries, degradation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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

from engines import DriftSearch
from engines.config import DriftSearchConfig
from engines.errors import EngineError

__all__ = ["srv"]
Q = "What is Operation Dulce about?"


def primer(score: int) -> str:
    return json.dumps({"intermediate_answer": f"Fold scored {score} [Data: Reports (1)]", "score": score,
                       "follow_up_queries": [f"F{score} q{j}?" for j in range(3)]})


def followup(body: dict[str, Any]) -> str:
    query = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
    children = {"F90 q0?": (20, ["C20 a?"]), "F90 q1?": (95, ["C95 a?", "C95 b?"])}
    score, kids = children.get(query, (60, []))
    return json.dumps({"response": f"About {query} [Data: Sources (1)]", "score": score, "follow_up_queries": kids})


async def test_followups_run_in_score_order_and_children_inherit_their_parents_score(srv: Any) -> None:
    script(srv, "drift_hyde", "A hypothetical report about the operation.")
    script(srv, "drift_primer", [primer(s) for s in (10, 90, 50, 30, 70)])
    script(srv, "drift_followup", followup)
    script(srv, "drift_reduce", "Final [Data: Reports (1); Sources (1)]")
    cfg = DriftSearchConfig(n_depth=2, k_followups=3, concurrency=1, primer_folds=5)
    result = await DriftSearch(load(DULCE), loopback_model(srv), config=cfg).search(Q)
    asked = [last_user(r) for r in requests_for(srv, "drift_followup")]
    assert asked == ["F90 q0?", "F90 q1?", "F90 q2?", "C95 a?", "C95 b?", "F70 q0?"]
    assert len(srv.chat_requests) == result.usage.total.llm_calls == 1 + 5 + 2 * 3 + 1 == cfg.max_llm_calls
    assert result.usage.stages["primer"].llm_calls == 6
    assert result.usage.stages["followups"].llm_calls == 6 and result.usage.stages["reduce"].llm_calls == 1
    assert result.response == "Final [Data: Reports (1); Sources (1)]"
    tree = {n["query"]: n for n in result.details["tree"]}
    assert tree["C95 a?"]["parent"] == tree["F90 q1?"]["id"] and tree["C95 a?"]["depth"] == 2
    assert tree["C20 a?"]["status"] == "pending"
    # The reduce gets analyst blocks (not a Python list repr), best score first.
    reduce_system = system_of(requests_for(srv, "drift_reduce")[0])
    assert "----Analyst 1----\nImportance Score: 95" in reduce_system and "['" not in reduce_system
    # Usage equals what the server reported, stage by stage summed.
    assert result.usage.total.prompt_tokens == sum(r.prompt_tokens for r in srv.chat_requests)
    assert result.usage.total.output_tokens == sum(r.completion_tokens for r in srv.chat_requests)


async def test_concurrency_setting_bounds_calls_in_flight() -> None:
    from testing.model_server import LoopbackServer

    seen = {}
    for limit in (2, 6):
        with LoopbackServer(latency_ms=200) as server:
            script(server, "drift_hyde", "hypothetical")
            script(server, "drift_primer", [primer(s) for s in (51, 52, 53, 54, 55)])  # 15 distinct follow-ups
            script(server, "drift_followup", followup)
            script(server, "drift_reduce", "done")
            cfg = DriftSearchConfig(concurrency=limit, k_followups=6, n_depth=1)
            await DriftSearch(load(DULCE), loopback_model(server), config=cfg).search(Q)
            seen[limit] = server.max_in_flight
            assert server.max_in_flight <= limit  # GraphRAG ignores the setting (bug 11)
    assert seen[2] == 2 and seen[6] > 2  # and the setting is really used for parallelism


async def test_failed_followup_degrades_and_the_answer_comes_from_the_rest(srv: Any) -> None:
    script(srv, "drift_hyde", "hypothetical")
    script(srv, "drift_primer", primer(50))
    # the follow-up and its corrective retry (whose last user message is the correction) both get garbage
    srv.add_rule(r"^F50 q1\?$|could not be used", system="You are answering one follow-up question", reply="garbage, not JSON")
    script(srv, "drift_followup", followup)
    script(srv, "drift_reduce", "Final answer")
    cfg = DriftSearchConfig(k_followups=3, n_depth=1, concurrency=1)
    result = await DriftSearch(load(DULCE), loopback_model(srv), config=cfg).search(Q)
    assert result.response == "Final answer"
    assert [d.stage for d in result.degraded] == ["followups"] and "F50 q1?" in result.degraded[0].reason
    assert result.details["followups_answered"] == 2


async def test_all_primer_folds_failing_is_an_error_naming_the_stage(srv: Any) -> None:
    script(srv, "drift_hyde", "hypothetical")
    script(srv, "drift_primer", "never JSON")
    with pytest.raises(EngineError, match="stage primer: all 5 primer folds failed"):
        await DriftSearch(load(DULCE), loopback_model(srv)).search(Q)


async def test_history_reaches_followups_but_not_the_primer(srv: Any) -> None:
    script(srv, "drift_hyde", "hypothetical")
    script(srv, "drift_primer", primer(50))
    script(srv, "drift_followup", followup)
    script(srv, "drift_reduce", "done")
    history = [{"role": "user", "content": "Tell me about Taylor Cruz"}, {"role": "assistant", "content": "Cruz leads."}]
    cfg = DriftSearchConfig(k_followups=2, n_depth=1)
    await DriftSearch(load(DULCE), loopback_model(srv), config=cfg).search(Q, history)
    assert all("Taylor Cruz" in system_of(r) for r in requests_for(srv, "drift_followup"))
    assert not any("Tell me about Taylor Cruz" in system_of(r) for r in requests_for(srv, "drift_primer"))


async def test_two_queries_on_one_engine_match_fresh_engines() -> None:
    index = load(DULCE)
    cfg = DriftSearchConfig(k_followups=3, n_depth=2)
    shared = DriftSearch(index, config=cfg)
    q2 = "What role does Taylor Cruz play?"
    first = await shared.search(Q)
    second = await shared.search(q2)
    fresh = await DriftSearch(index, config=cfg).search(q2)
    assert second.response == fresh.response and second.details["tree"] == fresh.details["tree"]
    assert first.response != second.response
    assert second.usage.total.llm_calls == fresh.usage.total.llm_calls <= cfg.max_llm_calls
    assert second.offline and second.model == "offline-extractive"


async def test_offline_drift_on_christmas_carol_is_cited_and_bounded() -> None:
    cfg = DriftSearchConfig(k_followups=3, n_depth=1)  # the default bound is checked on the loopback server
    result = await DriftSearch(load(CAROL), config=cfg).search("How does Scrooge change over the story?")
    assert result.usage.total.llm_calls <= cfg.max_llm_calls
    assert result.citations and not result.unresolved_citations and result.document_ids
    assert result.details["report_similarity"] in {"vector", "lexical"}
    assert not result.empty and not result.degraded


async def test_index_without_reports_starts_followups_from_the_question(
    srv: Any, graph_only_path: Path
) -> None:
    script(srv, "drift_followup", followup)
    script(srv, "drift_reduce", "done")
    result = await DriftSearch(load(graph_only_path), loopback_model(srv)).search("Who is Bob Cratchit?")
    assert [last_user(r) for r in requests_for(srv, "drift_followup")] == ["Who is Bob Cratchit?"]
    assert any("no community reports" in d.reason for d in result.degraded) and result.response == "done"


async def test_concurrent_queries_on_one_engine_do_not_interfere() -> None:
    import asyncio

    index = load(DULCE)
    cfg = DriftSearchConfig(k_followups=2, n_depth=1)
    engine = DriftSearch(index, config=cfg)
    q2 = "What role does Taylor Cruz play?"
    together = await asyncio.gather(engine.search(Q), engine.search(q2))
    alone = [await DriftSearch(index, config=cfg).search(q) for q in (Q, q2)]
    for a, b in zip(together, alone, strict=True):
        assert a.response == b.response and a.details["tree"] == b.details["tree"]
        assert a.usage.total.llm_calls == b.usage.total.llm_calls
