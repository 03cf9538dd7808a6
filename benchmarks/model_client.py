"""Client overhead and throughput of the model layer against the loopback OpenAI-compatible server.

    .venv/bin/python -m benchmarks.model_client [--calls 200] [--latencies 0,50] [--limits 16,64]

Overhead per call = wall time of one `OpenAIChatModel.complete` minus the time the server spent on
that request (its injected latency included), measured sequentially; the same for the bare `openai`
SDK call shows what our wrapper (retry loop, limiter, usage, pricing) adds on top of the SDK.
Throughput = calls/s when 64 calls are always in flight from the caller's side, under a concurrency
limit of 16 or 64 per (endpoint, model); the server runs in a separate process there, so it does not
share the client's GIL (use --same-process to compare). Everything runs on 127.0.0.1; no network, no key.
The machine's load average is printed, because on a busy machine every figure is inflated.

Client CPU per call (`--cpu-calls`, the server in a separate process): the CPU time this process spends on one
call with a 40 kB prompt and a 2,000-character answer (streamed 4 characters a chunk, about a token each), for
`OpenAIChatModel.complete` / `.stream` and for the SDK's typed `chat.completions.create` without and with
`stream=True` - the figure that keeps the backend's streamed answers on the SDK's raw request path (its typed
stream builds a pydantic model per chunk). Median and range over `--runs` runs of each run's median; written
with the other figures to `--out` (default `benchmarks/results/model_client/model_client.json`).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from pathlib import Path

import openai
from pydantic import SecretStr

from benchmarks.common import emit_report
from benchmarks.simulated_model import LoopbackServer
from engines.models.base import Message
from engines.models.config import ModelEndpoint, PriceTable
from engines.models.limiter import LimiterRegistry
from engines.models.openai_backend import OpenAIChatModel

MESSAGES: list[Message] = [
    {"role": "system", "content": "You answer from the context.\n-----Entities-----\nid|entity\n1|SCROOGE"},
    {"role": "user", "content": "Who is Scrooge?"},
]
REPLY = "Scrooge is a miser who learns generosity. [Data: Entities (1)]"
OUT = Path(__file__).resolve().parent / "results" / "model_client" / "model_client.json"
# a local question's size: a 40 kB context table in the system message, a 2,000-character answer
LONG_CONTEXT = "\n".join(f"{i}|ENTITY {i}|the description of entity {i}, a few words about it" for i in range(640))
LONG_MESSAGES: list[Message] = [
    {"role": "system", "content": f"You answer from the context.\n-----Entities-----\nid|entity|description\n{LONG_CONTEXT}"},
    {"role": "user", "content": "Who is Scrooge?"},
]
LONG_REPLY = ("Scrooge is a miser who learns generosity. [Data: Entities (1)] " * 32)[:2000]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def model_for(srv: LoopbackServer | RemoteServer, limit: int) -> OpenAIChatModel:
    endpoint = ModelEndpoint(provider="openai", model="gpt-4.1-mini", base_url=srv.base_url, api_key=SecretStr("bench"),
                             concurrency=limit, timeout_s=30, max_retries=0)
    return OpenAIChatModel(endpoint, PriceTable(), limiter_registry=LimiterRegistry())


async def overhead(srv: LoopbackServer, calls: int) -> tuple[list[float], list[float]]:
    """Per-call overhead (ms) of our wrapper and of the bare SDK, sequential calls."""
    model = model_for(srv, 16)
    sdk = openai.AsyncOpenAI(base_url=srv.base_url, api_key="bench", max_retries=0)
    for _ in range(5):  # warm up connections and lazy imports
        await model.complete(MESSAGES)
        await sdk.chat.completions.create(model="gpt-4.1-mini", messages=MESSAGES)  # type: ignore[arg-type]
    ours, bare = [], []
    for _ in range(calls):
        srv.requests.clear()
        t0 = time.perf_counter()
        await model.complete(MESSAGES)
        ours.append((time.perf_counter() - t0 - srv.requests[-1].seconds) * 1000)
        srv.requests.clear()
        t0 = time.perf_counter()
        await sdk.chat.completions.create(model="gpt-4.1-mini", messages=MESSAGES)  # type: ignore[arg-type]
        bare.append((time.perf_counter() - t0 - srv.requests[-1].seconds) * 1000)
    await sdk.close()
    await model.aclose()
    return ours, bare


def _serve(conn: Connection, latency_ms: float, reply: str = REPLY, chunk_chars: int = 8) -> None:
    """Child process: run the server, answer "reset"/"peak" commands, stop on "stop"."""
    with LoopbackServer(latency_ms=latency_ms, default_reply=reply, stream_chunk_chars=chunk_chars) as srv:
        conn.send(srv.base_url)
        while (command := conn.recv()) != "stop":
            if command == "reset":
                srv.reset()
                conn.send(None)
            elif command == "peak":
                conn.send(srv.max_in_flight)


class RemoteServer:
    """The loopback server in a child process, with the two numbers the benchmark reads."""

    def __init__(self, conn: Connection, base_url: str) -> None:
        self._conn = conn
        self.base_url = base_url

    def reset(self) -> None:
        self._conn.send("reset")
        self._conn.recv()

    @property
    def max_in_flight(self) -> int:
        self._conn.send("peak")
        return int(self._conn.recv())


@contextmanager
def server_process(latency_ms: float, reply: str = REPLY, chunk_chars: int = 8) -> Iterator[RemoteServer]:
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child, latency_ms, reply, chunk_chars), daemon=True)
    proc.start()
    try:
        yield RemoteServer(parent, parent.recv())
    finally:
        parent.send("stop")
        proc.join(timeout=10)


async def throughput(srv: LoopbackServer | RemoteServer, limit: int, calls: int, in_flight: int = 64) -> tuple[float, int]:
    endpoint = ModelEndpoint(provider="openai", model="gpt-4.1-mini", base_url=srv.base_url, api_key=SecretStr("b"),
                             concurrency=limit, timeout_s=30, max_retries=0)
    model = OpenAIChatModel(endpoint, PriceTable(), limiter_registry=LimiterRegistry())
    await asyncio.gather(*(model.complete(MESSAGES) for _ in range(min(limit, 16))))  # warm-up
    srv.reset()
    queue = iter(range(calls))

    async def worker() -> None:
        for _ in queue:
            await model.complete(MESSAGES)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    elapsed = time.perf_counter() - t0
    await model.aclose()
    return calls / elapsed, srv.max_in_flight


async def client_cpu(srv: RemoteServer, calls: int) -> dict[str, float]:
    """Median CPU ms of this process per call, for our model and the SDK's typed calls, plain and streamed."""
    model = model_for(srv, 16)
    sdk = openai.AsyncOpenAI(base_url=srv.base_url, api_key="bench", max_retries=0)

    async def ours_stream() -> None:
        async for _ in model.stream(LONG_MESSAGES):
            pass

    async def sdk_stream() -> None:
        stream = await sdk.chat.completions.create(model="gpt-4.1-mini", messages=LONG_MESSAGES,  # type: ignore[arg-type]
                                                   stream=True)
        async for _ in stream:
            pass

    async def ours_complete() -> None:
        await model.complete(LONG_MESSAGES)

    async def sdk_complete() -> None:
        await sdk.chat.completions.create(model="gpt-4.1-mini", messages=LONG_MESSAGES)  # type: ignore[arg-type]

    calls_of = {"ours_complete": ours_complete, "sdk_typed_complete": sdk_complete,
                "ours_stream": ours_stream, "sdk_typed_stream": sdk_stream}
    out = {}
    for name, call in calls_of.items():
        for _ in range(5):  # warm up connections and lazy imports
            await call()
        cpu = []
        for _ in range(calls):
            t0 = time.process_time()
            await call()
            cpu.append((time.process_time() - t0) * 1000)
        out[name] = statistics.median(cpu)
    await sdk.close()
    await model.aclose()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="sequential calls per overhead measurement")
    parser.add_argument("--throughput-calls", type=int, default=512, help="calls per throughput measurement")
    parser.add_argument("--latencies", default="0,50", help="server latency per call in ms, comma separated")
    parser.add_argument("--limits", default="16,64", help="concurrency limits to measure, comma separated")
    parser.add_argument("--same-process", action="store_true", help="run the server in this process for throughput")
    parser.add_argument("--cpu-calls", type=int, default=100, help="calls per client-CPU measurement")
    parser.add_argument("--runs", type=int, default=3, help="runs of the client-CPU measurement")
    parser.add_argument("--out", type=Path, default=OUT, help="result file")
    args = parser.parse_args(argv)
    print(f"load average before the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    latencies = [float(x) for x in args.latencies.split(",") if x.strip()]
    limits = [int(x) for x in args.limits.split(",") if x.strip()]

    print("client overhead per call (ms; wall time minus server time, sequential)")
    print(f"{'server latency':>15} | {'ours p50':>9} {'ours p95':>9} | {'SDK p50':>8} {'SDK p95':>8} | {'wrapper adds p50':>16}")
    rows = []
    for latency in latencies:
        with LoopbackServer(latency_ms=latency, default_reply=REPLY) as srv:
            calls = args.calls if latency == 0 else max(20, args.calls // 4)
            ours, bare = asyncio.run(overhead(srv, calls))
        rows.append((latency, ours, bare))
        print(f"{latency:>12.0f} ms | {statistics.median(ours):>9.2f} {pct(ours, 0.95):>9.2f} | "
              f"{statistics.median(bare):>8.2f} {pct(bare, 0.95):>8.2f} | "
              f"{statistics.median(ours) - statistics.median(bare):>16.2f}")

    print()
    print("throughput with 64 calls in flight from the caller (calls/s; max in flight seen by the server)")
    print(f"{'server latency':>15} | " + " | ".join(f"limit {limit:>3}: calls/s  max" for limit in limits))
    for latency in latencies:
        cells = []
        for limit in limits:
            if args.same_process:
                with LoopbackServer(latency_ms=latency, default_reply=REPLY) as local:
                    rate, peak = asyncio.run(throughput(local, limit, args.throughput_calls))
            else:
                with server_process(latency) as remote:
                    rate, peak = asyncio.run(throughput(remote, limit, args.throughput_calls))
            cells.append(f"{rate:>17.0f} {peak:>4d}")
        print(f"{latency:>12.0f} ms | " + " | ".join(cells))
    print()
    print("client CPU per call (ms; 40 kB prompt, 2,000-character answer streamed 4 characters a chunk)")
    with server_process(0, LONG_REPLY, chunk_chars=4) as remote:
        runs = [asyncio.run(client_cpu(remote, args.cpu_calls)) for _ in range(args.runs)]
    cpu = {name: {"median": statistics.median(r[name] for r in runs), "min": min(r[name] for r in runs),
                  "max": max(r[name] for r in runs), "runs": [r[name] for r in runs]} for name in runs[0]}
    for name, fig in cpu.items():
        print(f"{name:>20}: {fig['median']:.2f} ({fig['min']:.2f}-{fig['max']:.2f}, {len(runs)} runs)")
    print(f"load average after the run: {os.getloadavg()[0]:.2f}")
    overheads = {str(latency): {"ours_p50_ms": statistics.median(ours), "sdk_p50_ms": statistics.median(bare)}
                for latency, ours, bare in rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    emit_report({"overhead": overheads, "client_cpu_ms_per_call": cpu}, args.out, printed={"result_file": str(args.out)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
