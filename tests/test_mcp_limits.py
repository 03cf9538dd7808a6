"""The MCP server over HTTP with API keys keeps the service's daily limits per key (`[serve] max_calls_per_day`),
driven by the `mcp` package's client against `graphroute mcp --http` and the loopback model: a key past its
limit gets a tool error saying when the limit resets, another key still answers, a call without a key is
refused; with `[serve] redis_url` the ledger is the one the service's replicas keep in a real `redis-server`
(a key spent through the service is refused by the MCP server, and the MCP server's calls count there)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from engines.models.base import StageUsage, Usage
from engines.models.redis_link import RedisLink
from router.service.redis_admission import caller_ids
from router.service.spending import Spending
from testing.model_server import LoopbackServer
from testing.processes import RedisServer, mcp_http_server, missing_binaries

pytestmark = pytest.mark.asyncio(loop_scope="module")
KEY_A, KEY_B = "mcp-limit-key-a", "mcp-limit-key-b"
REPLY = "Bob Cratchit is Scrooge's clerk [Data: Sources (1)]."
CALLS_PER_DAY = 2
_missing = missing_binaries("redis-server")


@dataclass
class McpServer:
    url: str
    redis_url: str | None


def _config(path: Path, model: LoopbackServer, redis_url: str | None) -> Path:
    redis = f'redis_url = "{redis_url}"\nredis_prefix = "mcp-limits"\n' if redis_url else ""
    path.write_text(f"""
[models.chat]
base_url = "{model.base_url}"
api_key = "x"
model = "gpt-4.1"

[models.embedding]
provider = "offline"

[serve]
api_keys = ["{KEY_A}", "{KEY_B}"]
max_calls_per_day = {CALLS_PER_DAY}
{redis}""", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def model() -> Iterator[LoopbackServer]:
    with LoopbackServer(default_reply=REPLY) as server:
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def local_server(carol_path: Path, model: LoopbackServer,
                       tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpServer]:
    root = tmp_path_factory.mktemp("mcp-limits-local")
    config = _config(root / "graphroute.toml", model, None)
    async with mcp_http_server(root, "--config", str(config), "--index", f"carol={carol_path}") as url:
        yield McpServer(url, None)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_server(carol_path: Path, model: LoopbackServer,
                        tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[McpServer]:
    if _missing:
        pytest.skip("redis-server not installed (Debian: apt-get install redis-server)")
    root = tmp_path_factory.mktemp("mcp-limits-redis")
    with RedisServer() as redis:
        config = _config(root / "graphroute.toml", model, redis.url)
        async with mcp_http_server(root, "--config", str(config), "--index", f"carol={carol_path}") as url:
            yield McpServer(url, redis.url)


async def _asks(url: str, key: str | None, questions: list[str]) -> list[Any]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http, \
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120) as client:
        return [await client.call_tool("search_local", {"question": q}) for q in questions]


def _refused_until_midnight(result: Any) -> None:
    text = result.content[0].text
    assert result.is_error, text
    assert "[serve] max_calls_per_day" in text, text
    assert re.search(r"the limit resets at \d{4}-\d\d-\d\dT00:00:00Z", text), text


async def test_a_key_past_its_daily_calls_is_refused_until_the_day_resets(local_server: McpServer) -> None:
    answered = await _asks(local_server.url, KEY_A, ["Who is Bob Cratchit?", "Who is Jacob Marley?",
                                                     "Who is Fred?"])
    assert not answered[0].is_error and not answered[1].is_error, answered[0].content[0].text
    assert [r.structured_content["cost"]["llm_calls"] for r in answered[:2]] == [1, 1]
    _refused_until_midnight(answered[2])
    other = await _asks(local_server.url, KEY_B, ["Who is Tiny Tim?"])  # each key has its own day
    assert not other[0].is_error, other[0].content[0].text


async def test_a_call_without_a_configured_key_is_refused_when_limits_are_per_key(local_server: McpServer) -> None:
    for key in (None, "not-a-configured-key"):
        refused = (await _asks(local_server.url, key, ["Who is Bob Cratchit?"]))[0]
        assert refused.is_error and "daily limits are per API key" in refused.content[0].text


def _spent_calls(redis_url: str, key: str) -> int:
    import datetime as dt

    link = RedisLink(redis_url, "mcp-limits")
    try:
        day = dt.datetime.now(dt.UTC).date().isoformat()
        found = link.client.hget(link.key("spend", day, caller_ids([key])[0]), "calls")
        return int(found or 0)
    finally:
        link.close()


async def test_with_redis_the_mcp_server_and_the_service_keep_one_ledger(shared_server: McpServer) -> None:
    assert shared_server.redis_url is not None
    # the service's replicas spend key A's day (the same ledger a `serve` with this redis_url keeps) ...
    link = RedisLink(shared_server.redis_url, "mcp-limits")
    try:
        service_ledger = Spending(None, CALLS_PER_DAY, caller_ids([KEY_A, KEY_B]), link)
        held = service_ledger.reserve(0, cost=0.0, calls=CALLS_PER_DAY)
        held.settle(Usage({"answer": StageUsage(llm_calls=CALLS_PER_DAY)}))
    finally:
        link.close()
    # ... so the MCP server refuses it, while key B's call is counted where the service reads it
    refused = (await _asks(shared_server.url, KEY_A, ["Who is Bob Cratchit?"]))[0]
    _refused_until_midnight(refused)
    answered = (await _asks(shared_server.url, KEY_B, ["Who is Jacob Marley?"]))[0]
    assert not answered.is_error, answered.content[0].text
    paid = answered.structured_content["cost"]["llm_calls"]
    assert paid == 1 and _spent_calls(shared_server.redis_url, KEY_B) == paid
