"""Concurrency admission (429): the server-wide and per-API-key counts of requests in flight.

`LocalAdmission` counts in this process. `SharedAdmission` counts across `graphroute serve --workers N`
processes: a small memory-mapped file in the server's private run directory holds one row per worker
(its requests in flight, then one column per caller), and an `flock` on that file makes check-and-count
atomic. A file lock rather than a multiprocessing lock because the kernel drops it when its holder dies:
a worker killed mid-update cannot wedge the others. Each worker writes only its own row, so the
supervisor clears a dead worker's row (`clear_worker`) and its slots come back.

Callers are numbered: configured key i is caller i; with no keys configured every request is caller 0.
The per-key limit defaults to what fits the deployment (`per_key_limit`): one caller gets the whole server,
several share it fairly.
"""

from __future__ import annotations

import fcntl
import mmap
import os
from pathlib import Path
from typing import Protocol

_INT = 4  # bytes per counter (int32)


class Admission(Protocol):
    limit: int
    per_key_limit: int

    def enter(self, caller: int) -> str | None: ...

    def leave(self, caller: int) -> None: ...

    def in_flight(self) -> int: ...


def callers_for(api_keys: list[str]) -> int:
    """How many callers the per-key limit counts: one per key, or one (everyone) when no key is configured."""
    return max(1, len(api_keys))


def per_key_limit(limit: int, configured: int | None, callers: int) -> int:
    """The requests one caller may have in flight: `[serve] max_concurrency_per_key` when set; by default the
    server-wide `limit` with one key or none (a lone client that fans out is not throttled below what the
    server allows), and a fair share of it, `limit / callers` rounded up, with several keys."""
    if configured is not None:
        return configured
    return max(1, -(-limit // callers))


def refusal_message(refused: str, limit: int, configured: int | None, callers: int) -> str:
    """The 429 message: which limit was hit and the setting that raises it."""
    if refused == "server":
        return (f"the server is at its limit of {limit} requests in flight ([serve] max_concurrency); "
                "retry later")
    own = per_key_limit(limit, configured, callers)
    if configured is not None:
        why = "[serve] max_concurrency_per_key"
    else:
        why = (f"a fair share of [serve] max_concurrency = {limit} among {callers} API keys; "
               "[serve] max_concurrency_per_key sets it")
    return f"this API key is at its limit of {own} requests in flight ({why}); retry later"


class LocalAdmission:
    """In-process counts (a single `graphroute serve` process, `ServiceThread`)."""

    def __init__(self, limit: int, per_key_limit: int, callers: int) -> None:
        self.limit, self.per_key_limit = limit, per_key_limit
        self._total = 0
        self._per_caller = [0] * callers

    def enter(self, caller: int) -> str | None:
        """Count a request in; None when admitted, else which limit refused it ("server" or "key")."""
        if self._total >= self.limit:
            return "server"
        if self._per_caller[caller] >= self.per_key_limit:
            return "key"
        self._total += 1
        self._per_caller[caller] += 1
        return None

    def leave(self, caller: int) -> None:
        self._total -= 1
        self._per_caller[caller] -= 1

    def in_flight(self) -> int:
        return self._total


def create_admission_file(path: Path, workers: int, callers: int) -> None:
    """The zeroed counters file the workers map (made by the supervisor before any worker starts)."""
    with open(path, "wb") as f:
        f.write(bytes(workers * (callers + 1) * _INT))


class SharedAdmission:
    """Counts over all workers; this worker writes row `worker` of the file made by `create_admission_file`."""

    def __init__(self, path: Path, worker: int, workers: int, callers: int, limit: int, per_key_limit: int) -> None:
        self.limit, self.per_key_limit = limit, per_key_limit
        self._width = callers + 1
        self._workers = workers
        self._mine = worker * self._width
        self._fd = os.open(path, os.O_RDWR)  # an open file of its own: flock locks belong to the open file
        self._map = mmap.mmap(self._fd, workers * self._width * _INT)
        self._counts = memoryview(self._map).cast("i")

    def _sum(self, column: int) -> int:
        counts, width = self._counts, self._width
        return sum(counts[w * width + column] for w in range(self._workers))

    def enter(self, caller: int) -> str | None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            if self._sum(0) >= self.limit:
                return "server"
            if self._sum(caller + 1) >= self.per_key_limit:
                return "key"
            self._counts[self._mine] += 1
            self._counts[self._mine + caller + 1] += 1
            return None
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def leave(self, caller: int) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            self._counts[self._mine] -= 1
            self._counts[self._mine + caller + 1] -= 1
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def in_flight(self) -> int:
        return self._sum(0)

    def clear_worker(self, worker: int) -> None:
        """Forget what a dead worker had in flight (the supervisor, before it starts its replacement)."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            start = worker * self._width
            for i in range(start, start + self._width):
                self._counts[i] = 0
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        self._counts.release()
        self._map.close()
        os.close(self._fd)
