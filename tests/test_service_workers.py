"""`graphroute serve --workers 2`: real worker processes on one loopback port, driven over HTTP (the official
`openai` client and httpx), a slow loopback model behind them. What must hold across workers: the 429 limits,
`/metrics` totals, the model concurrency limit, restart of a dead worker, and a drain of every worker.

One supervised pool serves the module (a worker start loads and warms up the index: seconds); the drain test
stops it, so it comes last. Each httpx client below is pinned: its one keep-alive connection was accepted by
the worker it asked for (`x-graphroute-worker`), so a test decides which worker serves what.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from engines.config import GraphrouteConfig, ServeConfig
from engines.models.config import models_config_from_mapping
from router.service.supervisor import WorkerError, WorkerPool
from router.service.worker import WorkerSpec, check_model_shares, worker_models
from testing.model_server import LoopbackServer

KEY_A, KEY_B = "workers-key-a", "workers-key-b"
REPLY = "Bob Cratchit is the clerk [Data: Sources (1)]."
REPO = Path(__file__).resolve().parents[1]


def _config(model_url: str, **serve: Any) -> GraphrouteConfig:
    models = models_config_from_mapping({"chat": {"base_url": model_url, "api_key": "x", "model": "gpt-4.1",
                                                  "concurrency": 4},
                                         "embedding": {"provider": "offline"}}, env={})
    # warm_rows: a few rows are enough to check the warm-up runs; all of them would cost each start seconds
    return GraphrouteConfig(models=models, serve=ServeConfig(port=0, warm_rows=200, **serve))


@pytest.fixture(scope="module")
def model() -> Iterator[LoopbackServer]:
    with LoopbackServer(latency_ms=1000, default_reply=REPLY) as srv:
        yield srv


@pytest.fixture(scope="module")
def pool(model: LoopbackServer, carol_path: Path) -> Iterator[tuple[WorkerPool, list[str]]]:
    reports: list[str] = []
    spec = WorkerSpec({"carol": str(carol_path)},
                      _config(model.base_url, workers=2, max_concurrency=3, max_concurrency_per_key=2),
                      api_keys=[KEY_A, KEY_B], log_level="warning")
    with WorkerPool(spec, report=reports.append) as p:
        yield p, reports


def _pinned(url: str, worker: int, key: str = KEY_A) -> httpx.Client:
    """A client whose keep-alive connection the given worker accepted."""
    for _ in range(60):
        client = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        if client.get("/healthz").headers["x-graphroute-worker"] == str(worker):
            return client
        client.close()
    raise AssertionError(f"no connection reached worker {worker}")


def _ask_in_thread(client: httpx.Client, results: list[Any]) -> threading.Thread:
    def run() -> None:
        try:
            results.append(client.post("/v1/ask", json={"question": "Who is Bob Cratchit?", "mode": "basic"}))
        except httpx.HTTPError as exc:
            results.append(exc)

    t = threading.Thread(target=run)
    t.start()
    return t


def _metric(text: str, series: str) -> float:
    """The value of `series` ('name{label="value",...}', labels in any order) in a /metrics text, 0 if absent."""
    from prometheus_client.parser import text_string_to_metric_families

    wanted = next(iter(next(iter(text_string_to_metric_families(series + " 0\n"))).samples))
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == wanted.name and sample.labels == wanted.labels:
                return float(sample.value)
    return 0.0


ASKED = 'graphroute_http_requests_total{method="POST",path="/v1/ask",status="200"}'
IN_FLIGHT = "graphroute_http_requests_in_flight"


def _wait_for(cond: Any, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.02)


def test_openai_client_answers_from_each_worker(pool: tuple[WorkerPool, list[str]]) -> None:
    p, _ = pool
    assert sorted(p.pids) == [0, 1] and len(set(p.pids.values())) == 2
    for worker in (0, 1):
        with closing(_pinned(p.url, worker)) as http, \
                openai.OpenAI(base_url=p.url + "/v1", api_key=KEY_A, http_client=http, max_retries=0) as client:
            raw = client.chat.completions.with_raw_response.create(
                model="graphroute-basic", messages=[{"role": "user", "content": "Who is Bob Cratchit?"}])
            assert raw.headers["x-graphroute-worker"] == str(worker)
            completion = raw.parse()
            assert "Cratchit" in (completion.choices[0].message.content or "")
            assert (completion.model_extra or {})["graphroute"]["engine"] == "basic"


def test_each_worker_listens_on_its_own_socket(pool: tuple[WorkerPool, list[str]]) -> None:
    """Where there is SO_REUSEPORT the kernel spreads new connections over the workers' own sockets (on one
    shared socket they raced for them); either way every worker is reached."""
    p, _ = pool
    assert p.listener.per_worker == hasattr(socket, "SO_REUSEPORT")
    seen: dict[str, int] = {}
    for _ in range(32):
        with httpx.Client(base_url=p.url, timeout=60) as http:
            worker = http.get("/healthz").headers["x-graphroute-worker"]
            seen[worker] = seen.get(worker, 0) + 1
    assert sorted(seen) == ["0", "1"]


def test_without_reuse_port_the_workers_share_one_socket(model: LoopbackServer, carol_path: Path) -> None:
    spec = WorkerSpec({"carol": str(carol_path)}, _config(model.base_url, workers=2), log_level="warning")
    with WorkerPool(spec, report=lambda line: None, reuse_port=False) as p:
        assert not p.listener.per_worker
        seen = set()
        for _ in range(60):
            with httpx.Client(base_url=p.url, timeout=60) as http:
                seen.add(http.get("/healthz").json()["worker"])
            if seen == {0, 1}:
                break
        assert seen == {0, 1}
        url = p.url
    with httpx.Client(timeout=5) as fresh, pytest.raises(httpx.ConnectError):
        fresh.get(url + "/healthz")


def test_limits_count_requests_across_workers(pool: tuple[WorkerPool, list[str]], model: LoopbackServer) -> None:
    p, _ = pool
    a0, a1, b1, a0_more, b0 = (_pinned(p.url, 0, KEY_A), _pinned(p.url, 1, KEY_A), _pinned(p.url, 1, KEY_B),
                               _pinned(p.url, 0, KEY_A), _pinned(p.url, 0, KEY_B))
    try:
        results: list[Any] = []
        threads = [_ask_in_thread(a0, results), _ask_in_thread(a1, results)]  # key A: one on each worker
        _wait_for(lambda: _metric(a0_more.get("/metrics").text, IN_FLIGHT) == 2)
        # worker 0 holds one key-A request, below the per-key limit of 2: only the shared count refuses this
        refused = a0_more.post("/v1/ask", json={"question": "Who is Bob Cratchit?", "mode": "basic"})
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
        assert "API key" in refused.json()["error"]["message"]
        threads.append(_ask_in_thread(b1, results))
        _wait_for(lambda: _metric(b0.get("/metrics").text, IN_FLIGHT) == 3)
        # worker 0 holds one request and key B one: below both limits in this process, at the server's limit of 3
        refused = b0.post("/v1/ask", json={"question": "Who is Bob Cratchit?", "mode": "basic"})
        assert refused.status_code == 429 and "server is at its limit of 3" in refused.json()["error"]["message"]
        for t in threads:
            t.join()
        assert [r.status_code for r in results] == [200, 200, 200]
        assert model.max_in_flight <= 4  # the endpoint's limit, divided: 2 per worker
        _wait_for(lambda: _metric(b0.get("/metrics").text, IN_FLIGHT) == 0)
    finally:
        for c in (a0, a1, b1, a0_more, b0):
            c.close()


def test_metrics_are_totals_over_workers(pool: tuple[WorkerPool, list[str]]) -> None:
    p, _ = pool
    clients = [_pinned(p.url, 0), _pinned(p.url, 1), _pinned(p.url, 1, KEY_B)]  # 3: the server's limit
    try:
        before = _metric(clients[0].get("/metrics").text, ASKED)
        results: list[Any] = []
        for t in [_ask_in_thread(c, results) for c in clients]:
            t.join()
        assert [r.status_code for r in results] == [200] * 3
        for c in (clients[0], clients[1]):  # each worker renders the same totals (others' within 50 ms)
            _wait_for(lambda c=c: _metric(c.get("/metrics").text, ASKED) == before + 3, timeout=5)
        text = clients[1].get("/metrics").text
        assert _metric(text, 'graphroute_questions_total{index="carol",engine="basic",route="basic"}') >= 3
    finally:
        for c in clients:
            c.close()


def test_a_dead_worker_is_reported_and_restarted(pool: tuple[WorkerPool, list[str]]) -> None:
    p, reports = pool
    old = p.pids[0]
    with closing(_pinned(p.url, 0)) as victim, closing(_pinned(p.url, 1)) as other:
        asked = _metric(other.get("/metrics").text, ASKED)
        results: list[Any] = []
        t = _ask_in_thread(victim, results)
        _wait_for(lambda: _metric(other.get("/metrics").text, IN_FLIGHT) == 1)
        os.kill(old, signal.SIGKILL)
        t.join()
        assert isinstance(results[0], httpx.HTTPError)  # its client's connection is lost
        _wait_for(lambda: any("serves again" in r for r in reports), timeout=120)
        assert f"worker 0 (pid {old}) stopped unexpectedly (killed by SIGKILL); restarting it" in reports
        assert p.pids[0] != old and p.error is None
        assert _metric(other.get("/metrics").text, IN_FLIGHT) == 0  # the dead worker's slot came back
        assert _metric(other.get("/metrics").text, ASKED) >= asked  # its replacement carried on its counts
    with closing(_pinned(p.url, 0)) as again:
        assert again.post("/v1/ask", json={"question": "Who is Bob Cratchit?", "mode": "basic"}).status_code == 200


def test_stop_drains_every_worker(pool: tuple[WorkerPool, list[str]]) -> None:
    """Last: it stops the module's pool. In-flight requests on both workers finish, new ones get 503, then
    every worker exits and the port refuses connections."""
    import psutil

    p, _ = pool
    pids = list(p.pids.values())
    busy = [_pinned(p.url, 0), _pinned(p.url, 1)]
    idle = [_pinned(p.url, 0), _pinned(p.url, 1)]
    try:
        results: list[Any] = []
        threads = [_ask_in_thread(c, results) for c in busy]
        _wait_for(lambda: _metric(idle[0].get("/metrics").text, IN_FLIGHT) == 2)
        stopper = threading.Thread(target=p.stop)
        stopper.start()
        for c in idle:
            _wait_for(lambda c=c: c.get("/healthz").status_code == 503)
            refused = c.post("/v1/ask", json={"question": "Who is Bob Cratchit?"})
            assert refused.status_code == 503 and refused.headers["Retry-After"]
        for t in threads:
            t.join()
        assert [r.status_code for r in results] == [200, 200]
        stopper.join()
        assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                       for pid in pids)
        with httpx.Client(timeout=5) as fresh, pytest.raises(httpx.ConnectError):
            fresh.get(p.url + "/healthz")
    finally:
        for c in busy + idle:
            c.close()


def test_a_worker_that_cannot_start_stops_the_server_with_the_reason(tmp_path: Path) -> None:
    import psutil

    spec = WorkerSpec({"broken": str(tmp_path)}, _config("http://127.0.0.1:9", workers=2), log_level="warning")
    with pytest.raises(WorkerError, match=r"worker \d could not start: cannot read the index"):
        WorkerPool(spec, report=lambda line: None).start()
    workers = [c for c in psutil.Process().children() if "spawn_main" in " ".join(c.cmdline())
               and c.status() != psutil.STATUS_ZOMBIE]
    assert not workers  # the other worker was stopped too


def test_model_limits_are_divided_among_workers() -> None:
    from engines.models.config import EndpointOverride

    cfg = _config("http://127.0.0.1:9").models
    cfg = cfg.model_copy(update={"stages": {"map": EndpointOverride(concurrency=5)}})
    shares = [worker_models(cfg, w, 3) for w in range(3)]
    assert [m.chat.concurrency for m in shares] == [2, 1, 1]  # 4 over 3 workers, summing to 4
    assert [m.stages["map"].concurrency for m in shares] == [2, 2, 1]
    assert worker_models(cfg, 0, 1) is cfg
    with pytest.raises(ValueError, match=r"models.chat.concurrency is 4, fewer than the 5 workers"):
        check_model_shares(cfg, 5)
    spec = WorkerSpec({"carol": "unused"}, _config("http://127.0.0.1:9", workers=8))
    with pytest.raises(WorkerError, match="fewer than the 8 workers"):
        WorkerPool(spec)  # refused before binding or spawning anything


def test_cli_serve_workers_drains_on_ctrl_c(carol_path: Path, tmp_path: Path) -> None:
    """The command itself: two workers, "serving" once both are up, Ctrl-C (SIGINT to the process group, as a
    terminal sends it) drains them and exits 0."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    (tmp_path / "graphroute.toml").write_text("[serve]\nwarm_rows = 200\n")  # read from the working folder
    proc = subprocess.Popen([sys.executable, "-m", "router.cli", "serve", "--workers", "2", "--port", "0",
                             "--index", f"carol={carol_path}"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if " with 2 workers " in line:
                break
        url = lines[-1].split(" on ", 1)[1].split(" ", 1)[0]
        with httpx.Client(base_url=url, timeout=60) as http:
            seen = {http.get("/healthz").headers["x-graphroute-worker"]}
            assert http.post("/v1/ask", json={"question": "Who is Bob Cratchit?"}).status_code == 200
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    text = "".join(lines) + out
    assert proc.returncode == 0, text
    assert seen <= {"0", "1"} and "stopping, draining every worker" in text
    assert "Traceback" not in text and "did not stop in time" not in text
