"""`graphroute serve --workers N`: N worker processes serving one port, under a small supervisor.

Why processes: each question costs the service tens of milliseconds of Python under one GIL, so a single
process tops out at one core however many the machine has. The supervisor (this module, in the parent)
loads no index: it binds the port (so the address is taken, and refused, before any worker starts; each
worker listens on a socket of its own, `listeners.py`, or on the supervisor's where there is no SO_REUSEPORT),
makes a private run directory (mode 0700, `run_dir.py`) holding the shared admission counters and the workers'
metrics files, and spawns the workers (spawn, not fork: a fork would copy the parent's threads' locks mid-state,
and each worker builds everything itself anyway). It reports "serving" only when every worker has warmed
up and listens.

While serving it watches the workers: one that dies is reported and restarted, after its in-flight counts
are cleared (its clients' connections are lost; the others' are not). A worker that fails while starting
(a bad index, a model limit that cannot be divided), or more than `MAX_RESTARTS` restarts within
`RESTART_WINDOW_S`, stops the server with the reason (`WorkerError`). Stopping (`stop`, SIGINT/SIGTERM to
the parent): every worker drains — in-flight requests finish, new ones get 503 — and exits; the parent's
socket is closed first, so once the last worker closes its own new connections are refused.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from types import FrameType

from router.service.admission import SharedAdmission, callers_for, create_admission_file, per_key_limit
from router.service.listeners import Listener, ListenError
from router.service.run_dir import make_run_dir
from router.service.worker import WorkerSpec, check_model_shares, worker_main

log = logging.getLogger("graphroute.serve")
MAX_RESTARTS = 5
RESTART_WINDOW_S = 60.0
STOP_MARGIN_S = 10.0  # beyond [serve] shutdown_grace_s before a worker that does not exit is killed


class WorkerError(RuntimeError):
    """The server cannot (go on) serving: a worker failed to start, or kept dying."""


@dataclass
class _Worker:
    number: int
    process: BaseProcess
    conn: Connection
    ready: bool = False


def _exit_reason(process: BaseProcess) -> str:
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class WorkerPool:
    """`with WorkerPool(spec) as pool: pool.url` (supervised from a background thread), or `start()`,
    `supervise()` (blocking, in the main thread: what `serve_workers` does) and `stop()`."""

    def __init__(self, spec: WorkerSpec, report: Callable[[str], None] | None = None, *,
                 reuse_port: bool = True) -> None:
        """`reuse_port=False`: the workers share one listening socket even where SO_REUSEPORT exists."""
        try:
            check_model_shares(spec.config.models, spec.workers)
        except ValueError as exc:
            raise WorkerError(str(exc)) from None
        self.spec = spec
        self.report = report or log.warning
        self._ctx = multiprocessing.get_context("spawn")
        serve = spec.config.serve
        try:
            self.listener, sock = Listener.reserve(serve.host, serve.port, reuse_port=reuse_port)
        except ListenError as exc:
            raise WorkerError(exc.strerror) from None
        self._sock: socket.socket | None = sock
        self.host, self.port = serve.host, self.listener.port
        try:
            self._run_dir = make_run_dir()
            callers = callers_for(spec.api_keys)
            create_admission_file(self._run_dir / "admission", spec.workers, callers)
            self._admission = SharedAdmission(
                self._run_dir / "admission", 0, spec.workers, callers, serve.max_concurrency,
                per_key_limit(serve.max_concurrency, serve.max_concurrency_per_key, callers))
        except OSError as exc:
            self._sock.close()
            raise WorkerError(f"cannot make the server's run directory: {exc}") from None
        self._workers: dict[int, _Worker] = {}
        self._wake_r, self._wake_w = os.pipe()  # request_stop wakes the supervising wait (signal-safe)
        self._stopping = False
        self._force = False
        self._closed = False
        self._restarts: deque[float] = deque()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None  # why a background supervisor stopped the server

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def stopping(self) -> bool:
        return self._stopping

    @property
    def pids(self) -> dict[int, int]:
        """Worker number -> pid of the process serving as it now."""
        return {n: w.process.pid for n, w in self._workers.items() if not w.conn.closed and w.process.pid}

    # ---- starting ------------------------------------------------------------------------------------

    def _spawn(self, number: int) -> None:
        parent_end, child_end = self._ctx.Pipe()
        process = self._ctx.Process(target=worker_main, name=f"graphroute-worker-{number}",
                                    args=(self.spec, number, self.listener, child_end, str(self._run_dir)))
        process.start()
        child_end.close()
        self._workers[number] = _Worker(number, process, parent_end)

    def start(self) -> WorkerPool:
        """Spawn every worker and return once all of them serve; WorkerError (all stopped) if one fails."""
        try:
            for number in range(self.spec.workers):
                self._spawn(number)
            while not self._stopping and not all(w.ready for w in self._workers.values()):
                self._step(starting=True)
        except BaseException:
            self.stop()
            raise
        return self

    # ---- supervising ---------------------------------------------------------------------------------

    def supervise(self) -> None:
        """Watch the workers until `request_stop` (restarting those that die); WorkerError if it must give up."""
        while not self._stopping:
            self._step(starting=False)

    def _step(self, starting: bool) -> None:
        workers = list(self._workers.values())
        ready = wait([self._wake_r, *(w.conn for w in workers), *(w.process.sentinel for w in workers)])
        if self._wake_r in ready:
            os.read(self._wake_r, 512)
        for w in workers:
            if w.conn in ready:
                self._message(w)
        for w in workers:
            if w.process.sentinel in ready and not self._stopping:
                w.process.join()
                self._died(w, starting)

    def _message(self, w: _Worker) -> None:
        try:
            kind, detail = w.conn.recv()
        except (EOFError, OSError):
            return  # it is exiting: its sentinel says how
        if kind == "failed":
            raise WorkerError(f"worker {w.number} could not start: {detail}")
        if kind == "ready":
            w.ready = True
            if self._restarts:
                self.report(f"worker {w.number} serves again (pid {detail})")

    def _died(self, w: _Worker, starting: bool) -> None:
        reason, pid = _exit_reason(w.process), w.process.pid
        w.conn.close()
        w.process.close()
        if starting or not w.ready:
            raise WorkerError(f"worker {w.number} (pid {pid}) stopped while starting ({reason})")
        now = time.monotonic()
        self._restarts.append(now)
        while self._restarts and self._restarts[0] < now - RESTART_WINDOW_S:
            self._restarts.popleft()
        if len(self._restarts) > MAX_RESTARTS:
            raise WorkerError(f"worker {w.number} (pid {pid}) stopped ({reason}); more than "
                              f"{MAX_RESTARTS} restarts in {RESTART_WINDOW_S:.0f} s, giving up")
        self.report(f"worker {w.number} (pid {pid}) stopped unexpectedly ({reason}); restarting it")
        self._admission.clear_worker(w.number)  # what it had in flight will never be released
        self._spawn(w.number)

    # ---- stopping ------------------------------------------------------------------------------------

    def request_stop(self, *, force: bool = False) -> None:
        """Ask the supervising loop to stop (safe from a signal handler or another thread); `force`: kill the
        workers without waiting for their in-flight requests."""
        self._force = self._force or force
        self._stopping = True
        with contextlib.suppress(OSError):  # already closed: stopped
            os.write(self._wake_w, b"x")

    def stop(self) -> None:
        """Drain every worker (in-flight requests finish, new ones get 503), wait for them, clean up."""
        if self._closed:
            return
        self.request_stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        if self._sock is not None:  # the workers keep their copies until they have drained
            self._sock.close()
            self._sock = None
        for w in self._workers.values():
            if w.conn.closed or not w.process.is_alive():
                continue
            if w.ready:
                try:
                    w.conn.send("drain")
                except OSError:
                    w.process.terminate()
            else:
                w.process.terminate()  # still loading: nothing in flight to finish
        deadline = time.monotonic() + self.spec.config.serve.shutdown_grace_s + STOP_MARGIN_S
        for w in self._workers.values():
            if w.conn.closed:  # died and was not replaced (the server is giving up): already closed
                continue
            while w.process.is_alive() and time.monotonic() < deadline and not self._force:
                w.process.join(0.1)
            if w.process.is_alive():
                self.report(f"worker {w.number} (pid {w.process.pid}) did not stop in time; killing it")
                w.process.kill()
                w.process.join()
            w.conn.close()
            w.process.close()
        self._closed = True
        self._admission.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        shutil.rmtree(self._run_dir, ignore_errors=True)

    # ---- in a background thread (tests, benchmarks) ----------------------------------------------------

    def _supervise_in_background(self) -> None:
        try:
            self.supervise()
        except BaseException as exc:  # kept for the owner; the server stops
            self.error = exc
            self.report(f"graphroute serve: {exc}")
            self._stopping = True

    def __enter__(self) -> WorkerPool:
        self.start()
        self._thread = threading.Thread(target=self._supervise_in_background, name="graphroute-supervisor",
                                        daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_workers(spec: WorkerSpec, report: Callable[[str], None], on_serving: Callable[[WorkerPool], object],
                  on_bound: Callable[[WorkerPool], object] | None = None) -> None:
    """`graphroute serve --workers N`: serve until SIGINT/SIGTERM, then drain (blocking, main thread).
    A second signal stops without waiting for in-flight requests. `on_bound` runs once the port is taken
    (before any worker starts), `on_serving` once every worker serves."""
    pool = WorkerPool(spec, report)
    if on_bound is not None:
        on_bound(pool)

    def on_signal(sig: int, frame: FrameType | None) -> None:
        pool.request_stop(force=pool.stopping)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        pool.start()
        if not pool.stopping:
            on_serving(pool)
            pool.supervise()
        report("graphroute serve: stopping, draining every worker")
    finally:
        pool.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
