"""The layer in front of every route: drain (503), API keys (401), body size (413), concurrency (429),
no stack trace in any response, and request metrics.

A plain ASGI middleware, not Starlette's `BaseHTTPMiddleware`: it wraps streamed responses too, so a
concurrency slot is held until the last SSE chunk is sent.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

log = logging.getLogger("graphroute.serve")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Paths that need no key: the health probe, and the web page's static shell (it holds no data; the page
# sends the key it is given with every API call).
PUBLIC_PATHS = ("/healthz", "/", "/favicon.ico")
PUBLIC_PREFIXES = ("/static/",)
# Paths that do not take a concurrency slot (cheap, and needed to watch an overloaded server).
UNLIMITED_PATHS = ("/healthz", "/metrics", "/", "/favicon.ico")


class BodyTooLarge(Exception):
    pass


def error_body(status: int, message: str, kind: str) -> bytes:
    """OpenAI-style error JSON (the `openai` client reads `error.message`)."""
    return json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()


async def send_error(send: Send, status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> None:
    body = error_body(status, message, kind)
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


def path_template(path: str) -> str:
    """A bounded label for metrics: record ids and unknown paths never become label values."""
    if path.startswith("/v1/indexes/") and path.count("/") >= 5:
        return "/v1/indexes/{name}/" + path.split("/")[4] + "/{id}"
    if path.startswith("/static/"):
        return "/static"
    known = ("/", "/healthz", "/metrics", "/v1/ask", "/v1/route", "/v1/indexes", "/v1/models", "/v1/chat/completions")
    return path if path in known else "other"


class Guard:
    def __init__(self, app: ASGIApp, service: Any) -> None:
        self.app = app
        self.service = service
        self._keys = [k.encode() for k in service.api_keys]
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
        state = {"status": 500, "started": False}

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["status"] = message["status"]
                state["started"] = True
                if self._worker_header is not None:
                    message["headers"] = [*message.get("headers", ()), self._worker_header]
            await send(message)

        try:
            await self._guarded(scope, receive, tracked_send, path, state)
        finally:
            self.service.metrics.observe_request(scope.get("method", ""), path_template(path), int(state["status"]),
                                                 time.perf_counter() - started)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, path: str, state: dict[str, Any]) -> None:
        svc = self.service
        if svc.draining and path != "/healthz":
            await send_error(send, 503, "the server is shutting down; retry on another instance", "unavailable",
                             {"Retry-After": "5", "Connection": "close"})
            return
        public = path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)
        allowed, caller = self._key_of(scope)
        if not public and not allowed:
            await send_error(send, 401, "missing or wrong API key (send 'Authorization: Bearer <key>')",
                             "invalid_api_key", {"WWW-Authenticate": "Bearer"})
            return
        headers = dict(scope.get("headers") or [])
        limit = svc.config.max_body_bytes
        try:
            declared = int(headers.get(b"content-length", b"0") or 0)
        except ValueError:
            declared = 0
        if declared > limit:
            await send_error(send, 413, f"request body is {declared} bytes; the limit is {limit}", "request_too_large")
            return
        limited = path not in UNLIMITED_PATHS and not path.startswith(PUBLIC_PREFIXES)
        if limited:
            refused = self.admission.enter(caller)
            if refused == "server":
                await send_error(send, 429, f"the server is at its limit of {svc.config.max_concurrency} requests "
                                 "in flight; retry later", "rate_limit_exceeded", {"Retry-After": "1"})
                return
            if refused == "key":
                await send_error(send, 429, f"this API key is at its limit of {svc.config.max_concurrency_per_key} "
                                 "requests in flight; retry later", "rate_limit_exceeded", {"Retry-After": "1"})
                return
            svc.metrics.in_flight = self.admission.in_flight()
            svc.request_started()
        received = 0

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge
            return message

        try:
            await self.app(scope, counted_receive, send)
        except BodyTooLarge:
            if not state["started"]:
                await send_error(send, 413, f"request body is over the limit of {limit} bytes", "request_too_large")
        except Exception:  # never a stack trace in a response; the log has it
            log.exception("unhandled error serving %s", path)
            if not state["started"]:
                await send_error(send, 500, "internal error (see the server log)", "server_error")
        finally:
            if limited:
                self.admission.leave(caller)
                svc.metrics.in_flight = self.admission.in_flight()
                svc.request_finished()
