"""Chat and embedding models on any OpenAI-compatible endpoint (OpenAI, Azure, Ollama, vLLM, …).

The SDK runs with `max_retries=0`; retries, the deadline and the per-(endpoint, model) concurrency
limit are ours (`retry.py`, `limiter.py`). Usage comes from the provider; when it reports none we count
with tiktoken and mark the completion `usage_estimated`. Cost comes from the price table.
One SDK client is kept per event loop, because an httpx client is bound to the loop it first ran on.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

import numpy as np
import openai
from pydantic import BaseModel

from engines.models.base import Completion, EmbeddingResult, Message
from engines.models.cache import CallCache, completion_key, embedding_key
from engines.models.config import ModelEndpoint, PriceTable
from engines.models.errors import ModelConfigError, ModelError, ModelResponseError, ModelTimeoutError
from engines.models.limiter import DEFAULT_LIMITERS, ConcurrencyLimiter, LimiterRegistry
from engines.models.request_options import AnswerOptions, answer_options, capped
from engines.models.retry import RetryPolicy, call_with_retries, classify
from shared_context.tokens import get_tokenizer

if TYPE_CHECKING:
    from openai.types import CompletionUsage, CreateEmbeddingResponse
    from openai.types.chat import ChatCompletion, ChatCompletionMessageParam

    from engines.models.task_context import TaskContext

# Endpoints (base_url, model) that answered "response_format not supported": we stop asking.
_NO_JSON_MODE: set[tuple[str, str]] = set()
_NO_STREAM_OPTIONS: set[tuple[str, str]] = set()
_flags_lock = threading.Lock()
EMBEDDING_MAX_TOKENS = 8191  # OpenAI's per-input limit; longer inputs are truncated (counted as sent)
T = TypeVar("T")


def _estimate_prompt_tokens(messages: list[Message]) -> int:
    tok = get_tokenizer()
    return sum(tok.count(m["content"]) + 3 for m in messages) + 3  # OpenAI's chat framing overhead


def _uses_max_completion_tokens(model: str) -> bool:
    """Reasoning models reject `max_tokens`; everything else (and most local servers) only knows it."""
    name = model.rsplit("/", 1)[-1]
    return name.startswith(("o1", "o3", "o4", "gpt-5"))


@dataclass(frozen=True)
class _Sampling:
    """A request's length and sampling fields; unset ones are left out of the request body."""

    max_tokens: int | None = None
    max_tokens_field: str = "max_tokens"  # reasoning models take `max_completion_tokens` instead
    temperature: float | None = None
    extra: dict[str, float | int] = field(default_factory=dict)  # a caller's own (`AnswerOptions.sampling`)

    def typed_max_tokens(self) -> int | openai.Omit:
        return self.max_tokens if self.max_tokens is not None and self.max_tokens_field == "max_tokens" else openai.omit

    def typed_temperature(self) -> float | openai.Omit:
        return openai.omit if self.temperature is None else self.temperature

    def fields(self) -> dict[str, float | int]:
        """The fields the SDK's typed parameters do not cover, for its `extra_body`."""
        out = dict(self.extra)
        if self.max_tokens is not None and self.max_tokens_field != "max_tokens":
            out[self.max_tokens_field] = self.max_tokens
        return out

    def body_fields(self) -> dict[str, float | int]:
        """Every field that is set, as request-body fields."""
        out = self.fields()
        if self.max_tokens is not None and self.max_tokens_field == "max_tokens":
            out["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            out["temperature"] = self.temperature
        return out


async def _create_chat(client: openai.AsyncOpenAI, model: str, messages: list[Message], sampling: _Sampling,
                       timeout: float, *, json_mode: bool = False) -> ChatCompletion:
    """One chat completion through the SDK's public `chat.completions.create`."""
    return await client.chat.completions.create(
        model=model, messages=_sdk_messages(messages), timeout=timeout,
        max_tokens=sampling.typed_max_tokens(), temperature=sampling.typed_temperature(),
        response_format={"type": "json_object"} if json_mode else openai.omit,
        extra_body=sampling.fields() or None,
    )


async def _open_raw_chat_stream(client: openai.AsyncOpenAI, model: str, messages: list[Message],
                                sampling: _Sampling, timeout: float, *, with_usage: bool) -> openai.AsyncStream[object]:
    """The same request streamed, its server-sent events decoded by the SDK into plain dicts.

    The one request that leaves the SDK's typed API: it goes through the SDK's request path for custom requests
    (`client.post`: auth, Azure deployment URLs, typed errors and SSE decoding stay the SDK's) because typed
    `create(stream=True)` builds a pydantic model per streamed chunk, which costs a streamed answer several times
    the client CPU (`python -m benchmarks.model_client`, `benchmarks/results/model_client/model_client.json`).
    """
    body: dict[str, object] = {"model": model, "messages": messages, "stream": True, **sampling.body_fields()}
    if with_usage:
        body["stream_options"] = {"include_usage": True}
    return await client.post("/chat/completions", cast_to=object, body=body, options={"timeout": timeout},
                             stream=True, stream_cls=openai.AsyncStream[object])


def _sdk_messages(messages: list[Message]) -> list[ChatCompletionMessageParam]:
    """Our messages as the SDK's message params (role + content: the same JSON)."""
    return cast("list[ChatCompletionMessageParam]", messages)


def _message_text(response: ChatCompletion) -> str | None:
    """The first choice's content; None when the response has no choices."""
    if not response.choices:
        return None
    return response.choices[0].message.content or ""


def _delta_texts(chunk: object) -> list[str]:
    """The content deltas of one streamed chunk (a dict), in choice order."""
    out = []
    for choice in (chunk.get("choices") if isinstance(chunk, dict) else None) or []:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        content = delta.get("content") if isinstance(delta, dict) else None
        if content and isinstance(content, str):
            out.append(content)
    return out


def _chunk_usage(chunk: object) -> CompletionUsage | None:
    """The usage a streamed chunk (a dict) reports, None when it has none or it is malformed."""
    usage = chunk.get("usage") if isinstance(chunk, dict) else None
    if not isinstance(usage, dict):
        return None
    from openai.types import CompletionUsage

    try:
        return CompletionUsage.model_validate(usage)
    except ValueError:
        return None


def _with_options(max_tokens: int | None, temperature: float | None,
                  options: AnswerOptions | None) -> tuple[int | None, float | None]:
    """(max_tokens, temperature) with a caller's own answer options applied: the smaller cap, their temperature."""
    if options is None:
        return max_tokens, temperature
    return capped(max_tokens, options), temperature if options.temperature is None else options.temperature


def _mentions(err: ModelError, *words: str) -> bool:
    text = str(err).lower()
    return any(w in text for w in words)


class _ClientPool:
    """One AsyncOpenAI client per running event loop (an httpx client is bound to the loop it first ran on).

    A sync `Router` runs every call on one long-lived loop, so in practice this is one client per endpoint.
    Each client is closed with its loop: a tiny async generator is registered with the loop, and loops
    finalise their async generators when they shut down (`asyncio.run`, `Router.close`, test loops), so a
    client never outlives its loop with open sockets. The loop holds the generator (`_LOOP_CLOSERS`), so it is
    finalised by the loop's shutdown even when the model that made it is garbage by then.
    """

    def __init__(self, endpoint: ModelEndpoint, section: str = "chat") -> None:
        self._endpoint = endpoint
        self._section = section
        self._clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[openai.AsyncOpenAI, AsyncGenerator[None, None]]
        ] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self) -> openai.AsyncOpenAI:
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._clients.get(loop)
            if entry is None:
                client = make_client(self._endpoint, self._section)
                entry = self._clients[loop] = (client, _close_with_loop(client))
            return entry[0]

    async def aclose(self) -> None:
        """Close this loop's client now (other loops' clients close when those loops shut down)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._clients.pop(loop, None)
        if entry is not None:
            with _closers_lock:
                closers = _LOOP_CLOSERS.get(loop, [])
                if entry[1] in closers:
                    closers.remove(entry[1])
            await entry[1].aclose()


# Loop -> the client closers started on it: strong references, so a loop's shutdown finds and runs them all.
_LOOP_CLOSERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[AsyncGenerator[None, None]]] = (
    weakref.WeakKeyDictionary()
)
_closers_lock = threading.Lock()


async def _closer(client: openai.AsyncOpenAI) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await client.close()


def _close_with_loop(client: openai.AsyncOpenAI) -> AsyncGenerator[None, None]:
    """An async generator, started and parked at its `yield`, that the running loop will finalise at shutdown
    (starting it registers it with the loop's asyncgen hooks); finalising it closes `client`."""
    gen = _closer(client)
    with contextlib.suppress(StopIteration):
        gen.__anext__().send(None)  # runs to the first yield without awaiting anything
    with _closers_lock:
        _LOOP_CLOSERS.setdefault(asyncio.get_running_loop(), []).append(gen)
    return gen


def _api_key(endpoint: ModelEndpoint, section: str) -> str:
    """The endpoint's key; ModelConfigError naming the setting when it cannot be served (checked when a model
    is built, so a wrong configuration is an error before any question, with no network call)."""
    if endpoint.offline:
        raise ModelConfigError(
            "the OpenAI backend was asked to serve an offline endpoint; use engines.models.factory",
            key=f"models.{section}.provider",
        )
    key = endpoint.api_key.get_secret_value() if endpoint.api_key else None
    if not key:
        raise ModelConfigError(
            f"models.{section}.api_key: no API key for model {endpoint.model!r} (set OPENAI_API_KEY)",
            key=f"models.{section}.api_key",
        )
    return key


def make_client(endpoint: ModelEndpoint, section: str = "chat") -> openai.AsyncOpenAI:
    """`section` is the config table the endpoint came from ("chat" or "embedding"), for error messages."""
    key = _api_key(endpoint, section)
    transport: dict[str, Any] = {}
    if endpoint.http_client != "httpx":
        try:
            transport["http_client"] = openai.DefaultAioHttpClient(timeout=endpoint.timeout_s)
        except (AttributeError, RuntimeError):  # an SDK without it, or the aiohttp extra is not installed
            if endpoint.http_client == "aiohttp":
                raise ModelConfigError(
                    f"models.{section}.http_client = 'aiohttp' needs the openai SDK's aiohttp transport "
                    "(pip install 'openai[aiohttp]')", key=f"models.{section}.http_client",
                ) from None
    if endpoint.provider == "azure":
        return openai.AsyncAzureOpenAI(
            azure_endpoint=endpoint.base_url or "",
            azure_deployment=endpoint.azure_deployment,
            api_version=endpoint.api_version,
            api_key=key,
            timeout=endpoint.timeout_s,
            max_retries=0,
            **transport,
        )
    return openai.AsyncOpenAI(api_key=key, base_url=endpoint.base_url, timeout=endpoint.timeout_s, max_retries=0,
                              **transport)


class _EndpointUser:
    """Shared plumbing: client pool, limiter, retry policy, readable endpoint name."""

    section: ClassVar[str] = "chat"  # the config table the endpoint comes from (for error messages)

    def __init__(self, endpoint: ModelEndpoint, prices: PriceTable | None, limiter_registry: LimiterRegistry | None) -> None:
        _api_key(endpoint, self.section)
        self.endpoint = endpoint
        self.name = endpoint.model
        self.offline = False
        self.prices = prices or PriceTable()
        self._clients = _ClientPool(endpoint, self.section)
        registry = limiter_registry or DEFAULT_LIMITERS
        self.limiter: ConcurrencyLimiter = registry.get(endpoint.limiter_key, endpoint.concurrency)
        self.policy = RetryPolicy(
            max_retries=endpoint.max_retries, total_deadline_s=endpoint.total_deadline_s, timeout_s=endpoint.timeout_s
        )
        self.base_url = endpoint.base_url or ("https://api.openai.com/v1" if endpoint.provider == "openai" else "azure")
        # Azure addresses a deployment, everything else a model name.
        self.api_model = endpoint.azure_deployment or endpoint.model

    async def aclose(self) -> None:
        """Close this event loop's HTTP client (others close when their loop is collected)."""
        await self._clients.aclose()

    async def aopen(self) -> None:
        """Make this event loop's HTTP client now (SDK client, transport session, TLS context: tens of ms
        the first call would otherwise pay); it is closed as `aclose` or the loop's shutdown closes it."""
        self._clients.get()

    async def _once(self, attempt: Callable[[float], Awaitable[T]], timeout_s: float) -> T:
        """One attempt, no retry, cut at `timeout_s` (a probe: it must answer within its short bound);
        failures are the typed errors every call raises."""
        policy = RetryPolicy(max_retries=0, total_deadline_s=timeout_s, timeout_s=timeout_s)
        return await call_with_retries(attempt, policy, base_url=self.base_url, model=self.name)


class OpenAIChatModel(_EndpointUser):
    """`ChatModel` on an OpenAI-compatible chat-completions endpoint."""

    def __init__(
        self,
        endpoint: ModelEndpoint,
        prices: PriceTable | None = None,
        *,
        limiter_registry: LimiterRegistry | None = None,
        cache: CallCache | None = None,
    ) -> None:
        super().__init__(endpoint, prices, limiter_registry)
        self.cache = cache

    # ----------------------------------------------------------------- helpers
    def _params(self, max_tokens: int | None, temperature: float | None,
                options: AnswerOptions | None = None) -> _Sampling:
        """The request's sampling fields; `options` are the caller's for the final answer (`capped` and
        `with_options` already applied to `max_tokens` and `temperature`)."""
        field_name = "max_completion_tokens" if _uses_max_completion_tokens(self.name) else "max_tokens"
        return _Sampling(max_tokens, field_name, temperature, options.sampling() if options is not None else {})

    def _json_mode(self, json_schema: type[BaseModel] | None) -> bool:
        if json_schema is None or self.endpoint.json_mode == "off":
            return False
        if self.endpoint.json_mode == "on":
            return True
        with _flags_lock:
            return self.endpoint.limiter_key not in _NO_JSON_MODE

    def _finish(self, messages: list[Message], text: str, usage: CompletionUsage | None, started: float) -> Completion:
        if usage is not None and isinstance(usage.prompt_tokens, int):
            prompt, output, estimated = usage.prompt_tokens, int(usage.completion_tokens or 0), False
        else:
            prompt, output, estimated = _estimate_prompt_tokens(messages), get_tokenizer().count(text), True
        return Completion(
            text=text,
            prompt_tokens=prompt,
            output_tokens=output,
            model=self.name,
            seconds=time.monotonic() - started,
            usage_estimated=estimated,
            cost=self.prices.cost(self.name, prompt, output),
        )

    def _cache_key(self, messages: list[Message], task: str, schema: type[BaseModel] | None,
                   max_tokens: int | None, temperature: float | None,
                   options: AnswerOptions | None = None) -> str | None:
        if self.cache is None or (options is not None and options.sampling()):
            return None  # a caller's own sampling (top_p, seed, penalties): asked of the model each time
        return completion_key(self.name, messages, task=task, schema_name=schema.__name__ if schema else None,
                              max_tokens=max_tokens, temperature=temperature)

    async def probe(self, timeout_s: float) -> str:
        """Ask the endpoint for its model list (no tokens spent): '' when it answers and lists this model (or
        lists none), else a note that it does not list it. Typed model errors when it cannot be reached or
        refuses the key."""

        async def attempt(timeout: float) -> set[str]:
            page = await self._clients.get().models.list(timeout=timeout)
            return {model.id for model in page.data if isinstance(model.id, str)}

        try:
            ids = await self._once(attempt, timeout_s)
        except ModelResponseError as err:
            if err.status_code in (404, 405):  # reachable, key accepted or not needed; no model list there
                return "the endpoint answers; it has no model list to check the model against"
            raise
        if not ids or self.api_model in ids:
            return ""
        return f"the endpoint does not list {self.api_model!r} among its {len(ids)} models"

    # ----------------------------------------------------------------- complete
    async def complete(
        self,
        messages: list[Message],
        *,
        task: str = "answer",
        json_schema: type[BaseModel] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        context: TaskContext | None = None,  # the messages already render it: sent as they are
    ) -> Completion:
        options = answer_options(task)
        max_tokens, temperature = _with_options(max_tokens, temperature, options)
        key = self._cache_key(messages, task, json_schema, max_tokens, temperature, options)
        if key is not None and self.cache is not None and (hit := self.cache.get(key)) is not None:
            return hit
        started = time.monotonic()
        use_json = self._json_mode(json_schema)
        try:
            response = await self._create(messages, max_tokens, temperature, use_json, options)
        except ModelResponseError as err:
            if not (use_json and self.endpoint.json_mode == "auto" and err.status_code in (400, 422)
                    and _mentions(err, "response_format", "json")):
                err.task = err.task or task
                raise
            with _flags_lock:  # the server does not do JSON mode: remember, and ask plainly
                _NO_JSON_MODE.add(self.endpoint.limiter_key)
            try:
                response = await self._create(messages, max_tokens, temperature, False, options)
            except ModelError as retry_err:
                retry_err.task = retry_err.task or task
                raise
        except ModelError as err:
            err.task = err.task or task
            raise
        text = _message_text(response)
        if text is None:
            raise ModelResponseError(f"model {self.name!r} at {self.base_url} returned no choices", task=task)
        completion = self._finish(messages, text, response.usage, started)
        if key is not None and self.cache is not None and text:
            self.cache.put(key, completion)
        return completion

    async def _create(self, messages: list[Message], max_tokens: int | None, temperature: float | None,
                      use_json: bool, options: AnswerOptions | None = None) -> ChatCompletion:
        sampling = self._params(max_tokens, temperature, options)

        async def attempt(timeout: float) -> ChatCompletion:
            try:
                return await _create_chat(self._clients.get(), self.api_model, messages, sampling, timeout,
                                          json_mode=use_json)
            except ValueError as err:  # the SDK could not parse the body (not JSON)
                raise ModelResponseError(
                    f"model {self.name!r} at {self.base_url} sent a body that is not valid JSON: {err}", retryable=True
                ) from None

        return await call_with_retries(attempt, self.policy, base_url=self.base_url, model=self.name,
                                       limiter=self.limiter)

    # ----------------------------------------------------------------- stream
    async def stream(
        self,
        messages: list[Message],
        *,
        task: str = "answer",
        max_tokens: int | None = None,
        temperature: float | None = None,
        context: TaskContext | None = None,  # the messages already render it: sent as they are
    ) -> AsyncIterator[str | Completion]:
        """Yield text deltas, then one final Completion.

        Retries cover opening the stream only; once text has been yielded a failure is raised as a
        typed error (the caller already showed part of the answer). The limiter slot is held for the
        whole stream, including backoff before it opens.
        """
        options = answer_options(task)
        max_tokens, temperature = _with_options(max_tokens, temperature, options)
        key = self._cache_key(messages, task, None, max_tokens, temperature, options)
        if key is not None and self.cache is not None and (hit := self.cache.get(key)) is not None:
            yield hit.text
            yield hit
            return
        started = time.monotonic()
        deadline = started + self.policy.total_deadline_s
        params = self._params(max_tokens, temperature, options)
        with _flags_lock:
            want_usage = self.endpoint.limiter_key not in _NO_STREAM_OPTIONS
        parts: list[str] = []
        usage: CompletionUsage | None = None
        async with self.limiter.slot():
            async def open_stream(timeout: float) -> openai.AsyncStream[object]:
                return await _open_raw_chat_stream(self._clients.get(), self.api_model, messages, params, timeout,
                                                   with_usage=want_usage)

            try:
                stream = await call_with_retries(open_stream, self.policy, base_url=self.base_url, model=self.name)
            except ModelResponseError as err:
                if not (want_usage and err.status_code in (400, 422) and _mentions(err, "stream_options")):
                    err.task = err.task or task
                    raise
                with _flags_lock:
                    _NO_STREAM_OPTIONS.add(self.endpoint.limiter_key)
                want_usage = False
                stream = await call_with_retries(open_stream, self.policy, base_url=self.base_url, model=self.name)
            except ModelError as err:
                err.task = err.task or task
                raise
            iterator = stream.__aiter__()
            try:
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise ModelTimeoutError(
                            f"model {self.name!r} at {self.base_url}: stream passed the "
                            f"{self.policy.total_deadline_s:g} s deadline", task=task)
                    try:
                        chunk = await asyncio.wait_for(iterator.__anext__(), min(self.policy.timeout_s, remaining))
                    except StopAsyncIteration:
                        break
                    usage = _chunk_usage(chunk) or usage
                    for delta in _delta_texts(chunk):
                        parts.append(delta)
                        yield delta
            except (openai.OpenAIError, TimeoutError) as exc:
                failure = classify(exc, base_url=self.base_url, model=self.name, timeout_s=self.policy.timeout_s)
                failure.error.message += " (while streaming; the partial answer was discarded)"
                failure.error.task = task
                raise failure.error from None
            finally:
                await stream.close()
        completion = self._finish(messages, "".join(parts), usage, started)
        if key is not None and self.cache is not None and completion.text:
            self.cache.put(key, completion)
        yield completion


class OpenAIEmbedder(_EndpointUser):
    """`Embedder` on `/v1/embeddings`: batched, concurrent within the limiter, float32 output."""

    section = "embedding"

    def __init__(
        self,
        endpoint: ModelEndpoint,
        prices: PriceTable | None = None,
        *,
        limiter_registry: LimiterRegistry | None = None,
        cache: CallCache | None = None,
    ) -> None:
        super().__init__(endpoint, prices, limiter_registry)
        self.dim = endpoint.dimensions or 0  # learned from the first reply when not configured
        self.cache = cache

    async def probe(self, timeout_s: float) -> str:
        """Embed one short text with a single attempt cut at `timeout_s`: the endpoint answers, and the vector
        size is learned when not configured (`dim`). '' on success; typed model errors otherwise."""

        async def attempt(timeout: float) -> CreateEmbeddingResponse:
            return await self._request(["dimension probe"], timeout)

        response = await self._once(attempt, timeout_s)
        sizes = {len(row.embedding) for row in response.data}
        if len(sizes) != 1:
            raise ModelResponseError(f"embedding model {self.name!r} at {self.base_url} returned no usable vector")
        size = sizes.pop()
        if self.dim and size != self.dim:
            raise ModelResponseError(
                f"embedding model {self.name!r} at {self.base_url} returned vectors of size {size}, "
                f"expected {self.dim}")
        self.dim = size
        return ""

    async def _request(self, texts: list[str], timeout: float) -> CreateEmbeddingResponse:
        extra: dict[str, Any] = {"dimensions": self.endpoint.dimensions} if self.endpoint.dimensions else {}
        try:
            return await self._clients.get().embeddings.create(model=self.api_model, input=texts, timeout=timeout,
                                                                **extra)
        except ValueError as err:
            raise ModelResponseError(
                f"embedding model {self.name!r} at {self.base_url} sent an unusable body: {err}", retryable=True
            ) from None

    async def _embed_batch(self, texts: list[str]) -> tuple[np.ndarray, int | None]:
        async def attempt(timeout: float) -> CreateEmbeddingResponse:
            return await self._request(texts, timeout)

        response = await call_with_retries(attempt, self.policy, base_url=self.base_url, model=self.name,
                                           limiter=self.limiter)
        rows = sorted(response.data, key=lambda d: d.index)
        if len(rows) != len(texts):
            raise ModelResponseError(
                f"embedding model {self.name!r} returned {len(rows)} vectors for {len(texts)} inputs")
        vectors = np.asarray([r.embedding for r in rows], dtype=np.float32)
        tokens = getattr(response.usage, "prompt_tokens", None) if response.usage is not None else None
        return vectors, tokens

    async def embed(self, texts: list[str]) -> EmbeddingResult:
        started = time.monotonic()
        tok = get_tokenizer()
        # The API rejects empty strings and inputs over its token limit.
        prepared = [tok.truncate(t, EMBEDDING_MAX_TOKENS) if t.strip() else " " for t in texts]
        keys = [embedding_key(self.name, self.endpoint.dimensions, t) for t in prepared] if self.cache is not None else []
        cached = self.cache.get_vectors(keys) if self.cache is not None else {}
        todo = [i for i in range(len(prepared)) if not keys or keys[i] not in cached]
        size = self.endpoint.batch_size
        batches = [todo[s : s + size] for s in range(0, len(todo), size)]
        results = await asyncio.gather(*(self._embed_batch([prepared[i] for i in b]) for b in batches))
        out: list[np.ndarray | None] = [None] * len(prepared)
        prompt_tokens, estimated = 0, False
        for i in range(len(prepared)):
            if keys and keys[i] in cached:
                out[i] = cached[keys[i]][0]
        new_items: list[tuple[str, np.ndarray, int]] = []
        for batch, (vectors, tokens) in zip(batches, results, strict=True):
            counts = [tok.count(prepared[i]) for i in batch]
            if tokens is None:
                estimated = True
                tokens = sum(counts)
            prompt_tokens += tokens
            for row, i in enumerate(batch):
                out[i] = vectors[row]
                if keys:
                    new_items.append((keys[i], vectors[row], counts[row]))
        if new_items and self.cache is not None:
            self.cache.put_vectors(self.name, new_items)
        dims = {v.shape[0] for v in out if v is not None}
        if len(dims) > 1 or (self.dim and dims and dims != {self.dim}):
            raise ModelResponseError(
                f"embedding model {self.name!r} returned vectors of size {sorted(dims)}, expected {self.dim or 'one size'}"
            )
        if dims and not self.dim:
            self.dim = dims.pop()
        matrix = (np.vstack([v for v in out if v is not None]).astype(np.float32) if prepared
                  else np.zeros((0, self.dim), dtype=np.float32))
        return EmbeddingResult(
            vectors=matrix,
            prompt_tokens=prompt_tokens,
            model=self.name,
            seconds=time.monotonic() - started,
            usage_estimated=estimated,
            cost=self.prices.cost(self.name, prompt_tokens),
        )
