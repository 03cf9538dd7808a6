"""What the benchmark scripts share: where the shared data folder is, and how a report is printed and saved."""

from __future__ import annotations

import datetime
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

# The data sets live beside the repository (`../shared/data`), never inside it.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CAROL_INDEX = SHARED_DATA / "christmas_carol_graphrag_index"


def _main_module() -> str:
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return spec.name if spec is not None else Path(sys.argv[0]).stem


def machine() -> dict[str, Any]:
    """The platform, Python, cores and memory of this machine, as result files record them."""
    mem_kib = 0
    try:
        with open("/proc/meminfo") as fh:
            mem_kib = int(next(line for line in fh if line.startswith("MemTotal")).split()[1])
    except (OSError, StopIteration, ValueError):
        pass
    return {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count(),
            "memory_gib": round(mem_kib / 2**20, 1), "processor": platform.processor() or platform.machine()}


def run_facts() -> dict[str, Any]:
    """What a result file records about its run: the command, the date (UTC) and the machine."""
    return {
        "command": " ".join(["python", "-m", _main_module(), *sys.argv[1:]]),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "load_avg_start": list(os.getloadavg()),
    }


def emit_report(report: dict[str, Any], out: str | Path | None, printed: dict[str, Any] | None = None) -> None:
    """Print `printed` (default: the whole report) as JSON, and write the whole report, with the run's facts
    (`run_facts`) where the report has none of its own, to `out` if given."""
    report = {**run_facts(), **report}
    print(json.dumps(report if printed is None else printed, indent=2))
    if out:
        Path(out).write_text(json.dumps(report, indent=2) + "\n")
