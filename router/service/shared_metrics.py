"""`/metrics` over all workers of `graphroute serve --workers N`.

Each worker keeps its own `Metrics` and publishes a snapshot to `metrics-<worker>.json` in the server's
private run directory, at most `PUBLISH_DELAY_S` after a change (one small JSON write per burst, not per
request). Whichever worker renders `/metrics` adds the other workers' snapshots to its own live counts, so
the totals are exact for itself and at most that delay behind for the others. A restarted worker resumes
from its predecessor's snapshot, so the totals never go backwards. The in-flight gauge is read from the
shared admission counters, which are always current.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import orjson

from router.service.metrics import Metrics

if TYPE_CHECKING:
    from engines.models.base import JSONObject
    from router.answer import Answer

log = logging.getLogger("graphroute.serve")
PUBLISH_DELAY_S = 0.05


class InFlight(Protocol):
    def in_flight(self) -> int: ...


def _read_snapshot(path: Path) -> JSONObject | None:
    try:
        snap = json.loads(path.read_text())
    except FileNotFoundError:
        return None  # that worker has answered nothing yet
    except (OSError, ValueError) as exc:  # never half-written (replaced whole), but never trusted either
        log.warning("metrics snapshot %s unreadable: %s", path.name, exc)
        return None
    return snap if isinstance(snap, dict) else None


class SharedMetrics(Metrics):
    def __init__(self, run_dir: Path, worker: int, workers: int, admission: InFlight) -> None:
        super().__init__()
        self._dir, self._worker, self._workers = run_dir, worker, workers
        self._admission = admission
        self._file = run_dir / f"metrics-{worker}.json"
        self._publish_lock = threading.Lock()
        self._pending = False
        earlier = _read_snapshot(self._file)
        if earlier is not None:  # this worker replaces one that died: carry on from its counts
            self.absorb(earlier)

    def observe_request(self, method: str, path: str, status: int, seconds: float) -> None:
        super().observe_request(method, path, status, seconds)
        self._changed()

    def observe_answer(self, index: str, answer: Answer) -> None:
        super().observe_answer(index, answer)
        self._changed()

    def _changed(self) -> None:
        if self._pending:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # off the serving loop (a worker thread): publish now
            self.publish()
            return
        self._pending = True
        loop.call_later(PUBLISH_DELAY_S, self._publish_pending)

    def _publish_pending(self) -> None:
        self._pending = False
        self.publish()

    def publish(self) -> None:
        """Write this worker's snapshot (whole: a reader sees the old file or the new one)."""
        with self._publish_lock:
            tmp = self._file.with_suffix(".tmp")
            try:
                tmp.write_bytes(orjson.dumps(self.snapshot()))  # a tenth of json.dumps's CPU
                os.replace(tmp, self._file)
            except OSError as exc:  # the totals lag; serving goes on
                log.warning("cannot publish metrics: %s", exc)

    def render(self, indexes: Collection[str] | None = None) -> str:
        total = Metrics()
        total.absorb(self.snapshot())
        for worker in range(self._workers):
            if worker != self._worker:
                snap = _read_snapshot(self._dir / f"metrics-{worker}.json")
                if snap is not None:
                    total.absorb(snap)
        total.in_flight = self._admission.in_flight()
        return total.render(indexes)
