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

__all__ = ["Fault", "FaultKind", "LoopbackServer", "RecordedRequest", "Reply", "ReplySpec", "Rule", "hash_vector",
           "prompt_token_count"]


class LoopbackServer(SimulatedModelServer):
    """The simulated model server, whose next calls can be made to fail whatever they match."""

    def __init__(
        self,
        *,
        latency_ms: float = 0.0,
        tokens_per_s: float | None = None,
        default_reply: ReplySpec = "OK",
        embedding_dim: int = 64,
        supports_json_mode: bool = True,
        stream_chunk_chars: int = 8,
    ) -> None:
        super().__init__(latency_ms=latency_ms, tokens_per_s=tokens_per_s, default_reply=default_reply,
                         embedding_dim=embedding_dim, supports_json_mode=supports_json_mode,
                         stream_chunk_chars=stream_chunk_chars)
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
