"""Soak: thousands of questions through one sync `Router` and the loopback model server; RSS and sockets over time.

    .venv/bin/python -m benchmarks.soak --index ../shared/data/christmas_carol_graphrag_index --questions 2000

The model server runs in a child process (its own memory and sockets are not counted) and answers every
task with the offline extractive model (`benchmarks.bench_mock.OfflineResponder`: valid map/primer/follow-up
JSON, so every engine runs its full pipeline over real HTTP). Questions cycle through the engines (local,
global, DRIFT, basic, auto) and alternate plain `ask` with streaming (`astream` on the Router's loop).
Questions are built from the index's own entity titles. Every `--every` questions it prints RSS, open TCP
connections and open file descriptors of this process. Target: from question 100 to the last,
RSS grows by <= 10 MB and the socket count stays constant.
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Any

from benchmarks.common import CAROL_INDEX, emit_report

MODES = ("local", "global", "drift", "basic", "auto")


def _model_server(conn: Any) -> None:
    from benchmarks.bench_mock import MockBackend, parse_model_spec

    with MockBackend(parse_model_spec("mock:0")) as backend:
        backend.server.requests = _Discard()  # a soak must not measure the test server's request log
        conn.send(backend.base_url)
        conn.recv()


class _Discard(list):  # type: ignore[type-arg]
    def append(self, item: Any) -> None:
        return None


def _sample(proc: Any) -> dict[str, float]:
    gc.collect()
    return {"rss_mb": proc.memory_info().rss / 2**20,
            "tcp": len([c for c in proc.net_connections(kind="tcp") if c.status != "LISTEN"]),
            "fds": proc.num_fds()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    import psutil

    from engines.config import GraphrouteConfig
    from engines.models.config import models_config_from_mapping
    from router import Router
    from router.router import Done
    from shared_context import load_index

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    server = ctx.Process(target=_model_server, args=(child,), daemon=True)
    server.start()
    base_url = parent.recv()
    models = models_config_from_mapping({"chat": {"base_url": base_url, "api_key": "soak", "model": "gpt-4.1-mini",
                                                  "concurrency": 8},
                                         "embedding": {"provider": "offline"}}, env={})
    index = load_index(args.index)
    ranked = sorted(range(len(index.entities)), key=lambda i: -len(index.entity_relationships[i]))
    titles = [index.entities[i].title.title() for i in ranked[:4]]
    # A few questions, each asked in every mode, streaming and not: the replies are soon cached by the model
    # server, so the run measures the client side (memory, sockets), not the offline model's CPU.
    questions = [f"Who is {t}?" for t in titles] + [f"How is {titles[0]} connected to {titles[1]}?"]
    proc = psutil.Process()
    samples: list[dict[str, Any]] = []
    started = time.perf_counter()
    errors: dict[str, int] = {}
    with Router(index, config=GraphrouteConfig(models=models)) as router:

        async def streamed(q: str, mode: str) -> None:
            async for ev in router.astream(q, mode=mode):
                if isinstance(ev, Done):
                    return

        for n in range(1, args.questions + 1):
            q, mode = questions[(n // len(MODES)) % len(questions)], MODES[n % len(MODES)]
            try:
                if n % 2:
                    router.ask(q, mode=mode)
                else:
                    router.run(streamed(q, mode))
            except Exception as exc:  # counted, never hidden; the soak goes on
                errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
            if n % args.every == 0 or n == 1:
                s = {"question": n, "seconds": round(time.perf_counter() - started, 1), **_sample(proc)}
                samples.append(s)
                print(f"q={n:5d}  t={s['seconds']:7.1f}s  rss={s['rss_mb']:7.1f} MB  tcp={s['tcp']}  fds={s['fds']}",
                      flush=True)
    after_close = _sample(proc)
    parent.send("stop")
    server.join(10)
    base = next((s for s in samples if s["question"] >= 100), samples[0])
    last = samples[-1]
    tcp_after_100 = sorted({s["tcp"] for s in samples if s["question"] >= 100})
    return {
        "index": Path(args.index).name, "questions": args.questions, "errors": errors,
        "rss_growth_mb_from_q100": round(last["rss_mb"] - base["rss_mb"], 1),
        "tcp_counts_from_q100": tcp_after_100, "tcp_after_close": after_close["tcp"],
        "targets_met": last["rss_mb"] - base["rss_mb"] <= 10 and len(tcp_after_100) == 1,
        "load_average": os.getloadavg(), "samples": samples,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", default=str(CAROL_INDEX))
    p.add_argument("--questions", type=int, default=2000)
    p.add_argument("--every", type=int, default=100)
    p.add_argument("--out", help="write the report as JSON here")
    args = p.parse_args(argv)
    report = run(args)
    emit_report(report, args.out, printed={k: v for k, v in report.items() if k != "samples"})
    return 0 if report["targets_met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
