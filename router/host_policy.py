"""Loopback means loopback: the Host/Origin policy of a server that asks for no key.

Both `graphroute serve` without API keys and `graphroute mcp --http` (which has no authentication) answer
only requests that a program on this machine sent on purpose:

- the `Host` header must name a loopback address (`127.0.0.1`, `localhost`, `[::1]`, any port) or a host
  the operator allowed (`--allowed-host NAME` or `NAME:PORT`); otherwise 421. A web page that points its own
  domain at 127.0.0.1 (DNS rebinding) sends its own domain as the Host, so it is refused.
- an `Origin` header (browsers send it with cross-site requests and every POST) must be an origin on an
  allowed host or one of the configured CORS origins; otherwise 403. So another site's page can neither read
  the answers nor make the server spend its model budget.
- a POST must say `Content-Type: application/json`; otherwise 415. A browser sends a plain form or
  `text/plain` POST to any site without asking; a JSON one only after a CORS check this server refuses.

One implementation for both servers: `refusal` is called by the service's guard and by `HostGuard`, the
ASGI middleware in front of the MCP app.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str
    code: str


def _split_host(value: str) -> tuple[str, str]:
    """(host, port) of a Host header value or an allow-list entry ("" when no port)."""
    value = value.strip().lower()
    if value.startswith("["):  # an IPv6 literal: [::1]:8000
        end = value.find("]")
        host, rest = value[: end + 1], value[end + 1:]
        return host, rest[1:] if rest.startswith(":") else ""
    host, _, port = value.partition(":")
    return host, port


@dataclass(frozen=True)
class HostPolicy:
    """Which Host and Origin headers a keyless server answers (see the module docstring)."""

    allowed_hosts: tuple[str, ...] = ()  # beyond loopback: "name" (any port) or "name:port"
    allowed_origins: tuple[str, ...] = ()  # the configured CORS origins, e.g. "https://app.example"

    @classmethod
    def of(cls, allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = ()) -> HostPolicy:
        return cls(tuple(allowed_hosts), tuple(o.rstrip("/").lower() for o in allowed_origins))

    def host_allowed(self, value: str) -> bool:
        host, port = _split_host(value)
        if not host or (port and not port.isdigit()):
            return False
        for entry in (*LOOPBACK_HOSTS, *self.allowed_hosts):
            want_host, want_port = _split_host(entry)
            if host == want_host and (not want_port or want_port == port):
                return True
        return False

    def origin_allowed(self, origin: str) -> bool:
        origin = origin.strip().rstrip("/").lower()
        if origin in self.allowed_origins:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and not parts.path and self.host_allowed(parts.netloc)

    def refusal(self, method: str, headers: Iterable[tuple[bytes, bytes]]) -> Refusal | None:
        """Why a request with these headers is refused, or None when it is allowed."""
        found: dict[bytes, str] = {}
        for name, value in headers:
            found.setdefault(name.lower(), value.decode("latin-1"))
        host = found.get(b"host")
        if host is None or not self.host_allowed(host):
            return Refusal(421, f"this server answers only requests to a loopback address or an allowed host, "
                           f"not {host!r} (start it with --allowed-host NAME to add one)", "invalid_host")
        origin = found.get(b"origin")
        if origin is not None and not self.origin_allowed(origin):
            return Refusal(403, f"requests from web pages of another origin ({origin!r}) are refused "
                           "(list it with --cors-origin to allow it)", "invalid_origin")
        if method == "POST" and not found.get(b"content-type", "").lower().startswith("application/json"):
            return Refusal(415, "a POST must send its body as 'Content-Type: application/json'",
                           "unsupported_media_type")
        return None


class HostGuard:
    """ASGI middleware: `policy` in front of `app` (the MCP server's streamable HTTP app)."""

    def __init__(self, app: ASGIApp, policy: HostPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self.policy.refusal(scope.get("method", ""), scope.get("headers") or ())
            if refused is not None:
                from router.service.errors import error_body  # here: the service package imports this module

                body = error_body(refused.status, refused.message, refused.code)
                await send({"type": "http.response.start", "status": refused.status,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
