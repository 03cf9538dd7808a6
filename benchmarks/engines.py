"""Engine cost and latency benchmark with a simulated 300 ms model (the loopback OpenAI-compatible server).

For each index (Christmas Carol, and a synthetic 10k-entity index from `benchmarks.synthetic_index`) and each
engine, one question is answered through the real OpenAI client against the loopback server, whose replies are
scripted per task (valid JSON for map / rate / primer / follow-ups) and delayed by `--latency-ms`. Printed per
run: model calls, prompt and output tokens (as the server counted them), report tokens read by the map step
and wall time. Checks printed at the end:
  * global with pre-ranking reads <= 10 % of the report tokens static global reads (10k index);
  * DRIFT at default settings makes <= 22 calls and finishes in <= 1/2 the time of a sequential run.

    python -m benchmarks.engines                      # both indexes, 300 ms
    python -m benchmarks.engines --latency-ms 100 --skip-carol
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import multiprocessing as mp
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engines.prompts import TASK_MARKERS

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CAROL = DATA / "christmas_carol_graphrag_index"

MARKERS = TASK_MARKERS
WARM_UP = "Which places and events are described?"
CAROL_QUESTION = "How does Scrooge change after the visits of the ghosts?"


def question_for(index_name: str, index: Any) -> str:
    """A question about the index's best-connected entities (synthetic text has no real-world topics)."""
    if index_name == "carol":
        return CAROL_QUESTION
    top = sorted(index.entities, key=lambda e: -e.degree)[:2]
    return f"What roles do {top[0].title} and {top[1].title} play across the communities, and how are they connected?"


def _first_ids(system: str, n: int = 3) -> str:
    ids = re.findall(r"^(\d+)\|", system, re.M)[:n]
    return ", ".join(ids) or "0"


def script_replies(server: Any) -> None:
    """Valid replies for every task; follow-up questions are unique so DRIFT's tree really grows."""
    counter = itertools.count()

    def system_of(body: dict[str, Any]) -> str:
        return "\n".join(m.get("content") or "" for m in body.get("messages", []) if m.get("role") == "system")

    def map_reply(body: dict[str, Any]) -> str:
        ids = _first_ids(system_of(body))
        return json.dumps({"points": [
            {"description": f"Key finding {j} about the question [Data: Reports ({ids})]", "score": 80 - 20 * j}
            for j in range(3)]})

    def leads(system: str, n: int, count: int) -> list[str]:
        """Follow-up questions about entities named in the supplied data (so the local context is real)."""
        names = list(dict.fromkeys(re.findall(r"\b[A-Z][A-Z'.-]+(?: [A-Z][A-Z'.-]+)+\b", system)))
        names = names[n % max(len(names), 1):] + names[: n % max(len(names), 1)]
        picked = (names + [f"lead {n}.{j}" for j in range(count)])[:count]
        return [f"What is the role of {name} (question {n}.{j})?" for j, name in enumerate(picked)]

    def primer(body: dict[str, Any]) -> str:
        n = next(counter)
        system = system_of(body)
        return json.dumps({"intermediate_answer": f"Intermediate answer {n} [Data: Reports ({_first_ids(system)})]",
                           "score": 50 + n % 40, "follow_up_queries": leads(system, n, 5)})

    def followup(body: dict[str, Any]) -> str:
        n = next(counter)
        return json.dumps({"response": f"Follow-up answer {n} [Data: Sources (1)]", "score": 30 + n % 60,
                           "follow_up_queries": leads(system_of(body), n, 3)})

    replies: dict[str, Any] = {
        "global_map": map_reply,
        "global_reduce": "Merged answer [Data: Reports (1, 2)].",
        "rate": json.dumps({"reason": "partly relevant", "rating": 2}),
        "drift_hyde": "A hypothetical answer shaped like the template report.",
        "drift_primer": primer,
        "drift_followup": followup,
        "drift_reduce": "Final DRIFT answer [Data: Reports (1)].",
        "local_answer": "Local answer [Data: Entities (1); Sources (1)].",
        "basic_answer": "Basic answer [Data: Sources (1)].",
    }
    for task, reply in replies.items():
        server.add_rule(None, system=MARKERS[task], reply=reply)


@dataclass
class Row:
    index: str
    run: str
    calls: int
    prompt_tokens: int
    output_tokens: int
    report_tokens_read: int
    seconds: float
    note: str = ""


def _serve(latency_ms: float, ready: Any, stop: Any) -> None:
    """Child process: the loopback server with scripted replies, until `stop` is set."""
    from benchmarks.simulated_model import LoopbackServer

    with LoopbackServer(latency_ms=latency_ms) as server:
        script_replies(server)
        ready.put(server.base_url)
        stop.wait()


class RemoteServer:
    """The loopback server in its own process, so its JSON and token counting do not share our GIL —
    as with a real remote model, only the latency is on the client's clock."""

    def __init__(self, latency_ms: float) -> None:
        ctx = mp.get_context("fork")
        self._ready: Any = ctx.Queue()
        self._stop = ctx.Event()
        self._proc = ctx.Process(target=_serve, args=(latency_ms, self._ready, self._stop), daemon=True)

    def __enter__(self) -> str:
        self._proc.start()
        url: str = self._ready.get(timeout=60)
        return url

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._proc.join(timeout=10)


async def run_one(index_name: str, label: str, engine: Any, question: str) -> Row:
    t0 = time.perf_counter()
    result = await engine.search(question)
    seconds = time.perf_counter() - t0
    total = result.usage.total  # equals what the server reported (asserted in tests/test_engines_*.py)
    read = sum(b["tokens"] for b in result.details.get("batches", []))
    note = ""
    if "reduce" in result.details and isinstance(result.details["reduce"], dict):
        r = result.details["reduce"]
        note = f"reduce: {r.get('points_in')} points, {r.get('levels', 1)} level(s)"
    if result.degraded:
        note += f" degraded={len(result.degraded)}"
    return Row(index_name, label, total.llm_calls, total.prompt_tokens, total.output_tokens, read, seconds,
               note.strip())


async def bench_index(index_name: str, index: Any, base_url: str, map_calls: list[int]) -> list[Row]:
    from pydantic import SecretStr

    from engines import BasicSearch, DriftSearch, GlobalSearch, LocalSearch
    from engines.config import DriftSearchConfig, GlobalSearchConfig
    from engines.models.config import ModelEndpoint, PriceTable
    from engines.models.openai_backend import OpenAIChatModel

    question = question_for(index_name, index)
    rows: list[Row] = []
    endpoint = ModelEndpoint(provider="openai", base_url=base_url, api_key=SecretStr("bench"), model="gpt-4.1-mini",
                             timeout_s=120, max_retries=0, total_deadline_s=600, concurrency=64)
    model = OpenAIChatModel(endpoint, PriceTable())
    runs: list[tuple[str, Any]] = [
        ("local", LocalSearch(index, model)),
        ("basic", BasicSearch(index, model)),
        ("global static", GlobalSearch(index, model)),
        ("global prerank (default budget)", GlobalSearch(index, model, config=GlobalSearchConfig(prerank=True))),
        *((f"global prerank ({n} map call{'s' if n > 1 else ''})",
           GlobalSearch(index, model, config=GlobalSearchConfig(prerank=True, max_map_calls=n))) for n in map_calls),
        ("drift default", DriftSearch(index, model)),
        ("drift sequential", DriftSearch(index, model, config=DriftSearchConfig(concurrency=1))),
    ]
    for _, engine in runs:  # warm the per-index caches (BM25 tables, row renders) so no timed run pays for them
        await engine.search(WARM_UP)
    for label, engine in runs:
        row = await run_one(index_name, label, engine, question)
        rows.append(row)
        print(f"  {index_name:9} {label:30} {row.calls:5d} calls {row.seconds:7.2f} s", flush=True)
    await model.aclose()
    return rows


def synthetic(entities: int, cache: Path) -> Path:
    from benchmarks.synthetic_index import write_synthetic_index

    out = cache / f"synth{entities // 1000}k"
    if not (out / "community_reports.parquet").exists():
        write_synthetic_index(out, entities)
    return out


def print_table(rows: list[Row]) -> None:
    head = f"{'index':9} {'run':30} {'calls':>5} {'prompt tok':>11} {'output tok':>10} {'reports read':>12} {'wall s':>7}  note"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(f"{r.index:9} {r.run:30} {r.calls:5d} {r.prompt_tokens:11,d} {r.output_tokens:10,d} "
              f"{r.report_tokens_read:12,d} {r.seconds:7.2f}  {r.note}")


def checks(rows: list[Row]) -> list[str]:
    out = []
    for name in sorted({r.index for r in rows}):
        by = {r.run.split(" (")[0]: r for r in rows if r.index == name}
        static = by.get("global static")
        for ranked in (r for r in rows if r.index == name and r.run.startswith("global prerank")):
            if not static or not static.report_tokens_read:
                continue
            share = ranked.report_tokens_read / static.report_tokens_read
            out.append(f"{name}: {ranked.run} reads {share:.1%} of static's report tokens "
                       f"({ranked.report_tokens_read:,} vs {static.report_tokens_read:,}) — target <= 10 %: "
                       f"{'PASS' if share <= 0.10 else 'FAIL'}")
        drift, seq = by.get("drift default"), by.get("drift sequential")
        if drift and seq:
            out.append(f"{name}: DRIFT default {drift.calls} calls (target <= 22: {'PASS' if drift.calls <= 22 else 'FAIL'}), "
                       f"{drift.seconds:.2f} s vs sequential {seq.seconds:.2f} s = {drift.seconds / seq.seconds:.0%} "
                       f"(target <= 50 %: {'PASS' if drift.seconds <= 0.5 * seq.seconds else 'FAIL'})")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--entities", type=int, default=10_000, help="size of the synthetic index")
    parser.add_argument("--map-calls", type=int, nargs="+", default=[1, 4],
                        help="map-call budgets of the pre-ranked global runs")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "graphroute-bench")
    parser.add_argument("--skip-carol", action="store_true")
    parser.add_argument("--skip-synthetic", action="store_true")
    args = parser.parse_args(argv)
    from shared_context import load_index

    targets: list[tuple[str, Path]] = []
    if not args.skip_carol:
        targets.append(("carol", CAROL))
    if not args.skip_synthetic:
        targets.append(("synth10k", synthetic(args.entities, args.cache)))
    rows: list[Row] = []
    for name, path in targets:
        t0 = time.perf_counter()
        index = load_index(path)
        print(f"loaded {name}: {len(index.entities):,} entities, {len(index.community_reports):,} reports "
              f"in {time.perf_counter() - t0:.1f} s", flush=True)
        with RemoteServer(args.latency_ms) as base_url:
            rows += asyncio.run(bench_index(name, index, base_url, args.map_calls))
    print()
    print(f"simulated model latency: {args.latency_ms:.0f} ms per call (loopback server in a child process, "
          "scripted replies)")
    print_table(rows)
    print()
    for line in checks(rows):
        print(line)


if __name__ == "__main__":
    main()
