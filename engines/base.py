"""Shared engine plumbing: model resolution, the per-query run (usage, degradations, events) and streaming.

Design: an engine keeps only immutable things (index, models, config). Everything a query changes lives in
a fresh `QueryRun`, so one engine can serve many concurrent queries. `search()` consumes `stream()`, so
both run the very same pipeline and return the very same result.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import time
import unicodedata
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, TypeVar

import numpy as np
from pydantic import BaseModel

from engines.citations import context_ids_of_messages, resolve_citations, union_ids
from engines.errors import DeadlineExceeded, EngineError, attach_usage
from engines.events import AnswerDelta, Event, Final, Progress
from engines.latency import LATENCY, latency_key
from engines.models.base import ChatModel, Completion, Embedder, EmbeddingResult, Message, is_local_embedder
from engines.models.errors import ModelError, StructuredOutputError
from engines.models.structured import leading_reasoning_done, strip_reasoning
from engines.plan import QueryPlan
from engines.result import Degradation, SearchResult
from engines.usage import Usage
from shared_context.vectors import vector_table

if TYPE_CHECKING:
    from engines.config import GraphrouteConfig
    from engines.models.factory import Models
    from shared_context.index import Index

# What engines accept as `model`: one chat model for every stage, the configured bundle, or None (from config).
ModelLike: TypeAlias = "ChatModel | Models | None"
# An engine's `config`: its own section, the whole GraphrouteConfig, or None (defaults).
ConfigLike: TypeAlias = "BaseModel | None"

S = TypeVar("S", bound=BaseModel)
T = TypeVar("T")
R = TypeVar("R")

# Questions longer than this are refused; longer than LINK_TOKENS are cut for entity linking only.
MAX_QUESTION_TOKENS = 8_000
LINK_TOKENS = 1_000
# History bounds, checked before any linking: one message, the number of messages and their total kept.
MAX_TURN_TOKENS = 4_000
MAX_HISTORY_MESSAGES = 50
MAX_HISTORY_TOKENS = 16_000
# How many findings a run cut by its deadline shows instead of the final answer.
_DEADLINE_FINDINGS = 8

HistoryLike = Sequence[Message | str | Mapping[str, Any]] | None


class ModelSet:
    """The chat model per stage, the embedder and prices, whatever form the caller gave them in."""

    def __init__(
        self,
        index: Index,
        model: ModelLike = None,
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
        return float(self.prices.cost(model.name, prompt_tokens, output_tokens))  # unknown model: 0, warned once


def _default_models(index: Index, graphroute_config: GraphrouteConfig | None) -> Any:
    """The configured model stack (offline by default: extractive chat model + TF-IDF embedder)."""
    from engines.config import GraphrouteConfig
    from engines.models.factory import Models

    return Models.from_config((graphroute_config or GraphrouteConfig()).models, index=index)


def normalise_history(history: HistoryLike) -> list[Message]:
    """Accept a list of strings (earlier user questions) or of role/content messages; anything else is a
    ValueError naming the item (a bare string would otherwise be read one character per turn)."""
    if history is None:
        return []
    if isinstance(history, str | bytes) or not isinstance(history, Sequence):
        raise ValueError(
            f"history must be a list of earlier questions or {{'role', 'content'}} messages, "
            f"got {type(history).__name__}"
        )
    out: list[Message] = []
    for i, item in enumerate(history):
        if isinstance(item, str):
            out.append({"role": "user", "content": _valid_text(item, f"history item {i}")})
        elif isinstance(item, Mapping) and "role" in item and "content" in item:
            role = item["role"]
            if role not in ("user", "assistant", "system"):
                raise ValueError(f"history item {i} has unknown role {role!r} (use 'user', 'assistant' or 'system')")
            content = item["content"]
            if not isinstance(content, str):  # None would become the text "None"
                raise ValueError(f"history item {i} content must be a string, got {type(content).__name__}")
            out.append({"role": role, "content": _valid_text(content, f"history item {i}")})
        else:
            raise ValueError(f"history item {i} must be a string or a {{'role', 'content'}} message")
    return out


def limit_history(turns: list[Message], tokenizer: Any) -> tuple[list[Message], str | None]:
    """Bound the history before any linking: one oversized message is a ValueError naming it; beyond
    MAX_HISTORY_MESSAGES messages or MAX_HISTORY_TOKENS tokens the oldest are dropped (with a note)."""
    sizes = []
    for i, turn in enumerate(turns):
        text = turn["content"]
        # A cheap bound first: a token is rarely under 1/16 of a character, so huge texts are refused
        # without paying to tokenise them.
        tokens = MAX_TURN_TOKENS + 1 if len(text) > 16 * MAX_TURN_TOKENS else tokenizer.count(text)
        if tokens > MAX_TURN_TOKENS:
            size = f"{tokens:,} tokens" if len(text) <= 16 * MAX_TURN_TOKENS else f"{len(text):,} characters"
            raise ValueError(
                f"history item {i} is too long: {size} (the limit is {MAX_TURN_TOKENS:,} tokens per message)"
            )
        sizes.append(tokens)
    kept, total = 0, 0
    for tokens in reversed(sizes):
        if kept == MAX_HISTORY_MESSAGES or total + tokens > MAX_HISTORY_TOKENS:
            break
        kept, total = kept + 1, total + tokens
    if kept == len(turns):
        return turns, None
    return turns[len(turns) - kept :], (
        f"only the newest {kept} of {len(turns)} history messages were used (limits: {MAX_HISTORY_MESSAGES} "
        f"messages, {MAX_HISTORY_TOKENS:,} tokens)"
    )


def _valid_text(text: str, what: str) -> str:
    """`text`, or a ValueError when it holds a lone surrogate (not Unicode text; it cannot be sent)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"{what} is not valid Unicode text: lone surrogate U+{ord(text[err.start]):04X} at position {err.start}"
        ) from None
    return text


_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})


def _has_visible(text: str) -> bool:
    return any(unicodedata.category(ch) not in _INVISIBLE for ch in text)


def plan_question(question: str, index: Index) -> QueryPlan:
    """The question checked once (ValueError on bad input), as the `QueryPlan` the pipeline hands on."""
    link_text, note = check_question(question, index)
    return QueryPlan(question.strip(), link_text, note)


def check_question(question: str, index: Index) -> tuple[str, str | None]:
    """(question to use for linking, degradation note or None); raises ValueError on bad input."""
    if not isinstance(question, str):
        raise ValueError(f"question must be a string, got {type(question).__name__}")
    if not question.strip():
        raise ValueError("question is empty")
    if len(question) > 16 * MAX_QUESTION_TOKENS:  # refused before paying to tokenise it
        raise ValueError(f"question is too long: {len(question):,} characters (the limit is "
                         f"{MAX_QUESTION_TOKENS} tokens)")
    _valid_text(question, "question")
    if not _has_visible(question):
        raise ValueError("question is empty: it has only invisible characters (control, zero-width or bidi marks)")
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
        deadline: float | None = None,
    ):
        self.engine = engine
        self.question = question
        self.link_text = question if link_text is None else link_text  # the question as used for linking
        self.plan: QueryPlan | None = None  # what the router already computed for this question
        self.models = models
        self.usage = Usage()
        self.degraded: list[Degradation] = []
        self.details: dict[str, Any] = {}
        self._emit = emit
        self.started = time.perf_counter()
        # The question's deadline (a time.perf_counter() instant) and what is kept for it: findings as they
        # arrive and the answer text streamed so far, so a cut-off run still has something to return.
        self.deadline = deadline
        self.findings: list[tuple[float, str]] = []
        self.streamed: list[str] = []
        self.open_stream: tuple[str, list[Message], str] | None = None  # (stage, messages, model) being streamed
        self.longest_call_s = 0.0
        self.stage_now = "answer"  # the stage running now (named when the deadline cuts it)
        # (kind, id) of every context row any model call of this query was given: citation validity.
        self.shown: dict[tuple[str, str], None] = {}  # ordered set: first call's rows first
        # False when nobody shows the answer as it is written (`Router.aask`): with no deadline to cut it, the
        # final answer is then one plain model call (no SSE to decode: a third of the SDK's cost per answer).
        self.deltas = True

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.perf_counter()

    def should_wrap_up(self) -> bool:
        """True when there is only time left for the final call: twice the slowest call seen so far, and
        at least a fifth of the whole deadline (optional exploration stops here)."""
        left = self.time_left()
        if left is None or self.deadline is None:
            return False
        reserve = max(2.0 * self.longest_call_s, 0.2 * (self.deadline - self.started))
        return left < reserve

    def add_finding(self, score: float, text: str) -> None:
        """A partial result (a map point, a DRIFT intermediate answer) usable if the deadline cuts the run."""
        if text.strip() and math.isfinite(score) and score > 0:
            self.findings.append((float(score), text.strip()))

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
        self.stage_now = stage
        try:
            yield
        finally:
            self.usage.add_seconds(stage, time.perf_counter() - t0)

    def _record(self, stage: str, completions: Sequence[Completion]) -> None:
        model = self.models.chat(stage)
        for c in completions:
            self.usage.add_completion(stage, c)
            if not c.cached:
                self.longest_call_s = max(self.longest_call_s, float(c.seconds))
                if not getattr(model, "offline", False):  # what estimates learn the endpoint's speed from
                    LATENCY.observe(latency_key(model), float(c.seconds), c.output_tokens)

    async def complete(
        self,
        stage: str,
        task: str,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> Completion:
        self.shown.update(dict.fromkeys(context_ids_of_messages(messages)))
        try:
            completion = await self.models.chat(stage).complete(
                messages, task=task, max_tokens=max_tokens, temperature=temperature
            )
        except ModelError as err:
            raise _with_where(err, stage, task) from None
        self._record(stage, [completion])
        return _without_reasoning(completion)

    async def complete_json(
        self,
        stage: str,
        task: str,
        messages: list[Message],
        schema: type[S],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        context_ids: Sequence[tuple[str, str]] | None = None,
    ) -> S:
        """Parsed output; every call made (including a failed repair retry) is counted in usage.
        `context_ids` as in `stream_answer`."""
        from engines.models.structured import complete_json

        shown = context_ids if context_ids is not None else context_ids_of_messages(messages)
        self.shown.update(dict.fromkeys(shown))
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
        context_ids: Sequence[tuple[str, str]] | None = None,
    ) -> Completion:
        """Stream the final answer as `AnswerDelta` events; returns the final completion (text + usage).

        `context_ids`: the (kind, id) rows the messages show, when the caller has them from the built context
        (`citations.built_context_ids`); else they are parsed from the messages."""
        model = self.models.chat(stage)
        self.streamed = []
        self.open_stream = (stage, messages, model.name)
        shown = context_ids if context_ids is not None else context_ids_of_messages(messages)
        self.shown.update(dict.fromkeys(shown))
        whole = not self.deltas and self.deadline is None  # nobody watches it being written, nothing cuts it
        final: Completion | None
        try:
            if whole:
                final = await model.complete(messages, task=task, max_tokens=max_tokens, temperature=temperature)
            else:
                final = await self._stream_pieces(model, messages, task, max_tokens, temperature)
        except ModelError as err:
            raise EngineError(f"the model failed while writing the answer: {err}", stage=stage, engine=self.engine) from None
        if final is None:
            raise EngineError("the model stream ended without a final completion", stage=stage, engine=self.engine)
        self.open_stream = None
        self._record(stage, [final])
        final = _without_reasoning(final)
        if whole and final.text:
            await self._emit(AnswerDelta(final.text))
        return final

    async def _stream_pieces(
        self, model: ChatModel, messages: list[Message], task: str,
        max_tokens: int | None, temperature: float | None,
    ) -> Completion | None:
        """Emit the streamed answer as `AnswerDelta`s (a leading <think> block held back, never shown) and
        return the stream's final completion (None if it sent none)."""
        final: Completion | None = None
        held, reasoning_done = "", False
        async for piece in model.stream(messages, task=task, max_tokens=max_tokens, temperature=temperature):
            if isinstance(piece, Completion):
                final = piece
            elif piece and reasoning_done:
                self.streamed.append(piece)
                await self._emit(AnswerDelta(piece))
            elif piece:
                held += piece
                visible, reasoning_done = leading_reasoning_done(held)
                if visible:
                    self.streamed.append(visible)
                    await self._emit(AnswerDelta(visible))
        return final

    def cut_at_deadline(self, index: Index, deadline_s: float) -> SearchResult:
        """The best partial result when the deadline stops the run, or `DeadlineExceeded` carrying the usage.

        The answer streamed so far wins (it is the answer, cut short); else the findings gathered so far,
        best first. The unfinished streamed call is counted with estimated usage: it was paid for.
        """
        if self.open_stream is not None:
            stage, messages, model = self.open_stream
            text = "".join(self.streamed)
            prompt = sum(index.tokenizer.count(str(m.get("content") or "")) + 3 for m in messages) + 3
            self.usage.add_completion(stage, Completion(
                text, prompt, index.tokenizer.count(text), model, time.perf_counter() - self.started,
                usage_estimated=True,
            ))
            self.open_stream = None
        stage = self.stage_now
        streamed = "".join(self.streamed).strip()
        if streamed:
            self.degrade(stage, f"deadline of {deadline_s:g} s reached while the answer was written; it is cut short")
            return self.finish(index, response=streamed)
        if self.findings:
            best = sorted(self.findings, key=lambda f: -f[0])[:_DEADLINE_FINDINGS]
            self.degrade(stage, f"deadline of {deadline_s:g} s reached before the final answer; "
                                f"the {len(best)} best findings so far are shown unmerged")
            return self.finish(index, response="\n\n".join(text for _, text in best))
        raise DeadlineExceeded(deadline_s, stage=stage, engine=self.engine, usage=self.usage)

    async def embed(self, stage: str, texts: list[str]) -> np.ndarray | None:
        """Query vectors, or None when there is no embedder or it fails (a degradation, lexical fallback)."""
        embedder = self.models.embedder
        if embedder is None or not texts:
            return None
        try:
            result = await embedder.embed(texts)
        except ModelError as err:
            self._embedding_failed(stage, err)
            return None
        return self._embedded(stage, result)

    @property
    def embeds_locally(self) -> bool:
        """The embedder computes here, with no network call (`LocalEmbedder`): `embed_sync` may run in the
        worker thread that builds the context, one hop instead of two."""
        return is_local_embedder(self.models.embedder)

    def embed_sync(self, stage: str, texts: list[str]) -> np.ndarray | None:
        """`embed` in the caller's thread, for a `LocalEmbedder` (same degradation and usage)."""
        embedder = self.models.embedder
        if not is_local_embedder(embedder) or not texts:
            return None
        try:
            result = embedder.embed_sync(texts)
        except ModelError as err:
            self._embedding_failed(stage, err)
            return None
        return self._embedded(stage, result)

    def _embedding_failed(self, stage: str, err: ModelError) -> None:
        self.degrade(stage, f"embedding failed, lexical matching used instead: {err}")

    def _embedded(self, stage: str, result: EmbeddingResult) -> np.ndarray:
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
        response = strip_reasoning(response)
        if not response.strip():  # never a silent empty answer: say so, and let the router escalate
            self.degrade(self.stage_now, "the model returned an empty answer")
            empty = True
        citations = resolve_citations(index, response if cite_text is None else cite_text, set(self.shown))
        units, docs = union_ids(citations)
        answer_model = self.models.chat("answer")
        return SearchResult(
            engine=self.engine,
            question=self.question,
            response=response,
            context_text=context_text,
            context_records=context_records or {},
            citations=citations,
            context_ids=list(self.shown),
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


def _without_reasoning(completion: Completion) -> Completion:
    text = strip_reasoning(completion.text)
    return completion if text == completion.text else dataclasses.replace(completion, text=text)


def _with_where(err: ModelError, stage: str, task: str) -> ModelError:
    if err.stage is None:
        err.stage = stage
    if err.task is None:
        err.task = task
    return err


def vector_for(index: Index, table: str, models: ModelSet) -> bool:
    """True when the index has vectors for `table` that the configured embedder can query."""
    vt = vector_table(index, table)
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
        model: ModelLike = None,
        *,
        embedder: Embedder | None = None,
        config: ConfigLike = None,
    ) -> None:
        from engines.config import GraphrouteConfig

        self.index = index
        full = config if isinstance(config, GraphrouteConfig) else None
        if full is not None:
            from shared_context.search_backend import configure_search

            configure_search(index, full.search)
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

    async def search(
        self, question: str, history: HistoryLike = None, *, deadline_s: float | None = None,
        plan: QueryPlan | None = None,
    ) -> SearchResult:
        async for event in self.stream(question, history, deadline_s=deadline_s, plan=plan):
            if isinstance(event, Final):
                return event.result
        raise EngineError("the pipeline ended without a result", stage="answer", engine=self.name)

    async def stream(
        self,
        question: str,
        history: HistoryLike = None,
        *,
        deadline_s: float | None = None,
        deadline: float | None = None,
        plan: QueryPlan | None = None,
        deltas: bool = True,
    ) -> AsyncIterator[Event]:
        """Progress events, then the answer's deltas, then `Final(result)`; errors are raised here.

        `deltas=False`: the caller only wants the result, so without a deadline the answer is not streamed
        from the model (one `AnswerDelta` with the whole text); with one it is, so a cut keeps what was written.

        A deadline (`deadline_s` seconds from now, or the `time.perf_counter()` instant `deadline`, then
        `deadline_s` only names it) stops the run when it passes: the result is then the best partial
        answer, marked degraded, or the stream raises `DeadlineExceeded`. Every error raised here carries
        the usage spent (`.usage`). `plan`: the router's `QueryPlan` for this question (checked once, its
        linking and an estimate's context reused); made here when absent.
        """
        if plan is None or plan.question != question.strip():
            plan = plan_question(question, self.index)
        link_text, note = plan.link_text, plan.note
        messages, history_note = limit_history(normalise_history(history), self.index.tokenizer)
        if deadline is None and deadline_s is not None:
            deadline = time.perf_counter() + deadline_s
        total_s = deadline_s if deadline_s is not None else (
            None if deadline is None else deadline - time.perf_counter())
        queue: asyncio.Queue[Event | BaseException | None] = asyncio.Queue()

        async def emit(event: Event) -> None:
            await queue.put(event)

        run = QueryRun(self.name, question.strip(), self.models, emit, link_text, deadline=deadline)
        run.plan = plan
        run.deltas = deltas
        if note:
            run.degrade("entity_link", note)
        if history_note:
            run.degrade("history", history_note)

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
                item = await _next_event(queue, deadline)
                if item is _DEADLINE:
                    task.cancel()
                    with contextlib.suppress(BaseException):
                        await task
                    yield Final(run.cut_at_deadline(self.index, total_s or 0.0))
                    break
                if item is None:
                    break
                if isinstance(item, BaseException):
                    if isinstance(item, ModelError | EngineError):
                        attach_usage(item, run.usage)
                    raise item
                yield item
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


_DEADLINE = object()  # sentinel: the deadline passed while waiting for the next event


async def _next_event(queue: asyncio.Queue[Any], deadline: float | None) -> Any:
    if deadline is None:
        return await queue.get()
    with contextlib.suppress(asyncio.QueueEmpty):
        return queue.get_nowait()  # what is already done counts, even at the deadline
    left = deadline - time.perf_counter()
    if left <= 0:
        return _DEADLINE
    try:
        return await asyncio.wait_for(queue.get(), left)
    except TimeoutError:
        return _DEADLINE


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
