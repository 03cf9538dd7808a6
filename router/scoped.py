"""Questions limited to some documents (`Router.ask(..., scope=Scope(...))`).

A scope is answered by a Router of the same kind over the index cut to the scope (`shared_context.scope`),
sharing the models of the Router it came from, so every engine (local, global, DRIFT, basic) reads only what
the scope holds. The cut index and its Router are built once per scope and kept (the last `CACHED` scopes per
Router): a first question in a new scope pays for the cut and its search tables, in proportion to the scope.
The answer says what the scope held; a scope that holds nothing is answered at once, with no model call.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol

from engines.models.base import Usage
from router.answer import Answer
from router.events import Done, RouteDecided, RouterEvent
from shared_context.scope import Scope, in_scope_documents, scoped_index

if TYPE_CHECKING:
    from engines.config import GraphrouteConfig
    from engines.engine import Engine
    from engines.models.factory import Models
    from engines.plan import HistoryLike
    from router.answer_loop import Plan
    from router.budget import Budget
    from router.classifier import RouteDecision
    from shared_context.index import Index

CACHED = 8
NOTE_PREFIX = "scope ("  # what every note on a scope starts with: "scope (where year = 2024): ..."


class ScopableRouter(Protocol):
    """What scoping uses of a `router.router.Router`."""

    @property
    def index(self) -> Index: ...

    @property
    def config(self) -> GraphrouteConfig: ...

    @property
    def models(self) -> Models: ...

    def engine(self, name: str) -> Engine: ...

    async def aroute(self, question: str, history: HistoryLike = None, budget: Budget | None = None
                     ) -> tuple[RouteDecision, Plan]: ...

    def astream(self, question: str, history: HistoryLike = None, mode: str | None = None,
                budget: Budget | None = None, *, deltas: bool = True, classify_forced: bool = False,
                scope: Scope | None = None) -> AsyncIterator[RouterEvent]: ...


_lock = threading.Lock()
_cache: weakref.WeakKeyDictionary[object, OrderedDict[tuple[object, ...], tuple[ScopableRouter | None, str]]] = (
    weakref.WeakKeyDictionary())


def scoped_router(router: ScopableRouter, scope: Scope) -> tuple[ScopableRouter | None, str]:
    """(the Router over the scope's cut of the index, or None when the scope holds nothing; what it held)."""
    key = scope.key()
    with _lock:
        kept = _cache.setdefault(router, OrderedDict())
        if key in kept:
            kept.move_to_end(key)
            return kept[key]
    index = router.index
    docs = in_scope_documents(index, scope)
    if not docs:
        made: tuple[ScopableRouter | None, str] = (
            None, f"scope ({scope.describe()}): no document of the index is in it ({len(index.documents)} documents)")
    else:
        cut = scoped_index(index, docs)
        titles = [index.documents[d].title for d in docs]
        shown = ", ".join(titles[:3]) + (f" and {len(titles) - 3} more" if len(titles) > 3 else "")
        note = (f"scope ({scope.describe()}): {len(docs)} of {len(index.documents)} documents ({shown}), "
                f"{len(cut.text_units)} text units, {len(cut.entities)} entities, "
                f"{len(cut.community_reports)} community reports")
        made = (type(router)(cut, router.config, models=router.models), note)  # type: ignore[call-arg]
    with _lock:
        kept[key] = made
        while len(kept) > CACHED:
            kept.popitem(last=False)
    return made


async def scoped_stream(router: ScopableRouter, scope: Scope, question: str, history: HistoryLike,
                        mode: str | None, budget: Budget | None, *, deltas: bool,
                        classify_forced: bool) -> AsyncIterator[RouterEvent]:
    """The events of `question` asked within `scope`; the answer's notes say what the scope held."""
    import asyncio

    inner, note = await asyncio.to_thread(scoped_router, router, scope)
    if inner is None:
        answer = empty_scope_answer(question, note)
        yield RouteDecided(answer.route, answer.engine, [])
        yield Done(answer)
        return
    async for ev in inner.astream(question, history, mode, budget, deltas=deltas, classify_forced=classify_forced):
        if isinstance(ev, Done):
            ev.answer.notes.insert(0, note)
        yield ev


def empty_scope_answer(question: str, note: str) -> Answer:
    """The answer to a question whose scope holds nothing: no engine ran, nothing was spent."""
    from router.classifier import RouteDecision

    decision = RouteDecision(engine="local", confidence=1.0, probabilities={}, reasons=[note], method="empty-scope")
    text = f"Nothing was searched: the {note[0].lower()}{note[1:]}."
    return Answer(question=question, standalone_question=question, text=text, route=decision, engine="none",
                  usage=Usage(), model="", offline=True, seconds=0.0, notes=[note])


def scope_note(reasons: list[str]) -> str | None:
    """What a scope held, from a route's reasons (None when they say nothing of a scope)."""
    return next((r for r in reasons if r.startswith(NOTE_PREFIX)), None)
