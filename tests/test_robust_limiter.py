"""Deadlines that cancel questions must not push an endpoint past its concurrency limit:
a request already on the wire keeps its slot until it ends, so the server never sees more than the limit."""

from __future__ import annotations

import asyncio
import contextlib
import time

from pydantic import SecretStr

from engines.models.config import ModelEndpoint, PriceTable
from engines.models.limiter import LimiterRegistry
from engines.models.openai_backend import OpenAIChatModel
from testing.model_server import LoopbackServer

LIMIT = 4


async def test_cancelled_questions_never_push_the_server_past_the_limit() -> None:
    with LoopbackServer(latency_ms=1000) as server:
        endpoint = ModelEndpoint(provider="openai", base_url=server.base_url, api_key=SecretStr("test"),
                                 model="gpt-4.1-mini", timeout_s=10, max_retries=0, concurrency=LIMIT)
        registry = LimiterRegistry()
        model = OpenAIChatModel(endpoint, PriceTable(), limiter_registry=registry)
        limiter = registry.get(endpoint.limiter_key, LIMIT)

        async def question(i: int) -> None:
            # staggered deadlines: each cancellation frees a slot while other questions still wait for one
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(model.complete([{"role": "user", "content": f"q{i}"}]), 0.3 + 0.3 * i)

        try:
            await model.complete([{"role": "user", "content": "warm-up"}])  # server tokenizer, client pool
            server.reset()
            await asyncio.gather(*(question(i) for i in range(12)))
            give_up = time.monotonic() + 10
            while limiter.in_flight and time.monotonic() < give_up:  # abandoned requests end in the background
                await asyncio.sleep(0.05)
        finally:
            await model.aclose()
        assert len(server.chat_requests) > LIMIT  # slots were handed on after cancellations
        assert server.max_in_flight <= LIMIT
        assert limiter.in_flight == 0  # every slot came back
