"""Cold start, latency and memory against index size and title shape, with GraphRAG as a peer.

    .venv/bin/python -m benchmarks.scale --sizes 100000 --runs 3        # every shape at 100k
    nice .venv/bin/python -m benchmarks.scale --sizes 1000000 --titles type-word --runs 3
    .venv/bin/python -m benchmarks.scale --sizes 10000,100000 --graphrag-python /work/venv-graphrag/bin/python

Indexes are synthetic GraphRAG-v3 folders (`benchmarks/synthetic_index.py`), generated once and kept
under `/tmp/scale-idx/` (`--index-dir`). `--titles` picks the title shapes (comma-separated):
`unique`, `realistic` and `type-word` ("PERSON 600100": every title shares a word with a quarter of the
index) are written in GraphRAG's layout (5 relationships per entity with power-law degrees, a text unit
per five entities mentioning ~11 of them, one claim per entity, and the `lancedb/` folder GraphRAG
writes, 384-dim vectors); `plain` is the earlier index (unique titles, no vectors, 0.3 text units and
0.1 claims per entity). For each shape and size, `--runs` times, with a fresh cache directory, two child
processes run one after the other, so each starts cold in memory:
1. first open: `load_index` with an empty cache (token counts, derived structures, lexical tables and
   the vectors' copy computed and stored), then the first local context build;
2. second open: `load_index` again (everything read from the cache), then the first local context
   build ("first query": entity linking and the local context, no model call; `cold_s` is the process's
   age at its end: interpreter start, imports, load and first context), then 20 more local builds
   (p50/p95 wall, p50 CPU), one global batch build (`CommunityContextBuilder.build`, all reports of the
   default level in map batches) and basic search (`top_text_units` + its Sources table) p50 over the
   same questions. Peak RSS is the child's own high-water mark (`VmHWM`, else `ru_maxrss`).
Every figure is reported as the median and the range over the runs (never the best run).

GraphRAG 3.3.0 (a peer, never a dependency) is measured when `--graphrag-python` names a Python that
has it: `python3 -m venv /work/venv-graphrag && /work/venv-graphrag/bin/pip install graphrag==3.3.0`.
Its child (`benchmarks/scale_graphrag.py`) loads the same parquet tables with GraphRAG's query-side
readers and times its context builders the same way.

Prints a table and the targets, writes `scale.json` (the command, date, machine, load averages, every
run, medians and ranges) and a log-log chart `scale.png` into `--out`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import machine

INDEX_DIR = Path("/tmp/scale-idx")
OUT_DIR = Path(__file__).resolve().parent / "results" / "scale"
N_QUERIES = 20
CHILD_TIMEOUT_S = 3600
SHAPES = ("plain", "unique", "realistic", "type-word")
TARGETS = {  # size -> (second process import + load + first context s, first load s, peak RSS MiB, local p50 ms)
    100_000: (1.5, 20.0, 1536.0, 20.0),
    1_000_000: (5.0, None, 8192.0, 50.0),
}


def peak_rss_mb() -> float:
    """This process's peak resident memory. Linux's `VmHWM` first: `ru_maxrss` survives exec, so a child
    started by a parent that had just built a large index would report the parent's peak as its own."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def ensure_index(n_entities: int, index_dir: Path, shape: str = "plain") -> Path:
    from benchmarks.synthetic_index import ensure_synthetic_index

    return ensure_synthetic_index(index_dir, n_entities, None if shape == "plain" else shape)


def process_age_s() -> float:
    """Seconds since this process started (Linux: /proc), so a figure includes interpreter start and imports."""
    with open("/proc/self/stat") as fh:
        start_ticks = int(fh.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as fh:
        uptime = float(fh.read().split()[0])
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")


def questions(titles: list[str], n: int = N_QUERIES, seed: int = 1) -> list[str]:
    """Questions naming two entities each (title-cased, as a user would type them)."""
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(titles), size=(n, 2), replace=True)
    templates = ["What is the relationship between {} and {}?", "Tell me about {} and {}", "How did {} affect {}?"]
    return [templates[i % 3].format(titles[a].title(), titles[b].title()) for i, (a, b) in enumerate(picks.tolist())]


def _ms(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q)) if values else float("nan")


def _entity_titles(path: Path) -> list[str]:
    import pyarrow.parquet as pq

    return [str(t) for t in pq.read_table(path / "entities.parquet", columns=["title"]).column("title").to_pylist()]


def measure(path: Path, phase: str, qs: list[str]) -> dict[str, Any]:
    """Child process: load, then time the first local build and (second phase) the rest."""
    out: dict[str, Any] = {"phase": phase}
    started = time.perf_counter()
    from shared_context import CommunityContextBuilder, LocalContextBuilder, load_index
    from shared_context.basic_context import basic_context, top_text_units

    out["import_s"] = time.perf_counter() - started
    started, cpu0 = time.perf_counter(), time.process_time()
    index = load_index(path)
    out["load_s"] = time.perf_counter() - started
    out["load_cpu_s"] = time.process_time() - cpu0  # every thread's CPU: comparable on a shared machine
    out["rss_after_load_mb"] = peak_rss_mb()
    local = LocalContextBuilder(index)
    started, cpu0 = time.perf_counter(), time.process_time()
    local.build(qs[0])
    out["first_query_s"] = time.perf_counter() - started
    out["first_query_cpu_s"] = time.process_time() - cpu0
    out["cold_s"] = process_age_s()  # interpreter start, imports, load and the first context
    out["cold_cpu_s"] = time.process_time()
    if phase == "second":
        times, cpu = [], []
        for q in qs[1:]:
            t0, c0 = time.perf_counter(), time.process_time()
            local.build(q)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        out["local_p50_ms"], out["local_p95_ms"] = _ms(times, 50), _ms(times, 95)
        out["local_cpu_p50_ms"] = _ms(cpu, 50)  # what a build costs when the machine is shared
        started = time.perf_counter()
        batches = CommunityContextBuilder(index).build(qs[1])
        out["global_build_s"] = time.perf_counter() - started
        out["global_batches"] = len(batches)
        basic = []
        for q in qs[1:]:
            t0 = time.perf_counter()
            hits, _ = top_text_units(index, q, 10)
            basic_context(index, hits, 12_000)
            basic.append(time.perf_counter() - t0)
        out["basic_p50_ms"] = _ms(basic, 50)
    out["peak_rss_mb"] = peak_rss_mb()
    out["load_avg_1m"] = os.getloadavg()[0]
    return out


def _run_child(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {CHILD_TIMEOUT_S} s"}
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-3:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]
    except (ValueError, IndexError):
        return {"error": f"no result line in child output: {proc.stdout[-300:]!r}"}


_METRICS = ("import_s", "load_s", "load_cpu_s", "first_query_s", "first_query_cpu_s", "cold_s", "cold_cpu_s",
            "local_p50_ms", "local_p95_ms", "local_cpu_p50_ms", "global_build_s", "basic_p50_ms", "peak_rss_mb",
            "load_avg_1m")


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and range of every metric over the runs that succeeded (an error is kept as such)."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"error": runs[0].get("error", "no run") if runs else "no run"}
    out: dict[str, Any] = {"runs_ok": len(ok), "runs": len(runs)}
    for key in _METRICS:
        values = [float(r[key]) for r in ok if isinstance(r.get(key), int | float)]
        if values:
            out[key] = float(np.median(values))
            out[f"{key}_range"] = [min(values), max(values)]
    return out


def run_size(path: Path, graphrag_python: str | None, runs: int) -> dict[str, Any]:
    row: dict[str, Any] = {"index": str(path), "first_runs": [], "second_runs": []}
    with tempfile.TemporaryDirectory(prefix="graphroute-scale-q-") as qdir:
        qfile = Path(qdir) / "questions.json"
        qfile.write_text(json.dumps(questions(_entity_titles(path), N_QUERIES + 1)))
        for _ in range(runs):
            with tempfile.TemporaryDirectory(prefix="graphroute-scale-cache-") as cache_dir:
                env = {**os.environ, "GRAPHROUTE_CACHE_DIR": cache_dir}
                for phase in ("first", "second"):
                    cmd = [sys.executable, "-m", "benchmarks.scale", "--child", str(path), "--phase", phase,
                           "--questions", str(qfile)]
                    row[f"{phase}_runs"].append(_run_child(cmd, env))
                    print(f"    {phase}: {json.dumps(row[f'{phase}_runs'][-1])}", flush=True)
    row["first"], row["second"] = summarise(row["first_runs"]), summarise(row["second_runs"])
    if graphrag_python:
        script = Path(__file__).resolve().parent / "scale_graphrag.py"
        peer = [_run_child([graphrag_python, str(script), str(path), str(N_QUERIES)], dict(os.environ))
                for _ in range(runs)]
        row["graphrag_runs"], row["graphrag"] = peer, summarise(peer)
    return row


def _f(value: Any, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, int | float) else "-"


def _cell(row: dict[str, Any], key: str, fmt: str) -> str:
    """'median (min-max)' of one metric."""
    value, span = row.get(key), row.get(f"{key}_range")
    if not isinstance(value, int | float):
        return "-"
    if span and span[0] != span[1]:
        return f"{format(value, fmt)} ({format(span[0], fmt)}-{format(span[1], fmt)})"
    return format(value, fmt)


Results = dict[str, dict[int, dict[str, Any]]]  # shape -> entities -> row


def print_table(results: Results) -> None:
    header = (
        "| titles | entities | system | first load (s) | first-open peak RSS (MiB) | second process: import + load + "
        "first context (s) | local p50 / p95 (CPU p50) (ms) | global batch build (s) | basic p50 (ms) | "
        "second-open peak RSS (MiB) | load avg |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for shape, by_size in results.items():
        for n, row in sorted(by_size.items()):
            first, second = row.get("first", {}), row.get("second", {})
            if "error" in first or "error" in second:
                print(f"| {shape} | {n:,} | graphroute | failed: {first.get('error') or second.get('error')} |")
            else:
                print(
                    f"| {shape} | {n:,} | graphroute | {_cell(first, 'load_s', '.1f')} | {_cell(first, 'peak_rss_mb', '.0f')} | "
                    f"{_cell(second, 'cold_s', '.2f')} | {_cell(second, 'local_p50_ms', '.1f')} / "
                    f"{_cell(second, 'local_p95_ms', '.1f')} ({_cell(second, 'local_cpu_p50_ms', '.1f')}) | "
                    f"{_cell(second, 'global_build_s', '.2f')} | {_cell(second, 'basic_p50_ms', '.1f')} | "
                    f"{_cell(second, 'peak_rss_mb', '.0f')} | {_cell(second, 'load_avg_1m', '.1f')} |"
                )
            peer = row.get("graphrag")
            if peer is None:
                continue
            if "error" in peer:
                print(f"| {shape} | {n:,} | GraphRAG 3.3.0 | failed: {peer['error']} |")
                continue
            print(
                f"| {shape} | {n:,} | GraphRAG 3.3.0 | {_cell(peer, 'load_s', '.1f')} | {_cell(peer, 'peak_rss_mb', '.0f')} | "
                f"- | - | {_cell(peer, 'global_build_s', '.2f')} | - | - | {_cell(peer, 'load_avg_1m', '.1f')} |"
            )


def verdicts(results: Results) -> list[str]:
    lines = []
    for shape, by_size in results.items():
        for n, (cold_target, first_target, rss_target, p50_target) in TARGETS.items():
            row = by_size.get(n)
            if not row or "error" in row.get("second", {"error": 1}) or "error" in row.get("first", {"error": 1}):
                continue
            first, second = row["first"], row["second"]
            checks = [
                (f"second process import + load + first context {second['cold_s']:.2f} s <= {cold_target} s",
                 second["cold_s"] <= cold_target),
                (f"first-open peak RSS {first['peak_rss_mb']:.0f} MiB <= {rss_target:.0f} MiB",
                 first["peak_rss_mb"] <= rss_target),
                (f"local p50 {second['local_p50_ms']:.1f} ms <= {p50_target} ms", second["local_p50_ms"] <= p50_target),
            ]
            if first_target is not None:
                checks.append((f"first load {first['load_s']:.1f} s <= {first_target} s", first["load_s"] <= first_target))
            lines.append(f"{shape} {n:,} (medians): " + "; ".join(f"{t}: {'met' if ok else 'MISSED'}" for t, ok in checks))
    return lines


def write_chart(results: Results, png: Path) -> None:
    from benchmarks.bench_charts import pyplot

    plt = pyplot()  # ChartsUnavailable (naming the extra to install) without matplotlib

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    for shape, by_size in results.items():
        sizes = sorted(n for n, row in by_size.items() if "error" not in row.get("second", {"error": 1}))
        if not sizes:
            continue
        for label, phase, key, scale, style in (
            ("second process to first context (s)", "second", "cold_s", 1.0, "-o"),
            ("local p50 (s)", "second", "local_p50_ms", 1e-3, "--s"),
        ):
            points = [(n, by_size[n][phase].get(key)) for n in sizes]
            points = [(n, v * scale) for n, v in points if isinstance(v, int | float) and v > 0]
            if points:
                ax_t.plot(*zip(*points, strict=True), style, label=f"{shape}: {label}")
        rss = [(n, by_size[n]["first"].get("peak_rss_mb", 0)) for n in sizes]
        rss = [(n, v) for n, v in rss if v > 0]
        if rss:
            ax_m.plot(*zip(*rss, strict=True), "-o", label=f"{shape}: first-open peak RSS")
    for ax, ylabel in ((ax_t, "seconds (median of runs)"), (ax_m, "MiB (median of runs)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("entities")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    ax_t.set_title("time vs index size")
    ax_m.set_title("peak memory vs index size")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated entity counts")
    parser.add_argument("--titles", default="unique,realistic,type-word",
                        help=f"comma-separated title shapes: {', '.join(SHAPES)}")
    parser.add_argument("--runs", type=int, default=3, help="runs per shape and size (median and range reported)")
    parser.add_argument("--graphrag-python", help="a Python with graphrag==3.3.0 installed (peer column)")
    parser.add_argument("--index-dir", type=Path, default=INDEX_DIR, help="where generated indexes are kept")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="folder for scale.json and scale.png")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--phase", choices=("first", "second"), help=argparse.SUPPRESS)
    parser.add_argument("--questions", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.phase, json.loads(args.questions.read_text()))))
        return
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    if not sizes or min(sizes) < 2:
        parser.error("--sizes needs entity counts of at least 2")
    shapes = [t.strip() for t in args.titles.split(",") if t.strip()]
    if not shapes or any(t not in SHAPES for t in shapes):
        parser.error(f"--titles must name shapes among {', '.join(SHAPES)}, got {args.titles!r}")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.graphrag_python and not Path(args.graphrag_python).exists():
        parser.error(f"--graphrag-python {args.graphrag_python} does not exist")
    report: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, "-m", "benchmarks.scale", *(argv if argv is not None else sys.argv[1:])]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_avg_start": list(os.getloadavg()),
        "runs": args.runs,
    }
    results: Results = {}
    for shape in shapes:
        for n in sizes:
            print(f"[{shape} titles, {n:,} entities] load average {os.getloadavg()[0]:.1f}", flush=True)
            path = ensure_index(n, args.index_dir, shape)
            results.setdefault(shape, {})[n] = run_size(path, args.graphrag_python, args.runs)
    report["load_avg_end"] = list(os.getloadavg())
    report["results"] = {shape: {str(n): row for n, row in by_size.items()} for shape, by_size in results.items()}
    print()
    print_table(results)
    for line in verdicts(results):
        print("Targets at", line)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(report, indent=1))
    write_chart(results, args.out / "scale.png")
    print(f"\nwrote {args.out / 'scale.json'} and {args.out / 'scale.png'}")


if __name__ == "__main__":
    main()
