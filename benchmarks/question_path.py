"""Which of the project's files an auto-routed question runs through: `python -m benchmarks.question_path`.

Opens the Christmas Carol index with a Router (offline model) and asks two different questions with no mode
forced, so the classifier routes them as it routes any question. Every function call of each question is
recorded with `sys.setprofile` / `threading.setprofile` (installed before the Router starts its threads, so the
event loop's thread and the worker threads that build the context are counted too), and the project files and
functions those calls were in are listed, grouped by package:

- **first**: the first question of the process (the index is open; imports made on first use and the
  per-index caches are paid by this question);
- **second**: the next question, which finds all of that in place.

The derived store is one that other processes filled first by opening the index and asking the first question
(`--cache-dir`, default a new temporary folder), as for a service started on an index opened before: which
files run depends on it (the records are read back from the store, not built). Writes
`benchmarks/results/question_path/question_path.json` (with the command, date and machine).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path
from types import FrameType

from benchmarks.common import CAROL_INDEX, run_facts

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("shared_context", "engines", "router")
OUT = ROOT / "benchmarks" / "results" / "question_path" / "question_path.json"
COUNTED = ("project files (shared_context, engines, router) in which at least one Python function ran (a module "
           "body counts: a module imported while the question runs) between the question's start and its answer, in "
           "the calling thread, the Router's loop thread and the worker threads; functions are (file, first line, "
           "name) with at least one call")
# (file, first line, function name) of one project function
Function = tuple[str, int, str]


def trace_questions(index: Path, questions: list[str]) -> list[tuple[Counter[Function], str]]:
    """The calls per function of each question, asked in order on one Router, and the engine that answered."""
    from router import Router

    traces: list[Counter[Function]] = [Counter() for _ in questions]
    current: list[Counter[Function] | None] = [None]

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        calls = current[0]
        if event == "call" and calls is not None:
            code = frame.f_code
            calls[(code.co_filename, code.co_firstlineno, code.co_name)] += 1

    engines: list[str] = []
    # Installed before the Router starts its loop thread and worker threads, so they inherit it; it counts
    # only while a question runs.
    threading.setprofile(profile)  # type: ignore[arg-type]
    sys.setprofile(profile)  # type: ignore[arg-type]
    try:
        with Router.from_index(index) as router:
            for question, calls in zip(questions, traces, strict=True):
                current[0] = calls
                answer = router.ask(question)
                current[0] = None
                engines.append(answer.engine)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return [(_project_only(calls), engine) for calls, engine in zip(traces, engines, strict=True)]


def _project_only(calls: Counter[Function]) -> Counter[Function]:
    out: Counter[Function] = Counter()
    for (filename, line, name), n in calls.items():
        path = Path(filename).resolve()
        if path.is_relative_to(ROOT) and path.relative_to(ROOT).parts[0] in PACKAGES:
            out[(path.relative_to(ROOT).as_posix(), line, name)] += n
    return out


def summary(question: str, engine: str, calls: Counter[Function]) -> dict[str, object]:
    per_file: Counter[str] = Counter()
    for (name, _line, _function), n in calls.items():
        per_file[name] += n
    return {"question": question, "answered_by": engine, "files": len(per_file), "functions": len(calls),
            "by_package": dict(Counter(name.split("/")[0] for name in per_file)),
            "calls_per_file": dict(sorted(per_file.items()))}


def fill_store(index: Path, question: str, cache_dir: Path) -> None:
    """Open the index and ask `question` in another process with `cache_dir` as the derived store, so the
    traced process reads the stored tables and derived entries as a process that opened the index before does
    (a first open writes the large tables; the next one, reading them, stores the small records too)."""
    env = {**os.environ, "GRAPHROUTE_CACHE_DIR": str(cache_dir)}
    code = ("import sys\nfrom router import Router\n"
            "with Router.from_index(sys.argv[1]) as router:\n    router.ask(sys.argv[2])\n")
    for _ in range(2):
        subprocess.run([sys.executable, "-c", code, str(index), question], cwd=ROOT, env=env, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--index", type=Path, default=CAROL_INDEX)
    parser.add_argument("--first", default="Who is Jacob Marley?", help="the process's first question")
    parser.add_argument("--second", default="Who is Bob Cratchit and what does he earn?", help="the next one")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="the derived store to fill and then read (default: a new temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="question_path_") as tmp:
        cache_dir = args.cache_dir or Path(tmp)
        fill_store(args.index, args.first, cache_dir)
        os.environ["GRAPHROUTE_CACHE_DIR"] = str(cache_dir)
        (first, first_engine), (second, second_engine) = trace_questions(args.index, [args.first, args.second])
    report = {**run_facts(), "mode": "auto (routed by the classifier)", "counted": COUNTED,
              "first": summary(args.first, first_engine, first), "second": summary(args.second, second_engine, second)}
    for phase in ("first", "second"):
        facts = report[phase]
        assert isinstance(facts, dict)
        print(f"{phase}: {facts['question']!r} answered by {facts['answered_by']}: {facts['files']} files "
              f"{facts['by_package']}, {facts['functions']} functions")
        for name, n in facts["calls_per_file"].items():
            print(f"  {name}  ({n} calls)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
