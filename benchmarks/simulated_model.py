"""The simulated model: a loopback OpenAI-compatible server (no network beyond 127.0.0.1).

route-bench's `--model mock:LATENCY_MS[:TOKENS_PER_S]` puts it behind the real HTTP client with a per-call latency
(and a streaming pace), so it ships with route-bench; the tests' server (`testing/model_server.py`) builds on it
and adds queued fault injection.

    with LoopbackServer(latency_ms=0) as srv:
        srv.add_rule(r"capital of France", reply="Paris")
        srv.add_rule(None, system=r"Reports", reply=['{"points": []}', '{"points": [...]}'])  # consumed in order
        client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="x")
        ...
        srv.requests, srv.max_in_flight, srv.connections (TCP connections accepted: reuse shows as a small count)

Endpoints: `POST /v1/chat/completions` (JSON, or SSE when `stream=true`, with a final usage chunk when
`stream_options.include_usage`), `POST /v1/embeddings` (deterministic hash-seeded unit vectors; float or
base64 encoding), `GET /v1/models`. Rules are tried in order, first match wins; a rule's reply is a string,
a `Reply`, a callable `(request_json) -> str | Reply`, or a list consumed one item per call (the last item
repeats). A rule or a reply may carry a `Fault` (an HTTP error, a hang, a broken body). Usage is deterministic:
prompt tokens = o200k tokens of every message content + 3 per message + 3; completion tokens = o200k tokens of
the reply, so tests can assert exact numbers.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import urlsplit

import numpy as np

from shared_context.tokens import get_tokenizer

FaultKind = Literal[
    "rate_limit", "server_error", "http_error", "hang", "bad_body", "truncate", "malformed", "empty", "no_json_mode",
    "no_embedding",
]


@dataclass(frozen=True)
class Fault:
    """A failure the server injects.

    rate_limit: HTTP 429 with `Retry-After: retry_after`; server_error: HTTP 500; http_error: HTTP
    `status` (e.g. 401, 400); hang: wait `hang_s`
    then drop the connection; bad_body: HTTP 200 whose body is not JSON; truncate: the reply content
    cut to its first `keep` fraction (truncated JSON); malformed: the reply with single quotes and
    trailing commas; empty: empty content; no_json_mode: HTTP 400 "response_format is not supported";
    no_embedding: an embeddings reply whose items lack their `embedding`.
    """

    kind: FaultKind
    retry_after: float | str | None = 0.2
    hang_s: float = 30.0
    keep: float = 0.5
    status: int = 400


@dataclass(frozen=True)
class Reply:
    content: str
    prompt_tokens: int | None = None  # override the computed counts
    completion_tokens: int | None = None
    include_usage: bool = True  # False: send no usage (the client must estimate)
    fault: Fault | None = None


ReplySpec = str | Reply | Callable[[dict[str, Any]], "str | Reply"]


@dataclass
class Rule:
    pattern: re.Pattern[str] | None  # on the last user message
    system: re.Pattern[str] | None  # on the system message(s)
    model: re.Pattern[str] | None
    replies: list[ReplySpec]
    fault: Fault | None = None
    times: int | None = None  # how many calls this rule may answer (None: unlimited)
    hits: int = 0

    def matches(self, body: dict[str, Any]) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        messages = body.get("messages") or []
        user = next((m.get("content") or "" for m in reversed(messages) if m.get("role") == "user"), "")
        system = "\n".join(m.get("content") or "" for m in messages if m.get("role") == "system")
        return (
            (self.pattern is None or bool(self.pattern.search(str(user))))
            and (self.system is None or bool(self.system.search(system)))
            and (self.model is None or bool(self.model.search(str(body.get("model", "")))))
        )

    def next_reply(self) -> ReplySpec:
        spec = self.replies[min(self.hits, len(self.replies) - 1)]
        self.hits += 1
        return spec


@dataclass
class RecordedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    started: float
    status: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    content: str = ""
    fault: str | None = None
    seconds: float = 0.0  # time the server spent on the request (latency included)


def prompt_token_count(messages: Sequence[dict[str, Any]]) -> int:
    tok = get_tokenizer()
    return sum(tok.count(str(m.get("content") or "")) + 3 for m in messages) + 3


def hash_vector(text: str, dim: int) -> np.ndarray:
    """A deterministic unit vector for `text` (same text, same vector, any process)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    vec = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vec / np.float32(np.linalg.norm(vec) or 1.0)


def _malform(text: str) -> str:
    return re.sub(r"([}\]])", r",\1", text.replace('"', "'"))


class LoopbackServer:
    """OpenAI-compatible HTTP server on 127.0.0.1:<ephemeral port>, run in a background thread."""

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
        self.latency_ms = latency_ms
        self.tokens_per_s = tokens_per_s
        self.default_reply = default_reply
        self.embedding_dim = embedding_dim
        self.supports_json_mode = supports_json_mode
        self.stream_chunk_chars = stream_chunk_chars
        self.requests: list[RecordedRequest] = []
        self.max_in_flight = 0
        self.connections = 0
        self._in_flight = 0
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- scripting
    def add_rule(
        self,
        pattern: str | None = None,
        *,
        reply: ReplySpec | Sequence[ReplySpec] = "OK",
        system: str | None = None,
        model: str | None = None,
        fault: Fault | None = None,
        times: int | None = None,
    ) -> Rule:
        replies: list[ReplySpec] = list(reply) if isinstance(reply, list | tuple) else [reply]  # type: ignore[list-item]
        if not replies:
            raise ValueError("a rule needs at least one reply")
        rule = Rule(
            re.compile(pattern, re.S) if pattern else None,
            re.compile(system, re.S) if system else None,
            re.compile(model) if model else None,
            replies,
            fault,
            times,
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def reset(self) -> None:
        with self._lock:
            self._rules.clear()
            self.requests.clear()
            self.max_in_flight = 0

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if urlsplit(r.path).path.endswith("/chat/completions")]

    # ---------------------------------------------------------------- lifecycle
    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("LoopbackServer is not running; use it as a context manager or call start()")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> LoopbackServer:
        server = self

        class Handler(_Handler):
            owner = server

        httpd = _Server(("127.0.0.1", 0), Handler)
        httpd.owner = self
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes hanging / sleeping handlers
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- dispatch (handler threads)
    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _pick(self, body: dict[str, Any]) -> tuple[Reply, Fault | None]:
        """The reply to a request and the fault to inject, if any (called in the handler threads)."""
        with self._lock:
            queued = self._queued_fault()
            rule = next((r for r in self._rules if r.matches(body)), None)
            spec = rule.next_reply() if rule else self.default_reply
            rule_fault = rule.fault if rule else None
        reply = spec(body) if callable(spec) else spec
        if isinstance(reply, str):
            reply = Reply(reply)
        return reply, queued or rule_fault or reply.fault

    def _queued_fault(self) -> Fault | None:
        """A fault queued for the next call whatever it matches (under the lock); the simulated model queues none."""
        return None

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless the server stops; False when stopping."""
        return not self._stopping.wait(seconds) if seconds > 0 else True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # listen() backlog: must be set before bind, hence a class attribute
    allow_reuse_address = True
    owner: LoopbackServer

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.owner._lock:
            self.owner.connections += 1
        super().process_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hung up (its deadline passed, it was cancelled) is normal here, not an error."""
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    owner: LoopbackServer
    protocol_version = "HTTP/1.1"
    # One buffered write per response and no Nagle: otherwise header/body writes meet the client's
    # delayed ACK and every call pays ~40 ms on loopback.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        return

    # ---- helpers
    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        kind = {429: "rate_limit_exceeded", 500: "server_error", 400: "invalid_request_error",
                401: "invalid_api_key"}.get(status, "error")
        self._send_json(status, {"error": {"message": message, "type": kind, "code": kind}}, headers)

    # ---- routes
    def do_GET(self) -> None:
        if urlsplit(self.path).path.rstrip("/").endswith("/models"):
            names = ["gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "text-embedding-3-small", "loopback"]
            self._send_json(200, {"object": "list", "data": [
                {"id": n, "object": "model", "created": 0, "owned_by": "loopback"} for n in names]})
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._error(400, "request body is not JSON")
            return
        owner = self.owner
        route = urlsplit(self.path).path  # Azure adds ?api-version=...
        rec = RecordedRequest(self.path, body, {k.lower(): v for k, v in self.headers.items()}, time.monotonic())
        with owner._lock:
            owner.requests.append(rec)
        owner._enter()
        try:
            if route.endswith("/chat/completions"):
                self._chat(body, rec)
            elif route.endswith("/embeddings"):
                self._embeddings(body, rec)
            else:
                rec.status = 404
                self._error(404, f"no route {self.path}")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (timeout); nothing to answer
        finally:
            rec.seconds = time.monotonic() - rec.started
            owner._leave()

    def _apply_transport_fault(self, fault: Fault | None, rec: RecordedRequest) -> bool:
        """Send the fault's response if it is a transport fault; True when the request is done."""
        if fault is None:
            return False
        rec.fault = fault.kind
        if fault.kind == "rate_limit":
            rec.status = 429
            headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
            self._error(429, "Rate limit reached; please retry later", headers)
            return True
        if fault.kind == "server_error":
            rec.status = 500
            self._error(500, "The server had an error while processing your request")
            return True
        if fault.kind == "http_error":
            rec.status = fault.status
            self._error(fault.status, f"Injected HTTP {fault.status} error")
            return True
        if fault.kind == "hang":
            self.owner._sleep(fault.hang_s)
            self.close_connection = True
            return True
        if fault.kind == "bad_body":
            rec.status = 200
            data = b'{"id": "x", "choices": [ {"message": '
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return True
        return False

    def _chat(self, body: dict[str, Any], rec: RecordedRequest) -> None:
        owner = self.owner
        reply, fault = owner._pick(body)
        if not owner._sleep(owner.latency_ms / 1000.0):
            return
        if self._apply_transport_fault(fault, rec):
            return
        json_requested = isinstance(body.get("response_format"), dict)
        if json_requested and (not owner.supports_json_mode or (fault and fault.kind == "no_json_mode")):
            rec.status = 400
            rec.fault = "no_json_mode"
            self._error(400, "response_format is not supported by this model")
            return
        content = reply.content
        if fault and fault.kind == "truncate":
            content = content[: int(len(content) * fault.keep)]
        elif fault and fault.kind == "malformed":
            content = _malform(content)
        elif fault and fault.kind == "empty":
            content = ""
        tok = get_tokenizer()
        prompt = reply.prompt_tokens if reply.prompt_tokens is not None else prompt_token_count(body.get("messages") or [])
        completion = reply.completion_tokens if reply.completion_tokens is not None else tok.count(content)
        rec.status, rec.content = 200, content
        if reply.include_usage:
            rec.prompt_tokens, rec.completion_tokens = prompt, completion
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        model = str(body.get("model", "loopback"))
        base = {"id": f"chatcmpl-{len(owner.requests)}", "created": int(time.time()), "model": model}
        if not body.get("stream"):
            payload = base | {
                "object": "chat.completion",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            }
            if reply.include_usage:
                payload["usage"] = usage
            self._send_json(200, payload)
            return
        self._stream(base, content, usage if reply.include_usage else None, body)

    def _stream(self, base: dict[str, Any], content: str, usage: dict[str, int] | None, body: dict[str, Any]) -> None:
        owner = self.owner
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        # Paced (`tokens_per_s`): each event is its own write, as it is generated. Unpaced, the whole reply
        # exists at once: one write of all events (the same bytes and events; no syscall and wake-up per
        # delta, so a load benchmark's model server stays cheap).
        rate = owner.tokens_per_s
        paced = bool(rate)
        pending: list[bytes] = []

        def send(data: bytes) -> None:
            frame = f"{len(data):x}\r\n".encode() + data + b"\r\n"
            if paced:
                self.wfile.write(frame)
                self.wfile.flush()
            else:
                pending.append(frame)

        def event(obj: dict[str, Any]) -> None:
            send(b"data: " + json.dumps(base | {"object": "chat.completion.chunk"} | obj).encode() + b"\n\n")

        event({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]})
        step = max(1, owner.stream_chunk_chars)
        tok = get_tokenizer()
        for i in range(0, len(content), step):
            piece = content[i : i + step]
            if rate and not owner._sleep(tok.count(piece) / rate):
                return
            event({"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
        event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if usage is not None and wants_usage:
            event({"choices": [], "usage": usage})
        send(b"data: [DONE]\n\n")
        send(b"")  # end of chunked body
        if pending:
            self.wfile.write(b"".join(pending))
            self.wfile.flush()

    def _embeddings(self, body: dict[str, Any], rec: RecordedRequest) -> None:
        owner = self.owner
        _, fault = owner._pick({"messages": [], "model": body.get("model", "")})
        if not owner._sleep(owner.latency_ms / 1000.0):
            return
        if self._apply_transport_fault(fault, rec):
            return
        inputs = body.get("input")
        texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
        if not texts or not all(isinstance(t, str) for t in texts):
            rec.status = 400
            self._error(400, "input must be a non-empty string or list of strings")
            return
        dim = int(body.get("dimensions") or owner.embedding_dim)
        b64 = body.get("encoding_format") == "base64"
        data = []
        for i, text in enumerate(texts):
            vec = hash_vector(text, dim)
            emb: Any = base64.b64encode(vec.astype("<f4").tobytes()).decode() if b64 else vec.tolist()
            item = {"object": "embedding", "index": i, "embedding": emb}
            if fault is not None and fault.kind == "no_embedding":
                del item["embedding"]
            data.append(item)
        tokens = sum(get_tokenizer().count(t) for t in texts)
        rec.status, rec.prompt_tokens = 200, tokens
        self._send_json(200, {"object": "list", "data": data, "model": body.get("model", "loopback"),
                              "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
