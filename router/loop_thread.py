"""One long-lived event loop in a background thread, for the synchronous `Router` API.

Why: `asyncio.run` per call makes a new loop per question, and an HTTP client is bound to the loop it first
ran on, so every call opened a fresh connection pool and left the old one's sockets to the garbage
collector. A sync `Router` runs every coroutine on this one loop instead: one client per endpoint, reused
connections, and a single place (`close`) where they are shut.

`SyncLoop` is what a Router holds: the loop thread started on first use, and a `close` that works from any
thread, the loop's own included (a finaliser run by the garbage collector may run there), so a Router that is
never closed still shuts its clients on their own loop when it is collected or the interpreter exits.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import TypeVar

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
        try:
            self._loop.run_forever()
        finally:
            if self._closed:  # stopped by a close from this very thread: nobody joins to close the loop
                self._loop.close()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, coro: Coroutine[object, None, T]) -> T:
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

    def close(self, final: Coroutine[object, None, object] | None = None) -> None:
        """Run `final` (e.g. closing HTTP clients), cancel what is left, close the loop's async generators
        (the HTTP clients' closers among them), stop the loop and join the thread.

        From the loop's own thread (a finaliser) it cannot wait for itself: the same steps are scheduled and
        the loop closes itself once they are done."""
        if self._closed:
            if final is not None:
                final.close()
            return
        if threading.current_thread() is self._thread:
            self._closed = True
            self._loop.call_soon(self._start_shutdown, final)
            return
        if final is not None:
            self.run(final)
        self._closed = True
        asyncio.run_coroutine_threadsafe(self._shutdown(None), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def _start_shutdown(self, final: Coroutine[object, None, object] | None) -> None:
        task = self._loop.create_task(self._shutdown(final))
        task.add_done_callback(lambda _: self._loop.stop())

    async def _shutdown(self, final: Coroutine[object, None, object] | None) -> None:
        if final is not None:
            await final
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._loop.shutdown_asyncgens()
        await self._loop.shutdown_default_executor()


class SyncLoop:
    """A Router's synchronous API loop: a `LoopThread` started on the first `run`; `close` from any thread."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # re-entrant: a finaliser may run while this thread holds it
        self._thread: LoopThread | None = None
        self._closed = False

    @property
    def started(self) -> bool:
        return self._thread is not None

    def run(self, coro: Coroutine[object, None, T]) -> T:
        with self._lock:
            if self._closed:
                coro.close()
                raise RuntimeError("this Router is closed")
            if self._thread is None:
                self._thread = LoopThread()
            thread = self._thread
        return thread.run(coro)

    def close(self, final: Coroutine[object, None, object] | None = None) -> None:
        """Run `final` on the loop (when it ever started), then stop it. Idempotent."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
        if thread is None:
            if final is not None:
                final.close()
            return
        thread.close(final)
