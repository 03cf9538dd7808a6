"""What a question seen for the first time costs the service, against the same question asked again.

    .venv/bin/python -m benchmarks.serve_first_sight [--index PATH] [--questions 50] [--warm-rows 50000]

One process, one question at a time (so process CPU time is the service's own work, not a queue): the
service's ASGI app called directly (no uvicorn, no sockets on the client side), warmed up as `graphroute
serve` does (`Service.prepare`, `[serve] warm_rows` rows), its chat model pointed at the loopback
OpenAI-compatible server in a child process (0 ms latency), offline embedder. Questions are "Who is X?" for
the index's highest-degree entities after the first four (read from the index, as in `serve_load`; the first
four are the warm-up's). It asks them all once ("first sight"), then all again ("repeat"), and prints per
request for each pass: the service's CPU time, the tokenizer calls and characters tokenised, and the
local-context rows rendered. `--warm-rows 0` shows what the rows' warm-up saves. The counts are exact and the
same on any machine; CPU time on a shared virtual machine varies by tens of percent within one run with what else runs.
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

from benchmarks.common import CAROL_INDEX, emit_report
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

    from shared_context.tables import per_index_cache

    counter = _CountingEncoding(index.tokenizer._enc)
    index.tokenizer._enc = counter  # counts what is tokenised (deterministic, unlike CPU time here)
    rows = per_index_cache(index, "local.rows", dict)
    n = max(len(questions) - 4, 1)

    async def main() -> dict[str, dict[str, float]]:
        for q in questions[:4]:  # as serve_load's warm-up
            await _call(app, q)
        out = {}
        for label in ("first_sight", "repeat"):
            cpu0, calls0, chars0, rows0 = time.process_time(), counter.calls, counter.chars, len(rows)
            for q in questions[4:]:
                await _call(app, q)
            out[label] = {"cpu_ms": round(1000 * (time.process_time() - cpu0) / n, 2),
                          "tokenizer_calls": round((counter.calls - calls0) / n, 1),
                          "tokenized_chars": round((counter.chars - chars0) / n),
                          "rows_rendered": round((len(rows) - rows0) / n, 1)}
        await router.aclose()
        return out

    try:
        per = asyncio.run(main())
    finally:
        parent.send("stop")
        parent.recv()
        model_proc.join()
    return {"index": Path(args.index).name, "questions": len(questions) - 4, "warm_rows": args.warm_rows,
            "prepare_cpu_s": round(prepare_s, 2), "per_request": per, "load_average": os.getloadavg()}


class _CountingEncoding:
    """A tiktoken encoding that counts its `encode_ordinary` calls and the characters they encode."""

    def __init__(self, enc: Any) -> None:
        self._enc, self.calls, self.chars = enc, 0, 0

    def encode_ordinary(self, text: str) -> list[int]:
        self.calls += 1
        self.chars += len(text)
        return self._enc.encode_ordinary(text)  # type: ignore[no-any-return]

    def encode_ordinary_batch(self, texts: list[str], **kwargs: Any) -> list[list[int]]:
        self.calls += len(texts)
        self.chars += sum(len(t) for t in texts)
        return self._enc.encode_ordinary_batch(texts, **kwargs)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._enc, name)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", default=str(CAROL_INDEX))
    p.add_argument("--questions", type=int, default=50)
    p.add_argument("--warm-rows", type=int, default=50_000)
    p.add_argument("--out", help="write the report as JSON here")
    args = p.parse_args(argv)
    report = run(args)
    emit_report(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
