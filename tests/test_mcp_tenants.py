"""The MCP server over HTTP with API keys bound to indexes: a key sees only its indexes (listing, resources,
instructions), another index is unknown in the words a missing one gets, and index routing never picks it;
with no index named, a question goes to the index that covers it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from multi_index_support import build_garden

from testing.processes import mcp_http_server

pytestmark = pytest.mark.asyncio(loop_scope="module")
GARDEN_ONLY = "mcp-key-garden"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def server_url(carol_path: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[str]:
    root = tmp_path_factory.mktemp("mcp-tenants")
    garden = build_garden(root / "garden")
    (root / "graphroute.toml").write_text(f'[serve.key_indexes]\n"{GARDEN_ONLY}" = ["garden"]\n', encoding="utf-8")
    async with mcp_http_server(root, "--index", f"carol={carol_path}", "--index", f"garden={garden}") as url:
        yield url


async def _with_key(url: str, key: str | None, calls: Any) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http, \
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120) as client:
        return await calls(client)


async def test_a_bound_key_sees_only_its_index(server_url: str) -> None:
    async def calls(client: Any) -> dict[str, Any]:
        listed = (await client.call_tool("list_indexes", {})).structured_content["indexes"]
        resources = [str(r.uri) for r in (await client.list_resources()).resources]
        hidden = await client.call_tool("ask", {"question": "Who is Bob Cratchit?", "index": "carol"})
        missing = await client.call_tool("ask", {"question": "Who is Bob Cratchit?", "index": "nosuchindex"})
        routed = (await client.call_tool("route", {"question": "Who is Bob Cratchit?"})).structured_content
        entity = await client.call_tool("entity", {"name": "Bob Cratchit", "index": "carol"})
        return {"listed": listed, "resources": resources, "hidden": hidden, "missing": missing, "routed": routed,
                "entity": entity}

    got = await _with_key(server_url, GARDEN_ONLY, calls)
    assert [i["name"] for i in got["listed"]] == ["garden"]
    assert not any("carol" in uri for uri in got["resources"])
    assert got["hidden"].is_error and got["missing"].is_error and got["entity"].is_error
    assert got["hidden"].content[0].text.replace("carol", "nosuchindex") == got["missing"].content[0].text
    assert "carol" not in got["hidden"].content[0].text.replace("'carol'", "")
    assert got["routed"]["index"] == "garden" and "carol" not in str(got["routed"]).lower()


async def test_without_a_key_nothing_is_available(server_url: str) -> None:
    async def calls(client: Any) -> Any:
        return (await client.call_tool("list_indexes", {})).structured_content["indexes"], \
            await client.call_tool("ask", {"question": "Who is Bob Cratchit?"})

    listed, ask = await _with_key(server_url, None, calls)
    assert listed == [] and ask.is_error and "no index is available" in ask.content[0].text
