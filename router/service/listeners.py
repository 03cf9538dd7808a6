"""How the workers of `graphroute serve --workers N` listen: a socket of their own each on one port
(SO_REUSEPORT), or, where the platform has no SO_REUSEPORT, one listening socket they all accept on.

Why: on one shared socket the workers race for each connection, and the one that is idle at that moment (the
one with less work) does not always win: 64 keep-alive clients were seen split 216/424 requests. With a
socket per worker the kernel hashes each new connection to one of the listening sockets, so connections
spread evenly whatever the workers are doing.

The supervisor keeps the port (`Listener.reserve`): a socket bound without SO_REUSEPORT, so a port already
in use is refused as before (including by another graphroute server: its sockets all carry SO_REUSEPORT, a
plain bind still conflicts with them), then marked SO_REUSEPORT so the workers (same user) can bind beside
it. It never listens: the kernel hands connections to listening sockets only, so none wait on it, and with
every worker gone (all restarting, or all drained) connections are refused. A worker's listening socket
closes with it: the connections it had not accepted yet are reset, where a shared socket kept them for the
other workers (uvicorn accepts as they come, so that queue is short).
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass

BACKLOG = 2048  # 64+ clients connecting at once must not overflow a worker's accept queue


class ListenError(OSError):
    """The address cannot be listened on (in use, not local, not permitted)."""


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _why(exc: OSError, host: str, port: int) -> str:
    """One line an operator can act on."""
    if exc.errno == errno.EADDRINUSE:
        return (f"cannot listen on {host}:{port}: the port is already in use (another server listens there); "
                "stop it or choose another port with --port")
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {host}:{port}: {host} is not an address of this machine (--host)"
    if exc.errno == errno.EACCES:
        return f"cannot listen on {host}:{port}: not permitted (ports below 1024 need privileges; --port)"
    return f"cannot listen on {host}:{port}: {exc.strerror or exc}"


def _bind(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    try:
        sock = socket.socket(_family(host), socket.SOCK_STREAM)
    except OSError as exc:
        raise ListenError(exc.errno, _why(exc, host, port)) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except (OSError, OverflowError) as exc:
        sock.close()
        if isinstance(exc, OverflowError):
            raise ListenError(errno.EINVAL, f"cannot listen on {host}:{port}: {exc}") from None
        raise ListenError(exc.errno, _why(exc, host, port)) from None
    return sock


def _listen(sock: socket.socket, host: str, port: int) -> socket.socket:
    try:
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise ListenError(exc.errno, _why(exc, host, port)) from None
    return sock


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port` for a single-process server (ListenError naming the problem): bound
    and listening before the server says where it serves, so a busy port is an error at once, and a client
    that connects as soon as the address is printed waits in the queue until the server accepts."""
    return _listen(_bind(host, port), host, port)


@dataclass
class Listener:
    """What a worker is handed (pickled to it): `shared`, the one listening socket, or None, when each worker
    binds its own on `host:port` with SO_REUSEPORT."""

    host: str
    port: int
    shared: socket.socket | None = None

    @property
    def per_worker(self) -> bool:
        return self.shared is None

    @classmethod
    def reserve(cls, host: str, port: int, *, reuse_port: bool = True) -> tuple[Listener, socket.socket]:
        """(what the workers get, the supervisor's socket that holds the port until it closes it).
        `reuse_port=False`, or no SO_REUSEPORT here: one shared listening socket (the supervisor's)."""
        sock = _bind(host, port)
        bound_port = sock.getsockname()[1]
        if reuse_port and hasattr(socket, "SO_REUSEPORT"):
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                return cls(host, bound_port), sock
            except OSError:  # defined but refused (some kernels, some socket families): share the socket
                pass
        return cls(host, bound_port, _listen(sock, host, port)), sock

    def open(self) -> socket.socket:
        """In the worker: the socket it accepts on (its own, listening, or the shared one)."""
        if self.shared is not None:
            return self.shared
        return _listen(_bind(self.host, self.port, reuse_port=True), self.host, self.port)
