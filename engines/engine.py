"""The `Engine` protocol: what the router (and any other caller) needs of a search engine.

The built-in engines (local, global, DRIFT, basic) are `engines.base.BaseEngine`s; a third-party engine
satisfies this protocol structurally (no base class needed) and is typed against the same seam:

- `estimate(question)`: the `CostEstimate` of answering, with no model call (the router's budget ladder); it
  may return what it built (`CostEstimate.prebuilt`) for the answer to reuse;
- `stream(question, history, ...)`: `Progress` / `ContextReady` / `AnswerDelta` events, then exactly one
  `Final(SearchResult)`; `search(...)` returns that result;
- `builder`: the context builder it answers from (None when it builds no context of its own).

`question` is a string (the engine checks it) or the router's `engines.plan.Question`, checked once, with
its history, deadline, linking and an estimate's context, which the engine reads and never fills.

An engine answers in three steps, each a seam of its own: `context = builder.build(...)` (pure, no model
call: a `LocalContextSource` or `CommunityContextSource`), `messages = formatter.render(context, question)`
(a `PromptFormatter`: the prompt the model is sent) and generating from those messages. The builder
protocols (`engines.steps`) are exactly the calls the engines make, so an injected builder needs no base class.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Protocol

from engines.steps import CommunityContextSource, ContextBuilder, LocalContextSource, PromptFormatter

if TYPE_CHECKING:
    from engines.estimate import CostEstimate
    from engines.events import Event
    from engines.plan import HistoryLike, Question
    from engines.result import SearchResult
    from shared_context.index import Index

__all__ = ["CommunityContextSource", "ContextBuilder", "Engine", "LocalContextSource", "PromptFormatter"]


class Engine(Protocol):
    """A search engine over one index."""

    @property
    def name(self) -> str: ...

    @property
    def index(self) -> Index: ...

    @property
    def builder(self) -> ContextBuilder | None: ...

    def estimate(self, question: str | Question) -> CostEstimate: ...

    async def search(
        self, question: str | Question, history: HistoryLike = None, *, deadline_s: float | None = None,
    ) -> SearchResult: ...

    def stream(
        self,
        question: str | Question,
        history: HistoryLike = None,
        *,
        deadline_s: float | None = None,
        deltas: bool = True,
    ) -> AsyncGenerator[Event, None]: ...
