"""`BaseEngine`: construction (index, models, config section), the deadline, and `search()` = consume
`stream()`, so both run the very same pipeline and return the very same result.

An engine takes a question string (checked here by `engines.plan.prepare_question`, the one validation) or a
`Question` checked before (the router's `RoutedQuestion`), which it reads and never fills. The engine owns the
deadline: it stops the run when the question's deadline passes and returns its best partial result.

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
from engines.models.factory import ModelLike
from engines.plan import HistoryLike, Question, prepare_question
from engines.result import SearchResult
from engines.run import ModelSet, QueryRun

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
        self, question: str | Question, history: HistoryLike = None, *, deadline_s: float | None = None,
    ) -> SearchResult:
        async for event in self.stream(question, history, deadline_s=deadline_s):
            if isinstance(event, Final):
                return event.result
        raise EngineError("the pipeline ended without a result", stage="answer", engine=self.name)

    def _question(self, question: str | Question, history: HistoryLike, deadline_s: float | None) -> Question:
        """`question` as a checked `Question`: the router's as it is, a string checked here."""
        if not isinstance(question, Question):
            return prepare_question(question, self.index, history, deadline_s=deadline_s)
        if history is not None or deadline_s is not None:
            raise ValueError("a checked Question carries its own history and deadline; pass neither beside it")
        return question

    async def stream(
        self,
        question: str | Question,
        history: HistoryLike = None,
        *,
        deadline_s: float | None = None,
        deltas: bool = True,
    ) -> AsyncGenerator[Event, None]:
        """Progress events, then the answer's deltas, then `Final(result)`; errors are raised here.

        `deltas=False`: the caller only wants the result, so without a deadline the answer is not streamed
        from the model (one `AnswerDelta` with the whole text); with one it is, so a cut keeps what was written.

        A deadline (`deadline_s` seconds from now for a question string; a `Question` carries its own) stops
        the run when it passes: the result is then the best partial answer, marked degraded, or the stream
        raises `DeadlineExceeded`. Every error raised here carries the usage spent (`.usage`).
        """
        asked = self._question(question, history, deadline_s)
        deadline = asked.deadline
        total_s = asked.deadline_s or 0.0
        queue: asyncio.Queue[Event | BaseException | None] = asyncio.Queue()

        async def emit(event: Event) -> None:
            await queue.put(event)

        run = QueryRun(self.name, asked, self.models, emit)
        run.deltas = deltas
        if asked.link_note:
            run.degrade("entity_link", asked.link_note)
        if asked.history_note:
            run.degrade("history", asked.history_note)

        async def drive() -> None:
            try:
                result = await self._run(run, asked.text, list(asked.history))
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
                    yield Final(run.cut_at_deadline(self.index, total_s))
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
