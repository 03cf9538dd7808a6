"""The tests' loopback model server: route-bench's simulated model (`benchmarks.simulated_model`) plus queued
fault injection, which only tests script.

    with LoopbackServer(latency_ms=0) as srv:
        srv.add_rule(r"capital of France", reply="Paris")
        srv.fail_next(2, Fault("rate_limit", retry_after=0.2))
        ...

Everything else (rules, replies, latency, streaming, embeddings, the recorded requests) is the simulated model's;
see that module for the endpoints and the deterministic usage counts.
"""

from __future__ import annotations

import threading
from typing import Any

from benchmarks.simulated_model import (
    Fault,
    FaultKind,
    RecordedRequest,
    Reply,
    ReplySpec,
    Rule,
    hash_vector,
    prompt_token_count,
)
from benchmarks.simulated_model import LoopbackServer as SimulatedModelServer

__all__ = ["Fault", "FaultKind", "Gate", "LoopbackServer", "RecordedRequest", "Reply", "ReplySpec", "Rule", "hash_vector",
           "prompt_token_count"]


class LoopbackServer(SimulatedModelServer):
    """The simulated model server, whose next calls can be made to fail whatever they match."""

    def __init__(self, **options: Any) -> None:
        """`options`: the simulated model's (`benchmarks.simulated_model.LoopbackServer`)."""
        super().__init__(**options)
        self._next_faults: list[Fault] = []

    def fail_next(self, n: int, fault: Fault) -> None:
        """Inject `fault` into the next `n` chat/embedding calls, whatever they match."""
        with self._lock:
            self._next_faults.extend([fault] * n)

    def reset(self) -> None:
        super().reset()
        with self._lock:
            self._next_faults.clear()

    def _queued_fault(self) -> Fault | None:
        return self._next_faults.pop(0) if self._next_faults else None


class Gate:
    """Holds the replies of the calls it answers until `release`, so a test knows what is in flight:
    `server.add_rule("HOLD", reply=gate.reply)`, then `waiting` counts the held calls."""

    def __init__(self, reply: str) -> None:
        self.open = threading.Event()
        self.waiting = 0
        self._reply = reply
        self._lock = threading.Lock()

    def reply(self, body: dict[str, Any]) -> str:
        with self._lock:
            self.waiting += 1
        self.open.wait(30)
        with self._lock:
            self.waiting -= 1
        return self._reply

    def release(self) -> None:
        self.open.set()
