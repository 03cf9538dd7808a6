"""Run the service under uvicorn, with a graceful drain: on SIGINT/SIGTERM new requests get 503 while the
in-flight ones finish (up to `[serve] shutdown_grace_s`), then the HTTP clients are closed.

`ServiceThread` runs the same server in a background thread on an ephemeral loopback port (tests, the
load benchmark, the browser test).
"""

from __future__ import annotations

import socket
import threading
from typing import TYPE_CHECKING

import uvicorn

from router.service.app import Service, create_app

if TYPE_CHECKING:
    from types import FrameType


class DrainingServer(uvicorn.Server):
    """uvicorn's server, but a shutdown first marks the service draining and waits for in-flight requests."""

    def __init__(self, config: uvicorn.Config, service: Service) -> None:
        super().__init__(config)
        self.service = service

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.service.begin_drain()
        super().handle_exit(sig, frame)
        # uvicorn raises a captured signal again once it has stopped, which ends the command by it (exit 130
        # and "interrupted" after Ctrl-C); a server that drained as asked has stopped cleanly: exit 0.
        captured = getattr(self, "_captured_signals", None)
        if isinstance(captured, list):
            captured.clear()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.service.begin_drain()
        await self.service.wait_idle(self.service.config.shutdown_grace_s)
        await super().shutdown(sockets)


def uvicorn_config(service: Service, host: str, port: int, log_level: str) -> uvicorn.Config:
    return uvicorn.Config(
        create_app(service), host=host, port=port, log_level=log_level, lifespan="on",
        timeout_graceful_shutdown=int(service.config.shutdown_grace_s) or None,
        server_header=False, proxy_headers=False, access_log=log_level == "debug",
        # Longer than clients' own idle expiry (httpx: 5 s): the client closes an idle connection first, so it
        # never reuses one the server is closing at that moment (which fails the request with a read error).
        timeout_keep_alive=30,
    )


def serve(service: Service, sock: socket.socket, log_level: str = "info") -> None:
    """Serve on `sock` (bound and listening: `listeners.listen`) until SIGINT/SIGTERM (blocking). The caller
    has warmed the service up (`Service.prepare`)."""
    host, port = sock.getsockname()[:2]
    try:
        DrainingServer(uvicorn_config(service, host, port, log_level), service).run(sockets=[sock])
    finally:
        sock.close()


class ServiceThread:
    """The service on 127.0.0.1:<free port> in a background thread: `with ServiceThread(service) as s: s.base_url`.

    `prepare=True` warms up first, as `serve` does (`Service.prepare`: it freezes the process's garbage
    collector state, so tests leave it off).
    """

    def __init__(self, service: Service, log_level: str = "warning", *, prepare: bool = False) -> None:
        self.service = service
        self._prepare = prepare
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.server = DrainingServer(uvicorn_config(service, "127.0.0.1", self.port, log_level), service)
        self.server.config.backlog = 2048
        self._thread = threading.Thread(target=self._run, name="graphroute-serve", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        self.server.run(sockets=[self._sock])  # uvicorn's loop choice (uvloop when installed); no signal handlers off the main thread

    def start(self) -> ServiceThread:
        if self._prepare:
            self.service.prepare()
        self._thread.start()
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the service thread stopped while starting")
            self._thread.join(0.02)
        return self

    def stop(self) -> None:
        """Drain (503 for new requests, in-flight ones finish), then stop and close the socket. Idempotent."""
        if self._sock.fileno() == -1:
            return
        self.server.handle_exit(0, None)
        self._thread.join()
        self._sock.close()

    def __enter__(self) -> ServiceThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
