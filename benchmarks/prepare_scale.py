"""`graphroute prepare` at scale, then what a replica pays on a prepared store: a fresh process's open and
first local context.

    nice .venv/bin/python -m benchmarks.prepare_scale --sizes 100000 --runs 3
    nice .venv/bin/python -m benchmarks.prepare_scale --sizes 1000000 --runs 3 --out benchmarks/results/prepare_scale_1m

Indexes are the synthetic GraphRAG-shaped ones of `benchmarks/scale.py` with a type word in every title
(`--titles type-word`: GraphRAG's layout, LanceDB vectors, 384 dimensions), generated once under
`/tmp/scale-idx/`. For each size, with a fresh cache folder:
1. `graphroute prepare INDEX --cache-dir CACHE` (offline models, what a deployment runs once): wall time and
   the child's peak RSS (`wait4`'s `ru_maxrss`: the whole process, every thread and library);
2. `--runs` fresh processes, one after the other, each as a replica opens an index: the prepared store
   checked (`prepared_problem`), `load_index`, then the first local context (`LocalContextBuilder.build`,
   entity linking included, no model call) for a question naming two entities; the open, the first context,
   the process's age at its end (interpreter start and imports included) and its peak RSS.
Every figure of the fresh processes is the median and the range over the runs. No question is tuned on:
the questions are drawn from the index's titles with a fixed seed.

Writes `prepare_scale.json` into `--out`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import run_facts
from benchmarks.scale import INDEX_DIR, _entity_titles, ensure_index, peak_rss_mb, process_age_s, questions

OUT_DIR = Path(__file__).resolve().parent / "results" / "prepare_scale"
CHILD_TIMEOUT_S = 3600
TARGETS = {1_000_000: {"prepare_peak_rss_mb": 8192.0, "cold_s": 5.0}}


def run_measured(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run a child; its wall time, peak RSS (from `wait4`) and last stdout line (JSON when it is one)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=err)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except KeyboardInterrupt:
            proc.kill()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - started
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    row: dict[str, Any] = {"wall_s": wall, "peak_rss_mb": usage.ru_maxrss / 1024, "cpu_s": usage.ru_utime + usage.ru_stime}
    if proc.returncode != 0:
        row["error"] = f"exit {proc.returncode}: " + " | ".join(stderr.strip().splitlines()[-3:])
        return row
    last = stdout.strip().splitlines()[-1] if stdout.strip() else ""
    try:
        row.update(json.loads(last))
    except ValueError:
        row["output"] = last[-300:]
    return row


def open_child(path: Path, question: str) -> dict[str, Any]:
    """Child: open the prepared index as a replica does and build the first local context."""
    out: dict[str, Any] = {}
    started = time.perf_counter()
    from shared_context import LocalContextBuilder, load_index
    from shared_context.prepared import prepared_problem

    out["import_s"] = time.perf_counter() - started
    started = time.perf_counter()
    problem = prepared_problem(path)
    if problem:
        raise SystemExit(f"not prepared: {problem}")
    index = load_index(path)
    out["open_s"] = time.perf_counter() - started
    started = time.perf_counter()
    context = LocalContextBuilder(index).build(question)
    out["first_context_s"] = time.perf_counter() - started
    out["context_chars"] = len(context.text)
    out["cold_s"] = process_age_s()
    out["child_peak_rss_mb"] = peak_rss_mb()
    return out


_OPEN_METRICS = ("import_s", "open_s", "first_context_s", "cold_s", "peak_rss_mb")


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if "error" not in r]
    out: dict[str, Any] = {"runs_ok": len(ok), "runs": len(runs)}
    for key in _OPEN_METRICS:
        values = [float(r[key]) for r in ok if isinstance(r.get(key), int | float)]
        if values:
            out[key] = float(np.median(values))
            out[f"{key}_range"] = [min(values), max(values)]
    return out


def run_size(path: Path, runs: int) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_", "GRAPHROUTE_"))}
    question = questions(_entity_titles(path), 1)[0]
    row: dict[str, Any] = {"index": str(path), "question": question}
    with tempfile.TemporaryDirectory(prefix="graphroute-prepare-") as scratch:
        cache = Path(scratch) / "cache"
        env["GRAPHROUTE_CACHE_DIR"] = str(cache)
        row["prepare"] = run_measured([sys.executable, "-m", "router.cli", "prepare", str(path), "--cache-dir",
                                       str(cache)], {**env, "HOME": scratch})
        print(f"    prepare: {json.dumps(row['prepare'])}", flush=True)
        if "error" in row["prepare"]:
            return row
        row["store_mb"] = sum(f.stat().st_size for f in cache.rglob("*") if f.is_file()) / 2**20
        row["open_runs"] = []
        for _ in range(runs):
            cmd = [sys.executable, "-m", "benchmarks.prepare_scale", "--child", str(path), "--question", question]
            row["open_runs"].append(run_measured(cmd, {**env, "HOME": scratch}))
            print(f"    open: {json.dumps(row['open_runs'][-1])}", flush=True)
    row["open"] = summarise(row["open_runs"])
    return row


def verdicts(results: dict[str, Any]) -> list[str]:
    lines = []
    for size, targets in TARGETS.items():
        row = results.get(str(size))
        if row is None or "open" not in row:
            continue
        peak, cold = row["prepare"]["peak_rss_mb"], row["open"].get("cold_s", float("nan"))
        lines.append(f"{size:,}: prepare peak {peak:.0f} MiB (target <= {targets['prepare_peak_rss_mb']:.0f}): "
                     f"{'met' if peak <= targets['prepare_peak_rss_mb'] else 'NOT met'}; fresh open + first context "
                     f"{cold:.2f} s median (target <= {targets['cold_s']:.0f} s): "
                     f"{'met' if cold <= targets['cold_s'] else 'NOT met'}")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="100000", help="comma-separated entity counts")
    parser.add_argument("--runs", type=int, default=3, help="fresh opens per size (median and range reported)")
    parser.add_argument("--index-dir", type=Path, default=INDEX_DIR, help="where generated indexes are kept")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="folder for prepare_scale.json")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--question", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(open_child(args.child, args.question)))
        return
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    if not sizes or min(sizes) < 2 or args.runs < 1:
        parser.error("--sizes needs entity counts of at least 2 and --runs at least 1")
    report: dict[str, Any] = {**run_facts(), "load_avg_start": list(os.getloadavg()), "runs": args.runs,
                              "titles": "type-word", "results": {}}
    for n in sizes:
        print(f"[type-word titles, {n:,} entities] load average {os.getloadavg()[0]:.1f}", flush=True)
        path = ensure_index(n, args.index_dir, "type-word")
        report["results"][str(n)] = run_size(path, args.runs)
    report["load_avg_end"] = list(os.getloadavg())
    report["verdicts"] = verdicts(report["results"])
    for line in report["verdicts"]:
        print("Target at", line)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "prepare_scale.json").write_text(json.dumps(report, indent=1))
    print(f"wrote {args.out / 'prepare_scale.json'}")


if __name__ == "__main__":
    main()
