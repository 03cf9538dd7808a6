"""One worker process of `graphroute serve --workers N` (started by `router.service.supervisor`).

A worker is given a picklable `WorkerSpec`, its number, the supervisor's `Listener` and a pipe to the
supervisor. It loads its own Routers (its share of each model concurrency limit), warms up
(`Service.prepare`), only then opens its listening socket (SO_REUSEPORT: the kernel sends it connections from
then on, none wait on a worker still loading), serves under uvicorn and says "ready" once it accepts. Its 429
counts and `/metrics` go through the run directory (`admission.SharedAdmission`, `shared_metrics`).

Stopping is the supervisor's call: "drain" on the pipe (or the pipe closing, when the supervisor died, or a
SIGTERM sent to the worker itself) starts the same drain as a single server's. SIGINT is ignored: Ctrl-C in
a terminal reaches the whole process group, and the supervisor turns it into one drain of every worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

import uvicorn

from engines.config import GraphrouteConfig
from engines.models.config import ModelsConfig
from router.service.app import Service
from router.service.listeners import Listener
from router.service.server import DrainingServer, uvicorn_config
from router.service.shared_metrics import SharedMetrics, use_metrics_dir

log = logging.getLogger("graphroute.serve")


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs to build its service (pickled to each spawned process)."""

    indexes: dict[str, str]  # name -> index folder; the first is the default
    config: GraphrouteConfig  # `[serve] workers` says how many
    api_keys: list[str] = field(default_factory=list)
    log_level: str = "info"
    # an index's own configuration (its GraphRAG project's settings under graphroute.toml), else `config`
    index_configs: dict[str, GraphrouteConfig] = field(default_factory=dict)

    @property
    def workers(self) -> int:
        return self.config.serve.workers


# ---- each worker's share of the model concurrency limits ---------------------------------------------

def _share(limit: int, worker: int, workers: int) -> int:
    """Worker `worker`'s part of `limit` split as evenly as whole numbers allow; the parts sum to `limit`."""
    return limit // workers + (1 if worker < limit % workers else 0)


def _limits(models: ModelsConfig) -> list[tuple[str, int]]:
    """(setting, limit) of every endpoint that calls a model over the network (offline ones have no limit)."""
    out = []
    if not models.chat.offline:
        out.append(("models.chat.concurrency", models.chat.concurrency))
    if not models.embedding.offline:
        out.append(("models.embedding.concurrency", models.embedding.concurrency))
    for stage, override in models.stages.items():
        if override.concurrency is not None and not models.endpoint_for(stage).offline:
            out.append((f"models.stages.{stage}.concurrency", override.concurrency))
    return out


def check_model_shares(models: ModelsConfig, workers: int) -> None:
    """ValueError naming the setting when a model concurrency limit cannot give every worker a slot."""
    for setting, limit in _limits(models):
        if limit < workers:
            raise ValueError(f"{setting} is {limit}, fewer than the {workers} workers it is divided among "
                             "(each worker takes an equal share); raise it or lower [serve] workers")


def worker_models(models: ModelsConfig, worker: int, workers: int) -> ModelsConfig:
    """`models` with every concurrency limit replaced by this worker's share: the workers together never
    have more calls in flight to an endpoint than its configured limit."""
    if workers == 1:
        return models
    chat = models.chat.model_copy(update={"concurrency": _share(models.chat.concurrency, worker, workers)})
    embedding = models.embedding.model_copy(
        update={"concurrency": _share(models.embedding.concurrency, worker, workers)})
    stages = {name: o if o.concurrency is None else o.model_copy(
                  update={"concurrency": _share(o.concurrency, worker, workers)})
              for name, o in models.stages.items()}
    return models.model_copy(update={"chat": chat, "embedding": embedding, "stages": stages})


# ---- the worker process ------------------------------------------------------------------------------

def build_service(spec: WorkerSpec, worker: int, run_dir: Path) -> Service:
    """This worker's Routers and Service, with the counts it shares with the other workers."""
    from router.prepare import split_prepared
    from router.router import Router
    from router.service.admission import SharedAdmission, callers_for, per_key_limit
    from shared_context import load_index

    config = spec.config.model_copy(update={"models": worker_models(spec.config.models, worker, spec.workers)})
    serve = config.serve
    routers: dict[str, Router] = {}
    indexes, unready = split_prepared(spec.indexes, serve.require_prepared)
    for name, why in unready.items():
        log.warning("not serving %s: %s", name, why)
    try:
        for name, path in indexes.items():
            own = spec.index_configs.get(name)
            if own is not None:
                own = own.model_copy(update={"models": worker_models(own.models, worker, spec.workers),
                                             "serve": serve})
            routers[name] = Router(load_index(path), config=own or config)
    except BaseException:
        for router in routers.values():
            router.close()
        raise
    callers = callers_for(spec.api_keys)
    # with [serve] redis_url every worker is a replica of its own in Redis (the Service sets that up)
    admission = None if serve.redis_url else SharedAdmission(
        run_dir / "admission", worker, spec.workers, callers, serve.max_concurrency,
        per_key_limit(serve.max_concurrency, serve.max_concurrency_per_key, callers))
    service = Service(routers, serve, api_keys=spec.api_keys, admission=admission, worker=worker, unready=unready)
    service.metrics = SharedMetrics(run_dir, service.admission)
    return service


def describe_failure(exc: BaseException) -> str:
    """One line for the operator: what could not be started, without a traceback."""
    from shared_context import IndexFormatError

    if isinstance(exc, IndexFormatError):
        return f"cannot read the index: {exc}"
    if isinstance(exc, ValueError | OSError):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


class WorkerServer(DrainingServer):
    """uvicorn for one worker: says "ready" to the supervisor once listening, drains when told to."""

    def __init__(self, config: uvicorn.Config, service: Service, conn: Connection) -> None:
        super().__init__(config, service)
        self._conn = conn

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        # SIGTERM drains (as a single server's does); SIGINT stays ignored, it is the supervisor's to act on.
        # uvicorn's own handler would also re-raise the signal after shutdown, ending the process by it.
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGTERM, self.handle_exit)
        try:
            yield
        finally:
            signal.signal(signal.SIGTERM, previous)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            asyncio.get_running_loop().add_reader(self._conn.fileno(), self._from_supervisor)
            self._conn.send(("ready", os.getpid()))

    def _from_supervisor(self) -> None:
        try:
            message = self._conn.recv()
        except (EOFError, OSError):  # the supervisor is gone: stop serving rather than run unsupervised
            message = "drain"
        if message == "drain":
            asyncio.get_running_loop().remove_reader(self._conn.fileno())
            self.handle_exit(signal.SIGTERM, None)


def worker_main(spec: WorkerSpec, worker: int, listener: Listener, conn: Connection, run_dir: str) -> None:
    """The spawned process's entry point (module-level, so spawn can import it)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    use_metrics_dir(Path(run_dir))  # before anything imports prometheus_client
    logging.basicConfig(level=spec.log_level.upper(), format=f"%(levelname)s: [worker {worker}] %(message)s")
    try:
        service = build_service(spec, worker, Path(run_dir))
        service.prepare()
        if worker == 0:  # every worker checks its endpoints (its /healthz reports them); one reports them here
            level = logging.INFO if service.endpoints_ok else logging.WARNING
            for line in service.endpoint_lines():
                log.log(level, "model endpoint: %s", line)
        sock = listener.open()
    except Exception as exc:
        log.debug("worker %d failed to start", worker, exc_info=True)
        conn.send(("failed", describe_failure(exc)))
        conn.close()
        if listener.shared is not None:
            listener.shared.close()
        sys.exit(3)
    serve = service.config
    server = WorkerServer(uvicorn_config(service, serve.host, sock.getsockname()[1], spec.log_level),
                          service, conn)
    try:
        server.run(sockets=[sock])
    finally:
        conn.close()
