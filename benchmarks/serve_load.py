"""Load check for `graphroute serve`: many concurrent clients against the service, a slow model behind it.

    .venv/bin/python -m benchmarks.serve_load --index ../shared/data/christmas_carol_graphrag_index \\
        --clients 64 --requests 640 --latency-ms 300 --model-concurrency 32

Three processes, so no side steals the others' interpreter: the loopback OpenAI-compatible model server
(`benchmarks.simulated_model`, `--latency-ms` per call), the service (this process: uvicorn + one Router,
its chat model pointed at the loopback server, offline embedder; warmed up as `graphroute serve` does; with
`--workers N`, N worker processes under the same supervisor as `graphroute serve --workers N`), and
the load generator (`--clients` concurrent aiohttp clients sending `--requests` chat completions in total;
it was httpx, whose pool cost it 2.5-6 ms of CPU per request on the same two cores, against about 0.5). Questions are "Who is X?" for the
index's highest-degree entities (read from the index, nothing in this file knows a corpus), forced to local
search (`graphroute-local`). Reports throughput, p50/p95 latency, errors, and the most requests the model
server ever had in flight, which must not exceed `--model-concurrency` (the service's limiter).
Targets: >= 30 requests/s, p95 <= 1.5 s, 0 errors with 64 clients and a 300 ms model.
The exit status is 0 only when they are met. `cpu_ms_per_request` is each process's own core time over the
load divided by the requests: the service's figure is what a question costs it, whatever else runs (with
`--workers`, the sum over the worker processes and the supervisor).
The model server answers after `--latency-ms`, streams its reply in one write and reports prompt tokens as
characters / 4 (so its own CPU stays small: it shares the cores with the service under test).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.common import CAROL_INDEX, emit_report


def _model_server(latency_ms: float, conn: Any) -> None:
    from benchmarks.simulated_model import LoopbackServer, Reply

    text = "The answer, drawn from the supplied data [Data: Sources (1)]."

    def reply(body: dict[str, Any]) -> Reply:
        # Usage from characters / 4 rather than tokenising every 40 kB prompt: the simulated model's own CPU
        # shares the machine with the service under test, and a real model server would not.
        chars = sum(len(str(m.get("content") or "")) for m in body.get("messages") or [])
        return Reply(text, prompt_tokens=chars // 4 + 1)

    with LoopbackServer(latency_ms=latency_ms, default_reply=reply) as srv:
        conn.send(srv.base_url)
        conn.recv()  # the load starts: CPU is counted from here
        cpu0 = time.process_time()
        conn.recv()  # until told to stop
        conn.send({"max_in_flight": srv.max_in_flight, "requests": len(srv.requests),
                   "cpu_s": time.process_time() - cpu0})


def _load(url: str, questions: list[str], clients: int, total: int, model: str, conn: Any) -> None:
    """`clients` concurrent clients over aiohttp (one keep-alive connection each): it costs this process
    about a third of httpx's CPU per request, and the load generator shares the two cores with the service."""
    import aiohttp
    import orjson

    async def main() -> dict[str, Any]:
        latencies: list[float] = []
        sent: list[float] = []  # when each request (same order as latencies) was sent
        statuses: dict[str, int] = {}
        by_worker: dict[str, int] = {}  # requests answered per worker (`x-graphroute-worker`)
        todo = iter(range(total))
        connector = aiohttp.TCPConnector(limit=clients, force_close=False)
        headers = {"content-type": "application/json"}
        async with aiohttp.ClientSession(base_url=url, connector=connector,
                                         timeout=aiohttp.ClientTimeout(total=120)) as http:

            async def worker() -> None:
                for i in todo:
                    body = orjson.dumps({"model": model,
                                         "messages": [{"role": "user", "content": questions[i % len(questions)]}]})
                    t0 = time.perf_counter()
                    try:
                        async with http.post("/v1/chat/completions", data=body, headers=headers) as r:
                            await r.read()
                            key = str(r.status)
                            worker = r.headers.get("x-graphroute-worker", "in-process")
                            by_worker[worker] = by_worker.get(worker, 0) + 1
                    except (aiohttp.ClientError, TimeoutError) as exc:
                        key = type(exc).__name__
                    latencies.append(time.perf_counter() - t0)
                    sent.append(t0)
                    statuses[key] = statuses.get(key, 0) + 1

            started, cpu0 = time.perf_counter(), time.process_time()
            await asyncio.gather(*(worker() for _ in range(clients)))
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu0
        return {"latencies": latencies, "sent": sent, "statuses": statuses, "by_worker": by_worker,
                "wall_s": wall, "cpu_s": cpu}

    conn.send(asyncio.run(main()))


def _questions(index: Any, n: int) -> list[str]:
    ranked = sorted(range(len(index.entities)), key=lambda i: -len(index.entity_relationships[i]))
    return [f"Who is {index.entities[i].title.title()}?" for i in ranked[:n]]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextmanager
def _service_thread(args: argparse.Namespace, index: Any, models: Any) -> Iterator[tuple[str, Callable[[], float]]]:
    """The service in this process (uvicorn in a thread), warmed up as `graphroute serve` does; its CPU is
    this process's."""
    from engines.config import GraphrouteConfig, ServeConfig
    from router import Router
    from router.service import Service, ServiceThread

    cfg = ServeConfig(max_concurrency=max(args.clients, 1), max_concurrency_per_key=max(args.clients, 1))
    with Router(index, config=GraphrouteConfig(models=models)) as router, \
            ServiceThread(Service({"index": router}, cfg), prepare=True) as svc:
        yield svc.url, time.process_time


@contextmanager
def _worker_processes(args: argparse.Namespace, models: Any) -> Iterator[tuple[str, Callable[[], float]]]:
    """The service as `graphroute serve --workers N` runs it (the same supervisor and worker processes); its
    CPU is every worker's plus this process's (the supervisor thread)."""
    import psutil

    from engines.config import GraphrouteConfig, ServeConfig
    from router.service.supervisor import WorkerPool
    from router.service.worker import WorkerSpec

    cfg = ServeConfig(port=0, workers=args.workers, max_concurrency=max(args.clients, 1),
                      max_concurrency_per_key=max(args.clients, 1))
    spec = WorkerSpec({"index": args.index}, GraphrouteConfig(models=models, serve=cfg), log_level="warning")
    with WorkerPool(spec) as pool:
        workers = [psutil.Process(pid) for pid in pool.pids.values()]

        def cpu() -> float:
            return time.process_time() + sum(w.cpu_times().user + w.cpu_times().system for w in workers)

        yield pool.url, cpu


def run(args: argparse.Namespace) -> dict[str, Any]:
    from engines.models.config import models_config_from_mapping
    from shared_context import load_index

    ctx = mp.get_context("spawn")
    model_parent, model_child = ctx.Pipe()
    model_proc = ctx.Process(target=_model_server, args=(args.latency_ms, model_child), daemon=True)
    model_proc.start()
    base_url = model_parent.recv()
    models = models_config_from_mapping({
        "chat": {"base_url": base_url, "api_key": "bench", "model": "gpt-4.1-mini",
                 "concurrency": args.model_concurrency},
        "embedding": {"provider": "offline"},
    }, env={})
    index = load_index(args.index)
    questions = _questions(index, 50)
    service = _worker_processes(args, models) if args.workers else _service_thread(args, index, models)
    with service as (url, service_cpu_s):
        # Warm-up (unmeasured): the SDK's first calls, on every worker (a new connection each: the kernel
        # hashes each to one worker's socket, so 4 per worker reach each of them in all likelihood).
        import httpx

        for q in questions[:4 * max(args.workers, 1)]:
            with httpx.Client(base_url=url, timeout=300) as http:
                http.post("/v1/chat/completions", json={"model": args.model, "messages": [{"role": "user", "content": q}]})
        load_parent, load_child = ctx.Pipe()
        load_proc = ctx.Process(target=_load, args=(url, questions, args.clients, args.requests, args.model,
                                                    load_child))
        model_parent.send("load")
        cpu0 = service_cpu_s()
        load_proc.start()
        out = load_parent.recv()
        service_cpu = service_cpu_s() - cpu0
        load_proc.join()
    model_parent.send("stop")
    server_stats = model_parent.recv()
    model_proc.join()
    lat = out["latencies"]
    by_send = [x for _, x in sorted(zip(out["sent"], lat, strict=True))]
    burst, rest = by_send[:args.clients], by_send[args.clients:]
    ok = out["statuses"].get("200", 0)
    report = {
        "clients": args.clients, "requests": args.requests, "model": args.model, "latency_ms": args.latency_ms,
        "model_concurrency": args.model_concurrency, "index": Path(args.index).name,
        "service_workers": args.workers or "in-process",
        "throughput_rps": round(len(lat) / out["wall_s"], 2), "wall_s": round(out["wall_s"], 2),
        "p50_s": round(statistics.median(lat), 3), "p95_s": round(_pct(lat, 0.95), 3),
        "max_s": round(max(lat), 3),
        # The first `clients` requests arrive together on a cold service (no question answered yet): their
        # latency apart from the rest's, as they weigh on the p95 of a short run.
        "first_burst_p50_s": round(statistics.median(burst), 3), "after_burst_p95_s": round(_pct(rest or burst, 0.95), 3),
        "ok": ok, "errors": len(lat) - ok, "statuses": out["statuses"], "answered_by_worker": out["by_worker"],
        "model_server_max_in_flight": server_stats["max_in_flight"],
        "model_server_requests": server_stats["requests"],
        # Core time per request, each process measured by itself over the load (the service's spans the
        # load generator's start-up too, so it is an upper bound): the three share the machine's cores.
        "cpu_ms_per_request": {"service": round(1000 * service_cpu / max(len(lat), 1), 1),
                               "model_server": round(1000 * server_stats["cpu_s"] / max(len(lat), 1), 1),
                               "load_generator": round(1000 * out["cpu_s"] / max(len(lat), 1), 1)},
        "load_average": os.getloadavg(), "cpus": os.cpu_count(),
    }
    report["targets_met"] = (report["throughput_rps"] >= 30 and report["p95_s"] <= 1.5 and report["errors"] == 0
                             and report["model_server_max_in_flight"] <= args.model_concurrency)
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", default=str(CAROL_INDEX))
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--requests", type=int, default=640)
    p.add_argument("--latency-ms", type=float, default=300.0)
    p.add_argument("--model-concurrency", type=int, default=32)
    p.add_argument("--model", default="graphroute-local", help="the model name sent (graphroute[-MODE])")
    p.add_argument("--workers", type=int, default=0,
                   help="serve with N worker processes, as `graphroute serve --workers N` (default 0: the service "
                        "in this process, uvicorn in a thread)")
    p.add_argument("--replicas", type=int, choices=(2,),
                   help="one against two `graphroute serve` replicas behind HAProxy with one Redis, and the cost "
                        "the shared cache saves (benchmarks/serve_replicas.py; needs redis-server and haproxy)")
    p.add_argument("--distinct", type=int, default=20, help="--replicas: distinct questions of the cost workload")
    p.add_argument("--repeats", type=int, default=3, help="--replicas: times each is asked")
    p.add_argument("--runs", type=int, default=1, help="repeat the whole load N times (median and range reported)")
    p.add_argument("--out", help="write the report as JSON here")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    if args.replicas:
        from benchmarks.serve_replicas import run_replicas

        emit_report(run_replicas(args), args.out)
        return 0
    runs = [run(args) for _ in range(args.runs)]
    report = {**runs[-1], **summarise_runs(runs), "runs": runs,
              "targets_met": all(r["targets_met"] for r in runs)}
    emit_report(report, args.out)
    return 0 if report["targets_met"] else 1


def summarise_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each headline figure over the runs, with its range beside it (`KEY_range`)."""
    out: dict[str, Any] = {}
    for key in ("throughput_rps", "p50_s", "p95_s", "errors"):
        values = [r[key] for r in runs]
        out[key] = statistics.median(values)
        out[f"{key}_range"] = [min(values), max(values)]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
