"""The concurrency limiter: a hard cap shared across tasks, event loops and threads; cancellation-safe."""

from __future__ import annotations

import asyncio
import threading

import pytest

from engines.models.limiter import ConcurrencyLimiter, LimiterRegistry


async def _hold(limiter: ConcurrencyLimiter, seconds: float, seen: list[int]) -> None:
    async with limiter.slot():
        seen.append(limiter.in_flight)
        await asyncio.sleep(seconds)


async def test_never_exceeds_limit_and_reaches_it():
    limiter = ConcurrencyLimiter(3)
    seen: list[int] = []
    await asyncio.gather(*(_hold(limiter, 0.01, seen) for _ in range(20)))
    assert max(seen) == 3 and limiter.max_in_flight == 3 and limiter.in_flight == 0


def test_shared_across_threads_with_their_own_loops():
    limiter = ConcurrencyLimiter(2)
    seen: list[int] = []

    async def five() -> None:
        await asyncio.wait_for(asyncio.gather(*(_hold(limiter, 0.02, seen) for _ in range(5))), 10)

    def worker() -> None:
        asyncio.run(five())

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 20 and limiter.max_in_flight == 2 and limiter.in_flight == 0


def test_survives_a_closed_loop():
    limiter = ConcurrencyLimiter(1)
    for _ in range(3):
        asyncio.run(_hold(limiter, 0.0, []))
    assert limiter.in_flight == 0


async def test_cancelled_waiter_does_not_leak_a_slot():
    limiter = ConcurrencyLimiter(1)
    await limiter.acquire()
    waiter = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    limiter.release()
    assert limiter.in_flight == 0
    await asyncio.wait_for(limiter.acquire(), 1)  # the slot is really free
    limiter.release()


async def test_cancel_after_grant_passes_the_slot_on():
    limiter = ConcurrencyLimiter(1)
    await limiter.acquire()
    waiter = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0.01)
    limiter.release()  # hands the slot to the waiter (scheduled on the loop) ...
    waiter.cancel()  # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await asyncio.sleep(0.01)
    assert limiter.in_flight == 0


def test_registry_shares_by_endpoint_and_model_and_updates_limit():
    registry = LimiterRegistry()
    a = registry.get(("http://x/v1", "m"), 4)
    assert registry.get(("http://x/v1", "m"), 4) is a
    assert registry.get(("http://x/v1", "other"), 4) is not a
    registry.get(("http://x/v1", "m"), 8)
    assert a.limit == 8


def test_invalid_limit():
    with pytest.raises(ValueError, match="must be >= 1"):
        ConcurrencyLimiter(0)


async def test_a_release_on_the_waiters_own_loop_grants_at_once():
    """The next holder is granted in the release itself (no loop turn, no self-pipe write in between):
    under load every release is such a hand-off, and a busy loop's turns are milliseconds."""
    limiter = ConcurrencyLimiter(1)
    await limiter.acquire()
    waiter = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0.01)
    limiter.release()
    assert limiter.in_flight == 1  # handed over, not freed
    await asyncio.sleep(0)  # one loop turn: the waiter only had to resume
    assert waiter.done()
    limiter.release()
    assert limiter.in_flight == 0


async def test_a_request_cancelled_before_it_ran_gives_its_slot_back():
    """A request task cancelled before its first step (its loop shutting down) never runs the code that
    releases the slot; its done callback does."""
    from engines.models.retry import _attempt_in_slot

    limiter = ConcurrencyLimiter(1)

    async def attempt(timeout: float) -> str:
        return "answer"

    known = asyncio.all_tasks()
    outer = asyncio.create_task(_attempt_in_slot(limiter, attempt, 5.0))
    await asyncio.sleep(0)  # the outer task took the slot and made the request task, which has not run yet
    (request,) = asyncio.all_tasks() - known - {outer}
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    await asyncio.sleep(0)
    assert limiter.in_flight == 0
    assert await _attempt_in_slot(limiter, attempt, 5.0) == "answer" and limiter.in_flight == 0
