"""`Router`: classify each question, commit by expected cost, plan within the budget, answer with the right
engine, and escalate on an empty or insufficient answer where the index has evidence.

A thin facade over three parts: `router.lifecycle.RouterLifecycle` (the sync API's event loop thread, the
models, the engines built once, the endpoint and vector checks), `router.routing.RoutingPolicy` (the question
checked once, rewrite, classification, second opinion and commitment: one frozen `RoutedQuestion`) and
`router.answer_loop.AnswerLoop` (the budget ladder, the engine run, escalation and fallback).

One Router holds one immutable index; it keeps no per-question state, so many callers can `aask`
concurrently. The sync API (`ask`, `run`) runs every question on one long-lived event loop in a background
thread; `close()` (or `with Router(...) as r:`) shuts its HTTP clients. Async callers close with
`await router.aclose()` on their own loop. CPU-bound steps (classification, planning, engine construction and
its first-use embedder fit, context building) run in worker threads, so concurrent questions overlap their
model waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from engines.models.base import Usage
from router.answer_loop import Admit as Admit
from router.answer_loop import AnswerLoop
from router.answer_loop import public_name as public_name

# the events live in their own module (`router.fanout` streams them too); re-exported where callers import them
from router.events import Done as Done
from router.events import EngineEvent as EngineEvent
from router.events import Escalated as Escalated
from router.events import RouteDecided as RouteDecided
from router.events import RouterEvent as RouterEvent
from router.lifecycle import ENGINES as ENGINES
from router.lifecycle import RouterLifecycle
from router.routing import MODES as MODES
from router.routing import RoutingPolicy
from router.routing import forced_decision as forced_decision

if TYPE_CHECKING:
    from engines.config import GraphrouteConfig
    from engines.engine import Engine
    from engines.models.factory import Models
    from engines.models.probe import EndpointCheck
    from engines.plan import HistoryLike, Question
    from router.answer import Answer
    from router.answer_loop import Plan
    from router.budget import Budget
    from router.classifier import RouteDecision
    from router.fanout import MultiRouter
    from shared_context.index import Index
    from shared_context.scope import Scope

T = TypeVar("T")


class Router:
    """Answers questions over one index, choosing local, global, DRIFT or basic search per question."""

    def __init__(self, index: Index, config: GraphrouteConfig | None = None, models: Models | None = None) -> None:
        self.lifecycle = RouterLifecycle(index, config, models)
        self.routing = RoutingPolicy(self.lifecycle)
        self.answers = AnswerLoop(self.lifecycle)
        self.index, self.config, self.models = index, self.lifecycle.config, self.lifecycle.models
        self.notes = self.lifecycle.notes

    @classmethod
    def from_index(
        cls, path: str | Path, config: GraphrouteConfig | None = None, *, settings: str | Path | bool | None = None
    ) -> Router:
        """A Router over the index folder (or URI) `path`. Without `config`, the configuration is graphroute.toml
        and the environment over the settings of the GraphRAG project holding the index (its settings.yaml
        beside the index folder; `settings` names another file, False ignores it); settings graphroute does
        not use are named in one warning."""
        from shared_context import load_index

        if config is None:
            from engines.config_layers import load_project_config

            config = load_project_config(path, settings=settings)
        return cls(load_index(path), config=config)

    @staticmethod
    def from_indexes(paths: Mapping[str, str | Path], config: GraphrouteConfig | None = None, *,
                     settings: str | Path | bool | None = None) -> MultiRouter:
        """Several named indexes behind one router that picks the index too (`router.fanout.MultiRouter`)."""
        from router.fanout import MultiRouter

        return MultiRouter({name: Router.from_index(path, config, settings=settings) for name, path in paths.items()})

    # ---- lifecycle ------------------------------------------------------------------------------

    def run(self, coro: Coroutine[object, object, T]) -> T:
        """Run a coroutine on this Router's long-lived loop (from sync code; also inside Jupyter's loop)."""
        return self.lifecycle.sync.run(coro)

    def close(self) -> None:
        """Close the HTTP clients of the sync loop and stop it. Idempotent; the Router is unusable after."""
        self.lifecycle.close()

    async def aclose(self) -> None:
        """Close the HTTP clients this (the caller's) event loop opened, and the sync loop if one ran."""
        await self.lifecycle.aclose()

    def __enter__(self) -> Router:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Router:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def acheck_endpoints(self) -> list[EndpointCheck]:
        """Check every model endpoint once (`graphroute serve` runs this at start-up); see `RouterLifecycle`."""
        return await self.lifecycle.acheck_endpoints()

    def engine(self, name: str) -> Engine:
        return self.lifecycle.engine(name)

    def warm_up(self) -> None:
        """Build what the first questions would otherwise build while their callers wait (before serving)."""
        self.lifecycle.warm_up()

    # ---- questions ------------------------------------------------------------------------------

    async def aroute(
        self, question: str, history: HistoryLike = None, budget: Budget | None = None
    ) -> tuple[RouteDecision, Plan]:
        """The decision and plan `aask` starts from, with no model call: the question and history get the same
        checks and limits, but a follow-up is not rewritten and no model second opinion is asked: an expensive route
        below its commitment threshold starts with local search, as offline (`router.commitment`)."""

        def decide() -> tuple[RouteDecision, Plan]:
            routed, estimates = self.routing.decide(question, history, budget)
            plan, _, _ = self.answers.plan(routed, routed.decision.engine, budget, estimates)
            return routed.decision, plan

        return await asyncio.to_thread(decide)

    def plan(self, question: str | Question, engine: str, budget: Budget | None) -> tuple[Plan, Engine]:
        """Pick the first engine on the step-down ladder whose estimate fits the budget (no model calls)."""
        plan, eng, _ = self.answers.plan(question, engine, budget)
        return plan, eng

    async def aask(self, question: str, history: HistoryLike = None, mode: str | None = None,
                   budget: Budget | None = None, *, admit: Admit | None = None, scope: Scope | None = None) -> Answer:
        answer: Answer | None = None
        async for event in self.astream(question, history=history, mode=mode, budget=budget, deltas=False,
                                        admit=admit, scope=scope):
            if isinstance(event, Done):
                answer = event.answer
        assert answer is not None  # astream always ends with Done or raises
        return answer

    def ask(self, question: str, history: HistoryLike = None, mode: str | None = None, budget: Budget | None = None,
            scope: Scope | None = None) -> Answer:
        """Synchronous form of `aask`, run on this Router's long-lived loop (from async code use `aask`)."""
        return self.run(self.aask(question, history=history, mode=mode, budget=budget, scope=scope))

    async def astream(
        self,
        question: str,
        history: HistoryLike = None,
        mode: str | None = None,
        budget: Budget | None = None,
        *,
        deltas: bool = True,
        classify_forced: bool = False,
        admit: Admit | None = None,
        scope: Scope | None = None,
    ) -> AsyncIterator[RouterEvent]:
        """Yield `RouteDecided`, engine progress/answer deltas (`EngineEvent`), `Escalated`, then `Done`.

        `mode=None` takes `[router] default_mode` from the configuration ("auto" unless set). A forced mode
        (not "auto") runs no classifier: the route says it was forced by the caller. `classify_forced=True`
        still asks the classifier, so the route also carries its own opinion (the CLI shows it).
        `admit` is awaited with the chosen engine's estimate before its first model call (the service's daily
        spending limits); what it raises ends the question before anything is spent on answering it.
        """
        if scope is not None:  # answered over the index cut to the scope (`router.scoped`)
            from router.scoped import scoped_stream

            async for scoped in scoped_stream(self, scope, question, history, mode, budget, deltas=deltas,
                                              classify_forced=classify_forced):
                yield scoped
            return
        started = time.perf_counter()
        usage, degraded = Usage(), list[str]()
        budget = self.routing.budget(budget)
        routed, estimates = await self.routing.route(
            question, history, self.config.router.default_mode if mode is None else mode, budget, usage, degraded,
            started=started, classify_forced=classify_forced)
        vectors = self.lifecycle.vectors
        if not vectors.done:  # a remote embedder's first use: its size, bounded by the deadline
            await vectors.ensure(routed.deadline, degraded)
        async for event in self.answers.answer(routed, estimates, usage, degraded, started=started, deltas=deltas,
                                               admit=admit):
            yield event
