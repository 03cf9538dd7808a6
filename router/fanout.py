"""`MultiRouter`: several indexes behind one router. It picks the index (`router.index_routing`), then the
per-index `Router` picks the engine as it does for one index.

One index covers the question: that index's Router answers it and the route names the index. Several do: each
answers within its share of the budget (calls and cost divided among them, the same deadline, all at once) and
the answers are merged into one whose citations name their index (`IndexCitation`); routed to global search, they
are instead one global search over all their reports with one reduce (`router.global_fanout`). None does: the answer says
so and comes from the closest index with local search and at most one model call. A named index (`index=`)
skips index routing; `indexes=` limits routing to some indexes (an API key's, in the service).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Protocol, TypeVar

from engines.citations import Citation
from engines.models.base import Usage
from router.answer import Answer
from router.answer_loop import Admit, Plan
from router.budget import Budget
from router.events import Done, RouteDecided, RouterEvent
from router.index_citations import IndexCitation as IndexCitation  # re-exported: fanned-out citations
from router.index_citations import indexed
from router.index_routing import IndexChoice, route_indexes
from router.lifecycle import SyncLoop
from router.scoped import empty_scope_answer

if TYPE_CHECKING:
    from engines.config import GraphrouteConfig
    from engines.engine import Engine
    from engines.models.factory import Models
    from engines.plan import HistoryLike
    from router.classifier import RouteDecision
    from shared_context.index import Index
    from shared_context.scope import Scope

T = TypeVar("T")
NONE_COVERS_CALLS = 1  # what a question no index covers may spend
ONE_CALL_REASON = "local search with one model call, since no index covers the question"


class IndexRouter(Protocol):
    """What `MultiRouter` uses of each index's router (`router.router.Router`)."""

    @property
    def index(self) -> Index: ...

    @property
    def models(self) -> Models: ...

    @property
    def config(self) -> GraphrouteConfig: ...

    async def aroute(self, question: str, history: HistoryLike = None, budget: Budget | None = None
                     ) -> tuple[RouteDecision, Plan]: ...

    def astream(self, question: str, history: HistoryLike = None, mode: str | None = None,
                budget: Budget | None = None, *, deltas: bool = True, classify_forced: bool = False,
                admit: Admit | None = None, scope: Scope | None = None) -> AsyncIterator[RouterEvent]: ...

    async def aask(self, question: str, history: HistoryLike = None, mode: str | None = None,
                   budget: Budget | None = None, *, admit: Admit | None = None,
                   scope: Scope | None = None) -> Answer: ...

    def engine(self, name: str) -> Engine: ...

    def close(self) -> None: ...

    async def aclose(self) -> None: ...


class UnknownIndexError(LookupError):
    """An index name the caller may not use. The message never lists the other indexes: with API keys bound to
    indexes, saying which exist would confirm names the caller must not see."""

    def __init__(self, name: object) -> None:
        super().__init__(f"unknown index {name!r}" if name is not None else "no index is available to this caller")
        self.name = name


class MultiRouter:
    """Answers questions over several named indexes, choosing the index and then the engine per question."""

    def __init__(self, routers: Mapping[str, IndexRouter], *, owns_routers: bool = True) -> None:
        """`routers`: name -> Router (one per index; `Router.from_indexes` makes them from folders).
        `owns_routers`: `close` closes them too."""
        if not routers:
            raise ValueError("index routing needs at least one index")
        self.routers = dict(routers)
        self._owns = owns_routers
        self._sync = SyncLoop()

    @property
    def names(self) -> list[str]:
        return list(self.routers)

    def allowed(self, indexes: Sequence[str] | None) -> dict[str, IndexRouter]:
        """The routers a caller may use (all when `indexes` is None), in this router's order."""
        if indexes is None:
            return self.routers
        wanted = set(indexes)
        return {n: r for n, r in self.routers.items() if n in wanted}

    def names_of(self, indexes: Sequence[str] | None) -> list[str]:
        """The names a caller may use, or `UnknownIndexError` when there is none."""
        names = list(self.allowed(indexes))
        if not names:
            raise UnknownIndexError(None)
        return names

    def pick(self, name: object, indexes: Sequence[str] | None = None) -> tuple[str, IndexRouter]:
        """The named index's Router, or `UnknownIndexError` (also for an index outside `indexes`)."""
        allowed = self.allowed(indexes)
        if not isinstance(name, str) or name not in allowed:
            raise UnknownIndexError(name)
        return name, allowed[name]

    # ---- choosing the index -----------------------------------------------------------------------

    def choose(self, question: str, history: HistoryLike = None, indexes: Sequence[str] | None = None) -> IndexChoice:
        """Which index(es) cover the question (no model call). A follow-up is probed with the caller's
        previous question, which names what it refers to."""
        from engines.plan import check_question, normalise_history

        allowed = self.allowed(indexes)
        if not allowed:
            raise UnknownIndexError(None)
        first = next(iter(allowed.values()))
        text, _ = check_question(question, first.index)  # the engines' own checks: empty, too long
        earlier = [m["content"] for m in normalise_history(history) if m["role"] == "user"]
        if earlier:
            text = f"{earlier[-1]}\n{text}"
        return route_indexes({n: r.index for n, r in allowed.items()}, text)

    async def aroute(self, question: str, history: HistoryLike = None, budget: Budget | None = None, *,
                     index: str | None = None, indexes: Sequence[str] | None = None, scope: Scope | None = None
                     ) -> tuple[RouteDecision, Plan]:
        """The decision (naming the index) and the budget plan of the first chosen index, with no model call.
        With a `scope`, as `astream` answers it: only the indexes holding documents in it are considered, the
        engine is routed on the chosen index cut to the scope, and the reasons say what the scope held."""
        if index is None and scope is not None:
            indexes = await asyncio.to_thread(self._holding, scope, indexes)
            if not indexes:
                return _empty_scope_route(question, scope), Plan(chosen="none")
        if index is not None or len(self.allowed(indexes)) == 1:
            name, router = self.pick(index or self.names_of(indexes)[0], indexes)
            decision, plan = await _route_in_scope(router, question, history, budget, scope)
            return _named(decision, name, index is not None), plan
        choice = await asyncio.to_thread(self.choose, question, history, indexes)
        none = choice.outcome == "none"  # the plan an ask would follow: within one call
        limit = _closest_only(None, budget)[1] if none else _share(budget, choice)
        decision, plan = await _route_in_scope(self.routers[choice.names[0]], question, history, limit, scope)
        return _with_choice(decision, choice), plan

    # ---- answering --------------------------------------------------------------------------------

    async def astream(self, question: str, history: HistoryLike = None, mode: str | None = None,
                      budget: Budget | None = None, *, index: str | None = None,
                      indexes: Sequence[str] | None = None, deltas: bool = True,
                      classify_forced: bool = False, scope: Scope | None = None,
                      admit: Admit | None = None) -> AsyncIterator[RouterEvent]:
        """`Router.astream` over the chosen index; a fanned-out question yields its route, then the merged answer.
        With a `scope`, only the indexes holding documents in it are considered. `admit` (the service's spending
        limits) is awaited with each answering index's estimate."""
        if index is None and scope is not None:
            indexes = await asyncio.to_thread(self._holding, scope, indexes)
            if not indexes:
                answer = empty_scope_answer(question, f"scope ({scope.describe()}): no index holds a document in it")
                yield RouteDecided(answer.route, answer.engine, [])
                yield Done(answer)
                return
        if index is not None or len(self.allowed(indexes)) == 1:  # nothing to choose
            name, router = self.pick(index or self.names_of(indexes)[0], indexes)
            async for ev in router.astream(question, history, mode, budget, deltas=deltas,
                                           classify_forced=classify_forced, scope=scope, admit=admit):
                yield _retag(ev, partial(_named, name=name, by_caller=index is not None))
            return
        choice = await asyncio.to_thread(self.choose, question, history, indexes)
        if choice.outcome == "several":
            answer = await self._fan_out(question, history, mode, budget, choice, scope, admit)
            yield RouteDecided(answer.route, answer.engine, answer.plan)
            yield Done(answer)
            return
        router = self.routers[choice.names[0]]
        none = choice.outcome == "none"
        if none:
            mode, budget = _closest_only(mode, budget)
        async for ev in router.astream(question, history, mode, budget, deltas=deltas,
                                       classify_forced=classify_forced or none, scope=scope, admit=admit):
            if isinstance(ev, Done) and none:
                ev.answer.text = f"{_none_note(choice)}\n\n{ev.answer.text}"
                ev.answer.notes.insert(0, _none_note(choice))
            yield _retag(ev, partial(_with_choice, choice=choice, none=none))

    async def aask(self, question: str, history: HistoryLike = None, mode: str | None = None,
                   budget: Budget | None = None, *, index: str | None = None,
                   indexes: Sequence[str] | None = None, scope: Scope | None = None,
                   admit: Admit | None = None) -> Answer:
        answer: Answer | None = None
        async for ev in self.astream(question, history, mode, budget, index=index, indexes=indexes, deltas=False,
                                     scope=scope, admit=admit):
            if isinstance(ev, Done):
                answer = ev.answer
        assert answer is not None  # astream always ends with Done or raises
        return answer

    def ask(self, question: str, history: HistoryLike = None, mode: str | None = None,
            budget: Budget | None = None, *, index: str | None = None,
            indexes: Sequence[str] | None = None, scope: Scope | None = None) -> Answer:
        """Synchronous form of `aask`, on this router's own long-lived loop."""
        return self.run(self.aask(question, history, mode, budget, index=index, indexes=indexes, scope=scope))

    def _holding(self, scope: Scope, indexes: Sequence[str] | None) -> list[str]:
        """The allowed indexes with at least one document in `scope`."""
        from shared_context.scope import in_scope_documents

        return [n for n, r in self.allowed(indexes).items() if in_scope_documents(r.index, scope)]

    async def _fan_out(self, question: str, history: HistoryLike, mode: str | None, budget: Budget | None,
                       choice: IndexChoice, scope: Scope | None, admit: Admit | None = None) -> Answer:
        decision = await self._routed_global(question, history, mode, budget, choice)
        if decision is not None:
            from router.global_fanout import global_over_indexes

            routers = {n: self.routers[n] for n in choice.names}
            answer = await global_over_indexes(question, history, budget, choice, decision, routers, scope, admit,
                                               "global" if mode == "global" else "global_prerank")
            if answer is not None:
                return answer
        started = time.perf_counter()
        names = _affordable(choice.names, budget)
        share = _share(budget, replace(choice, names=names))
        results = await asyncio.gather(
            *(self.routers[n].aask(question, history=history, mode=mode, budget=share, scope=scope, admit=admit)
              for n in names),
            return_exceptions=True)
        answers: dict[str, Answer] = {}
        usage, degraded = Usage(), []
        failure: BaseException | None = None
        for name, got in zip(names, results, strict=True):
            if isinstance(got, Answer):
                answers[name] = got
                usage.merge(got.usage)
                continue
            if not isinstance(got, Exception):
                raise got  # cancellation and the like are not a failed index
            spent = getattr(got, "usage", None)
            if isinstance(spent, Usage):
                usage.merge(spent)
            degraded.append(f"index {name}: {got}")
            failure = failure or got
        if not answers:
            assert failure is not None
            failure.usage = usage  # type: ignore[attr-defined]  # everything the fan-out spent
            raise failure
        skipped = [n for n in choice.names if n not in names]
        if skipped:
            degraded.append(f"not asked, the call budget left no room: {', '.join(skipped)}")
        return merge_answers(question, answers, choice, usage, degraded, time.perf_counter() - started)

    async def _routed_global(self, question: str, history: HistoryLike, mode: str | None, budget: Budget | None,
                             choice: IndexChoice) -> RouteDecision | None:
        """The route decision when global search answers a fanned-out question (else None): forced by the
        caller, or the engine the best covering index routes it to (its classifier and commitment policy, no
        model call)."""
        if mode not in (None, "auto", "global", "global_prerank"):
            return None
        decision, _ = await self.routers[choice.names[0]].aroute(question, history, _share(budget, choice))
        if mode in ("global", "global_prerank"):
            return replace(decision, engine="global", reasons=[f"mode '{mode}' forced by the caller",
                                                               *decision.reasons])
        return decision if decision.engine in ("global", "global_prerank") else None

    # ---- the sync loop and closing ----------------------------------------------------------------

    def run(self, coro: Coroutine[object, None, T]) -> T:
        return self._sync.run(coro)

    def close(self) -> None:
        async def close_clients() -> None:  # the clients this router's own loop opened
            await asyncio.gather(*(r.models.aclose() for r in self.routers.values()))

        self._sync.close(close_clients())
        if self._owns:
            for r in self.routers.values():
                r.close()

    async def aclose(self) -> None:
        for r in self.routers.values():
            await r.models.aclose()
        if self._sync.started:
            await asyncio.to_thread(self.close)
        elif self._owns:
            for r in self.routers.values():
                await r.aclose()

    def __enter__(self) -> MultiRouter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _route_in_scope(router: IndexRouter, question: str, history: HistoryLike, budget: Budget | None,
                          scope: Scope | None) -> tuple[RouteDecision, Plan]:
    """`router.aroute`, over its index cut to `scope` when there is one (the reasons start with what it held)."""
    if scope is None:
        return await router.aroute(question, history, budget)
    from router.scoped import scoped_router

    inner, note = await asyncio.to_thread(scoped_router, router, scope)
    if inner is None:
        return empty_scope_answer(question, note).route, Plan(chosen="none")
    decision, plan = await inner.aroute(question, history, budget)
    return replace(decision, reasons=[note, *decision.reasons]), plan


def _empty_scope_route(question: str, scope: Scope) -> RouteDecision:
    return empty_scope_answer(question, f"scope ({scope.describe()}): no index holds a document in it").route


def merge_answers(question: str, answers: Mapping[str, Answer], choice: IndexChoice, usage: Usage,
                  degraded: list[str], seconds: float) -> Answer:
    """One answer from the answers of several indexes: a section per index, citations naming their index."""
    from engines.result import SearchResult

    names = list(answers)
    lead = answers[names[0]]
    engines = list(dict.fromkeys(a.engine for a in answers.values()))
    engine = engines[0] if len(engines) == 1 else "+".join(engines)
    text = "\n\n".join(f"**From index {n}** ({a.engine} search):\n\n{a.text}" for n, a in answers.items())
    citations: list[Citation] = [indexed(c, n) for n, a in answers.items() for c in a.citations]
    result = SearchResult(
        engine=engine, question=question, response=text, citations=citations,
        text_unit_ids=list(dict.fromkeys(u for a in answers.values() for u in a.text_unit_ids)),
        document_ids=list(dict.fromkeys(d for a in answers.values() for d in a.document_ids)),
        usage=usage, empty=all(a.result is None or a.result.empty for a in answers.values()), model=lead.model,
        offline=all(a.offline for a in answers.values()), seconds=seconds,
        details={"fanout": {n: {"engine": a.engine, "route": a.route.engine, "calls": a.usage.total.llm_calls,
                                "cost": a.usage.total.cost} for n, a in answers.items()}})
    per_index = [f"index {n}: {a.route.engine} by the classifier ({a.route.confidence:.2f}), answered by {a.engine}"
                 for n, a in answers.items()]
    route = replace(lead.route, index=list(names), reasons=[*choice.reasons, *per_index],
                    method=f"{lead.route.method}+fanout")
    return Answer(
        question=question, standalone_question=lead.standalone_question, text=text, route=route, engine=engine,
        usage=usage, model=lead.model, offline=result.offline, seconds=seconds, result=result,
        plan=[f"{n}: {step}" for n, a in answers.items() for step in a.plan],
        escalations=[e for a in answers.values() for e in a.escalations],
        degraded=[*degraded, *(f"index {n}: {d}" for n, a in answers.items() for d in a.degraded)],
        notes=list(dict.fromkeys(note for a in answers.values() for note in a.notes)))


def _affordable(names: Sequence[str], budget: Budget | None) -> tuple[str, ...]:
    """The chosen indexes the call budget leaves at least one call each (best first)."""
    if budget is None or budget.max_llm_calls is None:
        return tuple(names)
    return tuple(names[: max(1, budget.max_llm_calls)])


def _share(budget: Budget | None, choice: IndexChoice) -> Budget | None:
    """Each fanned-out index's part of the budget: calls and cost divided, the same deadline."""
    k = len(choice.names) if choice.outcome == "several" else 1
    if budget is None or k == 1:
        return budget
    calls = None if budget.max_llm_calls is None else max(1, budget.max_llm_calls // k)
    cost = None if budget.max_cost is None else budget.max_cost / k
    return Budget(cost, calls, budget.deadline_s)


def _closest_only(mode: str | None, budget: Budget | None) -> tuple[str, Budget]:
    """A question no index covers: local search on the closest index (one call; the engine to say what the
    index does not hold), unless the caller forced another engine, within one call."""
    calls = NONE_COVERS_CALLS if budget is None or budget.max_llm_calls is None \
        else min(NONE_COVERS_CALLS, budget.max_llm_calls)
    kept = budget or Budget()
    return (mode if mode not in (None, "auto") else "local"), Budget(kept.max_cost, calls, kept.deadline_s)


def _none_note(choice: IndexChoice) -> str:
    return (f"No index clearly covers this question; this answer comes from the closest one, "
            f"{choice.names[0]}, with one model call at most.")


def _named(decision: RouteDecision, name: str, by_caller: bool = True) -> RouteDecision:
    """The route over one index: named by the caller (no index routing), or the only one there is."""
    if not by_caller:
        return replace(decision, index=name)
    return replace(decision, index=name, reasons=[f"index {name} named by the caller (no index routing)",
                                                  *decision.reasons])


def _with_choice(decision: RouteDecision, choice: IndexChoice, none: bool = False) -> RouteDecision:
    reasons = list(decision.reasons)
    if none:  # the engine was set here, not by the caller: say why instead
        reasons = [ONE_CALL_REASON, *(r for r in reasons if not r.startswith("mode '"))]
    return replace(decision, index=choice.index, reasons=[*choice.reasons, *reasons])


def _retag(ev: RouterEvent, tag: Callable[[RouteDecision], RouteDecision]) -> RouterEvent:
    """The event with its route decision (and its answer's) passed through `tag`."""
    if isinstance(ev, RouteDecided):
        return RouteDecided(tag(ev.decision), ev.engine, ev.plan)
    if isinstance(ev, Done):
        ev.answer.route = tag(ev.answer.route)
    return ev
