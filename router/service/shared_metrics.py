"""`/metrics` over all workers of `graphroute serve --workers N`: `prometheus_client`'s multiprocess mode.

Each worker's counters write to memory-mapped files (one per metric type and process id) in the `metrics`
folder of the server's private run directory; whichever worker renders `/metrics` reads every file there
(`MultiProcessCollector`), so the totals are exact for every worker. A worker that died leaves its files,
so the totals never go backwards when it is replaced. The in-flight gauge is read from the shared admission
counts, which are always current. `prometheus_client` picks its multiprocess values when it is first imported,
so a worker names the folder (`use_metrics_dir`) before anything imports it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from router.service.metrics import InFlightCollector, Metrics

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

# The variable prometheus_client reads (once, at import) to count in files shared by processes.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


class InFlight(Protocol):
    def in_flight(self) -> int: ...


def metrics_dir(run_dir: Path) -> Path:
    return run_dir / "metrics"


def use_metrics_dir(run_dir: Path) -> None:
    """In a worker process, before `prometheus_client` is imported: count in the run directory's files."""
    if "prometheus_client" in sys.modules:
        raise RuntimeError("prometheus_client was imported before the worker named its metrics folder")
    folder = metrics_dir(run_dir)
    folder.mkdir(mode=0o700, exist_ok=True)
    os.environ[MULTIPROC_ENV] = str(folder)


class SharedMetrics(Metrics):
    def __init__(self, run_dir: Path, admission: InFlight) -> None:
        from prometheus_client import values

        if os.environ.get(MULTIPROC_ENV) != str(metrics_dir(run_dir)) or "MultiProcess" not in repr(
                values.ValueClass):
            raise RuntimeError("a worker's metrics need use_metrics_dir before prometheus_client is imported")
        super().__init__()
        self._dir = metrics_dir(run_dir)
        self._admission = admission

    def current_in_flight(self) -> int:
        return self._admission.in_flight()

    def exposition_registry(self) -> CollectorRegistry:
        from prometheus_client import CollectorRegistry
        from prometheus_client.multiprocess import MultiProcessCollector

        out = CollectorRegistry(auto_describe=False)
        MultiProcessCollector(out, path=str(self._dir))  # type: ignore[no-untyped-call]  # untyped in the library
        out.register(InFlightCollector(self))
        return out
