"""`router.service.listeners`: the sockets `graphroute serve --workers N` listens on, checked on real loopback
sockets in this process (the worker pool itself is `test_service_workers.py`)."""

from __future__ import annotations

import socket
from collections import Counter
from contextlib import closing

import pytest

from router.service.listeners import Listener, ListenError

needs_reuse_port = pytest.mark.skipif(not hasattr(socket, "SO_REUSEPORT"), reason="no SO_REUSEPORT here")


def _accepted(listeners: dict[str, socket.socket]) -> Counter[str]:
    """How many pending connections each listening socket holds (accepts them all)."""
    counts: Counter[str] = Counter()
    for name, sock in listeners.items():
        sock.settimeout(0.5)
        while True:
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                break
            conn.close()
            counts[name] += 1
            sock.settimeout(0.05)
    return counts


@needs_reuse_port
def test_each_worker_socket_gets_a_share_of_new_connections() -> None:
    listener, held = Listener.reserve("127.0.0.1", 0)
    with closing(held):
        assert listener.per_worker and listener.port == held.getsockname()[1]
        with pytest.raises(ConnectionRefusedError):  # the supervisor's socket holds the port, never accepts
            socket.create_connection(("127.0.0.1", listener.port), timeout=2)
        workers = {"0": listener.open(), "1": listener.open()}
        clients = [socket.create_connection(("127.0.0.1", listener.port), timeout=2) for _ in range(64)]
        counts = _accepted(workers)
        for c in clients:
            c.close()
        assert sum(counts.values()) == 64
        assert min(counts["0"], counts["1"]) >= 12  # hashed per connection (P(< 12 of 64) is below 1e-5)
        workers["0"].close()  # a worker gone (restarting): the others get every connection
        more = [socket.create_connection(("127.0.0.1", listener.port), timeout=2) for _ in range(8)]
        assert _accepted({"1": workers["1"]}) == {"1": 8}
        for c in more:
            c.close()
        replacement = listener.open()  # its replacement joins on the same port
        workers["1"].close()
        with closing(replacement), closing(socket.create_connection(("127.0.0.1", listener.port), timeout=2)):
            assert _accepted({"new": replacement}) == {"new": 1}
    with pytest.raises(ConnectionRefusedError):  # every socket closed: refused
        socket.create_connection(("127.0.0.1", listener.port), timeout=2)


@needs_reuse_port
def test_a_port_in_use_is_refused_even_by_a_server_that_shares_ports() -> None:
    listener, held = Listener.reserve("127.0.0.1", 0)
    with closing(held), closing(listener.open()), \
            pytest.raises(ListenError, match=rf"cannot listen on 127.0.0.1:{listener.port}: "):
        Listener.reserve("127.0.0.1", listener.port)  # a second graphroute server on the same port
    with closing(socket.socket()) as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        with pytest.raises(ListenError, match="cannot listen on"):
            Listener.reserve("127.0.0.1", other.getsockname()[1])


def test_without_reuse_port_the_workers_share_the_supervisors_socket() -> None:
    listener, held = Listener.reserve("127.0.0.1", 0, reuse_port=False)
    with closing(held):
        assert not listener.per_worker and listener.open() is held
        with closing(socket.create_connection(("127.0.0.1", listener.port), timeout=2)):
            assert _accepted({"shared": held}) == {"shared": 1}  # it listens itself

