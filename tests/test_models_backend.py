"""The OpenAI backend against the loopback server, driven through the real `openai` client."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time

import pytest

from engines.models.base import Completion, Usage
from engines.models.cache import ModelCallCache
from engines.models.config import ModelEndpoint, PriceTable
from engines.models.errors import ModelResponseError, ModelTimeoutError, ModelUnavailableError, RateLimitError
from engines.models.limiter import LimiterRegistry
from engines.models.openai_backend import OpenAIChatModel, OpenAIEmbedder
from testing.model_server import Fault, LoopbackServer, Reply, hash_vector, prompt_token_count

MESSAGES = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Who is Scrooge?"}]


@pytest.fixture()
def srv():
    with LoopbackServer() as server:
        yield server


def chat(srv: LoopbackServer, **kw) -> OpenAIChatModel:
    fields = dict(provider="openai", model="gpt-4.1-mini", base_url=srv.base_url, api_key="sk-test",
                  timeout_s=2.0, max_retries=3, total_deadline_s=5.0, concurrency=16)
    fields.update(kw)
    model = OpenAIChatModel(ModelEndpoint(**fields), PriceTable(), limiter_registry=LimiterRegistry())
    model.policy = dataclasses.replace(model.policy, base_delay_s=0.01, max_delay_s=0.05)  # fast tests
    return model


async def test_usage_is_exactly_what_the_server_reported(srv):
    srv.add_rule("Scrooge", reply="A miser.")
    c = await chat(srv).complete(MESSAGES)
    rec = srv.chat_requests[-1]
    assert c.text == "A miser."
    assert (c.prompt_tokens, c.output_tokens) == (rec.prompt_tokens, rec.completion_tokens)
    assert c.prompt_tokens == prompt_token_count(MESSAGES) and not c.usage_estimated
    assert c.cost == pytest.approx((c.prompt_tokens * 0.40 + c.output_tokens * 1.60) / 1e6)
    assert c.model == "gpt-4.1-mini" and c.seconds > 0
    assert rec.body["messages"] == MESSAGES and "response_format" not in rec.body


async def test_missing_usage_is_estimated_and_marked(srv):
    srv.add_rule(None, reply=Reply("A miser.", include_usage=False))
    c = await chat(srv).complete(MESSAGES)
    assert c.usage_estimated and c.output_tokens == 3 and c.prompt_tokens == prompt_token_count(MESSAGES)


async def test_429_honours_retry_after_then_succeeds(srv):
    srv.add_rule(None, reply="ok")
    srv.fail_next(1, Fault("rate_limit", retry_after=0.3))
    t0 = time.monotonic()
    c = await chat(srv).complete(MESSAGES)
    assert c.text == "ok" and time.monotonic() - t0 >= 0.3
    assert [r.status for r in srv.chat_requests] == [429, 200]
    assert srv.chat_requests[1].started - srv.chat_requests[0].started >= 0.3


async def test_retry_after_as_http_date_is_honoured(srv):
    from email.utils import formatdate

    # HTTP dates have 1 s resolution: a whole second two ahead leaves a wait of more than one second.
    when = int(time.time()) + 2
    srv.fail_next(1, Fault("rate_limit", retry_after=formatdate(when, usegmt=True)))
    t0 = time.monotonic()
    await chat(srv).complete(MESSAGES)
    assert time.monotonic() - t0 >= 0.9  # it waited for the date, not retried at once


async def test_500_is_retried(srv):
    srv.fail_next(2, Fault("server_error"))
    c = await chat(srv).complete(MESSAGES)
    assert c.text == "OK" and [r.status for r in srv.chat_requests] == [500, 500, 200]


async def test_persistent_500_gives_typed_error_after_all_attempts(srv):
    srv.fail_next(10, Fault("server_error"))
    with pytest.raises(ModelResponseError, match=r"HTTP 500.*after 3 attempts") as info:
        await chat(srv, max_retries=2).complete(MESSAGES, task="local_answer")
    assert info.value.status_code == 500 and info.value.task == "local_answer"
    assert len(srv.chat_requests) == 3


async def test_garbled_body_is_retried(srv):
    srv.fail_next(1, Fault("bad_body"))
    assert (await chat(srv).complete(MESSAGES)).text == "OK"
    assert len(srv.chat_requests) == 2


async def test_hang_times_out_within_the_deadline(srv):
    srv.fail_next(5, Fault("hang", hang_s=10))
    t0 = time.monotonic()
    with pytest.raises(ModelTimeoutError, match=r"within 0\.3 s"):
        await chat(srv, timeout_s=0.3, max_retries=1, total_deadline_s=1.0).complete(MESSAGES)
    # The server would hang 10 s; the 1 s deadline (plus scheduling slack on a busy machine) bounds us.
    assert time.monotonic() - t0 < 2.5
    assert 1 <= len(srv.chat_requests) <= 2


async def test_total_deadline_bounds_retries(srv):
    srv.fail_next(50, Fault("hang", hang_s=10))
    t0 = time.monotonic()
    with pytest.raises(ModelTimeoutError):
        await chat(srv, timeout_s=0.25, max_retries=20, total_deadline_s=0.6).complete(MESSAGES)
    assert time.monotonic() - t0 < 2.0  # 20 retries x 0.25 s would take 5 s


async def test_retry_after_past_the_deadline_fails_fast_with_rate_limit_error(srv):
    srv.fail_next(5, Fault("rate_limit", retry_after=30))
    t0 = time.monotonic()
    with pytest.raises(RateLimitError, match="deadline"):
        await chat(srv, total_deadline_s=2.0).complete(MESSAGES)
    assert time.monotonic() - t0 < 1.5 and len(srv.chat_requests) == 1  # did not sleep 30 s


@pytest.mark.parametrize("transport", ["auto", "httpx", "aiohttp"])
async def test_unreachable_endpoint_names_url_and_model(transport: str):
    """Both SDK transports; aiohttp's reports a refused connection as a timeout, which must still read as
    'cannot reach', not 'no reply within'."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    endpoint = ModelEndpoint(provider="openai", model="gpt-4.1", base_url=url, api_key="k", max_retries=1, timeout_s=1,
                             http_client=transport)
    model = OpenAIChatModel(endpoint, limiter_registry=LimiterRegistry())
    model.policy = dataclasses.replace(model.policy, base_delay_s=0.01)
    with pytest.raises(ModelUnavailableError) as info:
        await model.complete(MESSAGES)
    assert url in str(info.value) and "gpt-4.1" in str(info.value) and "cannot reach" in str(info.value)
    assert info.value.base_url == url
    await model.aclose()


async def test_non_retryable_4xx_fails_fast(srv):
    srv.fail_next(3, Fault("http_error", status=401))
    with pytest.raises(ModelResponseError, match=r"HTTP 401.*check the API key") as info:
        await chat(srv).complete(MESSAGES)
    assert info.value.status_code == 401 and len(srv.requests) == 1


async def test_json_mode_requested_and_fallback_when_unsupported(srv):
    from engines.schemas import RateResponse

    model = chat(srv, model="no-json-model")
    await model.complete(MESSAGES, json_schema=RateResponse)
    assert srv.chat_requests[-1].body["response_format"] == {"type": "json_object"}
    srv.supports_json_mode = False
    model2 = chat(srv, model="json-less")
    c = await model2.complete(MESSAGES, json_schema=RateResponse)
    statuses = [r.status for r in srv.chat_requests[1:]]
    assert c.text == "OK" and statuses == [400, 200]
    assert "response_format" not in srv.chat_requests[-1].body
    await model2.complete(MESSAGES, json_schema=RateResponse)  # remembered: no second 400
    assert srv.chat_requests[-1].status == 200 and "response_format" not in srv.chat_requests[-1].body
    assert len(srv.chat_requests) == 4


async def test_parameters_are_passed(srv):
    await chat(srv).complete(MESSAGES, max_tokens=50, temperature=0.0)
    body = srv.chat_requests[-1].body
    assert body["max_tokens"] == 50 and body["temperature"] == 0.0 and body["model"] == "gpt-4.1-mini"
    await chat(srv, model="o4-mini").complete(MESSAGES, max_tokens=50)
    assert srv.chat_requests[-1].body["max_completion_tokens"] == 50


async def test_stream_reassembles_and_reports_server_usage(srv):
    text = "Ebenezer Scrooge is a cold-hearted miser who learns generosity on Christmas Eve."
    srv.add_rule("Scrooge", reply=text)
    parts, finals = [], []
    async for item in chat(srv).stream(MESSAGES):
        (finals if isinstance(item, Completion) else parts).append(item)
    assert len(parts) > 3 and "".join(parts) == text
    assert len(finals) == 1 and finals[0].text == text
    rec = srv.chat_requests[-1]
    assert rec.body["stream"] is True and rec.body["stream_options"] == {"include_usage": True}
    assert (finals[0].prompt_tokens, finals[0].output_tokens) == (rec.prompt_tokens, rec.completion_tokens)
    assert not finals[0].usage_estimated


async def test_stream_without_usage_chunk_is_estimated(srv):
    srv.add_rule(None, reply=Reply("one two three", include_usage=False))
    items = [x async for x in chat(srv).stream(MESSAGES)]
    final = items[-1]
    assert isinstance(final, Completion) and final.usage_estimated and final.output_tokens == 3


async def test_stream_retries_opening_after_429(srv):
    srv.fail_next(1, Fault("rate_limit", retry_after=0.1))
    items = [x async for x in chat(srv).stream(MESSAGES)]
    assert items[-1].text == "OK" and [r.status for r in srv.chat_requests] == [429, 200]


async def test_64_concurrent_calls_never_exceed_limit_8(srv):
    srv.latency_ms = 100  # long enough that 8 calls overlap even on a busy machine
    model = chat(srv, concurrency=8)
    results = await asyncio.gather(*(model.complete([{"role": "user", "content": f"q{i}"}]) for i in range(64)))
    assert len(results) == 64 and all(r.text == "OK" for r in results)
    assert srv.max_in_flight == 8  # reached, never exceeded
    assert model.limiter.max_in_flight == 8


async def test_limit_is_shared_by_models_on_the_same_endpoint(srv):
    srv.latency_ms = 100  # long enough that all 4 slots fill even on a loaded machine
    registry = LimiterRegistry()
    endpoint = ModelEndpoint(provider="openai", model="gpt-4.1", base_url=srv.base_url, api_key="k", concurrency=4)
    a = OpenAIChatModel(endpoint, limiter_registry=registry)
    b = OpenAIChatModel(endpoint, limiter_registry=registry)
    calls = [m.complete(MESSAGES) for m in (a, b) for _ in range(16)]
    await asyncio.gather(*calls)
    assert a.limiter is b.limiter and srv.max_in_flight == 4


def test_model_works_across_event_loops(srv):
    model = chat(srv)
    for _ in range(3):  # a fresh loop each time, as sync wrappers and tests do
        assert asyncio.run(model.complete(MESSAGES)).text == "OK"


async def test_cache_hit_costs_nothing_and_is_counted(srv, tmp_path):
    model = chat(srv)
    model.cache = ModelCallCache(tmp_path / "calls.sqlite")
    first = await model.complete(MESSAGES, task="local_answer")
    second = await model.complete(MESSAGES, task="local_answer")
    assert len(srv.chat_requests) == 1
    assert second.cached and second.cost == 0.0 and second.seconds == 0.0 and second.text == first.text
    assert (second.prompt_tokens, second.output_tokens) == (first.prompt_tokens, first.output_tokens)
    await model.complete(MESSAGES, task="local_answer", temperature=0.5)  # different parameters: a miss
    assert len(srv.chat_requests) == 2
    usage = Usage()
    usage.add_completion("answer", first)
    usage.add_completion("answer", second)
    assert usage.total.cached_calls == 1 and usage.total.llm_calls == 2 and usage.total.cost == first.cost


async def test_embedder_batches_and_returns_server_vectors(srv):
    endpoint = ModelEndpoint(provider="openai", model="text-embedding-3-small", base_url=srv.base_url,
                             api_key="k", batch_size=4)
    emb = OpenAIEmbedder(endpoint, limiter_registry=LimiterRegistry())
    texts = [f"text number {i}" for i in range(10)] + [""]
    result = await emb.embed(texts)
    assert result.vectors.shape == (11, 64) and result.vectors.dtype.name == "float32"
    assert emb.dim == 64
    assert result.vectors[3] == pytest.approx(hash_vector("text number 3", 64), abs=1e-6)
    emb_requests = [r for r in srv.requests if r.path.endswith("/embeddings")]
    assert len(emb_requests) == 3 and result.prompt_tokens == sum(r.prompt_tokens for r in emb_requests)
    assert result.cost == pytest.approx(result.prompt_tokens * 0.02 / 1e6)


async def test_embedder_retries_429(srv):
    srv.fail_next(1, Fault("rate_limit", retry_after=0.1))
    endpoint = ModelEndpoint(provider="openai", model="e", base_url=srv.base_url, api_key="k", dimensions=32)
    result = await OpenAIEmbedder(endpoint, limiter_registry=LimiterRegistry()).embed(["a", "b"])
    assert result.vectors.shape == (2, 32)
    assert [r.status for r in srv.requests] == [429, 200] and srv.requests[-1].body["dimensions"] == 32


async def test_azure_addresses_the_deployment_with_api_version(srv):
    endpoint = ModelEndpoint(provider="azure", model="gpt-4.1", azure_deployment="my-gpt41",
                             base_url=srv.base_url.removesuffix("/v1"), api_key="az-key", api_version="2024-10-21")
    c = await OpenAIChatModel(endpoint, limiter_registry=LimiterRegistry()).complete(MESSAGES)
    rec = srv.chat_requests[-1]
    assert c.text == "OK" and c.model == "gpt-4.1"
    assert "/openai/deployments/my-gpt41/chat/completions" in rec.path and "api-version=2024-10-21" in rec.path
    assert rec.headers.get("api-key") == "az-key"


async def test_factory_sends_each_stage_to_its_model(srv):
    from engines.models.config import models_config_from_mapping
    from engines.models.factory import Models

    config = models_config_from_mapping(
        {"chat": {"base_url": srv.base_url, "model": "gpt-4.1"}, "stages": {"map": {"model": "gpt-4.1-nano"}}},
        env={},
    )
    models = Models(config)
    await models.chat("map").complete(MESSAGES, task="global_map")
    await models.chat("answer").complete(MESSAGES, task="local_answer")
    assert [r.body["model"] for r in srv.chat_requests] == ["gpt-4.1-nano", "gpt-4.1"]
    assert not models.offline and "map: gpt-4.1-nano" in models.describe()
    await models.aclose()


async def test_stream_that_stalls_mid_way_times_out_with_typed_error(srv):
    srv.tokens_per_s = 1.0  # each 8-character delta takes ~3 s to arrive
    srv.add_rule(None, reply="a long reply that trickles out far too slowly")
    await chat(srv, timeout_s=20).complete(MESSAGES)  # warm the SDK up (non-streamed replies do not trickle)
    model = chat(srv, timeout_s=0.8, total_deadline_s=1.5, max_retries=0)
    received: list[str] = []
    t0 = time.monotonic()
    # Headers and the role chunk arrive at once, then nothing for ~3 s: the per-chunk timeout fires
    # (on a very busy machine the open itself may be what times out; either way it is a typed timeout).
    with pytest.raises(ModelTimeoutError) as info:
        async for item in model.stream(MESSAGES, task="local_answer"):
            received.append(item)  # type: ignore[arg-type]
    assert time.monotonic() - t0 < 3.5 and received == [] and info.value.task == "local_answer"
    assert model.limiter.in_flight == 0  # the slot was given back


def test_cache_is_safe_across_threads(tmp_path):
    import threading

    cache = ModelCallCache(tmp_path / "c.sqlite")
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(25):
                key = f"{n}-{i}"
                cache.put(key, Completion(text=key, prompt_tokens=i, output_tokens=1, model="m", seconds=0.1, cost=1.0))
                hit = cache.get(key)
                assert hit is not None and hit.text == key and hit.cached and hit.cost == 0.0
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(cache) == 150
