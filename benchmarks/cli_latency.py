"""`graphroute ask` wall time from process start to its last byte, as a new user meets it.

    .venv/bin/python -m benchmarks.cli_latency                          # Christmas Carol index, 5 runs
    .venv/bin/python -m benchmarks.cli_latency --synthetic 100000 --runs 5

For each index, one unmeasured run first fills the derived store (what a user's first question does once
per index), then `--runs` runs of the plain command (`graphroute ask QUESTION --index PATH`, offline model,
no API key), each a new process timed from its start until its output closes. Reported per index: the
median and range of the wall times, user and system CPU of each run (comparable on a busy machine), the
first run's time, and a digest of the answer text (the panel the command prints), identical across runs
when the answer does not change. `--synthetic N` adds the `type-word` synthetic index of N entities in
GraphRAG's layout with a `lancedb/` folder (`benchmarks/synthetic_index.py`, kept under `--index-dir`).

Writes `cli_latency.json` (command, date, machine, load averages, every run) into `--out`.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import machine
from benchmarks.scale import INDEX_DIR, ensure_index

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CAROL = DATA / "christmas_carol_graphrag_index"
OUT_DIR = Path(__file__).resolve().parent / "results" / "cli_latency"
QUESTIONS = {"carol": "Who is Scrooge and what did Marley tell him?"}
TARGET_S = {"carol": 2.0}


def graphroute_command() -> list[str]:
    """The installed `graphroute` script beside this Python, else the module."""
    script = Path(sys.executable).with_name("graphroute")
    return [str(script)] if script.exists() else [sys.executable, "-m", "router.cli"]


def answer_digest(output: str) -> str:
    """sha256 of the answer panel's lines (the text between the box's top and bottom edges)."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("╭")), None)
    end = next((i for i, line in enumerate(lines) if line.startswith("╰")), None)
    panel = "\n".join(lines[start : end + 1]) if start is not None and end is not None else output
    return hashlib.sha256(panel.encode()).hexdigest()[:16]


def run_once(cmd: list[str], env: dict[str, str], timeout_s: float = 600) -> dict[str, Any]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"wall_s": time.perf_counter() - started, "error": f"timed out after {timeout_s:.0f} s",
                "load_avg_1m": os.getloadavg()[0]}
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out: dict[str, Any] = {"wall_s": wall, "user_s": after.ru_utime - before.ru_utime,
                           "sys_s": after.ru_stime - before.ru_stime, "exit": proc.returncode,
                           "load_avg_1m": os.getloadavg()[0]}
    if proc.returncode != 0:
        out["error"] = proc.stderr.strip().splitlines()[-1:] or ["no output"]
    else:
        out["answer_digest"] = answer_digest(proc.stdout)
    return out


def measure(name: str, index: Path, question: str, runs: int, cache: Path, code: Path | None = None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI_"))}
    env["GRAPHROUTE_CACHE_DIR"] = str(cache)
    if code is not None:  # another checkout's code (e.g. main's, for a back-to-back comparison)
        env["PYTHONPATH"] = str(code)
    env.pop("GRAPHROUTE_API_KEYS", None)
    cmd = [*graphroute_command(), "ask", question, "--index", str(index)]
    first = run_once(cmd, env, timeout_s=3600)  # a first question derives what later ones read
    print(f"  {name}: first run (fills the derived store) {first['wall_s']:.2f} s", flush=True)
    timed = []
    for _ in range(runs):
        timed.append(run_once(cmd, env))
        print(f"  {name}: {json.dumps(timed[-1])}", flush=True)
    ok = [r for r in timed if "error" not in r]
    row: dict[str, Any] = {"index": str(index), "question": question, "command": cmd, "first_run": first,
                           "runs": timed, "runs_ok": len(ok)}
    for key in ("wall_s", "user_s", "sys_s", "load_avg_1m"):
        values = [r[key] for r in ok]
        if values:
            row[key] = float(np.median(values))
            row[f"{key}_range"] = [min(values), max(values)]
    row["answer_digests"] = sorted({r["answer_digest"] for r in ok if "answer_digest" in r})
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--synthetic", type=int, action="append", default=[], metavar="N",
                        help="also the type-word synthetic index of N entities (repeatable)")
    parser.add_argument("--no-carol", action="store_true", help="skip the Christmas Carol index")
    parser.add_argument("--index-dir", type=Path, default=INDEX_DIR)
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument("--code", type=Path, help="run the command with this checkout's code (PYTHONPATH)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    targets: list[tuple[str, Path, str]] = []
    if not args.no_carol:
        if not CAROL.exists():
            parser.error(f"the Christmas Carol index is not at {CAROL}")
        targets.append(("carol", CAROL, QUESTIONS["carol"]))
    for n in args.synthetic:
        path = ensure_index(n, args.index_dir, "type-word")
        import pyarrow.parquet as pq

        titles = pq.ParquetFile(path / "entities.parquet").read(columns=["title"]).column("title").to_pylist()
        targets.append((f"type-word-{n}", path, f"What is the relationship between {titles[1].title()} and {titles[2].title()}?"))
    report: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, "-m", "benchmarks.cli_latency",
                             *(argv if argv is not None else sys.argv[1:])]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_avg_start": list(os.getloadavg()),
        "code": str(args.code or Path(__file__).resolve().parents[1]),
        "results": {},
    }
    cache = Path(tempfile.mkdtemp(prefix="graphroute-cli-cache-"))
    try:
        for name, path, question in targets:
            print(f"[{name}] load average {os.getloadavg()[0]:.1f}", flush=True)
            report["results"][name] = measure(name, path, question, args.runs, cache, args.code)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    report["load_avg_end"] = list(os.getloadavg())
    print()
    print("| index | wall median (range) s | user CPU s | system CPU s | answers | load avg |")
    print("|---|---|---|---|---|---|")
    for name, row in report["results"].items():
        if "wall_s" not in row:
            print(f"| {name} | failed: {row['runs'][0].get('error')} |")
            continue
        print(f"| {name} | {row['wall_s']:.2f} ({row['wall_s_range'][0]:.2f}-{row['wall_s_range'][1]:.2f}) | "
              f"{row['user_s']:.2f} | {row['sys_s']:.2f} | {len(row['answer_digests'])} distinct "
              f"({', '.join(row['answer_digests'])}) | {row['load_avg_1m']:.1f} |")
        if name in TARGET_S:
            verdict = "met" if row["wall_s"] <= TARGET_S[name] else "MISSED"
            print(f"target {name}: median {row['wall_s']:.2f} s <= {TARGET_S[name]} s: {verdict}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cli_latency.json").write_text(json.dumps(report, indent=1))
    print(f"\nwrote {args.out / 'cli_latency.json'}")


if __name__ == "__main__":
    main()
