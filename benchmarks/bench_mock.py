"""The `--model mock:LATENCY_MS[:TOKENS_PER_S]` backend: a loopback OpenAI-compatible server whose replies
come from the project's offline extractive model.

Why this shape: the benchmark must exercise the real HTTP client (connection pool, retries, limiter,
JSON mode, streaming) with a realistic per-call latency, and every engine must get a *valid* reply for
every task (map JSON with scores, rate JSON, primer/follow-up JSON, question lists, rewrites, routes and
plain answers). Scripting canned replies would make the answers fake and the call counts meaningless
(e.g. DRIFT's follow-up tree depends on what the primer returns). So the server's default reply runs
`OfflineChatModel` on the request's own messages: answers are the same extractive answers the offline
mode gives, only the latency (and the transport) is simulated. The offline model answers from the typed
context an engine hands the model (`TaskContext`), which HTTP does not carry: the client side's chat models are
wrapped (`RelayedModels`) so that each call leaves its context in a process-wide relay under its messages, where
the server's responder (same process) finds it. Replies are computed once, in an unmeasured
warm-up pass with the latency off, and replayed from a cache in the measured passes, so the measured time
is the engines' own work + real HTTP + LATENCY_MS per call, not the offline model's CPU time queueing on
a small machine (the report says how many replies still had to be computed while measuring).
The OpenAI request carries no `task`, so
the task is recovered from the request: the JSON schema name in `response_format` when the client sends
one, otherwise the prompt's own markers (the prompt contract in ARCHITECTURE.md keeps them stable).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from benchmarks.bench_queries import BenchInputError
from engines import schemas
from engines.models.base import ChatModel, Completion, Message
from engines.models.factory import Models
from engines.models.task_context import TaskContext

# task -> the schema its reply must satisfy (tasks not listed reply with plain text)
TASK_SCHEMAS: dict[str, type[BaseModel]] = {
    "global_map": schemas.MapResponse,
    "rate": schemas.RateResponse,
    "drift_primer": schemas.PrimerResponse,
    "drift_followup": schemas.FollowupResponse,
    "questions": schemas.QuestionList,
    "rewrite": schemas.RewriteResponse,
    "route": schemas.RouteResponse,
}
_SCHEMA_TASKS = {schema.__name__.lower(): task for task, schema in TASK_SCHEMAS.items()}

_MOCK_SPEC = re.compile(r"^mock:(?P<latency>\d+(?:\.\d+)?)(?::(?P<tps>\d+(?:\.\d+)?))?$")


@dataclass(frozen=True)
class ModelSpec:
    """What `--model` asked for."""

    kind: str  # "offline" | "mock" | "openai"
    latency_ms: float = 0.0
    tokens_per_s: float | None = None

    @property
    def label(self) -> str:
        if self.kind != "mock":
            return self.kind
        tps = f":{self.tokens_per_s:g}" if self.tokens_per_s else ""
        return f"mock:{self.latency_ms:g}{tps}"


def parse_model_spec(spec: str) -> ModelSpec:
    text = spec.strip().lower()
    if text in ("offline", "openai"):
        return ModelSpec(kind=text)
    m = _MOCK_SPEC.match(text)
    if m:
        tps = float(m["tps"]) if m["tps"] else None
        if tps is not None and tps <= 0:
            raise BenchInputError(f"--model {spec!r}: tokens per second must be > 0")
        return ModelSpec(kind="mock", latency_ms=float(m["latency"]), tokens_per_s=tps)
    raise BenchInputError(
        f"--model {spec!r} is not understood (use offline, openai, mock:LATENCY_MS or "
        "mock:LATENCY_MS:TOKENS_PER_S, e.g. mock:300 or mock:300:80)"
    )


def detect_task(body: dict[str, Any]) -> str:
    """Which engine task an OpenAI chat request is, from its schema name or its prompt markers."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict):
        name = str((fmt.get("json_schema") or {}).get("name", "")).lower()
        if name in _SCHEMA_TASKS:
            return _SCHEMA_TASKS[name]
    messages = body.get("messages") or []
    system = "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "system")
    # Order matters: the most specific markers first.
    if "-----Template-----" in system:
        return "drift_hyde"
    if "Overall question:" in system and "Max follow-ups:" in system:
        return "drift_followup"
    if "Number of questions:" in system:
        return "questions"
    if '"intermediate_answer"' in system:
        return "drift_primer"
    if '"rating"' in system:
        return "rate"
    if '"points"' in system:
        return "global_map"
    if "-----Conversation History-----" in system and '"question"' in system:
        return "rewrite"
    if '"engine"' in system and re.search(r"^Engines:", system, re.M):
        return "route"
    if "----Analyst" in system:
        return "global_reduce" if "Analyst findings:" in system else "drift_reduce"
    if "text passages" in system:
        return "basic_answer"
    return "local_answer"


def _messages_key(messages: Sequence[Mapping[str, Any]]) -> str:
    pairs = [[str(m.get("role", "user")), str(m.get("content") or "")] for m in messages]
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode()).hexdigest()


class ContextRelay:
    """The typed contexts of recent model calls by their messages (the newest `limit`), for a loopback server
    in the same process: a request's messages find the context the engine handed its client."""

    def __init__(self, limit: int = 4096) -> None:
        self.limit = limit
        self._contexts: OrderedDict[str, TaskContext] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, messages: Sequence[Mapping[str, Any]], context: TaskContext | None) -> None:
        if context is None:
            return
        key = _messages_key(messages)
        with self._lock:
            self._contexts[key] = context
            self._contexts.move_to_end(key)
            while len(self._contexts) > self.limit:
                self._contexts.popitem(last=False)

    def get(self, messages: Sequence[Mapping[str, Any]]) -> TaskContext | None:
        with self._lock:
            return self._contexts.get(_messages_key(messages))


RELAY = ContextRelay()


class RelayedChatModel:
    """A chat model that leaves each call's typed context in the relay, then makes the call with `inner`."""

    def __init__(self, inner: ChatModel, relay: ContextRelay) -> None:
        self.inner, self.relay = inner, relay
        self.name, self.offline = inner.name, inner.offline

    async def complete(self, messages: list[Message], *, task: str = "answer",
                       json_schema: type[BaseModel] | None = None, max_tokens: int | None = None,
                       temperature: float | None = None, context: TaskContext | None = None) -> Completion:
        self.relay.put(messages, context)
        return await self.inner.complete(messages, task=task, json_schema=json_schema, max_tokens=max_tokens,
                                         temperature=temperature, context=context)

    def stream(self, messages: list[Message], *, task: str = "answer", max_tokens: int | None = None,
               temperature: float | None = None, context: TaskContext | None = None) -> AsyncIterator[str | Completion]:
        self.relay.put(messages, context)
        return self.inner.stream(messages, task=task, max_tokens=max_tokens, temperature=temperature,
                                 context=context)

    def __getattr__(self, name: str) -> Any:  # aopen/aclose, the endpoint, ...: the inner model's
        return getattr(self.inner, name)


class RelayedModels(Models):
    """`Models` whose chat models leave their calls' typed contexts in `relay` (the loopback server's)."""

    def __init__(self, *args: Any, relay: ContextRelay = RELAY, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.relay = relay
        self._relayed: dict[int, RelayedChatModel] = {}

    def chat(self, stage: str | None = None) -> ChatModel:
        inner = super().chat(stage)
        relayed = self._relayed.get(id(inner))
        if relayed is None:
            relayed = self._relayed.setdefault(id(inner), RelayedChatModel(inner, self.relay))
        return relayed


class OfflineResponder:
    """Default reply of the loopback server: the offline extractive model answering the request.

    Runs in the server's handler threads. Replies are cached by (task, messages): the offline model is
    deterministic, so a cached reply is the very reply it would compute, and a warm cache keeps the
    model's CPU time out of the measured latency (on a small machine, a burst of 12 concurrent map calls
    would otherwise queue on the server's CPU, which a real API does not). `tasks` counts what was
    served, `invalid` the JSON replies that failed their schema, `misses`/`compute_s` the replies computed.
    """

    def __init__(self, relay: ContextRelay = RELAY) -> None:
        from engines.models.offline import OfflineChatModel

        self.model = OfflineChatModel()
        self.relay = relay
        self._cache: dict[str, str] = {}
        self._lock = threading.Lock()  # handler threads share the cache and the counters
        self.invalid: dict[str, int] = {}  # over the whole run: a bad reply is cached and replayed
        self.reset_counters()

    def reset_counters(self) -> None:
        with self._lock:
            self.tasks: dict[str, int] = {}
            self.misses = 0
            self.compute_s = 0.0

    def __call__(self, body: dict[str, Any]) -> str:
        task = detect_task(body)
        messages = [{"role": str(m.get("role", "user")), "content": str(m.get("content") or "")}
                    for m in body.get("messages") or []]
        key = hashlib.sha256(json.dumps([task, messages], ensure_ascii=False).encode()).hexdigest()
        with self._lock:
            self.tasks[task] = self.tasks.get(task, 0) + 1
            cached = self._cache.get(key)
        if cached is not None:
            return cached
        schema = TASK_SCHEMAS.get(task)
        started = time.perf_counter()
        # `respond` is the synchronous core of `complete` (no usage: the server counts tokens itself).
        context = self.relay.get(messages)  # None: a client without the relay; the question alone is answered
        text = self.model.respond(messages, task=task, json_schema=schema, context=context)  # type: ignore[arg-type]
        elapsed = time.perf_counter() - started
        valid = True
        if schema is not None:
            # A reply the client cannot parse is a bug in the offline model, not latency: count it
            # (the report shows it) and still send it, so the client's repair path is what gets measured.
            try:
                schema.model_validate(json.loads(text))
            except ValueError:
                valid = False
        with self._lock:
            self._cache[key] = text
            self.misses += 1
            self.compute_s += elapsed
            if not valid:
                self.invalid[task] = self.invalid.get(task, 0) + 1
        return text


class MockBackend:
    """Owns the loopback server for one benchmark run (start before the engines, stop after).

    `warmup()` switches the simulated latency off for an unmeasured pass that fills the reply cache;
    `measure()` switches it back on and starts counting requests from there.
    """

    def __init__(self, spec: ModelSpec) -> None:
        from benchmarks.simulated_model import LoopbackServer

        self.spec = spec
        self.responder = OfflineResponder()
        self.server = LoopbackServer(
            latency_ms=spec.latency_ms, tokens_per_s=spec.tokens_per_s, default_reply=self.responder
        )
        self._mark = 0
        self.warmup_requests = 0

    def __enter__(self) -> MockBackend:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def warmup(self) -> None:
        self.server.latency_ms = 0.0
        self.server.tokens_per_s = None

    def measure(self) -> None:
        self.server.latency_ms = self.spec.latency_ms
        self.server.tokens_per_s = self.spec.tokens_per_s
        self.warmup_requests = len(self.server.chat_requests)
        self._mark = len(self.server.requests)
        self.server.max_in_flight = 0
        self.responder.reset_counters()

    def stats(self) -> dict[str, Any]:
        chat = [r for r in self.server.requests[self._mark:] if r.path.endswith("/chat/completions")]
        return {
            "base_url": self.base_url,
            "latency_ms": self.spec.latency_ms,
            "tokens_per_s": self.spec.tokens_per_s,
            "warmup_chat_requests": self.warmup_requests,
            "chat_requests": len(chat),
            "failed_requests": sum(1 for r in chat if r.status != 200),
            "max_in_flight": self.server.max_in_flight,
            "replies_computed_while_measuring": self.responder.misses,
            "compute_s_while_measuring": round(self.responder.compute_s, 3),
            "tasks_served": dict(sorted(self.responder.tasks.items())),
            "invalid_json_replies": dict(sorted(self.responder.invalid.items())),
        }
