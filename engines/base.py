"""Shared engine plumbing: model resolution, the per-query run (usage, degradations, events) and streaming.

Design: an engine keeps only immutable things (index, models, config). Everything a query changes lives in
a fresh `QueryRun`, so one engine can serve many concurrent queries. `search()` consumes `stream()`, so
both run the very same pipeline and return the very same result.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import numpy as np
from pydantic import BaseModel

from engines.citations import context_ids_of_messages, resolve_citations, union_ids
from engines.errors import EngineError
from engines.events import AnswerDelta, Event, Final, Progress
from engines.models.base import ChatModel, Completion, Embedder, Message
from engines.models.errors import ModelError, StructuredOutputError
from engines.result import Degradation, SearchResult
from engines.usage import Usage

if TYPE_CHECKING:
    from engines.config import GraphrouteConfig
    from shared_context.index import Index

S = TypeVar("S", bound=BaseModel)
T = TypeVar("T")
R = TypeVar("R")

# Questions longer than this are refused; longer than LINK_TOKENS are cut for entity linking only.
MAX_QUESTION_TOKENS = 8_000
LINK_TOKENS = 1_000

HistoryLike = Sequence[Message | str | Mapping[str, Any]] | None


class ModelSet:
    """The chat model per stage, the embedder and prices, whatever form the caller gave them in."""

    def __init__(
        self,
        index: Index,
        model: Any = None,
        embedder: Embedder | None = None,
        graphroute_config: GraphrouteConfig | None = None,
    ) -> None:
        self._bundle: Any = None
        self._single: ChatModel | None = None
        self.prices: Any = None
        if model is None:
            model = _default_models(index, graphroute_config)
        if hasattr(model, "chat") and callable(model.chat) and not hasattr(model, "complete"):
            self._bundle = model
            self.embedder = embedder if embedder is not None else getattr(model, "embedder", None)
            cfg = getattr(model, "config", None)
            self.prices = getattr(cfg, "prices", None)
        elif isinstance(model, ChatModel):
            self._single = model
            self.embedder = embedder
        else:
            raise TypeError(
                f"model must be a ChatModel, an engines.models.factory.Models bundle or None, got {type(model).__name__}"
            )

    def chat(self, stage: str) -> ChatModel:
        if self._bundle is not None:
            chat: ChatModel = self._bundle.chat(stage)
            return chat
        assert self._single is not None
        return self._single

    @property
    def offline(self) -> bool:
        return bool(getattr(self.chat("answer"), "offline", False))

    def cost(self, stage: str, prompt_tokens: int, output_tokens: int) -> float:
        """Price of a hypothetical call (for estimates); 0 for offline or unknown models."""
        model = self.chat(stage)
        if getattr(model, "offline", False) or self.prices is None:
            return 0.0
        try:
            return float(self.prices.cost(model.name, prompt_tokens, output_tokens))
        except Exception:  # an estimate must never fail on a price lookup
            return 0.0


def _default_models(index: Index, graphroute_config: GraphrouteConfig | None) -> Any:
    """The configured model stack (offline by default: extractive chat model + TF-IDF embedder)."""
    from engines.config import GraphrouteConfig
    from engines.models.factory import Models

    return Models.from_config((graphroute_config or GraphrouteConfig()).models, index=index)


def normalise_history(history: HistoryLike) -> list[Message]:
    """Accept a list of strings (earlier user questions) or of role/content messages."""
    if not history:
        return []
    out: list[Message] = []
    for i, item in enumerate(history):
        if isinstance(item, str):
            out.append({"role": "user", "content": item})
        elif isinstance(item, Mapping) and "role" in item and "content" in item:
            role = str(item["role"])
            if role not in ("user", "assistant", "system"):
                raise ValueError(f"history item {i} has unknown role {role!r} (use 'user', 'assistant' or 'system')")
            out.append({"role": role, "content": str(item["content"])})
        else:
            raise ValueError(f"history item {i} must be a string or a {{'role', 'content'}} message")
    return out


def check_question(question: str, index: Index) -> tuple[str, str | None]:
    """(question to use for linking, degradation note or None); raises ValueError on bad input."""
    if not isinstance(question, str):
        raise ValueError(f"question must be a string, got {type(question).__name__}")
    if not question.strip():
        raise ValueError("question is empty")
    tokens = index.tokenizer.count(question)
    if tokens > MAX_QUESTION_TOKENS:
        raise ValueError(f"question is too long: {tokens} tokens (the limit is {MAX_QUESTION_TOKENS})")
    if tokens > LINK_TOKENS:
        return index.tokenizer.truncate(question, LINK_TOKENS), (
            f"question has {tokens} tokens; only its first {LINK_TOKENS} were used to find entities"
        )
    return question.strip(), None


class QueryRun:
    """Everything one query accumulates: usage per stage, degradations, details and the event stream."""

    def __init__(
        self,
        engine: str,
        question: str,
        models: ModelSet,
        emit: Callable[[Event], Awaitable[None]],
        link_text: str | None = None,
    ):
        self.engine = engine
        self.question = question
        self.link_text = question if link_text is None else link_text  # the question as used for linking
        self.models = models
        self.usage = Usage()
        self.degraded: list[Degradation] = []
        self.details: dict[str, Any] = {}
        self._emit = emit
        self.started = time.perf_counter()
        # (kind, id) of every context row any model call of this query was given: citation validity.
        self.shown: set[tuple[str, str]] = set()

    async def emit(self, event: Event) -> None:
        await self._emit(event)

    async def progress(self, stage: str, message: str, step: int = 0, total: int = 0) -> None:
        await self._emit(Progress(stage=stage, message=message, step=step, total=total))

    def degrade(self, stage: str, reason: str) -> None:
        self.degraded.append(Degradation(stage=stage, reason=reason))

    @contextlib.contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        """Wall seconds of a stage (concurrent calls inside count once, as the user waits once)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.usage.add_seconds(stage, time.perf_counter() - t0)

    def _record(self, stage: str, completions: Sequence[Completion]) -> None:
        for c in completions:
            self.usage.add_completion(stage, c)

    async def complete(
        self,
        stage: str,
        task: str,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        self.shown |= context_ids_of_messages(messages)
        try:
            completion = await self.models.chat(stage).complete(
                messages, task=task, max_tokens=max_tokens, temperature=temperature
            )
        except ModelError as err:
            raise _with_where(err, stage, task) from None
        self._record(stage, [completion])
        return completion

    async def complete_json(
        self,
        stage: str,
        task: str,
        messages: list[Message],
        schema: type[S],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> S:
        """Parsed output; every call made (including a failed repair retry) is counted in usage."""
        from engines.models.structured import complete_json

        self.shown |= context_ids_of_messages(messages)
        try:
            parsed, completions = await complete_json(
                self.models.chat(stage), messages, schema, task=task, max_tokens=max_tokens, temperature=temperature
            )
        except StructuredOutputError as err:
            self._record(stage, err.completions)
            raise
        except ModelError as err:
            raise _with_where(err, stage, task) from None
        self._record(stage, completions)
        return parsed

    async def stream_answer(
        self,
        stage: str,
        task: str,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        """Stream the final answer as `AnswerDelta` events; returns the final completion (text + usage)."""
        final: Completion | None = None
        self.shown |= context_ids_of_messages(messages)
        try:
            async for piece in self.models.chat(stage).stream(
                messages, task=task, max_tokens=max_tokens, temperature=temperature
            ):
                if isinstance(piece, Completion):
                    final = piece
                elif piece:
                    await self._emit(AnswerDelta(piece))
        except ModelError as err:
            raise EngineError(f"the model failed while writing the answer: {err}", stage=stage, engine=self.engine) from None
        if final is None:
            raise EngineError("the model stream ended without a final completion", stage=stage, engine=self.engine)
        self._record(stage, [final])
        return final

    async def embed(self, stage: str, texts: list[str]) -> np.ndarray | None:
        """Query vectors, or None when there is no embedder or it fails (a degradation, lexical fallback)."""
        embedder = self.models.embedder
        if embedder is None or not texts:
            return None
        try:
            result = await embedder.embed(texts)
        except ModelError as err:
            self.degrade(stage, f"embedding failed, lexical matching used instead: {err}")
            return None
        self.usage.add_embedding(stage, result)
        vectors: np.ndarray = result.vectors
        return vectors

    def finish(
        self,
        index: Index,
        *,
        response: str,
        context_text: str = "",
        context_records: dict[str, list[dict[str, Any]]] | None = None,
        empty: bool = False,
        cite_text: str | None = None,
    ) -> SearchResult:
        """Assemble the result; citations are resolved from `cite_text` (default: the response)."""
        citations = resolve_citations(index, response if cite_text is None else cite_text, self.shown)
        units, docs = union_ids(citations)
        answer_model = self.models.chat("answer")
        return SearchResult(
            engine=self.engine,
            question=self.question,
            response=response,
            context_text=context_text,
            context_records=context_records or {},
            citations=citations,
            text_unit_ids=units,
            document_ids=docs,
            usage=self.usage,
            degraded=list(self.degraded),
            empty=empty,
            model=answer_model.name,
            offline=bool(getattr(answer_model, "offline", False)),
            seconds=time.perf_counter() - self.started,
            details=self.details,
        )


def _with_where(err: ModelError, stage: str, task: str) -> ModelError:
    if err.stage is None:
        err.stage = stage
    if err.task is None:
        err.task = task
    return err


def vector_for(index: Index, table: str, models: ModelSet) -> bool:
    """True when the index has vectors for `table` that the configured embedder can query."""
    vt = index.vectors.get(table)
    emb = models.embedder
    return vt is not None and emb is not None and len(vt) > 0 and vt.dim == emb.dim


class Engine:
    """Base of every engine: construction, input checks, `search()` = consume `stream()`."""

    name: ClassVar[str] = "engine"
    # The engine's section of GraphrouteConfig: its attribute name and its type.
    section_name: ClassVar[str]
    section_type: ClassVar[type[BaseModel]]

    def __init__(
        self,
        index: Index,
        model: Any = None,
        *,
        embedder: Embedder | None = None,
        config: Any = None,
    ) -> None:
        from engines.config import GraphrouteConfig

        self.index = index
        full = config if isinstance(config, GraphrouteConfig) else None
        self.config = self._section(config)
        self.models = ModelSet(index, model, embedder, full)

    def _section(self, config: Any) -> Any:
        """The engine's own config section, from its section object, a whole GraphrouteConfig, or None."""
        from engines.config import GraphrouteConfig

        if config is None:
            return self.section_type()
        if isinstance(config, GraphrouteConfig):
            return getattr(config, self.section_name)
        if isinstance(config, self.section_type):
            return config
        raise TypeError(
            f"{type(self).__name__} config must be a {self.section_type.__name__} or GraphrouteConfig, "
            f"got {type(config).__name__}"
        )

    async def _run(self, run: QueryRun, question: str, history: list[Message]) -> SearchResult:
        raise NotImplementedError

    async def search(self, question: str, history: HistoryLike = None) -> SearchResult:
        async for event in self.stream(question, history):
            if isinstance(event, Final):
                return event.result
        raise EngineError("the pipeline ended without a result", stage="answer", engine=self.name)

    async def stream(self, question: str, history: HistoryLike = None) -> AsyncIterator[Event]:
        """Progress events, then the answer's deltas, then `Final(result)`; errors are raised here."""
        link_text, note = check_question(question, self.index)
        messages = normalise_history(history)
        queue: asyncio.Queue[Event | BaseException | None] = asyncio.Queue()

        async def emit(event: Event) -> None:
            await queue.put(event)

        run = QueryRun(self.name, question.strip(), self.models, emit, link_text)
        if note:
            run.degrade("entity_link", note)

        async def drive() -> None:
            try:
                result = await self._run(run, question.strip(), messages)
                await queue.put(Final(result))
                await queue.put(None)
            except BaseException as err:  # handed to the consumer, which re-raises it
                await queue.put(err)

        task = asyncio.create_task(drive())
        try:
            while True:
                item = await queue.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                yield item
                if isinstance(item, Final):
                    continue
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


async def gather_bounded(limit: int, fn: Callable[[T], Awaitable[R]], items: Sequence[T]) -> list[R | BaseException]:
    """`fn(item)` for every item with at most `limit` in flight; results in item order, exceptions returned."""
    sem = asyncio.Semaphore(max(1, limit))

    async def one(item: T) -> R:
        async with sem:
            return await fn(item)

    return list(await asyncio.gather(*(one(it) for it in items), return_exceptions=True))


def make_params(params_cls: Any, values: Mapping[str, Any]) -> Any:
    """Build a builder's params object from the fields it declares (pydantic or dataclass)."""
    import dataclasses

    if hasattr(params_cls, "model_fields"):
        known = set(params_cls.model_fields)
    elif dataclasses.is_dataclass(params_cls):
        known = {f.name for f in dataclasses.fields(params_cls)}
    else:
        known = set(values)
    return params_cls(**{k: v for k, v in values.items() if k in known})


def reraise_bugs(results: Sequence[Any]) -> None:
    """Model/engine failures degrade; anything else (a programming error) must surface."""
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, ModelError | EngineError):
            raise r
