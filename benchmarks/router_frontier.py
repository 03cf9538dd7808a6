"""The router's cost-quality frontier on real offline indexes: does routing earn its cost?

    python -m benchmarks.router_frontier --indexes DIR [--suites NAME,...] [--novel-sample 80] [--seed 0]
                                         [--out benchmarks/results/router_frontier] [--work DIR]

`DIR` holds indexes built once with `graphroute index --model offline` (SHARED = the shared data folder):

    graphroute index --model offline --out DIR/novel --text-column context --title-column corpus_name \
        SHARED/graphrag_bench/corpus/novel.parquet                      # 20 novels, one document each
    graphroute index --model offline --out DIR/earnings --text-column text --title-column file \
        SHARED/msft_graphrag_benchmarks/corpus/msft_earnings_call_transcripts.parquet   # all 41 calls
    graphroute index --model offline --out DIR/earnings_one FOLDER    # FOLDER: TranscriptFY24Q2.txt alone
    graphroute index --model offline --out DIR/podcast --text-column text --title-column file \
        SHARED/msft_graphrag_benchmarks/corpus/kevin_scott_podcast_parts.parquet        # 1669 parts, 60 episodes

(`TranscriptFY24Q2.txt` is the `text` of that `file` row of the earnings parquet, written out as it is.) Each suite runs
route-bench (`benchmarks/route_bench.py`) with the offline model and writes `OUT/<suite>.json`: command, date,
machine, per engine the model calls and cost per question, evidence recall and answer F1 (graded suites), and for
the router its route counts at the first decision (the classifier), after confirmation (the commitment rule:
`+local-first` holds the routed engine back) and after escalation (the engine whose answer was kept).

Suites:

* `novel-tune`, `novel-report`: a stratified sample of GraphRAG-Bench's novel development questions (label from
  the question type with the shared label map, local accepted for DRIFT types), split in two halves by a hash of
  the question id. The evidence-spread rules were tuned looking at `novel-tune` only; the report half was then
  measured once, and what it showed (a question naming nothing sent to DRIFT by a scope word) changed one rule,
  so it is no longer untouched. The local context's linked-unit order (`[local] hybrid_linked_order`) was chosen
  looking at `novel-tune` only (question by question: which gold evidence basic search's context held and local
  search's missed); `novel-report` and `novel-holdout` were then measured once. `novel-holdout`: a second
  stratified sample of half the size, disjoint from both, that no change was looked at on (only its totals were
  known, from the run before): the figure to quote. Engines router, local, pre-ranked global, DRIFT,
  basic; graded (evidence recall, token F1), no LLM judge.
* `earnings-one`: our 20 questions about one call (`benchmarks/data/router_frontier/`), on the one-call index;
  `earnings-one-doc` the same on the index of all calls; `earnings-cross-call` questions about how commentary
  evolved across the calls; `earnings-corpus-wide` and `podcast-corpus-wide` corpus-wide questions;
  `nonsense-<index>` made-up sentences of real words on every index (`nonsense-mock-<index>`: the same through the
  real OpenAI client against the loopback model server, `--model mock:0`). Router and local only (routing and
  calls).

The offline model is deterministic, so one run per suite is the measurement (every figure would repeat exactly);
`--repeat` is passed through for the latency columns only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "router_frontier"
SHARED = Path(os.environ.get("GRAPHROUTE_SHARED_DATA", ROOT.parent / "shared" / "data"))
NOVEL_QUESTIONS = SHARED / "graphrag_bench" / "questions" / "novel_questions_dev.parquet"
LABEL_MAP = SHARED / "graphrag_bench" / "router_label_map.json"
FULL_ENGINES = "router,local,global-prerank,drift,basic"
ROUTING_ENGINES = "router,local"


@dataclass(frozen=True)
class Suite:
    name: str
    index: str  # folder name under --indexes
    queries: str  # a file of benchmarks/data/router_frontier, or "novel:<half>"
    engines: str
    graded: bool = False
    model: str = "offline"  # route-bench --model; mock:0 drives the real client against the loopback server


SUITES = (
    Suite("novel-holdout", "novel", "novel:holdout", FULL_ENGINES, graded=True),
    Suite("novel-report", "novel", "novel:report", FULL_ENGINES, graded=True),
    Suite("novel-tune", "novel", "novel:tune", FULL_ENGINES, graded=True),
    Suite("earnings-one", "earnings_one", "earnings_one_questions.jsonl", ROUTING_ENGINES),
    Suite("earnings-one-doc", "earnings", "earnings_one_questions.jsonl", ROUTING_ENGINES),
    Suite("earnings-cross-call", "earnings", "earnings_cross_call_questions.jsonl", ROUTING_ENGINES),
    Suite("earnings-corpus-wide", "earnings", "earnings_corpus_wide_questions.jsonl", ROUTING_ENGINES),
    Suite("podcast-corpus-wide", "podcast", "podcast_corpus_wide_questions.jsonl", ROUTING_ENGINES),
    *(Suite(f"nonsense-{name}", name, "nonsense_questions.jsonl", "router")
      for name in ("novel", "earnings_one", "earnings", "podcast")),
    *(Suite(f"nonsense-mock-{name}", name, "nonsense_questions.jsonl", "router", model="mock:0")
      for name in ("novel", "earnings_one", "earnings", "podcast")),
)


HELD_OUT = {
    "novel-holdout": "held out: a sample disjoint from the tune and report halves; no change was looked at on it "
                     "(only its totals from earlier runs were known)",
    "novel-report": "seen once before the names-nothing rule change, which it prompted: not untouched; measured once "
                    "after the linked-unit order was chosen on the tune half",
    "novel-tune": "the half the evidence-spread rules and the local context's linked-unit order were tuned on",
}


class FrontierInputError(Exception):
    """A missing index or question file: printed without a traceback, exit code 2."""


def halves(ids: Sequence[str]) -> dict[str, list[str]]:
    """The sample split in two halves by a hash of the question id (alternately in hash order, so the halves are
    equal), so no tuning can move a question from one half to the other."""
    ordered = sorted(ids, key=lambda i: hashlib.sha256(i.encode()).hexdigest())
    return {"tune": ordered[0::2], "report": ordered[1::2]}


def novel_sample(n: int, seed: int, work: Path) -> dict[str, Path]:
    """The stratified sample of `n` novel dev questions, split into its two halves as parquet files in `work`
    (outside the repository: the questions are not copied into it)."""
    import pandas as pd

    from benchmarks.bench_queries import LabelMap, load_queries

    if not NOVEL_QUESTIONS.is_file():
        raise FrontierInputError(f"novel questions not found: {NOVEL_QUESTIONS} (set GRAPHROUTE_SHARED_DATA)")
    table = pd.read_parquet(NOVEL_QUESTIONS).drop_duplicates("id", keep="first")
    work.mkdir(parents=True, exist_ok=True)
    unique = work / "novel_dev_unique.parquet"
    table.to_parquet(unique)
    picked = {q.id for q in load_queries(str(unique), limit=n, label_map=LabelMap.load(str(LABEL_MAP)), seed=seed)}
    out = {}
    for half, ids in halves(sorted(picked)).items():
        rows = table[table["id"].isin(ids)]
        out[half] = work / f"novel_{half}.parquet"
        rows.to_parquet(out[half])
    # a second, disjoint sample: held out from every change, including those made after the report half was seen
    rest = work / "novel_dev_rest.parquet"
    table[~table["id"].isin(picked)].to_parquet(rest)
    held = {q.id for q in load_queries(str(rest), limit=n // 2, label_map=LabelMap.load(str(LABEL_MAP)), seed=seed + 1)}
    out["holdout"] = work / "novel_holdout.parquet"
    table[table["id"].isin(held)].to_parquet(out["holdout"])
    return out


def run_suite(suite: Suite, indexes: Path, queries: Path, work: Path, seed: int, repeat: int) -> dict[str, Any]:
    """route-bench on one suite; its report.json."""
    from benchmarks import route_bench

    out = work / suite.name
    argv = ["--index", str(indexes / suite.index), "--queries", str(queries), "--engines", suite.engines,
            "--model", suite.model, "--seed", str(seed), "--repeat", str(repeat), "--out", str(out),
            "--no-progress", "--quiet"]
    if suite.graded:
        argv += ["--grade", "--no-judge", "--label-map", str(LABEL_MAP)]
    code = route_bench.main(argv)
    report_path = out / "report.json"
    if code == 2 or not report_path.is_file():
        raise FrontierInputError(f"route-bench failed on suite {suite.name} (exit {code})")
    report: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
    report["exit_code"] = code
    return report


def first_decision(row: dict[str, Any]) -> str:
    """The classifier's engine before the commitment rule: a route started local holds it back first."""
    if str(row.get("route_method", "")).endswith("+local-first") and row.get("route_fallbacks"):
        return str(row["route_fallbacks"][0])
    return str(row["route"])


def _counts(values: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items()))


def summarise(suite: Suite, report: dict[str, Any]) -> dict[str, Any]:
    """The figures of one suite: per engine calls, cost, quality; the router's routes at each step."""
    rows = [r for r in report["rows"] if r["ok"] and r["repeat"] == 0]
    engines: dict[str, Any] = {}
    quality = (report.get("quality") or {}).get("per_target", {})
    for engine, s in report["summary"].items():
        q = quality.get(engine) or {}
        engines[engine] = {"calls_per_question": s["llm_calls_mean"], "cost_per_question": s["cost_mean"],
                           "evidence_recall": q.get("evidence_recall"), "answer_f1": q.get("f1"),
                           "runs": s["runs"], "failures": s["failures"]}
    routed = [r for r in rows if r["engine"] == "router"]
    router: dict[str, Any] = {
        "first_decision": _counts([first_decision(r) for r in routed]),
        "after_confirmation": _counts([str(r["route"]) for r in routed]),
        "after_escalation": _counts([str(r["engine_used"]) for r in routed]),
        "rules": _counts([str(r.get("route_method", "")) for r in routed]),
        "confident_expensive": sum(1 for r in routed if first_decision(r) != "local" and r["route_confidence"] >= 0.8
                                   and r["route"] != "local"),
        "max_calls": max((int(r["llm_calls"]) for r in routed), default=0),
        "expected_calls": (report.get("router") or {}).get("expected_calls"),
        "questions": [{"id": r["query_id"], "label": r.get("label"), "first": first_decision(r), "route": r["route"],
                       "used": r["engine_used"], "confidence": round(float(r["route_confidence"]), 3),
                       "rule": r.get("route_method"), "calls": r["llm_calls"]} for r in routed],
    }
    local = engines.get("local")
    if local and local["cost_per_question"] and "router" in engines:
        router["cost_over_local"] = engines["router"]["cost_per_question"] / local["cost_per_question"]
    if suite.graded:
        router["frontier"] = frontier(engines)
    return {"suite": suite.name, "index": suite.index, "queries": report["queries"], "engines": engines,
            "router": router, "index_facts": report["index"], "route_bench_exit_code": report["exit_code"],
            "consistency_problems": len(report["consistency"]["problems"]), "failures": report["failures"]}


def frontier(engines: dict[str, Any]) -> dict[str, Any]:
    """Whether the router is on the cost-quality frontier: no fixed engine both cheaper (or as cheap) and at least
    as good on evidence recall. Names the engines that dominate it, if any."""
    mine = engines["router"]
    dominated_by = [e for e, s in engines.items() if e != "router" and s["evidence_recall"] is not None
                    and mine["evidence_recall"] is not None and s["cost_per_question"] <= mine["cost_per_question"]
                    and s["evidence_recall"] >= mine["evidence_recall"]
                    and (s["cost_per_question"] < mine["cost_per_question"]
                         or s["evidence_recall"] > mine["evidence_recall"])]
    return {"on_frontier": not dominated_by, "dominated_by": dominated_by}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="router_frontier", description=__doc__.split("\n")[0])
    p.add_argument("--indexes", required=True, help="folder holding the indexes novel, earnings_one, earnings, podcast")
    p.add_argument("--suites", default=",".join(s.name for s in SUITES), help="comma-separated suites (default all)")
    p.add_argument("--novel-sample", type=int, default=80, help="stratified novel dev questions, both halves (80)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "router_frontier"))
    p.add_argument("--work", default="/tmp/router_frontier", help="route-bench reports and the novel sample")
    args = p.parse_args(argv)
    wanted = [n.strip() for n in args.suites.split(",") if n.strip()]
    by_name = {s.name: s for s in SUITES}
    try:
        unknown = [n for n in wanted if n not in by_name]
        if unknown:
            raise FrontierInputError(f"unknown suite {unknown[0]!r} (choose from {', '.join(by_name)})")
        indexes, work, out = Path(args.indexes), Path(args.work), Path(args.out)
        for name in wanted:
            if not (indexes / by_name[name].index).is_dir():
                raise FrontierInputError(f"index {indexes / by_name[name].index} not found (build it first)")
        split = novel_sample(args.novel_sample, args.seed, work) if any(n.startswith("novel-") for n in wanted) \
            else {}
        out.mkdir(parents=True, exist_ok=True)
        for name in wanted:
            suite = by_name[name]
            queries = split[suite.queries.split(":", 1)[1]] if suite.queries.startswith("novel:") \
                else DATA / suite.queries
            started = datetime.now(UTC)
            report = run_suite(suite, indexes, queries, work, args.seed, args.repeat)
            result = summarise(suite, report) | {
                "command": "python -m benchmarks.router_frontier " + " ".join(argv if argv is not None else sys.argv[1:]),
                "date": started.isoformat(timespec="seconds"),
                "machine": report.get("machine", {}) | {"processor": platform.processor() or platform.machine()},
                "model": "offline (deterministic: one run is the measurement)" if suite.model == "offline"
                else f"{suite.model}: the real OpenAI client against the loopback server answering with the offline "
                     "model",
                "held_out": HELD_OUT.get(name, "questions written by us; see benchmarks/data/router_frontier"),
            }
            (out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
            r = result["router"]
            print(f"{name}: first {r['first_decision']} -> confirmed {r['after_confirmation']} -> used "
                  f"{r['after_escalation']}; " + ", ".join(
                      f"{e} {s['calls_per_question']:.2f} calls ${s['cost_per_question']:.4f}"
                      + (f" ER {s['evidence_recall']:.3f}" if s['evidence_recall'] is not None else "")
                      for e, s in result["engines"].items()), flush=True)
    except FrontierInputError as err:
        print(f"router_frontier: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
