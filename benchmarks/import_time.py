"""CPU time of `import router` in fresh interpreters: best and median of N runs, in two bytecode states.

    python -m benchmarks.import_time [--runs 7] [--module router] [--top 12]

- **warm**: every module (ours, the standard library, site-packages) loads from bytecode, as after an install
  or any earlier run that could write `__pycache__`;
- **source**: the project's own modules are compiled from source on every run (the state of a checkout run
  with `PYTHONDONTWRITEBYTECODE=1`), everything else from bytecode.

Both use a private `PYTHONPYCACHEPREFIX` directory, so nothing is written into the repository or the venv.
CPU time (`time.process_time`) rather than wall time: on a shared machine wall time mostly measures the load,
which is printed beside the figures. `--top` lists the project modules with the largest own import time
(`-X importtime`, one warm run) — where to look when the figure creeps up.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROJECT = ("router", "engines", "shared_context", "indexer", "benchmarks")

_PROBE = """
import json, sys, time
start = time.process_time()
import {module}
seconds = time.process_time() - start
print(json.dumps({{"seconds": seconds, "file": {module}.__file__,
                  "top_level": sorted({{m.split(".")[0] for m in sys.modules}})}}))
"""


def _env(prefix: Path, write_bytecode: bool) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), PYTHONPYCACHEPREFIX=str(prefix))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(code: str, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *flags, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120, check=True)


def measure(module: str, runs: int, prefix: Path, from_source: bool) -> dict[str, object]:
    """Best and median CPU seconds of `import module` over `runs` fresh interpreters."""
    _run(f"import {module}", _env(prefix, write_bytecode=True))  # fill the private bytecode cache
    project_cache = prefix / REPO.relative_to(REPO.anchor)
    if from_source:
        shutil.rmtree(project_cache, ignore_errors=True)
    probes = [json.loads(_run(_PROBE.format(module=module), _env(prefix, write_bytecode=False)).stdout)
              for _ in range(runs)]
    if from_source and project_cache.exists():
        raise RuntimeError(f"bytecode was written under {project_cache}: the 'source' figure would be wrong")
    seconds = [float(p["seconds"]) for p in probes]
    loaded = probes[0]["top_level"]
    return {"best_s": round(min(seconds), 3), "median_s": round(statistics.median(seconds), 3),
            "runs": runs, "file": probes[0]["file"],
            "third_party": [m for m in loaded if m not in sys.stdlib_module_names and not m.startswith("_")
                            and m not in PROJECT]}


def top_modules(module: str, prefix: Path, count: int) -> list[tuple[str, int]]:
    """The project modules with the largest own import time (microseconds), from one `-X importtime` run."""
    err = _run(f"import {module}", _env(prefix, write_bytecode=False), "-X", "importtime").stderr
    rows = []
    for line in err.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[0].startswith("import time:") and parts[0].split(":")[1].strip().isdigit():
            name = parts[2].strip()
            if name.split(".")[0] in PROJECT:
                rows.append((name, int(parts[0].split(":")[1])))
    return sorted(rows, key=lambda r: -r[1])[:count]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", default="router")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--top", type=int, default=0, help="also list the N slowest project modules")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="import-time-") as tmp:
        results = {state: measure(args.module, args.runs, Path(tmp) / state, from_source=state == "source")
                   for state in ("warm", "source")}
        top = top_modules(args.module, Path(tmp) / "warm", args.top) if args.top else []
    load = {"loadavg_1m_before": round(load_before, 2), "loadavg_1m_after": round(os.getloadavg()[0], 2),
            "cpus": os.cpu_count()}
    if args.json:
        print(json.dumps({"module": args.module, **results, **load, "top_us": top}, indent=2))
        return 0
    print(f"import {args.module}  (CPU seconds, {args.runs} fresh interpreters each; "
          f"load average {load['loadavg_1m_before']} -> {load['loadavg_1m_after']} on {load['cpus']} CPUs)")
    for state, r in results.items():
        print(f"  {state:<7} best {r['best_s']:.3f}  median {r['median_s']:.3f}")
    print(f"  third-party packages loaded: {', '.join(results['warm']['third_party'])}")  # type: ignore[arg-type]
    for name, micros in top:
        print(f"  {micros / 1000:7.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
