"""One connection to the Redis that replicas share (`[serve] redis_url`), and whether it is answering.

Every user of the shared state (admission, spending limits, the model-call cache) goes through
`RedisLink.run`: a Redis that fails (refused, timed out, restarted, read-only) marks the link down, the caller
falls back to what it does alone, and the link is not tried again for `retry_s`, so an outage costs at most
one short timeout per second rather than one per request. The first success after that marks it up again.
Each change is logged once, and `status()` is what `/healthz` shows.

The client is redis-py's synchronous one with short socket timeouts: the calls are a few hundred microseconds
on a local network, the cache and admission interfaces they serve are synchronous, and a stalled Redis costs
at most one timeout per retry interval.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    import redis

log = logging.getLogger("graphroute.serve")
T = TypeVar("T")


def redacted_url(url: str) -> str:
    """The URL without its password, for logs and `/healthz`."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


class RedisLink:
    """The shared Redis client, its key prefix and its health."""

    def __init__(self, url: str, prefix: str = "graphroute", *, timeout_s: float = 0.5, retry_s: float = 1.0,
                 client: redis.Redis | None = None) -> None:
        import redis as redis_lib

        self.url = redacted_url(url)
        self.prefix = prefix
        self.retry_s = retry_s
        try:
            self.client: redis.Redis = client or redis_lib.Redis.from_url(
                url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, health_check_interval=30)
        except ValueError as exc:  # a URL redis-py cannot read: the operator's to fix, named
            raise ValueError(f"[serve] redis_url {self.url!r}: {exc}") from None
        self._errors: tuple[type[BaseException], ...] = (redis_lib.RedisError, OSError)
        self._lock = threading.Lock()
        self._down_since: float | None = None  # wall-clock time of the first failure of this outage
        self._retry_at = 0.0
        self._last_error = ""
        self.outages = 0

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    @property
    def up(self) -> bool:
        return self._down_since is None

    def available(self) -> bool:
        """False while an outage's retry interval runs: callers go straight to their fallback."""
        return self._down_since is None or time.monotonic() >= self._retry_at

    def run(self, action: Callable[[redis.Redis], T], fallback: T) -> T:
        """`action(client)`, or `fallback` when Redis is down or fails now (which marks it down)."""
        if not self.available():
            return fallback
        try:
            result = action(self.client)
        except self._errors as exc:
            self._failed(exc)
            return fallback
        if self._down_since is not None:
            self._recovered()
        return result

    def _failed(self, exc: BaseException) -> None:
        with self._lock:
            self._retry_at = time.monotonic() + self.retry_s
            self._last_error = str(exc) or type(exc).__name__
            if self._down_since is None:
                self._down_since = time.time()
                self.outages += 1
                log.warning("Redis at %s is unreachable (%s): each replica counts its own limits and the shared "
                            "model-call cache is off until it answers again", self.url, self._last_error)

    def _recovered(self) -> None:
        with self._lock:
            if self._down_since is None:
                return
            seconds = time.time() - self._down_since
            self._down_since = None
        log.warning("Redis at %s answers again after %.1f s: limits and the model-call cache are shared again",
                    self.url, seconds)

    def status(self) -> dict[str, str | bool | float | int]:
        """What `/healthz` reports: up or down (since when, the last error), and how many outages so far."""
        out: dict[str, str | bool | float | int] = {"url": self.url, "up": self.up, "outages": self.outages}
        if self._down_since is not None:
            out["down_since"] = round(self._down_since, 3)
            out["error"] = self._last_error
        return out

    def ping(self) -> bool:
        """One round trip (a recovery check when nothing else is asking)."""
        return self.run(lambda c: bool(c.ping()), False)

    def close(self) -> None:
        self.client.close()
