"""`QueryRun`: everything one query accumulates (usage per stage, degradations, details, the event stream,
what the deadline keeps), and the model calls made through it; `ModelSet`: the models those calls go through.

An engine keeps only immutable things (index, models, config); each query gets a fresh `QueryRun`, so one
engine serves many concurrent queries.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from pydantic import BaseModel

from engines.citations import context_ids_of_messages, resolve_citations, tables_context_ids, union_ids
from engines.errors import DeadlineExceeded, EngineError
from engines.events import AnswerDelta, Event, Progress
from engines.latency import LATENCY, latency_key
from engines.models.base import (
    ChatModel,
    Completion,
    Embedder,
    EmbeddingResult,
    MarkerFilter,
    Message,
    Usage,
    is_local_embedder,
    leading_reasoning_done,
    split_marker,
    strip_reasoning,
)
from engines.models.config import ModelsConfig, PriceTable
from engines.models.errors import ModelError, StructuredOutputError
from engines.models.factory import ModelLike, Models
from engines.models.task_context import TaskContext
from engines.plan import Question
from engines.result import Degradation, SearchResult

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["ModelSet", "QueryRun", "gather_bounded", "reraise_bugs", "vector_for"]

S = TypeVar("S", bound=BaseModel)
T = TypeVar("T")
R = TypeVar("R")

# How many findings a run cut by its deadline shows instead of the final answer.
_DEADLINE_FINDINGS = 8


class ModelSet:
    """The chat model per stage, the embedder and prices of one engine, whatever form the caller gave them in;
    None is the bundle `config` describes (the default `ModelsConfig`: offline)."""

    def __init__(
        self,
        index: Index,
        model: ModelLike = None,
        embedder: Embedder | None = None,
        config: ModelsConfig | None = None,
    ) -> None:
        self._bundle: Models | None = None
        self._by_stage: dict[str, ChatModel] = {}  # the bundle's model per stage, looked up once
        self._single: ChatModel | None = None
        self.prices: PriceTable | None = None
        self.embedder: Embedder | None = embedder
        if model is None:
            model = Models.from_config(config or ModelsConfig(), index=index)
        if isinstance(model, Models):
            self._bundle = model
            self.embedder = embedder if embedder is not None else model.embedder
            self.prices = model.config.prices
        elif isinstance(model, ChatModel):
            self._single = model
        else:
            raise TypeError(
                f"model must be a ChatModel, an engines.models.factory.Models bundle or None, got {type(model).__name__}"
            )

    def chat(self, stage: str) -> ChatModel:
        if self._bundle is not None:
            # Every model call asks; a bundle's model per stage never changes once built.
            model = self._by_stage.get(stage)
            if model is None:
                model = self._by_stage[stage] = self._bundle.chat(stage)
            return model
        assert self._single is not None
        return self._single

    @property
    def offline(self) -> bool:
        return bool(self.chat("answer").offline)

    def cost(self, stage: str, prompt_tokens: int, output_tokens: int) -> float:
        """Price of a hypothetical call (for estimates); 0 for offline or unknown models."""
        model = self.chat(stage)
        if model.offline or self.prices is None:
            return 0.0
        return float(self.prices.cost(model.name, prompt_tokens, output_tokens))  # unknown model: 0, warned once


def vector_for(index: Index, table: str, models: ModelSet) -> bool:
    """True when the index has vectors for `table` that the configured embedder can query."""
    from shared_context.search_backend import vector_table

    vt = vector_table(index, table)
    emb = models.embedder
    return vt is not None and emb is not None and len(vt) > 0 and vt.dim == emb.dim


class QueryRun:
    """Everything one query accumulates: usage per stage, degradations, details and the event stream."""

    def __init__(
        self,
        engine: str,
        asked: Question,
        models: ModelSet,
        emit: Callable[[Event], Awaitable[None]],
    ):
        self.engine = engine
        self.asked = asked  # the checked question, read only: its linking and a prebuilt context are reused
        self.question = asked.text
        self.link_text = asked.link_text  # the question as used for linking
        self.models = models
        self.usage = Usage()
        self.degraded: list[Degradation] = []
        self.details: dict[str, Any] = {}
        self._emit = emit
        self.started = time.perf_counter()
        # The question's deadline (a time.perf_counter() instant) and what is kept for it: findings as they
        # arrive and the answer text streamed so far, so a cut-off run still has something to return.
        self.deadline = asked.deadline
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

    def _show(self, messages: list[Message], context: TaskContext | None) -> None:
        """Remember the (kind, id) rows this call shows: from the typed tables, else parsed from the messages."""
        shown = tables_context_ids(context.tables) if context is not None else context_ids_of_messages(messages)
        self.shown.update(dict.fromkeys(shown))

    async def complete(
        self,
        stage: str,
        task: str,
        messages: list[Message],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        context: TaskContext | None = None,
    ) -> Completion:
        """One model call; `context`: the typed data the messages render (`ChatModel.complete`)."""
        self._show(messages, context)
        try:
            completion = await self.models.chat(stage).complete(
                messages, task=task, max_tokens=max_tokens, temperature=temperature, context=context
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
        context: TaskContext | None = None,
    ) -> S:
        """Parsed output; every call made (including a failed repair retry) is counted in usage.
        `context` as in `complete`."""
        from engines.models.structured import complete_json

        self._show(messages, context)
        try:
            parsed, completions = await complete_json(
                self.models.chat(stage), messages, schema, task=task, max_tokens=max_tokens, temperature=temperature,
                context=context,
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
        context: TaskContext | None = None,
    ) -> Completion:
        """Stream the final answer as `AnswerDelta` events; returns the final completion (text + usage).
        `context` as in `complete`."""
        model = self.models.chat(stage)
        self.streamed = []
        self.open_stream = (stage, messages, model.name)
        self._show(messages, context)
        whole = not self.deltas and self.deadline is None  # nobody watches it being written, nothing cuts it
        final: Completion | None
        try:
            if whole:
                final = await model.complete(messages, task=task, max_tokens=max_tokens, temperature=temperature,
                                             context=context)
            else:
                final = await self._stream_pieces(model, messages, task, max_tokens, temperature, context)
        except ModelError as err:  # chained: the router tells an endpoint that is down from a bad reply
            raise EngineError(f"the model failed while writing the answer: {err}", stage=stage, engine=self.engine) from err
        if final is None:
            raise EngineError("the model stream ended without a final completion", stage=stage, engine=self.engine)
        self.open_stream = None
        self._record(stage, [final])
        final = _without_reasoning(final)
        if whole and final.text:
            await self._emit(AnswerDelta(split_marker(final.text)[0]))
        return final

    async def _stream_pieces(
        self, model: ChatModel, messages: list[Message], task: str,
        max_tokens: int | None, temperature: float | None, context: TaskContext | None,
    ) -> Completion | None:
        """Emit the streamed answer as `AnswerDelta`s (a leading <think> block held back, never shown) and
        return the stream's final completion (None if it sent none)."""
        final: Completion | None = None
        held, reasoning_done = "", False
        marks = MarkerFilter()  # the insufficient-context mark is for the router, never shown
        async for piece in model.stream(messages, task=task, max_tokens=max_tokens, temperature=temperature,
                                        context=context):
            if isinstance(piece, Completion):
                final = piece
                continue
            if piece and not reasoning_done:
                held += piece
                piece, reasoning_done = leading_reasoning_done(held)
            shown = marks.feed(piece) if piece else ""
            if shown:
                self.streamed.append(shown)
                await self._emit(AnswerDelta(shown))
        rest = marks.flush()
        if rest:
            self.streamed.append(rest)
            await self._emit(AnswerDelta(rest))
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
        context_records: dict[str, list[dict[str, object]]] | None = None,
        empty: bool = False,
        empty_reason: str = "",
        cite_text: str | None = None,
    ) -> SearchResult:
        """Assemble the result; citations are resolved from `cite_text` (default: the response). `empty_reason`
        says why nothing relevant was found (`empty`)."""
        response, insufficient = split_marker(strip_reasoning(response))
        if not response.strip():  # never a silent empty answer: say so, and let the router escalate
            self.degrade(self.stage_now, "the model returned an empty answer")
            empty, empty_reason = True, empty_reason or "the model returned an empty answer"
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
            empty_reason=empty_reason if empty else "",
            insufficient=insufficient,
            model=answer_model.name,
            offline=answer_model.offline,
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


async def gather_bounded(limit: int, fn: Callable[[T], Awaitable[R]], items: Sequence[T]) -> list[R | BaseException]:
    """`fn(item)` for every item with at most `limit` in flight; results in item order, exceptions returned."""
    sem = asyncio.Semaphore(max(1, limit))

    async def one(item: T) -> R:
        async with sem:
            return await fn(item)

    return list(await asyncio.gather(*(one(it) for it in items), return_exceptions=True))


def reraise_bugs(results: Sequence[object]) -> None:
    """Model/engine failures degrade; anything else (a programming error) must surface."""
    for r in results:
        if isinstance(r, BaseException) and not isinstance(r, ModelError | EngineError):
            raise r
