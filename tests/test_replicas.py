"""Two `graphroute serve` replicas behind HAProxy with one Redis, as docs/guides/deployment.md deploys them:
`graphroute prepare` builds the index's store once, each replica runs the ExecStart of
docs/deploy/graphroute.service with `[serve] require_prepared`, HAProxy runs docs/deploy/haproxy.cfg, and
Debian's `redis-server` keeps what they share. The model is the loopback server (300 ms a call); a question
whose text says HOLD waits until the test releases it, so a test knows what is in flight.

What must hold: a key's limit of 4 in flight is the fifth request's 429 on either replica; a daily limit of
model calls is not passed across both replicas under concurrent load; a question answered through one replica
is a cache hit through the other; stopping Redis mid-load fails no request (and `/healthz` says so, until it
is back); killing a replica under load loses only what it had in flight, HAProxy sends the rest to the other,
and the dead replica's slots come back when its lease ends. The kill comes last: it ends the module's pool.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from testing.model_server import Gate, LoopbackServer
from testing.processes import (
    HAProxy,
    RedisServer,
    Replica,
    free_port,
    missing_binaries,
    shared_state_config,
    unit_command,
)

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "docs" / "deploy"
KEY_A, KEY_B, KEY_C = "replica-key-a", "replica-key-b", "replica-key-c"
REPLY = "Bob Cratchit is Scrooge's clerk [Data: Sources (1)]."
CALLS_PER_DAY = 40  # every key's; the spending test runs one key past it, the others stay below
LEASE_S = 4.0

_missing = missing_binaries("redis-server", "haproxy")
if _missing:
    print(f"test_replicas: skipped on this platform: {', '.join(_missing)} not installed "
          "(Debian: apt-get install redis-server haproxy)")
pytestmark = pytest.mark.skipif(bool(_missing), reason=f"{', '.join(_missing)} not installed")


@dataclass
class Deployment:
    model: LoopbackServer
    gate: Gate
    redis: RedisServer
    replicas: dict[str, Replica]
    lb: HAProxy


def _config(path: Path, model: LoopbackServer, redis_url: str) -> Path:
    return shared_state_config(path, model.base_url, redis_url, (KEY_A, KEY_B, KEY_C), calls_per_day=CALLS_PER_DAY,
                               lease_s=LEASE_S, warm_rows=200, extra="require_prepared = true\n")


@pytest.fixture(scope="module")
def deployment(carol_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    gate = Gate(REPLY)
    tmp = tmp_path_factory.mktemp("replicas")
    with LoopbackServer(latency_ms=300, default_reply=REPLY) as model, RedisServer() as redis:
        model.add_rule("HOLD", reply=gate.reply)
        config = _config(tmp / "graphroute.toml", model, redis.url)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GRAPHROUTE_"))}
        env["GRAPHROUTE_CACHE_DIR"] = str(tmp / "prepared")  # the store `prepare` builds, which replicas read
        prepared = subprocess.run([sys.executable, "-m", "router.cli", "prepare", str(carol_path), "--config",
                                   str(config)], env=env, capture_output=True, text=True, timeout=300)
        assert prepared.returncode == 0, prepared.stderr
        replicas: dict[str, Replica] = {}
        try:
            for name in ("a", "b"):  # side by side: each opens the prepared store
                port = free_port()
                command, unit_env = unit_command(DEPLOY / "graphroute.service", {
                    "GRAPHROUTE_CONFIG": str(config), "GRAPHROUTE_INDEX": str(carol_path),
                    "GRAPHROUTE_HOST": "127.0.0.1", "GRAPHROUTE_PORT": str(port)})
                replicas[name] = Replica(command, port, {**env, **unit_env, "GRAPHROUTE_CACHE_DIR": env[
                    "GRAPHROUTE_CACHE_DIR"]}, log=tmp / f"replica-{name}.log").launch()
            for replica in replicas.values():
                replica.wait_ready()
            with HAProxy(DEPLOY / "haproxy.cfg", {"GRAPHROUTE_REPLICA_A": replicas["a"].address,
                                                   "GRAPHROUTE_REPLICA_B": replicas["b"].address}) as lb:
                yield Deployment(model, gate, redis, replicas, lb)
        finally:
            gate.release()
            for replica in replicas.values():
                replica.stop()


def _client(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def _ask(url: str, key: str, question: str) -> httpx.Response:
    with _client(url, key) as client:
        return client.post("/v1/ask", json={"question": question, "mode": "basic"})


def _health(url: str) -> dict[str, Any]:
    """`/healthz` as an operator reads it (with a key: a caller without one is told only up or degraded)."""
    with _client(url, KEY_A) as client:
        body: dict[str, Any] = client.get("/healthz").json()
    return body


def _wait_for(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.05)


def test_each_replica_is_ready_and_shares_redis(deployment: Deployment) -> None:
    for replica in deployment.replicas.values():
        assert httpx.get(replica.url + "/readyz").json() == {"ready": True, "reasons": []}
        health = _health(replica.url)
        assert health["status"] == "ok" and health["redis"]["up"] is True
    assert _ask(deployment.lb.url, KEY_A, "Who is Bob Cratchit?").status_code == 200


def test_fifth_request_of_a_key_is_refused_on_either_replica(deployment: Deployment) -> None:
    d = deployment
    d.gate.open.clear()
    a, b = d.replicas["a"].url, d.replicas["b"].url
    with ThreadPoolExecutor(4) as pool:
        held = [pool.submit(_ask, url, KEY_A, f"HOLD question {i}") for i, url in enumerate((a, a, b, b))]
        _wait_for(lambda: d.gate.waiting == 4)
        for url in (a, b):  # the fifth, whichever replica it reaches
            refused = _ask(url, KEY_A, "HOLD question five")
            assert refused.status_code == 429
            assert "this API key is at its limit of 4 requests in flight" in refused.json()["error"]["message"]
        assert _ask(b, KEY_B, "Who is Fred?").status_code == 200  # another key is not held back
        d.gate.release()
        assert [f.result().status_code for f in held] == [200] * 4
    assert _ask(a, KEY_A, "HOLD question six").status_code == 200  # the slots came back


def test_a_call_paid_through_one_replica_is_a_cache_hit_through_the_other(deployment: Deployment) -> None:
    d = deployment
    question = "What does Scrooge say about Christmas, asked once?"
    first = _ask(d.replicas["a"].url, KEY_B, question)
    assert first.status_code == 200
    calls = len(d.model.chat_requests)
    second = _ask(d.replicas["b"].url, KEY_B, question)
    assert second.status_code == 200 and second.json()["text"] == first.json()["text"]
    assert len(d.model.chat_requests) == calls  # no new model call
    usage = second.json()["usage"]["total"]
    assert usage["cached_calls"] == usage["llm_calls"] >= 1 and second.json()["cost"] == 0.0
    assert usage["prompt_tokens"] == first.json()["usage"]["total"]["prompt_tokens"]  # the original counts


def test_a_daily_call_limit_holds_across_both_replicas(deployment: Deployment) -> None:
    d = deployment
    urls = [d.replicas["a"].url, d.replicas["b"].url]
    questions = [f"Spending question number {i} about the Fezziwig ball" for i in range(CALLS_PER_DAY + 8)]
    with ThreadPoolExecutor(4) as pool:  # the key's 4 in flight, spread over both replicas
        responses = list(pool.map(lambda iq: _ask(urls[iq[0] % 2], KEY_C, iq[1]), enumerate(questions)))
    answered = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert len(answered) + len(refused) == len(questions)
    paid = sum(r.json()["usage"]["total"]["llm_calls"] - r.json()["usage"]["total"]["cached_calls"] for r in answered)
    assert CALLS_PER_DAY - 1 <= paid <= CALLS_PER_DAY + 1  # at most one question's estimate (1 call) over
    error = refused[0].json()["error"]
    assert error["code"] == "spending_limit_exceeded" and "[serve] max_calls_per_day" in error["message"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT00:00:00Z", error["resets_at"])
    assert error["resets_at"] in error["message"] and int(refused[0].headers["retry-after"]) >= 1


def test_stopping_redis_mid_load_fails_no_request(deployment: Deployment) -> None:
    d = deployment
    questions = [f"Who visits Scrooge, asked under load {i}?" for i in range(16)]
    with ThreadPoolExecutor(3) as pool:  # under the per-key limit, whichever limits count
        futures = [pool.submit(_ask, d.lb.url, KEY_B, q) for q in questions]
        _wait_for(lambda: sum(f.done() for f in futures) >= 3)
        d.redis.stop(signal.SIGKILL)
        statuses = [f.result().status_code for f in futures]
    assert statuses == [200] * len(questions)
    for replica in d.replicas.values():
        _wait_for(lambda url=replica.url: _health(url)["redis"]["up"] is False)
        health = _health(replica.url)
        assert health["status"] == "degraded" and "error" in health["redis"]
        assert httpx.get(replica.url + "/healthz").json() == {"status": "degraded"}  # a load balancer, no key
    d.redis.start()  # the same port, empty: every replica rewrites its leases there
    for replica in d.replicas.values():
        _wait_for(lambda url=replica.url: _health(url)["redis"]["up"] is True)
    assert _ask(d.lb.url, KEY_B, "Who is Marley, after the outage?").status_code == 200


def test_killing_a_replica_under_load_loses_only_its_requests_in_flight(deployment: Deployment) -> None:
    d = deployment
    d.gate.open.clear()
    a = d.replicas["a"]
    with ThreadPoolExecutor(4) as pool:
        held = [pool.submit(_ask, a.url, KEY_A, f"HOLD on the replica that dies {i}") for i in range(4)]
        _wait_for(lambda: d.gate.waiting == 4)
        a.stop(signal.SIGKILL)
        lost = [f.exception() or f.result() for f in held]
        d.gate.release()
    assert all(isinstance(x, httpx.HTTPError) for x in lost)  # its requests in flight, and only those
    # A's dead slots count until its lease ends: its key has no room left meanwhile
    refused = _ask(d.lb.url, KEY_A, "Right after the kill")
    assert refused.status_code == 429 and "limit of 4 requests in flight" in refused.json()["error"]["message"]
    killed = time.monotonic()
    with ThreadPoolExecutor(3) as pool:  # through the load balancer, every other request is answered, by B
        statuses = list(pool.map(lambda i: _ask(d.lb.url, KEY_B, f"After the kill, question {i}").status_code,
                                 range(9)))
    assert statuses == [200] * 9
    time.sleep(max(0.0, LEASE_S + 0.5 - (time.monotonic() - killed)))
    with ThreadPoolExecutor(4) as pool:  # the lease ended: the key's whole limit again, on B alone
        burst = list(pool.map(lambda i: _ask(d.lb.url, KEY_A, f"Burst after the lease {i}").status_code, range(4)))
    assert burst == [200] * 4
