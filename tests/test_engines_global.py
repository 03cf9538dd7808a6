"""Global search on the loopback server (scripted replies) and on real indexes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fixture_paths import CAROL, DULCE
from test_engines_support import (
    last_user,
    load,
    loopback_model,
    map_reply,
    requests_for,
    script,
    srv,
    system_of,
)

from engines import GlobalSearch
from engines.config import GlobalSearchConfig
from engines.errors import EngineError
from engines.prompts import NO_DATA_ANSWER

__all__ = ["srv"]  # the fixture, re-exported so pytest finds it here
Q = "What are the main themes of the story?"


def _batches(index: Any, cfg: GlobalSearchConfig) -> int:
    return len(GlobalSearch(index, _NoModel(), config=cfg).builder.build(Q))


class _NoModel:
    """Satisfies the ChatModel protocol for engines built only to inspect batches; never called."""

    name = "none"
    offline = True

    async def complete(self, *a: Any, **k: Any) -> Any:
        raise AssertionError("no model call expected")

    def stream(self, *a: Any, **k: Any) -> Any:
        raise AssertionError("no model call expected")


async def test_one_map_call_per_batch_then_one_reduce_and_usage_matches_server(srv: Any) -> None:
    index = load(CAROL)
    cfg = GlobalSearchConfig(max_context_tokens=6000)
    script(srv, "global_map", map_reply(("Redemption is central [Data: Reports (1, 2)]", 80)))
    script(srv, "global_reduce", "The story is about redemption [Data: Reports (1, 2)].")
    engine = GlobalSearch(index, loopback_model(srv), config=cfg)
    n = _batches(index, cfg)
    result = await engine.search(Q)
    assert n > 1
    assert len(requests_for(srv, "global_map")) == n
    assert len(requests_for(srv, "global_reduce")) == 1
    assert result.usage.stages["map"].llm_calls == n and result.usage.stages["reduce"].llm_calls == 1
    total = result.usage.total
    assert total.llm_calls == sum(s.llm_calls for s in result.usage.stages.values()) == n + 1
    assert total.prompt_tokens == sum(r.prompt_tokens for r in srv.chat_requests)
    assert total.output_tokens == sum(r.completion_tokens for r in srv.chat_requests)
    assert total.cost > 0 and not total.estimated
    assert result.response.startswith("The story is about redemption")
    assert {c.id for c in result.citations} == {"1", "2"} and result.document_ids
    assert engine.estimate(Q).llm_calls == total.llm_calls
    # Every map request carries exactly one Reports table and the question as the last user message.
    for r in requests_for(srv, "global_map"):
        assert system_of(r).count("-----Reports-----") == 1 and last_user(r) == Q


async def test_reduce_keeps_every_point_when_they_exceed_one_budget(srv: Any) -> None:
    index = load(DULCE)
    cfg = GlobalSearchConfig(max_context_tokens=1500, data_max_tokens=150, concurrency=1)
    counter = {"n": 0}

    def points(_: dict[str, Any]) -> str:
        counter["n"] += 1
        b = counter["n"]
        return map_reply(*((f"Finding MARK-{b}-{j} about the operation [Data: Reports ({j})]", 10 + j) for j in range(3)))

    script(srv, "global_map", points)
    script(srv, "global_reduce", lambda body: "Merged " + " ".join(sorted(set(re.findall(r"MARK-\d+-\d", json.dumps(body))))))
    result = await GlobalSearch(index, loopback_model(srv), config=cfg).search(Q)
    marks = {f"MARK-{b}-{j}" for b in range(1, counter["n"] + 1) for j in range(3)}
    reduce_reqs = requests_for(srv, "global_reduce")
    first_level = [r for r in reduce_reqs if "Merged" not in system_of(r)]
    seen = set(re.findall(r"MARK-\d+-\d", " ".join(system_of(r) for r in first_level)))
    assert seen == marks  # no point dropped for lack of room
    info = result.details["reduce"]
    assert info["levels"] >= 2 and info["calls"] == len(reduce_reqs) > 1
    assert info["points_in"] == len(marks) and info["points_lost"] == 0
    assert result.usage.stages["reduce"].llm_calls == len(reduce_reqs)
    for r in reduce_reqs:  # each call within the budget (plus the fixed instructions)
        blocks = system_of(r).split("Analyst findings:\n\n", 1)[1]
        assert index.tokenizer.count(blocks) <= cfg.data_max_tokens + 5


async def test_garbage_map_batch_degrades_instead_of_failing(srv: Any) -> None:
    index = load(CAROL)
    cfg = GlobalSearchConfig(max_context_tokens=8000, concurrency=1, shuffle_data=False)
    good = map_reply(("Scrooge changes [Data: Reports (3)]", 70))
    script(srv, "global_map", ["this is not JSON at all", "still <not> json", good])
    script(srv, "global_reduce", "Answer [Data: Reports (3)]")
    result = await GlobalSearch(index, loopback_model(srv), config=cfg).search(Q)
    n = _batches(index, cfg)
    assert [d.stage for d in result.degraded] == ["map"]
    assert result.degraded[0].reason.startswith(f"batch 1/{n}:")
    assert result.response == "Answer [Data: Reports (3)]" and not result.empty
    # the failed batch made two calls (the reply and the corrective retry), both counted
    assert result.usage.stages["map"].llm_calls == n + 1 == len(requests_for(srv, "global_map"))


async def test_every_batch_failing_raises_an_error_naming_the_map_stage(srv: Any) -> None:
    script(srv, "global_map", "no json here")
    with pytest.raises(EngineError, match=r"stage map: all \d+ map batches failed") as info:
        await GlobalSearch(load(DULCE), loopback_model(srv)).search(Q)
    assert info.value.stage == "map"


async def test_all_zero_scores_give_no_data_answer_without_reduce(srv: Any) -> None:
    script(srv, "global_map", map_reply(("The reports do not say", 0)))
    result = await GlobalSearch(load(DULCE), loopback_model(srv)).search(Q)
    assert result.response == NO_DATA_ANSWER and result.empty
    assert requests_for(srv, "global_reduce") == [] and "reduce" not in result.usage.stages


async def test_index_without_reports_says_so_without_model_calls(srv: Any, graph_only_path: Path) -> None:
    result = await GlobalSearch(load(graph_only_path), loopback_model(srv)).search(Q)
    assert "no community reports" in result.response.lower() or "has none" in result.response
    assert result.empty and srv.chat_requests == []
    assert any("no community reports" in d.reason for d in result.degraded)


async def test_prerank_budget_caps_map_calls_and_estimate_matches(srv: Any) -> None:
    index = load(CAROL)
    static = GlobalSearchConfig(max_context_tokens=4000)
    ranked = GlobalSearchConfig(max_context_tokens=4000, prerank=True, max_map_calls=2)
    script(srv, "global_map", map_reply(("Ghosts visit Scrooge [Data: Reports (4)]", 60)))
    script(srv, "global_reduce", "Ghosts [Data: Reports (4)]")
    engine = GlobalSearch(index, loopback_model(srv), config=ranked)
    est = engine.estimate("Which ghosts visit Scrooge?")
    result = await engine.search("Which ghosts visit Scrooge?")
    maps = requests_for(srv, "global_map")
    assert len(maps) <= 2 and est.llm_calls == result.usage.total.llm_calls == len(maps) + 1
    read = sum(b["tokens"] for b in result.details["batches"])
    assert read < 0.5 * sum(b.tokens for b in GlobalSearch(index, _NoModel(), config=static).builder.build(Q))


async def test_dynamic_selection_descends_into_relevant_children(srv: Any) -> None:
    index = load(DULCE)
    level0 = [index.community_reports[p] for p in index.reports_by_level[0]]
    parent = next(r for r in level0 if any(c in index.report_pos for c in r.children))
    kids = [c for c in parent.children if c in index.report_pos]

    def rate(body: dict[str, Any]) -> str:
        system = "\n".join(m["content"] for m in body["messages"] if m["role"] == "system")
        row = re.search(r"-----Reports-----\nid\|title\|content\n(\d+)\|", system)
        assert row is not None
        community = int(row.group(1))
        return json.dumps({"reason": "r", "rating": 4 if community == parent.community or community in kids else 0})

    script(srv, "rate", rate)
    script(srv, "global_map", map_reply(("Point [Data: Reports (1)]", 50)))
    script(srv, "global_reduce", "Final [Data: Reports (1)]")
    cfg = GlobalSearchConfig(dynamic_community_selection=True)
    result = await GlobalSearch(index, loopback_model(srv), config=cfg).search(Q)
    sel = result.details["dynamic_selection"]
    assert sel["rated"] == len(level0) + len(kids) == len(requests_for(srv, "rate"))
    assert sorted(sel["selected"]) == sorted(kids)  # children replace their parent (keep_parent=False)
    assert result.usage.stages["rate"].llm_calls == sel["rated"]
    selected_in_batches = {c for b in result.details["batches"] for c in b["communities"]}
    assert selected_in_batches == set(kids)


async def test_unparseable_rating_is_a_degradation_and_keeps_the_report(srv: Any) -> None:
    index = load(DULCE)
    zero = json.dumps({"reason": "unrelated", "rating": 0})
    script(srv, "rate", ["I cannot rate this", "still not JSON", zero])  # the first report's two attempts fail
    script(srv, "global_map", map_reply(("Point [Data: Reports (1)]", 50)))
    script(srv, "global_reduce", "Final")
    cfg = GlobalSearchConfig(dynamic_community_selection=True, dynamic_max_level=0, concurrency=1)
    result = await GlobalSearch(index, loopback_model(srv), config=cfg).search(Q)
    first = index.community_reports[index.reports_by_level[0][0]].community
    assert result.details["dynamic_selection"]["selected"] == [first]
    assert [d.stage for d in result.degraded] == ["rate"] and f"report {first}" in result.degraded[0].reason


async def test_all_ratings_failing_is_an_error_naming_the_rate_stage(srv: Any) -> None:
    script(srv, "rate", "no")
    cfg = GlobalSearchConfig(dynamic_community_selection=True, dynamic_max_level=0)
    with pytest.raises(EngineError, match="stage rate: all 7 report ratings failed"):
        await GlobalSearch(load(DULCE), loopback_model(srv), config=cfg).search(Q)


async def test_general_knowledge_mode_still_reduces_and_asks_for_tags(srv: Any) -> None:
    script(srv, "global_map", map_reply(("Nothing relevant", 0)))
    script(srv, "global_reduce", "From general knowledge: Roswell is in New Mexico [LLM: verify].")
    cfg = GlobalSearchConfig(allow_general_knowledge=True)
    result = await GlobalSearch(load(DULCE), loopback_model(srv), config=cfg).search("Where is Roswell?")
    (req,) = requests_for(srv, "global_reduce")
    assert "[LLM: verify]" in system_of(req) and "----Analyst" not in system_of(req)
    assert result.response.endswith("[LLM: verify].") and result.empty
