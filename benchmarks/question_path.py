"""Which of the project's files one local question runs through: `python -m benchmarks.question_path`.

Opens the Christmas Carol index with a Router (offline model), asks one question forced to local search once to
warm what every question shares (imports, per-index caches), then records every function call of a second,
different question with `sys.setprofile` / `threading.setprofile` (installed before the Router starts its
threads, so the event loop's thread and the worker threads that build the context are counted too) and lists the project files those calls were in, grouped by package. The derived store is one that
other processes filled first by opening the index and asking the warm-up question (`--cache-dir`, default a new
temporary folder), as for a service started on an index opened before: which files run depends on it (the
records are read back from the store, not built). Writes
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


def trace_question(index: Path, warm: str, question: str) -> Counter[str]:
    from router import Router

    calls: Counter[str] = Counter()
    recording = threading.Event()

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and recording.is_set():
            calls[frame.f_code.co_filename] += 1

    # Installed before the Router starts its loop thread and worker threads, so they inherit it; it counts
    # only while the second question runs.
    threading.setprofile(profile)  # type: ignore[arg-type]
    sys.setprofile(profile)  # type: ignore[arg-type]
    try:
        with Router.from_index(index) as router:
            router.ask(warm, mode="local")
            recording.set()
            router.ask(question, mode="local")
            recording.clear()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    out: Counter[str] = Counter()
    for filename, n in calls.items():
        path = Path(filename).resolve()
        if path.is_relative_to(ROOT) and path.relative_to(ROOT).parts[0] in PACKAGES:
            out[path.relative_to(ROOT).as_posix()] += n
    return out


def fill_store(index: Path, question: str, cache_dir: Path) -> None:
    """Open the index and ask `question` in another process with `cache_dir` as the derived store, so the
    traced process reads the stored tables and derived entries as a process that opened the index before does
    (a first open writes the large tables; the next one, reading them, stores the small records too)."""
    env = {**os.environ, "GRAPHROUTE_CACHE_DIR": str(cache_dir)}
    code = ("import sys\nfrom router import Router\n"
            "with Router.from_index(sys.argv[1]) as router:\n    router.ask(sys.argv[2], mode='local')\n")
    for _ in range(2):
        subprocess.run([sys.executable, "-c", code, str(index), question], cwd=ROOT, env=env, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--index", type=Path, default=CAROL_INDEX)
    parser.add_argument("--question", default="Who is Bob Cratchit and what does he earn?")
    parser.add_argument("--warm", default="Who is Jacob Marley?")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="the derived store to fill and then read (default: a new temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="question_path_") as tmp:
        cache_dir = args.cache_dir or Path(tmp)
        fill_store(args.index, args.warm, cache_dir)
        os.environ["GRAPHROUTE_CACHE_DIR"] = str(cache_dir)
        files = trace_question(args.index, args.warm, args.question)
    by_package = Counter(name.split("/")[0] for name in files)
    report = {**run_facts(), "question": args.question, "files": len(files), "by_package": dict(by_package),
              "calls_per_file": dict(sorted(files.items()))}
    print(json.dumps({k: v for k, v in report.items() if k != "calls_per_file"}, indent=1))
    for name in sorted(files):
        print(f"  {name}  ({files[name]} calls)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
