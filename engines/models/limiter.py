"""One concurrency limit per (base_url, model), shared by every engine in the process.

The limiter is thread-safe and loop-agnostic: the count lives behind a `threading.Lock`, and a
waiter is an asyncio future on *its own* loop, woken with `call_soon_threadsafe` (or at once, when the
slot is released on that loop's own thread). So engines
running on different event loops (tests, sync wrappers in worker threads) still share one limit,
and a limiter created under one loop keeps working after that loop is closed.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class ConcurrencyLimiter:
    """At most `limit` holders at a time; FIFO hand-off to waiters."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"concurrency limit must be >= 1 (got {limit})")
        self._limit = limit
        self._lock = threading.Lock()
        self._in_flight = 0
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        self.max_in_flight = 0  # highest number of holders observed

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def set_limit(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"concurrency limit must be >= 1 (got {limit})")
        granted = []
        with self._lock:
            self._limit = limit
            while self._waiters and self._in_flight < self._limit:
                self._in_flight += 1
                here = self._hand_off_locked()
                if here is not None:
                    granted.append(here)
        for fut in granted:
            self._grant(fut)

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._in_flight < self._limit and not self._waiters:
                self._in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self._in_flight)
                return
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, fut))
        try:
            await fut
        except asyncio.CancelledError:
            with self._lock:
                entry = (loop, fut)
                if entry in self._waiters:
                    self._waiters.remove(entry)  # never granted: nothing to give back
                    raise
            if fut.done() and not fut.cancelled():
                self.release()  # granted, then cancelled before we resumed: pass the slot on
            # else: the pending grant sees the cancelled future and passes the slot on itself
            raise

    def release(self) -> None:
        with self._lock:
            if not self._waiters:
                self._in_flight -= 1
                return
            here = self._hand_off_locked()  # slot moves to the next waiter; count unchanged
        if here is not None:
            self._grant(here)  # outside the lock: a cancelled waiter's grant releases again

    def _hand_off_locked(self) -> asyncio.Future[None] | None:
        """Give the slot to the first waiter whose loop is open. A waiter on the loop running in this thread
        is returned, for the caller to grant at once: a hand-off then costs the next holder no extra loop
        turn and no self-pipe write (each loop turn of a busy serving loop is milliseconds, and under load
        every slot release is a hand-off). Waiters on other loops are woken through their loop."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        while self._waiters:
            loop, fut = self._waiters.popleft()
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            if loop is running:
                return fut
            try:
                loop.call_soon_threadsafe(self._grant, fut)
                return None
            except RuntimeError:  # that loop is closed: its waiter is gone
                continue
        self._in_flight -= 1
        return None

    def _grant(self, fut: asyncio.Future[None]) -> None:
        if fut.done():  # cancelled while the grant was in transit
            self.release()
        else:
            fut.set_result(None)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        await self.acquire()
        try:
            yield
        finally:
            self.release()


class LimiterRegistry:
    """Limiters keyed by (base_url, model). The last configured limit for a key wins."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._limiters: dict[tuple[str, str], ConcurrencyLimiter] = {}

    def get(self, key: tuple[str, str], limit: int) -> ConcurrencyLimiter:
        with self._lock:
            limiter = self._limiters.get(key)
            if limiter is None:
                limiter = self._limiters[key] = ConcurrencyLimiter(limit)
                return limiter
        if limiter.limit != limit:
            limiter.set_limit(limit)
        return limiter

    def keys(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._limiters)


# The process-wide registry every backend uses unless a test passes its own.
DEFAULT_LIMITERS = LimiterRegistry()
