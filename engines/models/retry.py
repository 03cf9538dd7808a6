"""Retries with exponential backoff and full jitter, honouring Retry-After, bounded by attempts and a deadline.

The OpenAI SDK runs with `max_retries=0`; every retry decision is made here so that the deadline,
the limiter (held only while a request is on the wire, never while backing off) and the error
messages are ours.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import openai

from engines.models.errors import (
    ModelError,
    ModelResponseError,
    ModelTimeoutError,
    ModelUnavailableError,
    RateLimitError,
)
from engines.models.limiter import ConcurrencyLimiter

T = TypeVar("T")
# Backoff jitter when the caller brings no generator (seeding a new one from os.urandom on every call
# was a visible share of a model call's CPU in the service).
_JITTER = random.Random()
RETRYABLE_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 520, 522, 524, 529})


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    total_deadline_s: float = 180.0
    timeout_s: float = 60.0  # per attempt
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def backoff(self, retry_index: int, rng: random.Random) -> float:
        """Full jitter: uniform(0, min(cap, base * 2**i))."""
        return rng.uniform(0.0, min(self.max_delay_s, self.base_delay_s * (2**retry_index)))


def parse_retry_after(headers: object, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` as seconds or an HTTP date."""
    get = getattr(headers, "get", None)
    if get is None:
        return None
    ms = get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    raw = get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass
class Failure:
    """One failed attempt, classified."""

    retryable: bool
    error: ModelError
    retry_after: float | None = None


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return exc.message


def _connection_failure(exc: BaseException) -> BaseException | None:
    """The aiohttp connection error (refused, reset, server disconnected; not a timeout) behind an SDK
    timeout, when the SDK's aiohttp transport mapped one to a timeout. None otherwise."""
    if not isinstance(exc, openai.APITimeoutError):
        return None
    import sys

    aiohttp = sys.modules.get("aiohttp")  # loaded only when an endpoint uses the aiohttp transport
    if aiohttp is None:
        return None
    cause: BaseException | None = exc
    for _ in range(8):  # the SDK's error <- httpx2's <- aiohttp's
        cause = cause.__cause__ or cause.__context__ if cause is not None else None
        if cause is None:
            return None
        if isinstance(cause, aiohttp.ClientConnectionError) and not isinstance(cause, aiohttp.ServerTimeoutError):
            found: BaseException = cause
            return found
    return None


def classify(exc: BaseException, *, base_url: str, model: str, timeout_s: float) -> Failure:
    """Map an SDK/asyncio exception to a typed, user-readable failure."""
    where = f"model {model!r} at {base_url}"
    refused = _connection_failure(exc)
    if refused is not None:  # the aiohttp transport reports a refused or dropped connection as a timeout
        return Failure(True, ModelUnavailableError(
            f"cannot reach {where} (connection failed: {refused}); is the server running and the base URL right?",
            base_url=base_url, model=model))
    if isinstance(exc, openai.APITimeoutError | asyncio.TimeoutError | TimeoutError):
        return Failure(True, ModelTimeoutError(f"no reply from {where} within {timeout_s:g} s"))
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {cause}" if cause else ""
        return Failure(
            True,
            ModelUnavailableError(
                f"cannot reach {where} (connection failed{detail}); is the server running and the "
                "base URL right?",
                base_url=base_url,
                model=model,
            ),
        )
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        message = _server_message(exc)
        retry_after = parse_retry_after(exc.response.headers)
        if status == 429:
            return Failure(
                True, RateLimitError(f"{where} is rate limiting requests (HTTP 429: {message})"), retry_after
            )
        if status in RETRYABLE_STATUS:
            return Failure(
                True,
                ModelResponseError(f"{where} failed with HTTP {status}: {message}", status_code=status),
                retry_after,
            )
        hint = {
            401: " — check the API key (OPENAI_API_KEY or models.chat.api_key)",
            403: " — the key is not allowed to use this model",
            404: " — check the model name and base URL",
        }.get(status, "")
        return Failure(
            False,
            ModelResponseError(f"{where} rejected the request (HTTP {status}: {message}){hint}", status_code=status),
        )
    if isinstance(exc, openai.APIResponseValidationError | openai.APIError):
        return Failure(False, ModelResponseError(f"{where} sent an unusable response: {exc}"))
    if isinstance(exc, ModelError):
        return Failure(bool(getattr(exc, "retryable", False)), exc)
    raise exc  # a bug of ours, not a model failure: let it surface


# Requests whose caller gave up while they were on the wire; kept referenced until they end.
_ABANDONED: set[asyncio.Future[Any]] = set()  # any result type: only kept alive, never read


async def _attempt_in_slot(limiter: ConcurrencyLimiter, attempt: Callable[[float], Awaitable[T]], timeout: float) -> T:
    """One attempt holding a limiter slot for as long as the request is on the wire.

    When the caller is cancelled (its deadline passed) the request is not torn down: the server would go
    on working on it anyway, so freeing the slot then would let the next request past the limit. It
    finishes in the background (bounded by the per-call timeout), its result dropped, and only then is
    the slot released.
    """
    await limiter.acquire()
    slot = _Slot(limiter)
    request = asyncio.ensure_future(_held(slot, attempt, timeout))
    request.add_done_callback(slot.release)  # a task cancelled before its first step never ran `_held`
    try:
        return await asyncio.shield(request)
    except asyncio.CancelledError:
        if not request.done():
            _ABANDONED.add(request)
            request.add_done_callback(_forget)
        raise


class _Slot:
    """A held limiter slot, released once whoever releases it first."""

    __slots__ = ("held", "limiter")

    def __init__(self, limiter: ConcurrencyLimiter) -> None:
        self.limiter, self.held = limiter, True

    def release(self, *_: object) -> None:
        if self.held:
            self.held = False
            self.limiter.release()


async def _held(slot: _Slot, attempt: Callable[[float], Awaitable[T]], timeout: float) -> T:
    """The attempt, cut at `timeout` (+50 ms), then the slot released in the same step. One task, where
    `wait_for` and a done callback took two loop turns more per request (a busy loop's turns are
    milliseconds each, and every request pays them while it holds a slot another request waits for:
    benchmarks of 16 slots under a loop busy 0.5 ms a turn went from 6-8 to 3-3.5 ms per slot turnover)."""
    try:
        async with asyncio.timeout(timeout + 0.05):
            return await attempt(timeout)
    finally:
        slot.release()


def _forget(request: asyncio.Future[T]) -> None:
    _ABANDONED.discard(request)
    if not request.cancelled():
        request.exception()  # retrieved, so an abandoned failure is not reported as "never retrieved"


async def call_with_retries(
    attempt: Callable[[float], Awaitable[T]],
    policy: RetryPolicy,
    *,
    base_url: str,
    model: str,
    limiter: ConcurrencyLimiter | None = None,
    rng: random.Random | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Run `attempt(timeout_s)` until it succeeds, a non-retryable error, attempts or the deadline run out.

    Each attempt gets min(per-call timeout, time left before the deadline) and is also cut by
    `asyncio.wait_for` so a server that trickles bytes cannot hold us past the deadline.
    """
    start = time.monotonic()
    deadline = start + policy.total_deadline_s
    last: Failure | None = None
    attempts = 0
    for retry_index in range(policy.max_retries + 1):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        timeout = min(policy.timeout_s, remaining)
        attempts += 1
        try:
            if limiter is None:
                return await asyncio.wait_for(attempt(timeout), timeout + 0.05)
            return await _attempt_in_slot(limiter, attempt, timeout)
        except (openai.OpenAIError, TimeoutError, ModelError) as exc:
            last = classify(exc, base_url=base_url, model=model, timeout_s=timeout)
        if not last.retryable or retry_index == policy.max_retries:
            break
        delay = last.retry_after if last.retry_after is not None else policy.backoff(retry_index, rng or _JITTER)
        if time.monotonic() + delay >= deadline:
            last.error.message += (
                f"; gave up: the next retry (after {delay:.2f} s) would pass the "
                f"{policy.total_deadline_s:g} s deadline"
            )
            break
        await sleep(delay)
    if last is None:
        raise ModelTimeoutError(
            f"model {model!r} at {base_url}: the {policy.total_deadline_s:g} s deadline passed before a reply"
        )
    if last.retryable:
        last.error.message += f" (after {attempts} attempt{'s' if attempts != 1 else ''} in {time.monotonic() - start:.1f} s)"
    raise last.error
