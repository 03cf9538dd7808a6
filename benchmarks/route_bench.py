"""`route-bench`: latency and cost of every engine and of the router, on your index and your questions.

    route-bench --index PATH --queries FILE|builtin:NAME
                [--engines local,global,global-prerank,drift,basic,router,keyword-router]
                [--model offline|mock:LATENCY_MS[:TOKENS_PER_S]|openai] [--repeat N] [--concurrency C]
                [--out DIR] [--seed S] [--config graphroute.toml] [--price-as MODEL] [--limit N] [--no-progress]
                [--grade [--no-judge]] [--label-map FILE]

Writes `DIR/report.json` (every run: config, model, seed, package versions, per-query rows with per-stage
usage), `DIR/report.md` and PNG charts, and prints a table. Exit codes: 0 all runs succeeded and every
figure is consistent; 1 some run failed or a consistency check failed (both are listed in the report);
2 bad input (missing index, unreadable queries, unknown engine, bad --model), with a message and no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.bench_mock import MockBackend, ModelSpec, parse_model_spec
from benchmarks.bench_queries import BenchInputError, LabelMap, Query, builtin_names, load_queries
from benchmarks.bench_runner import (
    TARGET_NAMES,
    Pricing,
    build_targets,
    check_router_rows,
    check_row,
    run_benchmark,
)
from benchmarks.bench_stats import quality_section, router_section, summarize_engine

DEFAULT_PRICE_AS = "gpt-4.1-mini"
DEFAULT_EMBEDDING_PRICE_AS = "text-embedding-3-small"
PACKAGES = ("graphroute", "numpy", "pandas", "pyarrow", "pydantic", "openai", "httpx", "tiktoken",
            "scikit-learn", "lancedb", "matplotlib", "rich")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="route-bench",
        description="Measure latency, model calls, tokens and cost of each GraphRAG engine and of the router.",
    )
    p.add_argument("--index", required=True, help="GraphRAG index folder (the parquet output)")
    p.add_argument("--queries", required=True,
                   help="questions: .txt (one per line), .csv, .jsonl or .parquet (columns question, optional id, "
                        "label, answer, evidence, question_type), or builtin:NAME "
                        f"({', '.join(builtin_names())})")
    p.add_argument("--engines", default="local,global,global-prerank,drift,basic,router",
                   help="comma-separated subset of local,global,global-prerank,drift,basic,router,keyword-router "
                        "(default: all but keyword-router); global-prerank is global search with [global_search] "
                        "prerank = true; keyword-router is the baseline of the keyword rules of the enterprise "
                        "GraphRAG guide")
    p.add_argument("--model", default="offline",
                   help="offline (extractive, no network), mock:LATENCY_MS[:TOKENS_PER_S] (loopback OpenAI server "
                        "answering with the offline model after LATENCY_MS), or openai (graphroute.toml / env)")
    p.add_argument("--repeat", type=int, default=1, help="runs per question and engine (default 1)")
    p.add_argument("--concurrency", type=int, default=1, help="questions in flight per engine (default 1)")
    p.add_argument("--out", default="route-bench-out", help="output folder (default ./route-bench-out)")
    p.add_argument("--seed", type=int, default=0, help="seed for DRIFT templates and report shuffling (default 0)")
    p.add_argument("--config", default=None, help="graphroute.toml with engine settings")
    p.add_argument("--settings", default=None, metavar="PATH",
                   help="the GraphRAG project's settings.yaml (default: the one beside the index folder, if any)")
    p.add_argument("--no-settings", action="store_true", help="ignore the GraphRAG project's settings")
    p.add_argument("--price-as", default=DEFAULT_PRICE_AS,
                   help=f"offline/mock: price tokens as this model (default {DEFAULT_PRICE_AS})")
    p.add_argument("--limit", type=int, default=None,
                   help="use a stratified sample of N questions (across labels and question types, seeded by --seed)")
    p.add_argument("--label-map", default=None, metavar="FILE",
                   help="JSON {field, map}: derive each question's label from another column (e.g. GraphRAG-Bench's "
                        "question_type with ../shared/data/graphrag_bench/router_label_map.json)")
    p.add_argument("--grade", action="store_true",
                   help="grade answers against the gold 'answer' / 'evidence' columns: token F1, evidence recall and "
                        "citation validity always; with --model openai also an LLM judge (verdict, faithfulness, "
                        "context precision/recall), whose calls are reported apart from the answers'")
    p.add_argument("--no-judge", action="store_true", help="--grade without the LLM judge (offline measures only)")
    p.add_argument("--model-cache", default=None, metavar="PATH",
                   help="enable the model-call cache (sqlite file) so repeats show cache hits; off by default "
                        "(the offline model is never cached: it is deterministic and free)")
    p.add_argument("--no-warmup", action="store_true",
                   help="mock: skip the unmeasured pass that precomputes the offline replies")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--quiet", action="store_true", help="no terminal table")
    return p


def parse_engines(text: str) -> list[str]:
    names = [n.strip().lower() for n in text.split(",") if n.strip()]
    if not names:
        raise BenchInputError("--engines is empty (choose from " + ", ".join(TARGET_NAMES) + ")")
    unknown = [n for n in names if n not in TARGET_NAMES]
    if unknown:
        raise BenchInputError(f"unknown engine {unknown[0]!r} in --engines (choose from {', '.join(TARGET_NAMES)})")
    return list(dict.fromkeys(names))


# ---- configuration of the model backend ---------------------------------------------------------


def make_config(spec: ModelSpec, config_path: str | None, seed: int, base_url: str | None, price_as: str,
                cache_path: str | None = None, *, index: str | None = None,
                settings: str | bool | None = False) -> Any:
    """The GraphrouteConfig for this run: engine settings from `--config` over the GraphRAG project's
    settings (`settings`: a file, None to look beside `index`, False for none), models from `--model`,
    seeds fixed."""
    from engines.config_layers import load_project_config
    from engines.models.config import CacheConfig, models_config_from_mapping

    config = load_project_config(index or ".", config_path, settings if index is not None else False)
    if spec.kind == "offline":
        # Ignore OPENAI_API_KEY & co: `--model offline` must never reach a network.
        models = models_config_from_mapping({"chat": {"provider": "offline"}, "embedding": {"provider": "offline"}},
                                            env={})
        config = config.model_copy(update={"models": models})
    elif spec.kind == "mock":
        # The chat model is named after the priced model so the model layer prices calls as it would
        # for the real thing; embeddings stay offline (the server's hash vectors carry no meaning).
        models = models_config_from_mapping(
            {"chat": {"provider": "openai", "base_url": base_url, "model": price_as},
             "embedding": {"provider": "offline"}},
            env={},
        )
        config = config.model_copy(update={"models": models})
    elif config.models.offline:
        raise BenchInputError("--model openai needs an endpoint: set OPENAI_API_KEY (or OPENAI_BASE_URL), or "
                              "[models.chat] in graphroute.toml")
    if cache_path is not None:
        cache = CacheConfig(enabled=True, path=Path(cache_path))
        config = config.model_copy(update={"models": config.models.model_copy(update={"cache": cache})})
    return config.model_copy(update={
        "drift": config.drift.model_copy(update={"seed": seed}),
        "global_search": config.global_search.model_copy(update={"random_state": seed}),
    })


def _load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):  # not available on Windows
        return None


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def index_facts(index: Any) -> dict[str, Any]:
    return {
        "entities": len(index.entities),
        "relationships": len(index.relationships),
        "community_reports": len(index.community_reports),
        "text_units": len(index.text_units),
        "claims": len(index.claims),
        "documents": len(index.documents),
        "version": str(getattr(index, "version", "")),
    }


# ---- the run ------------------------------------------------------------------------------------


def run(args: argparse.Namespace, queries: list[Query], engines: list[str], spec: ModelSpec) -> int:
    from engines.models.config import PriceTable
    from shared_context import load_index

    index_path = Path(args.index)
    random.seed(args.seed)
    started = time.perf_counter()
    try:
        index = load_index(index_path)
    except Exception as exc:  # any loader error is a bad --index for the user; say which and why
        raise BenchInputError(f"cannot load index {index_path}: {exc}") from None

    mock = MockBackend(spec) if spec.kind == "mock" else None
    warmup_stats: dict[str, Any] | None = None
    load_before = _load_average()
    try:
        if mock is not None:
            mock.__enter__()
        config = make_config(spec, args.config, args.seed, mock.base_url if mock else None, args.price_as,
                             args.model_cache, index=args.index,
                             settings=False if args.no_settings else args.settings)
        table: PriceTable = config.models.prices
        if spec.kind != "openai" and table.lookup(args.price_as) is None:
            raise BenchInputError(f"--price-as {args.price_as!r}: no price known for this model "
                                  f"(known: {', '.join(sorted(table.prices))})")
        pricing = (Pricing("reported", config.models.chat.model, config.models.embedding.model, table)
                   if spec.kind == "openai"
                   else Pricing("priced_as", args.price_as, DEFAULT_EMBEDDING_PRICE_AS, table,
                                chat_cost_from_model_layer=spec.kind == "mock"))
        from benchmarks.bench_mock import RelayedModels
        from engines.models.factory import Models

        # mock: the loopback server's offline replies read the typed contexts the engines hand their models
        models = (RelayedModels if mock is not None else Models).from_config(config.models, index=index)
        _ = models.embedder  # fit/load it now: it is set-up, not part of the first question's latency
        targets = build_targets(index, config, models, engines)
        judge, judge_note = _judge_for(args, spec, models, index) if args.grade else (None, None)
        grader = None
        if args.grade:
            from benchmarks.bench_grade import make_grader

            grader = make_grader(index, keep_judge_input=judge is not None)
        if mock is not None:
            # With a model cache the warm-up would turn every measured call into a cache hit.
            if not args.no_warmup and args.model_cache is None:
                mock.warmup()
                warm = _run_with_progress(targets, queries, args, pricing, models, warmup=True)
                warmup_stats = {"runs": len(warm), "failed": sum(1 for r in warm if not r["ok"]),
                                "degraded": sum(1 for r in warm if r["ok"] and r["degraded"]),
                                "llm_calls": sum(r["llm_calls"] for r in warm),
                                "errors": sorted({str(r["error"]) for r in warm if not r["ok"]})[:10]}
            mock.measure()
        rows = _run_with_progress(targets, queries, args, pricing, models, grader=grader)
        mock_stats = mock.stats() if mock else None
        if judge is not None:
            _judge_pass(judge, rows, queries, args, models)
        for row in rows:
            row.pop("_judge_input", None)  # a judge input is never written out
        if mock_stats is not None:
            mock_stats["warmup"] = warmup_stats
    finally:
        if mock is not None:
            mock.__exit__(None, None, None)

    report = build_report(args, queries, engines, spec, config, pricing, index, rows, mock_stats,
                          time.perf_counter() - started)
    if args.grade:
        report["grading"] = {"judge": judge is not None, "judge_model": getattr(judge, "model", None) and judge.model.name,
                             "note": judge_note, "graded_queries": sum(1 for q in queries if q.answer or q.evidence)}
    # Latency is wall-clock: a busy machine inflates it, so the report says how busy this one was.
    report["machine"] = {"cpus": os.cpu_count(), "load_average_1m_before": load_before,
                         "load_average_1m_after": _load_average()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from benchmarks.bench_charts import ChartsUnavailable, write_charts
    from benchmarks.bench_report import print_terminal, render_markdown, write_json

    try:
        report["charts"] = write_charts(report, out)
    except ChartsUnavailable as err:  # the report is complete without them
        report["charts"] = []
        print(f"route-bench: {err}; the report has no charts", file=sys.stderr)
    write_json(report, out / "report.json")
    (out / "report.md").write_text(render_markdown(report), encoding="utf-8")
    if not args.quiet:
        print_terminal(report)
        print(f"report: {out / 'report.md'}, {out / 'report.json'}; charts: {', '.join(report['charts']) or 'none'}")
    return 1 if report["failures"] or report["consistency"]["problems"] else 0


def _judge_for(args: argparse.Namespace, spec: ModelSpec, models: Any, index: Any) -> tuple[Any, str]:
    """The LLM judge for this run, or None with the reason it does not run."""
    if args.no_judge:
        return None, "LLM judge off (--no-judge): offline measures only"
    if spec.kind != "openai":
        return None, ("LLM judge not run: it needs a real model (--model openai); offline and mock replies come from "
                      "the extractive model, which cannot judge. Offline measures only")
    from benchmarks.grading import Judge, NeedsRealModel

    try:
        return Judge(models.chat("judge"), index.tokenizer), "LLM judge: verdict, faithfulness, context precision/recall"
    except NeedsRealModel as err:
        return None, f"LLM judge not run: {err}"


def _judge_pass(judge: Any, rows: list[dict[str, Any]], queries: list[Query], args: argparse.Namespace,
                models: Any) -> None:
    from benchmarks.bench_grade import judge_rows

    async def one_pass() -> None:
        try:
            await judge_rows(judge, rows, queries, concurrency=max(args.concurrency, 4))
        finally:
            await models.aclose()

    asyncio.run(one_pass())


def _run_with_progress(targets: dict[str, Any], queries: list[Query], args: argparse.Namespace,
                       pricing: Pricing, models: Any, warmup: bool = False,
                       grader: Any = None) -> list[dict[str, Any]]:
    repeat = 1 if warmup else args.repeat
    label = "warm-up" if warmup else "route-bench"

    async def one_pass(on_done: Any = None) -> list[dict[str, Any]]:
        try:
            return await run_benchmark(targets, queries, repeat=repeat, concurrency=args.concurrency,
                                       pricing=pricing, seed=args.seed, on_done=on_done, grader=grader)
        finally:
            await models.aclose()  # HTTP clients belong to this pass's event loop

    if args.no_progress:
        return asyncio.run(one_pass())
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True) as progress:
        task = progress.add_task(label, total=len(targets) * len(queries) * repeat)

        def done(row: dict[str, Any]) -> None:
            status = "ok" if row["ok"] else "FAILED"
            progress.update(task, advance=1, description=f"{label} {row['engine']:>14} {row['query_id']} {status}")

        return asyncio.run(one_pass(done))


def build_report(args: argparse.Namespace, queries: list[Query], engines: list[str], spec: ModelSpec,
                 config: Any, pricing: Pricing, index: Any, rows: list[dict[str, Any]],
                 mock_stats: dict[str, Any] | None, wall_s: float) -> dict[str, Any]:
    problems = [p for r in rows for p in check_row(r)] + check_router_rows(rows)
    if mock_stats is not None:
        # Every model call the engines counted must have reached the server once (no retries expected).
        counted = sum(r["llm_calls"] - r["cached_calls"] for r in rows if r["ok"])
        if counted != mock_stats["chat_requests"]:
            problems.append({"engine": "*", "query_id": "*", "repeat": "*",
                             "check": "model calls counted != chat requests the server received",
                             "expected": mock_stats["chat_requests"], "actual": counted})
    descriptions = {
        "offline": "offline extractive model in-process (no network, zero latency)",
        "mock": f"loopback OpenAI-compatible HTTP server, {spec.latency_ms:g} ms per call"
                + (f", streaming at {spec.tokens_per_s:g} tokens/s" if spec.tokens_per_s else "")
                + "; replies computed by the offline extractive model from each request"
                + ("" if args.no_warmup or args.model_cache
                   else " (precomputed in an unmeasured warm-up pass, replayed while measuring)"),
        "openai": f"OpenAI-compatible endpoint {config.models.chat.base_url or 'api.openai.com'}",
    }
    return {
        "tool": "route-bench",
        "command": " ".join([_invocation(), *sys.argv[1:]]),
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": {
            "index": str(args.index), "queries": args.queries, "engines": engines, "model": spec.label,
            "repeat": args.repeat, "concurrency": args.concurrency, "seed": args.seed, "config_file": args.config,
            "price_as": args.price_as, "limit": args.limit, "out": str(args.out),
            "label_map": args.label_map, "grade": args.grade, "no_judge": args.no_judge,
            "warmup": spec.kind == "mock" and not args.no_warmup and args.model_cache is None, "model_cache": args.model_cache,
        },
        "model": {
            "spec": spec.label, "kind": spec.kind, "description": descriptions[spec.kind],
            "chat_model": config.models.chat.model, "chat_provider": config.models.chat.provider,
            "embedding_model": config.models.embedding.model, "mock_server": mock_stats,
        },
        "engine_config": config.model_dump(mode="json", exclude={"models"}),
        "pricing": pricing.describe(),
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "index": index_facts(index),
        "queries": {"spec": args.queries, "count": len(queries),
                    "labelled": sum(1 for q in queries if q.label),
                    "with_gold_answer": sum(1 for q in queries if q.answer),
                    "by_type": _count(q.question_type for q in queries if q.question_type),
                    "by_label": _count(q.label for q in queries if q.label),
                    "sample": "stratified by label and question type" if args.limit else "all"},
        "summary": {e: summarize_engine(r for r in rows if r["engine"] == e) for e in engines},
        "router": router_section(rows),
        "keyword_router": router_section(rows, "keyword-router"),
        "quality": quality_section(rows, engines),
        "consistency": {"checked_rows": sum(1 for r in rows if r["ok"]), "problems": problems},
        "failures": [{"engine": r["engine"], "query_id": r["query_id"], "repeat": r["repeat"], "error": r["error"]}
                     for r in rows if not r["ok"]],
        "wall_seconds": wall_s,
        "rows": rows,
    }


def _invocation() -> str:
    """How this run was started: the installed `route-bench` script or `python -m benchmarks.route_bench`."""
    return "route-bench" if Path(sys.argv[0]).name == "route-bench" else "python -m benchmarks.route_bench"


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return dict(sorted(out.items()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage error (or --help)
        return int(exc.code or 0)
    try:
        if args.repeat < 1 or args.concurrency < 1:
            raise BenchInputError("--repeat and --concurrency must be >= 1")
        if args.limit is not None and args.limit < 1:
            raise BenchInputError("--limit must be >= 1")
        index_path = Path(args.index)
        if not index_path.exists():
            raise BenchInputError(f"index path not found: {index_path}")
        if not index_path.is_dir():
            raise BenchInputError(f"index path is not a folder: {index_path}")
        engines = parse_engines(args.engines)
        spec = parse_model_spec(args.model)
        label_map = LabelMap.load(args.label_map) if args.label_map else None
        queries = load_queries(args.queries, limit=args.limit, label_map=label_map, seed=args.seed)
        if args.grade and not any(q.answer or q.evidence for q in queries):
            raise BenchInputError(f"--grade needs gold answers: {args.queries} has no 'answer' or 'evidence' column")
        if args.config is not None and not Path(args.config).is_file():
            raise BenchInputError(f"config file not found: {args.config}")
        return run(args, queries, engines, spec)
    except BenchInputError as err:
        print(f"route-bench: error: {err}", file=sys.stderr)
        return 2
    except Exception as err:
        from engines.models.errors import ModelConfigError

        if isinstance(err, ModelConfigError):
            print(f"route-bench: error: {err}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
