"""Cold start, latency and memory against index size (10k / 100k / 1M entities), with GraphRAG as a peer.

    .venv/bin/python -m benchmarks.scale                       # 10k, 100k, 1M; about 15 minutes
    .venv/bin/python -m benchmarks.scale --sizes 10000,100000 --graphrag-python /work/venv-graphrag/bin/python

Indexes are synthetic GraphRAG-v3 folders (`benchmarks/synthetic_index.py`, 5 relationships per entity),
generated once and kept under `/tmp/scale-idx/` (`--index-dir`). For each size, with a fresh cache
directory, two child processes run one after the other, so each starts cold in memory:
1. first load: `load_index` with an empty cache (token counts, derived structures and lexical tables
   computed and stored), then the first local context build;
2. second load: `load_index` again (everything read from the cache), then the first local context build
   ("first query": entity linking and the local context, no model call), then 20 more local builds
   (p50/p95 wall, p50 CPU), one global batch build (`CommunityContextBuilder.build`, all reports of the default
   level in map batches) and basic search (`top_text_units` + its Sources table) p50 over the same
   questions. Peak RSS is the child's `ru_maxrss`.

GraphRAG 3.3.0 (a peer, never a dependency) is measured when `--graphrag-python` names a Python that
has it: `python3 -m venv /work/venv-graphrag && /work/venv-graphrag/bin/pip install graphrag==3.3.0`.
Its child (`benchmarks/scale_graphrag.py`) loads the same parquet tables with GraphRAG's query-side
readers and times its local and global context builders the same way.

Prints a table and the targets, writes `scale.json` and a log-log chart `scale.png` into `--out`.
"""

from __future__ import annotations

import argparse
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

INDEX_DIR = Path("/tmp/scale-idx")
OUT_DIR = Path(__file__).resolve().parent / "results" / "scale"
N_QUERIES = 20
CHILD_TIMEOUT_S = 1800
TARGETS = {  # size -> (second load + first query s, first load s, peak RSS MiB, local p50 ms)
    100_000: (3.0, 20.0, 1536.0, 20.0),
    1_000_000: (10.0, None, 6144.0, 50.0),
}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def ensure_index(n_entities: int, index_dir: Path) -> Path:
    from benchmarks.synthetic_index import ensure_synthetic_index

    return ensure_synthetic_index(index_dir, n_entities)


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


def measure(path: Path, phase: str) -> dict[str, Any]:
    """Child process: load, then time the first local build and (second phase) the rest."""
    from engines.basic import sources_section, top_text_units
    from shared_context import CommunityContextBuilder, LocalContextBuilder, load_index

    qs = questions(_entity_titles(path), N_QUERIES + 1)
    out: dict[str, Any] = {"phase": phase}
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
            sources_section(index, hits, 12_000)
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


def run_size(path: Path, graphrag_python: str | None) -> dict[str, Any]:
    row: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="graphroute-scale-cache-") as cache_dir:
        env = {**os.environ, "GRAPHROUTE_CACHE_DIR": cache_dir}
        for phase in ("first", "second"):
            cmd = [sys.executable, "-m", "benchmarks.scale", "--child", str(path), "--phase", phase]
            row[phase] = _run_child(cmd, env)
    if graphrag_python:
        script = Path(__file__).resolve().parent / "scale_graphrag.py"
        row["graphrag"] = _run_child([graphrag_python, str(script), str(path), str(N_QUERIES)], dict(os.environ))
    return row


def _f(value: Any, fmt: str) -> str:
    return format(value, fmt) if isinstance(value, int | float) else "-"


def print_table(results: dict[int, dict[str, Any]]) -> None:
    header = (
        "| entities | system | first load (s) | second load (s) | first query (s) | local p50 / p95 (CPU p50) (ms) | "
        "global batch build (s) | basic p50 (ms) | peak RSS (MiB) | load avg |"
    )
    print(header)
    print("|---" * (header.count("|") - 1) + "|")
    for n, row in sorted(results.items()):
        first, second = row.get("first", {}), row.get("second", {})
        if "error" in first or "error" in second:
            print(f"| {n:,} | graphroute | failed: {first.get('error') or second.get('error')} |")
        else:
            print(
                f"| {n:,} | graphroute | {_f(first.get('load_s'), '.2f')} | {_f(second.get('load_s'), '.2f')} | "
                f"{_f(second.get('first_query_s'), '.2f')} | {_f(second.get('local_p50_ms'), '.1f')} / "
                f"{_f(second.get('local_p95_ms'), '.1f')} ({_f(second.get('local_cpu_p50_ms'), '.1f')}) | "
                f"{_f(second.get('global_build_s'), '.2f')} | "
                f"{_f(second.get('basic_p50_ms'), '.1f')} | "
                f"{_f(max(first.get('peak_rss_mb', 0), second.get('peak_rss_mb', 0)), '.0f')} | "
                f"{_f(second.get('load_avg_1m'), '.1f')} |"
            )
        peer = row.get("graphrag")
        if peer is None:
            continue
        if "error" in peer:
            print(f"| {n:,} | GraphRAG 3.3.0 | failed: {peer['error']} |")
            continue
        print(
            f"| {n:,} | GraphRAG 3.3.0 | {_f(peer.get('load_s'), '.2f')} | - | {_f(peer.get('first_query_s'), '.2f')} | "
            f"{_f(peer.get('local_p50_ms'), '.1f')} / {_f(peer.get('local_p95_ms'), '.1f')} | "
            f"{_f(peer.get('global_build_s'), '.2f')} | {_f(peer.get('basic_p50_ms'), '.1f')} | "
            f"{_f(peer.get('peak_rss_mb'), '.0f')} | {_f(peer.get('load_avg_1m'), '.1f')} |"
        )


def verdicts(results: dict[int, dict[str, Any]]) -> list[str]:
    lines = []
    for n, (cold_target, first_target, rss_target, p50_target) in TARGETS.items():
        row = results.get(n)
        if not row or "error" in row.get("second", {"error": 1}) or "error" in row.get("first", {"error": 1}):
            continue
        first, second = row["first"], row["second"]
        cold = second["load_s"] + second["first_query_s"]
        rss = max(first["peak_rss_mb"], second["peak_rss_mb"])
        checks = [
            (f"second load + first query {cold:.2f} s <= {cold_target} s", cold <= cold_target),
            (f"peak RSS {rss:.0f} MiB <= {rss_target:.0f} MiB", rss <= rss_target),
            (f"local p50 {second['local_p50_ms']:.1f} ms <= {p50_target} ms", second["local_p50_ms"] <= p50_target),
        ]
        if first_target is not None:
            checks.append((f"first load {first['load_s']:.1f} s <= {first_target} s", first["load_s"] <= first_target))
        lines.append(f"{n:,}: " + "; ".join(f"{text}: {'met' if ok else 'MISSED'}" for text, ok in checks))
    return lines


def write_chart(results: dict[int, dict[str, Any]], png: Path) -> None:
    from benchmarks.bench_charts import pyplot

    plt = pyplot()  # ChartsUnavailable (naming the extra to install) without matplotlib

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    series = {
        "first load (s)": ("first", "load_s"),
        "second load (s)": ("second", "load_s"),
        "first query (s)": ("second", "first_query_s"),
        "global batch build (s)": ("second", "global_build_s"),
        "local build p50 (s)": ("second", "local_p50_ms"),
    }
    for system, key_of in (("graphroute", lambda row, phase: row.get(phase, {})),
                           ("GraphRAG", lambda row, phase: row.get("graphrag", {}))):  # fmt: skip
        style = "-o" if system == "graphroute" else "--s"
        for label, (phase, key) in series.items():
            if system == "GraphRAG" and label.startswith("second load"):  # it has no cache: one load
                continue
            points = [(n, key_of(row, phase).get(key)) for n, row in sorted(results.items())]
            points = [(n, v / 1000 if key.endswith("_ms") else v) for n, v in points if isinstance(v, int | float) and v > 0]
            if points:
                ax_t.plot(*zip(*points, strict=True), style, label=f"{system}: {label}")
        rss = [(n, max(key_of(row, "first").get("peak_rss_mb", 0), key_of(row, "second").get("peak_rss_mb", 0)))
               for n, row in sorted(results.items())]  # fmt: skip
        rss = [(n, v) for n, v in rss if v > 0]
        if rss:
            ax_m.plot(*zip(*rss, strict=True), style, label=f"{system}: peak RSS")
    for ax, ylabel in ((ax_t, "seconds"), (ax_m, "MiB")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("entities (5 relationships each)")
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
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated entity counts")
    parser.add_argument("--graphrag-python", help="a Python with graphrag==3.3.0 installed (peer column)")
    parser.add_argument("--index-dir", type=Path, default=INDEX_DIR, help="where generated indexes are kept")
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="folder for scale.json and scale.png")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--phase", choices=("first", "second"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.child, args.phase)))
        return
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    if not sizes or min(sizes) < 2:
        parser.error("--sizes needs entity counts of at least 2")
    if args.graphrag_python and not Path(args.graphrag_python).exists():
        parser.error(f"--graphrag-python {args.graphrag_python} does not exist")
    results: dict[int, dict[str, Any]] = {}
    for n in sizes:
        print(f"[{n:,} entities] load average {os.getloadavg()[0]:.1f}", flush=True)
        path = ensure_index(n, args.index_dir)
        results[n] = run_size(path, args.graphrag_python)
        print(json.dumps(results[n]), flush=True)
    print()
    print_table(results)
    for line in verdicts(results):
        print("Targets at", line)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps({str(n): r for n, r in results.items()}, indent=1))
    write_chart(results, args.out / "scale.png")
    print(f"\nwrote {args.out / 'scale.json'} and {args.out / 'scale.png'}")


if __name__ == "__main__":
    main()
