"""Before and after one change, side by side: `python -m benchmarks.before_after --before DIR --after DIR`.

Each DIR holds the result files of one checkout, written by the scripts themselves, run from inside that
checkout (`cd $CODE`: `python -m` puts the working directory first on the path) with its code first on
`PYTHONPATH` (the editable install would otherwise load this one):

    PYTHONPATH=$CODE python -m benchmarks.question_path --out DIR/question_path.json
    PYTHONPATH=$CODE python -m benchmarks.router_eval --parts latency --runs 3 --json DIR/router_eval.json
    PYTHONPATH=$CODE python -m benchmarks.cli_latency --runs 3 --code $CODE --out DIR/cli_latency
    PYTHONPATH=$CODE python -m benchmarks.scale --sizes 10000,100000 --titles type-word --runs 3 --out DIR/scale
    PYTHONPATH=$CODE python -m benchmarks.scale --sizes 1000000 --titles type-word --runs 3 --out DIR/scale_1m

or, to let both sides meet the same load, one `--runs 1` run per side in turn, each side's files then merged:
`python -m benchmarks.scale_merge --commit C --note WHY --out DIR/scale_1m RUN1/scale.json RUN2/scale.json ...`.

Figures (wall time, and the CPU time of the same runs where the script records it): the local context p50 at 10k
entities and the second process's cold start (import + load + first context) at 100k and 1M entities
(`benchmarks.scale`, type-word titles), `graphroute ask` wall time on the Christmas Carol index
(`benchmarks.cli_latency`), the classifier's p50 per question with linking and the index probe on a 10k-entity
index (`benchmarks.router_eval`, latency part), and the files an auto-routed question runs through
(`benchmarks.question_path`). Timings are the median and the range over each script's runs; a figure whose file is
missing is reported as missing. A source file that records its own `commit` (and `note`), such as one merged from
interleaved runs by `benchmarks.scale_merge`, keeps them in its side's `sources`. Writes
`benchmarks/results/architecture/before_after.json` (the per-run values, each source file's command, date and load
averages) and copies the source files beside it (absolute paths into the shared data folder shown as
`../shared/data`, as `benchmarks.redact_report` does).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import SHARED_DATA, run_facts
from benchmarks.redact_report import relativise

OUT = Path(__file__).resolve().parent / "results" / "architecture"
Json = dict[str, Any]
# figure name -> (source file inside a DIR, unit, reader of its per-run values)
Reader = Callable[[Json], list[float]]


def _scale(size: str, key: str) -> Reader:
    return lambda r: [float(run[key]) for run in r["results"]["type-word"][size]["second_runs"] if key in run]


def _cli(*keys: str) -> Reader:
    return lambda r: [sum(float(x[k]) for k in keys) for x in r["results"]["carol"]["runs"]]


# Wall times and, where the script records it, the CPU time of the same runs: on a shared machine the CPU time
# is the comparable figure (the wall time also holds the waits for other processes).
FIGURES: dict[str, tuple[str, str, Reader]] = {
    "local context p50, 10k entities (wall)": ("scale/scale.json", "ms", _scale("10000", "local_p50_ms")),
    "local context p50, 10k entities (CPU)": ("scale/scale.json", "ms", _scale("10000", "local_cpu_p50_ms")),
    "cold start (second process), 100k entities (wall)": ("scale/scale.json", "s", _scale("100000", "cold_s")),
    "cold start (second process), 100k entities (CPU)": ("scale/scale.json", "s", _scale("100000", "cold_cpu_s")),
    "cold start (second process), 1M entities (wall)": ("scale_1m/scale.json", "s", _scale("1000000", "cold_s")),
    "cold start (second process), 1M entities (CPU)": ("scale_1m/scale.json", "s", _scale("1000000", "cold_cpu_s")),
    "`graphroute ask` wall time, Christmas Carol": ("cli_latency/cli_latency.json", "s", _cli("wall_s")),
    "`graphroute ask` CPU (user + system), Christmas Carol": ("cli_latency/cli_latency.json", "s",
                                                              _cli("user_s", "sys_s")),
    "routing p50 per question, with linking and the index probe (10k entities)": (
        "router_eval.json", "ms", lambda r: [float(x) for x in r["latency"]["with_index_p50_ms"]]),
    "routing p50 per question, no index": (
        "router_eval.json", "ms", lambda r: [float(x) for x in r["latency"]["no_index_p50_ms"]]),
    "question path, first question of a process (files)": (
        "question_path.json", "files", lambda r: [float(r["first"]["files"])]),
    "question path, second question (files)": ("question_path.json", "files", lambda r: [float(r["second"]["files"])]),
}


def side(folder: Path, skipped: dict[str, str]) -> tuple[dict[str, Json], dict[str, Json]]:
    """Per figure: its runs, median and range (or why it is missing); and each source file's provenance.
    `skipped`: source file or figure name -> why it was not measured."""
    figures: dict[str, Json] = {}
    sources: dict[str, Json] = {}
    for name, (rel, unit, read) in FIGURES.items():
        path = folder / rel
        if not path.exists():
            figures[name] = {"unit": unit, "missing": skipped.get(rel, f"no {rel}")}
            continue
        report = json.loads(path.read_text(encoding="utf-8"))
        try:
            runs = read(report)
        except KeyError:  # the file was written without this figure (a scale run at other sizes)
            runs = []
        if not runs:
            figures[name] = {"unit": unit, "missing": skipped.get(name, f"not in {rel}")}
        else:
            figures[name] = {"unit": unit, "runs": runs, "median": statistics.median(runs),
                             "range": [min(runs), max(runs)]}
        sources[rel] = {k: report.get(k) for k in ("command", "date", "load_avg_start", "load_avg_end")}
        # a file measured at another commit than the side's (merged by benchmarks.scale_merge) says so
        sources[rel] |= {k: report[k] for k in ("commit", "note") if report.get(k)}
    return figures, sources


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--before", type=Path, required=True, help="result files of the starting checkout")
    parser.add_argument("--after", type=Path, required=True, help="result files of the changed checkout")
    parser.add_argument("--before-commit", default="", help="the starting commit, as recorded")
    parser.add_argument("--after-commit", default="", help="the changed commit, as recorded")
    parser.add_argument("--skipped", action="append", default=[], metavar="FILE=WHY",
                        help="a source file, or a figure, not measured on either side, and why")
    parser.add_argument("--data-root", action="append", default=[],
                        help="a spelling of the shared data folder the source files use (shown as ../shared/data)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    roots = [SHARED_DATA, *args.data_root]
    skipped = dict(item.split("=", 1) for item in args.skipped)
    report: Json = {**run_facts(), "figures": list(FIGURES)}
    for label, folder, commit in (("before", args.before, args.before_commit), ("after", args.after, args.after_commit)):
        figures, sources = side(folder, skipped)
        report[label] = {"commit": commit, "figures": figures, "sources": sources}
        for rel in sources:  # the source files themselves, beside the summary, data paths shown relative
            target = args.out / label / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            copied = json.loads((folder / rel).read_text(encoding="utf-8"))
            for root in roots:
                copied = relativise(copied, root)
            target.write_text(json.dumps(copied, indent=1) + "\n", encoding="utf-8")
    args.out.mkdir(parents=True, exist_ok=True)
    for root in roots:
        report = relativise(report, root)
    (args.out / "before_after.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    for name in FIGURES:
        b, a = report["before"]["figures"][name], report["after"]["figures"][name]
        print(f"{name}: before {b.get('median', b.get('missing'))} after {a.get('median', a.get('missing'))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
