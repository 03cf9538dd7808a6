"""One long-lived event loop in a background thread, for the synchronous `Router` API.

Why: `asyncio.run` per call makes a new loop per question, and an HTTP client is bound to the loop it first
ran on, so every call opened a fresh connection pool and left the old one's sockets to the garbage
collector. A sync `Router` runs every coroutine on this one loop instead: one client per endpoint, reused
connections, and a single place (`close`) where they are shut.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running forever in a daemon thread; `run(coro)` blocks until the coroutine is done."""

    def __init__(self, name: str = "graphroute-loop") -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        self._closed = False

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._ready.set)
        self._loop.run_forever()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop from any other thread (a running loop in the caller's thread is fine)."""
        if self._closed:
            coro.close()
            raise RuntimeError("this Router is closed")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("the synchronous API was called from the Router's own event loop; use the async form")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except KeyboardInterrupt:  # Ctrl-C: stop the question rather than leave it running in the background
            future.cancel()
            raise

    def close(self, final: Coroutine[Any, Any, Any] | None = None) -> None:
        """Run `final` (e.g. closing HTTP clients), cancel what is left, stop the loop and join the thread."""
        if self._closed:
            if final is not None:
                final.close()
            return
        if final is not None:
            self.run(final)
        self._closed = True

        async def _cancel_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._loop.shutdown_asyncgens()
            await self._loop.shutdown_default_executor()

        asyncio.run_coroutine_threadsafe(_cancel_rest(), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
