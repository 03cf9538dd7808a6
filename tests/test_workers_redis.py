"""`graphroute serve --workers 2` with `[serve] redis_url`: two such serves (two hosts, each with its own cache
folder) and one real `redis-server`, four worker processes in all. Admission, the daily spending ledger and the
model-call cache are shared across the workers of one serve and across the serves: a key's fifth request in
flight is refused whichever serve and worker it reaches, a daily call limit holds over every worker under
concurrent load, and a question answered through one serve is a cache hit through the other."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from testing.model_server import Gate, LoopbackServer
from testing.processes import RedisServer, Replica, free_port, missing_binaries, shared_state_config

KEY_A, KEY_B, KEY_C = "workers-key-a", "workers-key-b", "workers-key-c"
REPLY = "Bob Cratchit is Scrooge's clerk [Data: Sources (1)]."
CALLS_PER_DAY = 12

_missing = missing_binaries("redis-server")
pytestmark = pytest.mark.skipif(bool(_missing), reason="redis-server not installed (Debian: apt-get install "
                                                       "redis-server)")


@dataclass
class Serves:
    model: LoopbackServer
    gate: Gate
    a: Replica
    b: Replica


def _config(path: Path, model: LoopbackServer, redis_url: str) -> Path:
    return shared_state_config(path, model.base_url, redis_url, (KEY_A, KEY_B, KEY_C), calls_per_day=CALLS_PER_DAY,
                               lease_s=4.0, warm_rows=0, extra="")


@pytest.fixture(scope="module")
def serves(carol_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serves]:
    tmp = tmp_path_factory.mktemp("workers-redis")
    gate = Gate(REPLY)
    with LoopbackServer(latency_ms=100, default_reply=REPLY) as model, RedisServer() as redis:
        model.add_rule("HOLD", reply=gate.reply)
        config = _config(tmp / "graphroute.toml", model, redis.url)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GRAPHROUTE_"))}
        started: dict[str, Replica] = {}
        try:
            for name in ("a", "b"):  # two hosts: each its own cache folder (sqlite model cache included)
                cache = tmp / f"cache-{name}"
                host_env = {**env, "GRAPHROUTE_CACHE_DIR": str(cache)}
                prepared = subprocess.run([sys.executable, "-m", "router.cli", "prepare", str(carol_path),
                                           "--config", str(config)], env=host_env, capture_output=True, text=True,
                                          timeout=300)
                assert prepared.returncode == 0, prepared.stderr
                port = free_port()
                started[name] = Replica([sys.executable, "-m", "router.cli", "serve", "--index", str(carol_path),
                                         "--host", "127.0.0.1", "--port", str(port), "--workers", "2", "--config",
                                         str(config)], port, host_env, log=tmp / f"serve-{name}.log").launch()
            for replica in started.values():
                replica.wait_ready(180)
            yield Serves(model, gate, started["a"], started["b"])
        finally:
            gate.release()
            for replica in started.values():
                replica.stop()


def _ask(url: str, key: str, question: str) -> httpx.Response:
    # a new connection per request, so the kernel spreads them over the serve's workers
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60) as client:
        return client.post("/v1/ask", json={"question": question, "mode": "basic"})


def _workers_seen(url: str, tries: int = 40) -> set[int]:
    seen: set[int] = set()
    for _ in range(tries):
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {KEY_B}"}, timeout=10) as client:
            seen.add(int(client.get("/healthz").json()["worker"]))
        if len(seen) > 1:
            break
    return seen


def _wait_for(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.05)


def test_each_serve_runs_two_workers_on_redis(serves: Serves) -> None:
    for replica in (serves.a, serves.b):
        assert len(_workers_seen(replica.url)) == 2
        with httpx.Client(base_url=replica.url, headers={"Authorization": f"Bearer {KEY_A}"}) as client:
            assert client.get("/healthz").json()["redis"]["up"] is True


def test_a_keys_fifth_request_in_flight_is_refused_by_every_worker_of_both_serves(serves: Serves) -> None:
    s = serves
    s.gate.open.clear()
    with ThreadPoolExecutor(4) as pool:
        held = [pool.submit(_ask, url, KEY_A, f"HOLD worker question {i}")
                for i, url in enumerate((s.a.url, s.a.url, s.b.url, s.b.url))]
        _wait_for(lambda: s.gate.waiting == 4)
        refusals = [_ask(url, KEY_A, f"HOLD the fifth, try {i}") for i, url in enumerate([s.a.url, s.b.url] * 4)]
        assert [r.status_code for r in refusals] == [429] * 8  # eight connections: both workers of each serve
        assert all("limit of 4 requests in flight" in r.json()["error"]["message"] for r in refusals)
        assert _ask(s.b.url, KEY_B, "Who is Fred?").status_code == 200  # another key is not held back
        s.gate.release()
        assert [f.result().status_code for f in held] == [200] * 4
    _wait_for(lambda: _ask(s.a.url, KEY_A, "HOLD after the release").status_code == 200)


def test_a_call_paid_on_one_serve_is_a_cache_hit_on_every_worker_of_the_other(serves: Serves) -> None:
    s = serves
    question = "What does Scrooge say about Christmas, asked on one host?"
    first = _ask(s.a.url, KEY_B, question)
    assert first.status_code == 200
    calls = len(s.model.chat_requests)
    again = [_ask(s.b.url, KEY_B, question) for _ in range(6)]  # six connections over serve b's two workers
    assert len(s.model.chat_requests) == calls  # no new model call
    for second in again:
        usage = second.json()["usage"]["total"]
        assert second.status_code == 200 and second.json()["text"] == first.json()["text"]
        assert usage["cached_calls"] == usage["llm_calls"] >= 1 and second.json()["cost"] == 0.0


def test_a_daily_call_limit_holds_over_every_worker_of_both_serves(serves: Serves) -> None:
    s = serves
    urls = [s.a.url, s.b.url]
    questions = [f"Worker spending question {i} about the Fezziwig ball" for i in range(CALLS_PER_DAY + 8)]
    with ThreadPoolExecutor(4) as pool:
        responses = list(pool.map(lambda iq: _ask(urls[iq[0] % 2], KEY_C, iq[1]), enumerate(questions)))
    answered = [r for r in responses if r.status_code == 200]
    refused = [r for r in responses if r.status_code == 429]
    assert len(answered) + len(refused) == len(questions) and refused
    paid = sum(r.json()["usage"]["total"]["llm_calls"] - r.json()["usage"]["total"]["cached_calls"] for r in answered)
    assert CALLS_PER_DAY - 1 <= paid <= CALLS_PER_DAY + 1  # at most one question's estimate (1 call) over
    assert all(r.json()["error"]["code"] == "spending_limit_exceeded" for r in refused)
