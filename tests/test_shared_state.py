"""What replicas share through Redis, checked piece by piece against a real `redis-server` on a free loopback
port: admission over two replicas' counts with leases, the daily spending ledger (cost and calls, reserved
from the estimate, settled with the real cost, a late settlement sent when Redis is back), the model-call
cache with the sqlite cache's hits, and a service without `redis_url` that counts alone (its spending limit
included) and says when it is ready. tests/test_replicas.py runs the same over HTTP with real replicas."""

from __future__ import annotations

import datetime as dt
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from engines.config import GraphrouteConfig, ServeConfig
from engines.models.base import Completion, StageUsage, Usage
from engines.models.cache import ModelCallCache
from engines.models.config import models_config_from_mapping
from engines.models.redis_cache import RedisCallCache
from engines.models.redis_link import RedisLink, redacted_url
from router.router import Router
from router.service import Service
from router.service.redis_admission import RedisAdmission
from router.service.server import ServiceThread
from router.service.spending import Spending, SpendingLimitExceeded
from shared_context.index import Index
from testing.model_server import LoopbackServer
from testing.processes import RedisServer, missing_binaries

_missing = missing_binaries("redis-server")
if _missing:
    print("test_shared_state: the Redis tests are skipped on this platform: redis-server is not installed "
          "(Debian: apt-get install redis-server)")
needs_redis = pytest.mark.skipif(bool(_missing), reason="redis-server not installed")
REPLY = "Bob Cratchit is Scrooge's clerk [Data: Sources (1)]."


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    if _missing:
        pytest.skip("redis-server not installed")
    with RedisServer() as server:
        yield server


@pytest.fixture
def link(redis_server: RedisServer, request: pytest.FixtureRequest) -> Iterator[RedisLink]:
    own = RedisLink(redis_server.url, prefix=f"t-{request.node.name}")  # a prefix per test: nothing shared
    yield own
    own.close()


def _usage(cost: float, calls: int, cached: int = 0) -> Usage:
    return Usage({"answer": StageUsage(llm_calls=calls, cached_calls=cached, cost=cost)})


@needs_redis
def test_admission_counts_every_replica_and_a_dead_replicas_slots_come_back(link: RedisLink) -> None:
    a = RedisAdmission(link, ["key-1", "key-2"], limit=3, per_key_limit=2, lease_s=1.0)
    b = RedisAdmission(link, ["key-2", "key-1"], limit=3, per_key_limit=2, lease_s=1.0)  # keys in another order
    assert a.enter(0) is None and b.enter(1) is None  # key-1 on each replica
    assert a.enter(0) == "key" and b.enter(1) == "key"  # key-1's limit of 2 counts both replicas
    assert b.enter(0) is None  # key-2
    assert a.enter(1) == "server"  # three in flight over the two replicas
    b.leave(0)
    assert a.enter(1) is None
    # replica a dies holding two; its slots come back when its lease ends, not before
    assert b.enter(0) == "server"
    time.sleep(1.2)
    assert b.enter(0) is None and b.enter(0) is None
    assert b.in_flight() == 3


@needs_redis
def test_a_renewed_lease_keeps_the_slots_and_rewrites_a_lost_row(link: RedisLink) -> None:
    a = RedisAdmission(link, [], limit=2, per_key_limit=2, lease_s=1.0)
    b = RedisAdmission(link, [], limit=2, per_key_limit=2, lease_s=1.0)
    assert a.enter(0) is None and a.enter(0) is None
    link.client.delete(link.key("admission", a.replica))  # as if Redis restarted empty
    a.renew(link.client)
    assert b.enter(0) == "server"
    for _ in range(3):  # a live replica's slots outlive its lease while it renews
        time.sleep(0.5)
        a.renew(link.client)
    assert b.enter(0) == "server"
    a.leave(0)
    assert b.enter(0) is None


@needs_redis
def test_spending_reserves_the_estimate_and_settles_the_real_cost(link: RedisLink) -> None:
    replica_a = Spending(1.00, None, ["key"], link, lease_s=5)
    replica_b = Spending(1.00, None, ["key"], link, lease_s=5)
    first = replica_a.reserve(0, cost=0.40, calls=2)
    second = replica_b.reserve(0, cost=0.40, calls=2)
    with pytest.raises(SpendingLimitExceeded) as refused:  # 0.80 held + 0.40 > 1.00, whichever replica
        replica_a.reserve(0, cost=0.40, calls=1)
    assert "[serve] max_cost_per_day" in str(refused.value) and "$0.8000 more" in str(refused.value)
    reset = refused.value.resets_at
    assert reset.tzinfo == dt.UTC and (reset.hour, reset.minute) == (0, 0)
    assert reset.strftime("%Y-%m-%dT%H:%M:%SZ") in str(refused.value)
    first.settle(_usage(0.10, 2))  # it cost less than estimated: the difference is free again
    second.settle(_usage(0.10, 1, cached=1))
    third = replica_b.reserve(0, cost=0.70, calls=1)
    third.settle(None)  # unknown (a client that left): its estimate counts
    ledger = link.client.hgetall(link.key("spend", first.day, "key"))
    assert float(ledger[b"cost"]) == pytest.approx(0.90) and int(ledger[b"calls"]) == 3  # the cached call is free
    with pytest.raises(SpendingLimitExceeded):
        replica_a.reserve(0, cost=0.20, calls=1)
    replica_a.reserve(0, cost=0.05, calls=1)  # what is left still fits a cheaper question


@needs_redis
def test_a_call_limit_and_a_late_settlement_after_an_outage(redis_server: RedisServer) -> None:
    link = RedisLink(redis_server.url, prefix="t-late", retry_s=0.1)
    spending = Spending(None, 3, ["key"], link, lease_s=5)
    held = spending.reserve(0, cost=0.0, calls=2)
    redis_server.stop(signal.SIGKILL)
    try:
        held.settle(_usage(0.0, 2))  # Redis is down: kept, and counted in this replica's own ledger
        assert not link.up
        spending.reserve(0, cost=0.0, calls=1)  # the replica's own ledger: 2 + 1 fits 3
        with pytest.raises(SpendingLimitExceeded, match=r"made 2 of its 3 model calls"):
            spending.reserve(0, cost=0.0, calls=1)
    finally:
        redis_server.start()
    time.sleep(0.2)
    spending.renew(link.client)  # the heartbeat: the settlement Redis missed is sent
    assert link.run(lambda c: c.ping(), False) and link.up
    assert int(link.client.hget(link.key("spend", held.day, "key"), "calls") or 0) == 2
    link.close()


@needs_redis
def test_the_redis_cache_hits_as_the_sqlite_cache_does(link: RedisLink, tmp_path: Path) -> None:
    sqlite = ModelCallCache(tmp_path / "calls.sqlite")
    shared = RedisCallCache(link, fallback=sqlite, ttl_s=60)
    other_replica = RedisCallCache(link)
    paid = Completion(text="Scrooge", prompt_tokens=120, output_tokens=7, model="gpt-4.1", seconds=1.5,
                      usage_estimated=False, cached=False, cost=0.0013)
    shared.put("k1", paid)
    sqlite.put("k1", paid)
    assert other_replica.get("k1") == sqlite.get("k1")  # the same hit: original counts, no time, no cost
    hit = other_replica.get("k1")
    assert hit is not None and hit.cached and hit.cost == 0.0 and hit.prompt_tokens == 120
    assert other_replica.get("missing") is None
    assert 0 < link.client.pttl(link.key("calls", "c", "k1")) <= 60_000
    vector = np.arange(4, dtype=np.float32)
    shared.put_vectors("emb", [("v1", vector, 5)])
    found = other_replica.get_vectors(["v1", "v2"])
    assert list(found) == ["v1"] and np.array_equal(found["v1"][0], vector) and found["v1"][1] == 5


def test_redis_down_from_the_start_falls_back_to_the_local_cache(tmp_path: Path) -> None:
    from testing.processes import free_port

    link = RedisLink(f"redis://:secret@127.0.0.1:{free_port()}/0", retry_s=60)  # nothing listens there
    assert "secret" not in link.url and redacted_url("redis://u:pw@h:1/0") == "redis://u:***@h:1/0"
    sqlite = ModelCallCache(tmp_path / "calls.sqlite")
    cache = RedisCallCache(link, fallback=sqlite)
    paid = Completion(text="x", prompt_tokens=3, output_tokens=1, model="m", seconds=0.1, usage_estimated=False,
                      cached=False, cost=0.1)
    cache.put("k", paid)
    hit = cache.get("k")
    assert hit is not None and hit.cached and len(sqlite) == 1
    status = link.status()
    assert status["up"] is False and status["outages"] == 1 and "error" in status
    admission = RedisAdmission(link, [], limit=1, per_key_limit=1, lease_s=5)
    assert admission.enter(0) is None and admission.enter(0) == "server"  # this replica's own limits
    admission.leave(0)
    assert admission.in_flight() == 0


def _config(model: LoopbackServer, **serve: object) -> GraphrouteConfig:
    models = models_config_from_mapping({"chat": {"base_url": model.base_url, "api_key": "x", "model": "gpt-4.1"},
                                         "embedding": {"provider": "offline"}}, env={})
    return GraphrouteConfig(models=models, serve=ServeConfig.model_validate({"warm_rows": 100, **serve}))


def test_without_redis_a_daily_limit_counts_in_the_server_and_readyz_waits_for_warm_up(carol: Index) -> None:
    with LoopbackServer(default_reply=REPLY) as model:
        config = _config(model, max_calls_per_day=2, api_keys=["only-key"])
        service = Service({"carol": Router(carol, config)}, config.serve)
        assert service.shared is None
        with ServiceThread(service) as server, httpx.Client(
                base_url=server.url, headers={"Authorization": "Bearer only-key"}, timeout=60) as client:
            not_ready = client.get("/readyz")
            assert not_ready.status_code == 503 and not_ready.json()["reasons"] == ["the indexes are not warmed up yet"]
            service.warm_up()
            assert client.get("/readyz").json() == {"ready": True, "reasons": []}
            assert "redis" not in client.get("/healthz").json()
            asked = [client.post("/v1/ask", json={"question": f"Who is Bob Cratchit, {i}?", "mode": "basic"})
                     for i in range(3)]
            assert [r.status_code for r in asked] == [200, 200, 429]
            assert asked[2].json()["error"]["code"] == "spending_limit_exceeded"
            assert len(model.chat_requests) == 2  # the refused question made no call
