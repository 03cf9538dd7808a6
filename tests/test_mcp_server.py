"""`graphroute mcp` driven by the official MCP SDK's own client over stdio: the tools are listed, questions are
asked (routed and forced) and routed, entities and community reports are read, errors follow the protocol
and a long ask reports progress."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from fixture_paths import CAROL, DULCE

pytestmark = [pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_", "GRAPHROUTE_"))}
    env["GRAPHROUTE_CACHE_DIR"] = str(tmp_path_factory.mktemp("mcp-cache"))
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "router.cli", "mcp", "--index", f"carol={CAROL}", "--index", f"dulce={DULCE}"],
        env=env,
        cwd=str(tmp_path_factory.mktemp("mcp-cwd")),  # no graphroute.toml there
    )
    # The client's task group must be entered and left in one task: a task of its own holds it open.
    ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    done = asyncio.Event()

    async def hold() -> None:
        try:
            async with Client(params, read_timeout_seconds=120) as connected:
                ready.set_result(connected)
                await done.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            raise

    holder = asyncio.create_task(hold())
    yield await ready
    done.set()
    await holder


async def test_the_tools_are_listed_with_their_schemas(client: Any) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"ask", "route", "search_local", "search_global", "search_basic", "entity", "list_indexes"}
    ask = tools["ask"]
    assert set(ask.input_schema["properties"]) == {"question", "index", "mode", "max_cost", "max_calls",
                                                   "deadline_s", "history", "scope_documents", "scope_globs",
                                                   "scope_where"}
    assert ask.input_schema["required"] == ["question"]
    assert {"answer", "engine", "route", "citations", "cost"} <= set(ask.output_schema["properties"])
    assert tools["route"].annotations.read_only_hint is True


async def test_ask_routes_and_answers_with_citations_and_cost(client: Any) -> None:
    result = await client.call_tool("ask", {"question": "Who is Bob Cratchit?"})
    assert not result.is_error
    data = result.structured_content
    assert data["index"] == "carol" and data["engine"] == "local" and data["route"]["engine"] == "local"
    assert data["route"]["method"] != "forced" and data["route"]["reasons"]
    assert "Cratchit" in data["answer"] and data["offline"] is True
    assert data["citations"] and all(c["resolved"] for c in data["citations"])
    assert data["cost"]["llm_calls"] == 1 and data["cost"]["cost_usd"] == 0.0
    text = result.content[0].text
    assert text.startswith(data["answer"]) and "engine: local (route: local" in text and "cost: 1 model calls" in text


async def test_forced_engines_and_a_second_index(client: Any) -> None:
    result = await client.call_tool("search_global", {"question": "What are the main themes of the story?",
                                                       "index": "carol"})
    data = result.structured_content
    assert data["engine"] == "global" and data["route"]["method"] == "forced"
    assert data["cost"]["llm_calls"] >= 2  # map batches and the reduce
    basic = (await client.call_tool("search_basic", {"question": "Who is Alex Mercer?", "index": "dulce"}))
    assert basic.structured_content["engine"] == "basic" and basic.structured_content["index"] == "dulce"
    assert "Mercer" in basic.structured_content["answer"]
    local = await client.call_tool("ask", {"question": "Who is Alex Mercer?", "index": "dulce", "mode": "local"})
    assert local.structured_content["engine"] == "local"


async def test_route_decides_without_a_model_call(client: Any) -> None:
    result = await client.call_tool("route", {"question": "What are the main themes of the story?", "index": "carol",
                                              "max_calls": 1})
    data = result.structured_content
    assert data["route"]["engine"] == "global" and data["engine"] == "local" and data["stepped_down"] is True
    assert [(s["engine"], s["prerank"]) for s in data["plan"]] == [("global", False), ("global", True),
                                                                   ("local", False)]
    assert data["plan"][0]["fits"] is False and "calls" in data["plan"][0]["why_not"]
    assert result.content[0].text.startswith("engine: local (route: global")


async def test_route_takes_a_scope_as_ask_does(client: Any) -> None:
    """The route tool's scope: routing considers only the indexes holding documents in it, and says what it held."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert {"scope_documents", "scope_globs", "scope_where"} <= set(tools["route"].input_schema["properties"])
    held = (await client.call_tool("route", {"question": "Who is the main character?",
                                             "scope_globs": ["a-christmas-carol*"]})).structured_content
    assert held["index"] == "carol"
    assert any(r.startswith("scope (matching a-christmas-carol*)") and "1 of 1 documents" in r
               for r in held["route"]["reasons"]), held["route"]["reasons"]
    empty = (await client.call_tool("route", {"question": "Who is the main character?",
                                              "scope_where": {"year": 1999}})).structured_content
    assert "scope (where year = 1999): no index holds a document in it" in empty["route"]["reasons"]


async def test_entity_with_relationships_and_sources(client: Any) -> None:
    result = await client.call_tool("entity", {"name": "Bob Cratchit"})
    data = result.structured_content
    assert data["title"] == "BOB CRATCHIT" and data["matched"] == "exact"
    assert data["relationships"] and all("BOB CRATCHIT" in (r["source"], r["target"]) for r in data["relationships"])
    assert data["sources"] and data["source_count"] >= len(data["sources"])
    assert data["relationship_count"] >= len(data["relationships"])
    closest = (await client.call_tool("entity", {"name": "cratchit's clerk Bob"})).structured_content
    assert closest["matched"] == "closest" and closest["title"]


async def test_indexes_and_report_resources(client: Any) -> None:
    listed = (await client.call_tool("list_indexes", {})).structured_content["indexes"]
    assert [(i["name"], i["default"]) for i in listed] == [("carol", True), ("dulce", False)]
    assert listed[0]["community_reports"] > 0
    resources = {str(r.uri) for r in (await client.list_resources()).resources}
    assert resources == {"graphroute://carol/reports", "graphroute://dulce/reports"}
    import json

    reports = json.loads((await client.read_resource("graphroute://dulce/reports")).contents[0].text)["reports"]
    first = reports[0]
    report = (await client.read_resource(first["uri"])).contents[0]
    assert report.text.startswith(f"# {first['title']}")
    templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
    assert templates == ["graphroute://{index}/reports/{community}"]


async def test_errors_follow_the_protocol(client: Any) -> None:
    from mcp.shared.exceptions import MCPError

    unknown = await client.call_tool("ask", {"question": "Who is Scrooge?", "index": "nope"})
    assert unknown.is_error and "unknown index 'nope' (indexes: carol, dulce)" in unknown.content[0].text
    empty = await client.call_tool("ask", {"question": "   "})
    assert empty.is_error and "empty" in empty.content[0].text
    budget = await client.call_tool("ask", {"question": "Who is Scrooge?", "max_cost": -1})
    assert budget.is_error and "max_cost" in budget.content[0].text
    bad_mode = await client.call_tool("ask", {"question": "Who is Scrooge?", "mode": "fast"})
    assert bad_mode.is_error
    with pytest.raises(MCPError) as err:
        await client.read_resource("graphroute://carol/reports/999999")
    assert "no report for community '999999'" in err.value.message


async def test_a_long_ask_reports_progress(client: Any) -> None:
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    result = await client.call_tool("ask", {"question": "What are the main themes of the story?", "mode": "drift",
                                            "index": "carol"},
                                    progress_callback=on_progress)
    assert result.structured_content["engine"] == "drift"
    messages = [m or "" for _, m in seen]
    assert messages[0].startswith("route: drift") and any("primer fold" in m for m in messages)
    assert [p for p, _ in seen] == sorted(p for p, _ in seen)


async def test_streamable_http(tmp_path: Path) -> None:
    import socket
    import subprocess

    from mcp import Client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_", "GRAPHROUTE_"))}
    env["GRAPHROUTE_CACHE_DIR"] = str(tmp_path / "cache")
    proc = subprocess.Popen([sys.executable, "-m", "router.cli", "mcp", "--http", "--port", str(port),
                             "--index", f"dulce={DULCE}"], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stderr.readline), 120)
        assert line.startswith(f"graphroute mcp: dulce on http://127.0.0.1:{port}/mcp"), line
        for _ in range(100):  # uvicorn listens just after the line
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                await asyncio.sleep(0.1)
        async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=120) as http_client:
            names = {t.name for t in (await http_client.list_tools()).tools}
            assert "ask" in names and "route" in names
            result = await http_client.call_tool("ask", {"question": "Who is Alex Mercer?"})
        assert result.structured_content["index"] == "dulce" and "Mercer" in result.structured_content["answer"]
        # no authentication, so only this machine's programs: the policy `graphroute serve` keeps without keys
        import httpx

        hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as raw:
            rebound = await raw.post("/mcp", json=hello, headers={"Host": "attacker.example"})
            assert rebound.status_code == 421 and rebound.json()["error"]["code"] == "invalid_host"
            cross = await raw.post("/mcp", json=hello, headers={"Origin": "https://attacker.example"})
            assert cross.status_code == 403
            form = await raw.post("/mcp", content=b"x=1", headers={"Content-Type": "text/plain"})
            assert form.status_code == 415
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()
