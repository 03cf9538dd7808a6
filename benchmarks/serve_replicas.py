"""`python -m benchmarks.serve_load --replicas 2`: one against two `graphroute serve` replicas behind HAProxy
with one Redis, deployed from docs/deploy (the systemd unit's ExecStart, the HAProxy configuration), and the
cost the shared model-call cache saves on a workload that repeats its questions.

    .venv/bin/python -m benchmarks.serve_load --replicas 2 --clients 32 --requests 320 --model-concurrency 4 \\
        --runs 3 --out benchmarks/results/serve/serve_replicas.json

Throughput: the same load generator as `serve_load` (`--clients` aiohttp clients, forced-local chat
completions for the index's highest-degree entities, each request's question its own so that no answer comes
from the cache; the replicas were warmed up before they listened) through HAProxy, first with one replica (both of its
`server` lines on replica A), then with two. Each replica may have `--model-concurrency` calls in flight to
the loopback model (`--latency-ms` per call, its own process), as a per-replica quota would allow: while the
model is the bottleneck, two replicas can answer twice the requests per second; the CPU of this machine (the
replicas, HAProxy, Redis, the model server and the load generator share its cores) caps both.

Cost: `--distinct` questions each asked `--repeats` times through HAProxy to two replicas, priced as
gpt-4.1-mini from the loopback model's token counts: without a cache, with each replica's own sqlite cache
(`[models.cache]`), and with the shared Redis cache (`[serve] redis_url`). Reported: model calls and dollars.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "docs" / "deploy"


def _toml(path: Path, model_url: str, args: argparse.Namespace, *, redis_url: str | None,
          sqlite: Path | None) -> Path:
    lines = ["[models.chat]", f'base_url = "{model_url}"', 'api_key = "bench"', 'model = "gpt-4.1-mini"',
             f"concurrency = {args.model_concurrency}", "", "[models.embedding]", 'provider = "offline"', ""]
    if sqlite is not None:
        lines += ["[models.cache]", "enabled = true", f'path = "{sqlite}"', ""]
    lines += ["[serve]", f"max_concurrency = {max(args.clients, 1)}", f"max_concurrency_per_key = {max(args.clients, 1)}"]
    if redis_url is not None:
        lines.append(f'redis_url = "{redis_url}"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@contextmanager
def _replicas(args: argparse.Namespace, folder: Path, configs: tuple[Path, Path]) -> Iterator[list[Any]]:
    """Two replicas as the systemd unit starts them, one after the other (each loads and warms the index),
    each with its graphroute.toml."""
    from testing.processes import Replica, free_port, unit_command

    with ExitStack() as stack:
        started = []
        for name, config in zip(("a", "b"), configs, strict=True):
            port = free_port()
            command, unit_env = unit_command(DEPLOY / "graphroute.service", {
                "GRAPHROUTE_CONFIG": str(config), "GRAPHROUTE_INDEX": str(args.index),
                "GRAPHROUTE_HOST": "127.0.0.1", "GRAPHROUTE_PORT": str(port)})
            env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "GRAPHROUTE_"))}
            env.update(unit_env)
            env["GRAPHROUTE_CACHE_DIR"] = os.environ.get("GRAPHROUTE_CACHE_DIR", str(Path.home() / ".cache" / "graphroute"))
            replica = Replica(command, port, env, log=folder / f"replica-{name}.log")
            started.append(stack.enter_context(replica))
        yield started


def _balancer(a: Any, b: Any) -> Any:
    from testing.processes import HAProxy

    return HAProxy(DEPLOY / "haproxy.cfg", {"GRAPHROUTE_REPLICA_A": a.address, "GRAPHROUTE_REPLICA_B": b.address})


def _throughput(url: str, questions: list[str], args: argparse.Namespace, tag: str) -> dict[str, Any]:
    """The load of `serve_load`, every request a question of its own (`tag` differs per load): the shared
    cache would otherwise answer the repeats, and this measures answering."""
    from benchmarks.serve_load import _load, _pct

    questions = [f"{questions[i % len(questions)]} (load {tag}, request {i})" for i in range(args.requests)]
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_load, args=(url, questions, args.clients, args.requests, args.model, child))
    proc.start()
    out = parent.recv()
    proc.join()
    lat = out["latencies"]
    ok = out["statuses"].get("200", 0)
    return {"throughput_rps": round(len(lat) / out["wall_s"], 2), "p50_s": round(statistics.median(lat), 3),
            "p95_s": round(_pct(lat, 0.95), 3), "errors": len(lat) - ok, "statuses": out["statuses"]}


def _cost_workload(url: str, questions: list[str], repeats: int) -> dict[str, Any]:
    """Every question asked `repeats` times (all first asks, then all second asks, ...), 4 at a time."""
    from concurrent.futures import ThreadPoolExecutor

    def ask(question: str) -> dict[str, Any]:
        with httpx.Client(base_url=url, timeout=120) as http:
            r = http.post("/v1/ask", json={"question": question, "mode": "local"})
            r.raise_for_status()
            body: dict[str, Any] = r.json()
            return body

    answers: list[dict[str, Any]] = []
    with ThreadPoolExecutor(4) as pool:
        for _ in range(repeats):
            answers += list(pool.map(ask, questions))
    totals = [a["usage"]["total"] for a in answers]
    return {"questions": len(answers), "model_calls": sum(t["llm_calls"] - t["cached_calls"] for t in totals),
            "cached_calls": sum(t["cached_calls"] for t in totals), "cost_usd": round(sum(a["cost"] for a in answers), 6)}


def run_replicas(args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks.serve_load import _model_server, _questions, summarise_runs
    from shared_context import load_index
    from testing.processes import RedisServer

    questions = _questions(load_index(args.index), 50)
    ctx = mp.get_context("spawn")
    model_parent, model_child = ctx.Pipe()
    model_proc = ctx.Process(target=_model_server, args=(args.latency_ms, model_child), daemon=True)
    model_proc.start()
    model_url = model_parent.recv()
    model_parent.send("load")
    report: dict[str, Any] = {"clients": args.clients, "requests": args.requests, "latency_ms": args.latency_ms,
                              "model_concurrency_per_replica": args.model_concurrency, "model": args.model,
                              "index": Path(args.index).name, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="graphroute-replicas-") as tmp, RedisServer() as redis:
        folder = Path(tmp)
        shared = _toml(folder / "shared.toml", model_url, args, redis_url=redis.url, sqlite=None)
        with _replicas(args, folder, (shared, shared)) as (a, b):
            by_count: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
            for run in range(args.runs):
                for count, second in ((1, a), (2, b)):
                    with _balancer(a, second) as lb:
                        by_count[count].append(_throughput(lb.url, questions, args, f"{run}.{count}"))
            report["throughput"] = {f"{n}_replica{'s' if n > 1 else ''}": {**summarise_runs(runs), "runs": runs}
                                    for n, runs in by_count.items()}
            report["load_average"] = os.getloadavg()
            distinct = [f"{q.rstrip('?')}, and whom is he close to?" for q in questions[:args.distinct]]
            with _balancer(a, b) as lb:
                shared_cost = _cost_workload(lb.url, distinct, args.repeats)
        costs = {"shared Redis cache": shared_cost}
        for label, sqlite in (("no cache", False), ("each replica's own sqlite cache", True)):
            # a cache file per replica, as on hosts of their own
            configs = tuple(_toml(folder / f"{label[:8].replace(' ', '-')}-{name}.toml", model_url, args,
                                  redis_url=None, sqlite=folder / f"calls-{name}.sqlite" if sqlite else None)
                            for name in ("a", "b"))
            with _replicas(args, folder, (configs[0], configs[1])) as (a2, b2), _balancer(a2, b2) as lb:
                costs[label] = _cost_workload(lb.url, distinct, args.repeats)
        report["cost_workload"] = {"distinct_questions": args.distinct, "repeats": args.repeats,
                                   "priced_as": "gpt-4.1-mini", "by_cache": costs}
    model_parent.send("stop")
    model_parent.recv()
    model_proc.join()
    return report
