"""`BaseEngine`: construction (index, models, config section), input checks, and `search()` = consume
`stream()`, so both run the very same pipeline and return the very same result.

Subclasses implement `_run(run, question, history)`; a `QueryRun` (`engines.run`) holds what one query
changes. The `Engine` protocol (`engines.engine`) is what the router is typed against.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import TYPE_CHECKING, ClassVar, TypeAlias, TypeVar

from pydantic import BaseModel

from engines.errors import EngineError, attach_usage
from engines.events import Event, Final
from engines.models.base import Embedder, Message
from engines.models.errors import ModelError
from engines.models.factory import ModelLike, ModelSet
from engines.plan import HistoryLike, QueryPlan, limit_history, normalise_history, plan_question
from engines.result import SearchResult
from engines.run import QueryRun

if TYPE_CHECKING:
    from engines.steps import ContextBuilder
    from shared_context.index import Index

__all__ = ["BaseEngine", "ConfigLike", "make_params"]

# An engine's `config`: its own section, the whole GraphrouteConfig, or None (defaults).
ConfigLike: TypeAlias = "BaseModel | None"
P = TypeVar("P")


class BaseEngine:
    """Base of every engine: construction, input checks, `search()` = consume `stream()`."""

    name: ClassVar[str] = "engine"
    # The engine's section of GraphrouteConfig: its attribute name and its type.
    section_name: ClassVar[str]
    section_type: ClassVar[type[BaseModel]]
    config: BaseModel  # an instance of `section_type` (subclasses declare theirs)
    # the context builder the engine answers from (`Engine.builder`); None: it builds no context of its own
    builder: ContextBuilder | None = None

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
        self.models = ModelSet(index, model, embedder, full.models if full is not None else None)

    def _section(self, config: ConfigLike) -> BaseModel:
        """The engine's own config section, from its section object, a whole GraphrouteConfig, or None."""
        from engines.config import GraphrouteConfig

        if config is None:
            return self.section_type()
        if isinstance(config, GraphrouteConfig):
            section: BaseModel = getattr(config, self.section_name)
            return section
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
    ) -> AsyncGenerator[Event, None]:
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
                if isinstance(item, _DeadlinePassed):
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


class _DeadlinePassed:
    """Sentinel: the deadline passed while waiting for the next event."""


_DEADLINE = _DeadlinePassed()
_Item: TypeAlias = "Event | BaseException | None"  # what the pipeline hands the consumer (None: it ended)


async def _next_event(queue: asyncio.Queue[_Item], deadline: float | None) -> _Item | _DeadlinePassed:
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


def make_params(params_cls: type[P], values: Mapping[str, object]) -> P:
    """Build a builder's params object from the fields it declares (pydantic or dataclass)."""
    import dataclasses

    fields = getattr(params_cls, "model_fields", None)
    if fields is not None:
        known = set(fields)
    elif dataclasses.is_dataclass(params_cls):
        known = {f.name for f in dataclasses.fields(params_cls)}
    else:
        known = set(values)
    make: Callable[..., P] = params_cls
    return make(**{k: v for k, v in values.items() if k in known})
