"""A fanned-out question routed to global search is one global search over the reports of every covering index:
one map over their pre-ranked reports (ids qualified with their index) and ONE reduce, within the call budget, and
fewer calls than a global search on each index. Through the real client against the loopback model server, whose
map replies cite the reports each batch showed and whose reduce reply keeps the analysts' citations."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from multi_index_support import build_coop
from pydantic import SecretStr
from robust_support import MARKERS

from engines.config import GraphrouteConfig
from engines.models.config import ModelEndpoint, ModelsConfig
from router import Router
from router.budget import Budget
from router.fanout import IndexCitation, MultiRouter
from testing.model_server import LoopbackServer

QUESTION = "What did Ebenezer Scrooge and Elin Hargreaves each do?"  # names something of each index
_ROW_ID = re.compile(r"^(\w+:\d+)\|", re.MULTILINE)  # a report row starts with its id (index:number)
_CITED = re.compile(r"\[Data: Reports \(([^)]*)\)\]")


def _system(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body["messages"] if m.get("role") == "system")


def _map_reply(body: dict[str, Any]) -> str:
    """A point citing the first two reports the batch showed (their ids as written in its `id` column)."""
    ids = _ROW_ID.findall(_system(body).split("-----Reports-----", 1)[-1])[:2]
    return json.dumps({"points": [{"description": f"Finding [Data: Reports ({', '.join(ids)})]", "score": 70}]})


def _reduce_reply(body: dict[str, Any]) -> str:
    """The answer keeps every report the analysts cited."""
    ids = [i.strip() for group in _CITED.findall(_system(body)) for i in group.split(",") if ":" in i]
    return f"Both did much [Data: Reports ({', '.join(dict.fromkeys(ids))})]."


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(latency_ms=0) as srv:
        yield srv


@pytest.fixture(scope="module")
def multi(server: LoopbackServer, carol_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiRouter]:
    endpoint = ModelEndpoint(provider="openai", base_url=server.base_url, api_key=SecretStr("test"),
                             model="gpt-4.1-mini", max_retries=0)
    config = GraphrouteConfig(models=ModelsConfig(chat=endpoint))
    paths = {"carol": carol_path, "coop": build_coop(tmp_path_factory.mktemp("coop") / "coop")}
    with Router.from_indexes(paths, config, settings=False) as m:
        yield m


@pytest.fixture(autouse=True)
def scripted(server: LoopbackServer) -> None:
    server.reset()
    server.add_rule(None, system=MARKERS["global_map"], reply=_map_reply)
    server.add_rule(None, system=MARKERS["global_reduce"], reply=_reduce_reply)


def _calls(server: LoopbackServer, task: str) -> int:
    return sum(1 for r in server.chat_requests if re.search(MARKERS[task], _system(r.body)))


def test_one_reduce_over_both_indexes_citations_name_both(multi: MultiRouter, server: LoopbackServer) -> None:
    answer = multi.ask(QUESTION, mode="global")
    assert answer.engine == "global" and sorted(answer.route.index or []) == ["carol", "coop"], answer.route.reasons
    assert _calls(server, "global_reduce") == 1 and answer.usage.stages["reduce"].llm_calls == 1
    maps = _calls(server, "global_map")
    assert maps >= 2 and answer.usage.total.llm_calls == maps + 1
    shown = "\n".join(_system(r.body) for r in server.chat_requests if re.search(MARKERS["global_map"], _system(r.body)))
    assert "carol:" in shown and "coop:" in shown  # every report id carries its index
    cited = {c.index for c in answer.citations if isinstance(c, IndexCitation) and c.resolved}
    assert cited == {"carol", "coop"}, [c.to_dict() for c in answer.citations]
    assert all(c.text_unit_ids for c in answer.citations if c.resolved)
    assert any(r.startswith("one global search over the reports of carol, coop") for r in answer.route.reasons)


def test_the_call_budget_holds(multi: MultiRouter, server: LoopbackServer) -> None:
    answer = multi.ask(QUESTION, mode="global", budget=Budget(max_llm_calls=3))
    assert answer.engine == "global" and answer.usage.total.llm_calls <= 3
    assert _calls(server, "global_reduce") == 1 and _calls(server, "global_map") == 2
    # the two map calls are each index's best batch: both indexes are still read
    assert {c.index for c in answer.citations if isinstance(c, IndexCitation) and c.resolved} == {"carol", "coop"}


def test_fewer_calls_than_a_global_search_on_each_index(multi: MultiRouter, server: LoopbackServer) -> None:
    one = multi.ask(QUESTION, mode="global")
    each = [multi.ask(QUESTION, mode="global", index=n) for n in ("carol", "coop")]
    per_index = sum(a.usage.total.llm_calls for a in each)
    assert one.usage.total.llm_calls < per_index
    assert sum(a.usage.stages["reduce"].llm_calls for a in each) == 2 and one.usage.stages["reduce"].llm_calls == 1


def test_a_routed_themes_question_takes_the_same_path(multi: MultiRouter, server: LoopbackServer) -> None:
    """No mode: the best covering index routes the question to global search, so the fan-out is one global search
    over both indexes' pre-ranked reports, with one reduce, within the call budget."""
    question = "Summarise the overall themes across Scrooge and the Harrowmere Energy Cooperative."
    answer = multi.ask(question, budget=Budget(max_llm_calls=6))
    assert answer.engine == "global" and sorted(answer.route.index or []) == ["carol", "coop"], answer.route.reasons
    assert _calls(server, "global_reduce") == 1 and answer.usage.total.llm_calls <= 6
    assert any(r.startswith("one global search over the reports of") for r in answer.route.reasons)


def test_an_index_the_budget_leaves_unread_is_named(multi: MultiRouter, server: LoopbackServer) -> None:
    answer = multi.ask(QUESTION, mode="global", budget=Budget(max_llm_calls=2))  # one map call, one reduce
    assert answer.usage.total.llm_calls == 2 and answer.engine == "global"
    assert isinstance(answer.route.index, list) and len(answer.route.index) == 1
    assert any(d.startswith("not read, the call budget left no room: ") for d in answer.degraded)
