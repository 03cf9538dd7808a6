"""What a build says while it runs: each stage's start and end on stderr with its counts and time, bars
within the long ones, and each stage's wall time, CPU time and peak memory in the build report."""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tqdm.auto import tqdm

from indexer.config import IndexBuildReport


class BuildProgress:
    """Times the stages of one build into `report` and, when `enabled`, reports them on stderr."""

    def __init__(self, report: IndexBuildReport, enabled: bool) -> None:
        self.report = report
        self.enabled = enabled

    @contextmanager
    def step(self, name: str, doing: str = "") -> Iterator[dict[str, str]]:
        """Time one stage and say on stderr when it starts and what it made (the yielded dict's "done")."""
        t0, c0 = time.perf_counter(), time.process_time()
        note = {"done": ""}
        if doing:
            self.say(f"{name}: {doing} ...")
        try:
            yield note
        finally:
            seconds = time.perf_counter() - t0
            report = self.report
            report.step_seconds[name] = report.step_seconds.get(name, 0.0) + seconds
            report.step_cpu_seconds[name] = report.step_cpu_seconds.get(name, 0.0) + time.process_time() - c0
            report.step_peak_rss_mb[name] = peak_rss_mb()
            self.say(f"{name}: {note['done'] or 'done'} ({seconds:.1f} s)")

    def say(self, line: str) -> None:
        if self.enabled:
            tqdm.write(f"[index] {line}", file=sys.stderr)

    def bar(self, total: int, desc: str) -> Any:
        """A progress bar (tqdm's own type: its `update` is what the stages call)."""
        return tqdm(total=total, desc=desc, unit="it", disable=not self.enabled, leave=False)


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (ru_maxrss is KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (1024.0 * 1024.0 if sys.platform == "darwin" else 1024.0), 1)
