"""The layer in front of every route: drain (503), the keyless Host/Origin policy (421/403/415,
`router.host_policy`), API keys (401), body size (413), concurrency (429),
no stack trace in any response (a JSON 500 naming a request id the log also has), and request metrics.

A plain ASGI middleware, not Starlette's `BaseHTTPMiddleware`: it wraps streamed responses too, so a
concurrency slot is held until the last SSE chunk is sent. It reads a request's whole body before the app
sees it, counting bytes as they arrive, so a chunked body (no Content-Length) meets the same size limit and
the same JSON 413 as a declared one, and a client that stalls mid-body holds no concurrency slot.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from router.host_policy import HostPolicy
from router.service.admission import refusal_message
from router.service.errors import error_body

if TYPE_CHECKING:
    from engines.config import ServeConfig
    from engines.models.base import JSON
    from router.service.admission import Admission
    from router.service.metrics import Metrics

log = logging.getLogger("graphroute.serve")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Paths that need no key: the health probe, and the web page's static shell (it holds no data; the page
# sends the key it is given with every API call).
PUBLIC_PATHS = ("/healthz", "/readyz", "/", "/favicon.ico")
PUBLIC_PREFIXES = ("/static/",)
# Paths that do not take a concurrency slot (cheap, and needed to watch an overloaded server).
UNLIMITED_PATHS = ("/healthz", "/readyz", "/metrics", "/", "/favicon.ico")


AUTHORIZED = "graphroute.authorized"  # scope key: the request carried a valid key (or none is needed)
REQUEST_ID = "graphroute.request_id"  # scope key: the id a response's `x-request-id` and the log share
LOGGED = "graphroute.logged"  # scope key: this request's failure is already in the log
CALLER = "graphroute.caller"  # scope key: the caller number the limits count this request under


def new_request_id() -> str:
    return secrets.token_hex(8)


async def send_error(send: Send, status: int, message: str, code: str | None, headers: dict[str, str] | None = None,
                     *, param: str | None = None, **extra: JSON) -> None:
    body = error_body(status, message, code, param, **extra)
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


RECORD_KINDS = ("text_units", "documents", "entities")
KNOWN_PATHS = frozenset({"/", "/healthz", "/readyz", "/metrics", "/favicon.ico", "/v1/ask", "/v1/route",
                         "/v1/indexes", "/v1/models", "/v1/chat/completions"})


def path_template(path: str) -> str:
    """A bounded label for metrics: the route's template, never a caller's text (index names, record ids and
    kinds, model ids); every path no route serves is "other"."""
    if path in KNOWN_PATHS:
        return path
    parts = path.split("/")
    if path.startswith("/v1/indexes/") and len(parts) == 5 and parts[4] == "graph":
        return "/v1/indexes/{name}/graph"
    if path.startswith("/v1/indexes/") and len(parts) >= 6 and parts[4] in RECORD_KINDS:
        return "/v1/indexes/{name}/" + parts[4] + "/{id}"
    if path.startswith("/v1/models/"):
        return "/v1/models/{id}"
    if path.startswith("/static/"):
        return "/static"
    return "other"


# On every response. The page loads its scripts and styles from /static only (no inline script or style, no
# other origin), talks to this server only, and is never framed; a JSON or text body is never sniffed as HTML.
SECURITY_HEADERS = [
    (b"content-security-policy", b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


class GuardedService(Protocol):
    """What the guard reads and updates of the service it stands in front of (`app.Service`)."""

    api_keys: list[str]
    admission: Admission
    metrics: Metrics
    worker: int | None
    config: ServeConfig
    callers: int
    draining: bool

    def request_started(self) -> None: ...

    def request_finished(self) -> None: ...


@dataclass
class _ResponseState:
    """What the app has sent so far: the status (500 until it starts a response) and whether it started."""

    status: int = 500
    started: bool = False


class Guard:
    def __init__(self, app: ASGIApp, service: GuardedService) -> None:
        self.app = app
        self.service = service
        self._keys = [k.encode() for k in service.api_keys]
        # Without keys, only this machine's programs are answered (the MCP server's policy): no other site's
        # page, through the user's browser, reads the indexes or spends the model budget.
        cfg = service.config
        self._keyless = None if self._keys else HostPolicy.of(cfg.allowed_hosts, cfg.cors_origins)
        self.admission = service.admission  # server-wide and per-key counts (across workers when shared)
        # Which worker answered, on every response of a multi-worker server (operators and tests tell them apart).
        self._worker_header = None if service.worker is None else (b"x-graphroute-worker", str(service.worker).encode())

    def _key_of(self, scope: Scope) -> tuple[bool, int]:
        """(allowed, caller number for the per-key limit): key i is caller i; with no keys configured every
        request is caller 0. Every configured key is compared (constant time), whichever matches."""
        if not self._keys:
            return True, 0
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"authorization", b"")
        if given[:7].lower() == b"bearer ":
            given = given[7:].strip()
        else:
            given = headers.get(b"x-api-key", b"").strip()
        match = -1
        for i, key in enumerate(self._keys):
            if hmac.compare_digest(given, key):
                match = i
        return match >= 0, max(match, 0)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        started = time.perf_counter()
        state = _ResponseState()
        request_id = scope[REQUEST_ID] = new_request_id()
        extra_headers = [(b"x-request-id", request_id.encode()), *SECURITY_HEADERS]
        if self._worker_header is not None:
            extra_headers.append(self._worker_header)

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state.status = int(message["status"])
                state.started = True
                message["headers"] = [*message.get("headers", ()), *extra_headers]
            await send(message)

        try:
            await self._guarded(scope, receive, tracked_send, path, state)
        finally:
            self.service.metrics.observe_request(scope.get("method", ""), path_template(path), state.status,
                                                 time.perf_counter() - started)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, path: str, state: _ResponseState) -> None:
        svc = self.service
        if svc.draining and path not in ("/healthz", "/readyz"):
            await send_error(send, 503, "the server is shutting down; retry on another instance", "unavailable",
                             {"Retry-After": "5", "Connection": "close"})
            return
        if self._keyless is not None:
            off_policy = self._keyless.refusal(scope.get("method", ""), scope.get("headers") or ())
            if off_policy is not None:
                await send_error(send, off_policy.status, off_policy.message, off_policy.code)
                return
        public = path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)
        allowed, caller = self._key_of(scope)
        scope[AUTHORIZED] = allowed
        scope[CALLER] = caller
        if not public and not allowed:
            await send_error(send, 401, "missing or wrong API key (send 'Authorization: Bearer <key>')",
                             "invalid_api_key", {"WWW-Authenticate": "Bearer"})
            return
        limit = svc.config.max_body_bytes
        body = await _read_body(scope, receive, limit)
        if body is None:
            await send_error(send, 413, f"request body is over the limit of {limit} bytes ([serve] max_body_bytes)",
                             "request_too_large", {"Connection": "close"})
            return
        limited = path not in UNLIMITED_PATHS and not path.startswith(PUBLIC_PREFIXES)
        if limited:
            refused = self.admission.enter(caller)
            if refused is not None:
                cfg = svc.config
                message = refusal_message(refused, cfg.max_concurrency, cfg.max_concurrency_per_key, svc.callers)
                await send_error(send, 429, message, "rate_limit_exceeded", {"Retry-After": "1"})
                return
            svc.metrics.in_flight = self.admission.in_flight()
            svc.request_started()
        try:
            await self.app(scope, _replay(body, receive), send)
        except Exception:  # never a stack trace in a response; the log has it, under the request's id
            request_id = scope[REQUEST_ID]
            if not scope.get(LOGGED):
                log.exception("request %s: unhandled error serving %s", request_id, path)
            if not state.started:
                await send_error(send, 500, f"internal error (request id {request_id}; the server log has the "
                                 "details)", "internal_error", request_id=request_id)
        finally:
            if limited:
                self.admission.leave(caller)
                svc.metrics.in_flight = self.admission.in_flight()
                svc.request_finished()


_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


async def _read_body(scope: Scope, receive: Receive, limit: int) -> list[Message] | None:
    """The request's body messages, read whole before the app runs; None as soon as it passes `limit` bytes,
    declared (Content-Length) or counted as it arrives (chunked). A GET's body is not read (no route reads one)."""
    if scope.get("method") not in _BODY_METHODS:
        return []
    for name, value in scope.get("headers") or ():
        if name == b"content-length":
            try:
                if int(value) > limit:
                    return None
            except ValueError:
                pass  # the server refuses a malformed length itself
    messages: list[Message] = []
    received = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":  # the client went away: the app sees it as it would have
            return messages
        received += len(message.get("body", b""))
        if received > limit:
            return None
        if not message.get("more_body", False):
            return messages


def _replay(body: list[Message], receive: Receive) -> Receive:
    """A `receive` that hands the app the body already read, then the connection's own messages (a
    disconnect, which a streamed response listens for)."""
    if not body:
        return receive
    pending = iter(body)

    async def replayed() -> Message:
        message = next(pending, None)
        return message if message is not None else await receive()

    return replayed
