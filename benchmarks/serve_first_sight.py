"""What a question seen for the first time costs the service, against the same question asked again.

    .venv/bin/python -m benchmarks.serve_first_sight [--index PATH] [--questions 50] [--warm-rows 50000]

One process, one question at a time (so process CPU time is the service's own work, not a queue): the
service's ASGI app called directly (no uvicorn, no sockets on the client side), warmed up as `graphroute
serve` does (`Service.prepare`, `[serve] warm_rows` rows), its chat model pointed at the loopback
OpenAI-compatible server in a child process (0 ms latency), offline embedder. Questions are "Who is X?" for
the index's highest-degree entities after the first four (read from the index, as in `serve_load`; the first
four are the warm-up's). It asks them all once ("first sight"), then all again ("repeat"), and prints the
service's CPU per request for each pass and their ratio. `--warm-rows 0` shows what the rows' warm-up saves.
CPU time on a shared VM varies from run to run with what else runs: compare passes of one run, or runs
taken back to back.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import time
from pathlib import Path
from typing import Any

from benchmarks.serve_load import _model_server, _questions


async def _call(app: Any, question: str) -> None:
    raw = json.dumps({"model": "graphroute-local", "messages": [{"role": "user", "content": question}]}).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions", "query_string": b"",
             "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2),
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]}
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:  # the request was read whole: wait as a connected client would
            await asyncio.Event().wait()
        sent = True
        return {"type": "http.request", "body": raw, "more_body": False}

    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    await app(scope, receive, send)
    if statuses != [200]:
        raise RuntimeError(f"the service answered {statuses} to {question!r}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    from engines.config import GraphrouteConfig, ServeConfig
    from engines.models.config import models_config_from_mapping
    from router import Router
    from router.service import Service
    from router.service.app import create_app
    from shared_context import load_index

    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    model_proc = ctx.Process(target=_model_server, args=(0.0, child), daemon=True)
    model_proc.start()
    base_url = parent.recv()
    parent.send("load")
    models = models_config_from_mapping({
        "chat": {"base_url": base_url, "api_key": "bench", "model": "gpt-4.1-mini"},
        "embedding": {"provider": "offline"},
    }, env={})
    index = load_index(args.index)
    questions = _questions(index, args.questions + 4)
    router = Router(index, config=GraphrouteConfig(models=models))
    service = Service({"index": router}, ServeConfig(warm_rows=args.warm_rows))
    started = time.process_time()
    service.prepare()
    prepare_s = time.process_time() - started
    app = create_app(service)

    async def main() -> dict[str, float]:
        for q in questions[:4]:  # as serve_load's warm-up
            await _call(app, q)
        out = {}
        for label in ("first_sight", "repeat"):
            cpu0 = time.process_time()
            for q in questions[4:]:
                await _call(app, q)
            out[label] = 1000 * (time.process_time() - cpu0) / max(len(questions) - 4, 1)
        await router.aclose()
        return out

    try:
        per = asyncio.run(main())
    finally:
        parent.send("stop")
        parent.recv()
        model_proc.join()
    return {"index": Path(args.index).name, "questions": len(questions) - 4, "warm_rows": args.warm_rows,
            "prepare_cpu_s": round(prepare_s, 2),
            "cpu_ms_per_request": {k: round(v, 2) for k, v in per.items()},
            "first_sight_over_repeat": round(per["first_sight"] / per["repeat"], 3) if per["repeat"] else None,
            "load_average": os.getloadavg()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" /
                                          "christmas_carol_graphrag_index"))
    p.add_argument("--questions", type=int, default=50)
    p.add_argument("--warm-rows", type=int, default=50_000)
    p.add_argument("--out", help="write the report as JSON here")
    args = p.parse_args(argv)
    report = run(args)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
