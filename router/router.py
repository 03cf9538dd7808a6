"""`Router`: classify each question, commit by expected cost (`router.commitment`), plan within the budget, answer
with the right engine, and escalate on an empty or insufficient answer where the index has evidence
(`router.escalation`).

One Router holds one immutable index and engines built once; it keeps no per-question state, so many
callers can `aask` concurrently. The sync API (`ask`, `run`) runs every question on one long-lived event loop
in a background thread (`router.loop_thread`), so HTTP clients and their connections are reused; `close()`
(or `with Router(...) as r:`) shuts them. Async callers close with `await router.aclose()` on their own loop.
CPU-bound steps (classification, planning, engine construction and its first-use embedder fit, context
building) run in worker threads, so concurrent questions overlap their model waits.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Coroutine, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from engines.errors import DeadlineExceeded, EngineError
from engines.models.base import Message, Usage
from engines.models.errors import ModelError, StructuredOutputError
from engines.plan import HistoryLike, QueryPlan, limit_history, normalise_history, plan_question
from router.answer import Answer, Escalation
from router.budget import LADDER, Budget, BudgetError, Plan, PlanStep, check_fit
from router.classifier import NAMES_NOTHING, NOT_COVERED
from router.commitment import Verdict, after_second_opinion, commit
from router.escalation import (
    FALLBACK,
    endpoint_failure,
    has_evidence,
    next_engines,
    term_coverage,
    worth_falling_back,
)
from router.events import Admit as Admit

# the events live in their own module (`router.fanout` streams them too); re-exported where callers import them
from router.events import Done as Done
from router.events import EngineEvent as EngineEvent
from router.events import Escalated as Escalated
from router.events import RouteDecided as RouteDecided
from router.events import RouterEvent as RouterEvent
from router.loop_thread import SyncLoop
from router.rewrite import rewrite_question, user_turns

if TYPE_CHECKING:
    from engines.config import GraphrouteConfig
    from engines.engine import Engine
    from engines.events import Event
    from engines.models.factory import Models
    from engines.models.probe import EndpointCheck
    from engines.result import SearchResult
    from router.classifier import Engine as RoutedEngine
    from router.classifier import RouteDecision
    from router.fanout import MultiRouter
    from shared_context.index import Index
    from shared_context.scope import Scope

T = TypeVar("T")
ENGINES = ("local", "global", "drift", "basic")
MODES = ("auto", *ENGINES)
# Seconds the router waits past the deadline for an engine to hand back its partial result.
DEADLINE_GRACE_S = 1.0


class Router:
    """Answers questions over one index, choosing local, global, DRIFT or basic search per question."""

    def __init__(self, index: Index, config: GraphrouteConfig | None = None, models: Models | None = None) -> None:
        from engines import load_config

        self.index = index
        self.config = config if config is not None else load_config()
        from shared_context.search_backend import configure_search

        configure_search(index, self.config.search)  # before any query builds a search table
        # Vectors stored in the index by a model we cannot call are replaced by the configured embedder's
        # own (attached on first use); every answer says so.
        stored = {name: (t.dim, t.model) for name, t in index.vectors.items()}
        self.models = models if models is not None else _build_models(self.config, index)
        self.notes: list[str] = _foreign_vector_notes(stored, self.models)
        self._engines: dict[str, Engine] = {}
        self._lock = threading.Lock()
        self._sync = SyncLoop()  # the sync API's event loop, started on first use
        # Closes the sync loop (and so its HTTP clients) when this Router is collected or the interpreter
        # exits without `close()`; holds no reference to the Router.
        self._finalizer = weakref.finalize(self, self._sync.close)
        self._closed = False
        self._vectors = _VectorCheck(self.index, self.models)

    # ---- the event loop of the synchronous API, and closing -------------------------------------

    def run(self, coro: Coroutine[object, object, T]) -> T:
        """Run a coroutine on this Router's long-lived loop (from sync code; also inside Jupyter's loop)."""
        with self._lock:
            if self._closed:
                coro.close()
                raise RuntimeError("this Router is closed")
        return self._sync.run(coro)

    def close(self) -> None:
        """Close the HTTP clients of the sync loop and stop it. Idempotent; the Router is unusable after."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._sync.close(self.models.aclose())
        self._finalizer.detach()

    async def aclose(self) -> None:
        """Close the HTTP clients this (the caller's) event loop opened, and the sync loop if one ran."""
        await self.models.aclose()
        if self._sync.started:
            await asyncio.to_thread(self.close)
        self._closed = True

    def __enter__(self) -> Router:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Router:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def acheck_endpoints(self) -> list[EndpointCheck]:
        """Check every model endpoint once, each within its `probe_timeout_s` (`engines.models.probe`); the
        embedder's reply also checks its vector size against the index's stored vectors (status "error"
        naming the table when they differ). `graphroute serve` runs this at start-up."""
        checks = await self.models.check_endpoints()
        for i, check in enumerate(checks):
            if check.role == "embedding":
                checks[i] = self._vectors.settle(check)
        return checks

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

    # ---- engines, built once --------------------------------------------------------------------

    def engine(self, name: str) -> Engine:
        with self._lock:
            if name not in self._engines:
                self._engines[name] = self._make_engine(name)
            return self._engines[name]

    def warm_up(self) -> None:
        """Build now what the first questions would otherwise build while their callers wait: every engine
        (with the embedder, whose offline fit can take seconds), the chat models (the SDK's import is about
        a second of CPU), and the tables linking, classification and the local context read on first use
        (`graphroute serve` also renders rows ahead: `router.service.warmup`). Synchronous and CPU-bound: call
        it before serving."""
        from router.classifier import classify

        for name in ENGINES:
            self.engine(name)
        self.models.embedder  # noqa: B018 - a property: builds (and fits) the embedder
        for stage in (None, *self.models.config.stages):  # the default endpoint and each stage's own
            self.models.chat(stage)
        if not len(self.index.entities):
            return
        # Any entity's name makes a question that touches every lazily built table; the first one will do.
        plan = plan_question(f"Who is {self.index.entities[0].title}?", self.index)
        classify(plan.question, self.index, linker=plan.linker(self.index))
        builder = self.engine("local").builder
        if builder is not None:
            builder.build(plan.link_text)

    def _make_engine(self, name: str, max_map_calls: int | None = None) -> Engine:
        """The engine `name`; `max_map_calls` caps the map calls of global search with pre-ranking."""
        from engines import BasicSearch, DriftSearch, GlobalSearch, LocalSearch

        cfg = self.config
        if name == "local":
            return LocalSearch(self.index, self.models, config=cfg.local)
        if name == "global":
            return GlobalSearch(self.index, self.models, config=cfg.global_search)
        if name == "global_prerank":
            overrides: dict[str, object] = {"prerank": True}
            if max_map_calls is not None:
                overrides["max_map_calls"] = max_map_calls
            return GlobalSearch(self.index, self.models, config=cfg.global_search.model_copy(update=overrides))
        if name == "drift":
            return DriftSearch(self.index, self.models, config=cfg.drift)
        if name == "basic":
            return BasicSearch(self.index, self.models, config=cfg.basic)
        raise ValueError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")

    def _routed_engine(self, name: str, budget: Budget | None) -> Engine:
        """The engine a route to `name` runs: global search pre-ranked (the cheaper configuration), else `name`."""
        return self._prerank_engine(budget) if name in ("global", "global_prerank") else self.engine(name)

    def _prerank_engine(self, budget: Budget | None) -> Engine:
        """Global search with pre-ranking: the configured share of report tokens, and no more map calls
        than the call budget leaves room for (one reduce and a possible escalation aside). Built once per
        map-call cap, like every other engine."""
        cap = self.config.global_search.max_map_calls
        if budget is not None and budget.max_llm_calls is not None:
            room = max(1, budget.max_llm_calls - 2)
            cap = room if cap is None else min(cap, room)
        key = f"global_prerank:{cap}"
        with self._lock:
            if key not in self._engines:
                self._engines[key] = (self._make_engine("global_prerank", max_map_calls=cap) if cap
                                      else self._make_engine("global_prerank"))
            return self._engines[key]

    # ---- the question pipeline ------------------------------------------------------------------

    async def _prepare(
        self,
        question: str,
        history: HistoryLike,
        mode: str,
        usage: Usage,
        deadline: float | None = None,
        degraded: list[str] | None = None,
        query_plan: QueryPlan | None = None,
        classify_forced: bool = False,
        budget: Budget | None = None,
    ) -> tuple[str, list[Message], RouteDecision]:
        from router.classifier import classify

        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")

        notes = degraded if degraded is not None else []
        turns, history_note = limit_history(normalise_history(history), self.index.tokenizer)
        if history_note:
            notes.append(f"history: {history_note}")
        standalone = question
        if turns and self.config.router.rewrite_followups:
            standalone = await self._rewrite(question, turns, usage, deadline, notes)
        if mode != "auto" and not classify_forced:  # the caller chose: nothing to classify
            return standalone, turns, forced_decision(mode)
        t0 = time.perf_counter()
        # the classifier links through the plan, so the engine can reuse that linking
        linker = query_plan.linker(self.index) if query_plan is not None and standalone == query_plan.question else None
        decision = await asyncio.to_thread(classify, standalone, self.index, history=user_turns(turns), linker=linker)
        if mode == "auto":
            decision = await self._commit(standalone, decision, usage, deadline, budget)
        usage.add_seconds("classify", time.perf_counter() - t0)
        if mode != "auto":
            forced = _route_engine(mode) if mode != "basic" else decision.engine  # basic is not a routed class
            decision = replace(
                decision, engine=forced, reasons=[f"mode '{mode}' requested by the caller", *decision.reasons]
            )
        return standalone, turns, decision

    def _commitment(self, question: str, decision: RouteDecision, budget: Budget | None, *, can_ask: bool
                    ) -> tuple[Verdict, RouteDecision]:
        """The commitment rule (`router.commitment`) on this index's estimates; no model call."""
        engines = ("local", decision.engine) if decision.engine != "local" else ()
        estimates = {e: self._routed_engine(e, budget).estimate(question) for e in engines}
        # nothing named in the index for DRIFT to start from: no vote can make it DRIFT, so none is asked
        can_ask = can_ask and decision.method not in (NOT_COVERED, NAMES_NOTHING)
        made = commit(decision, estimates, self.config.router, can_ask=can_ask, budget=budget)
        return made.verdict, made.decision

    async def _commit(self, question: str, decision: RouteDecision, usage: Usage, deadline: float | None,
                      budget: Budget | None) -> RouteDecision:
        """Commit, ask the chat model once where the rule says it pays, or start local (`router.commitment`)."""
        verdict, decision = await asyncio.to_thread(self._commitment, question, decision, budget,
                                                    can_ask=not self.models.offline)
        if verdict is not Verdict.ASK:
            return decision
        return after_second_opinion(decision, await self._llm_second_opinion(question, decision, usage, deadline))

    async def _rewrite(
        self, question: str, turns: list[Message], usage: Usage, deadline: float | None, notes: list[str]
    ) -> str:
        """The standalone form of a follow-up; an optional stage: on any failure the question goes on as asked."""
        t0 = time.perf_counter()
        try:
            standalone, completions = await _within(
                deadline, rewrite_question(question, turns, self.models.chat("rewrite"),
                                           self.config.router.rewrite_prompt)
            )
        except TimeoutError:
            notes.append("rewrite: the deadline left no time to rewrite the follow-up; it was used as asked")
            return question
        except StructuredOutputError as err:
            for c in err.completions:
                usage.add_completion("rewrite", c)
            notes.append(f"rewrite: failed, the follow-up was used as asked ({err})")
            return question
        except ModelError as err:
            notes.append(f"rewrite: failed, the follow-up was used as asked ({err})")
            return question
        finally:
            usage.add_seconds("rewrite", time.perf_counter() - t0)
        for c in completions:
            usage.add_completion("rewrite", c)
        return standalone

    async def _llm_second_opinion(
        self, question: str, decision: RouteDecision, usage: Usage, deadline: float | None = None
    ) -> RouteDecision:
        from router.classifier import classify_with_llm

        try:
            new_decision, completions = await _within(deadline, classify_with_llm(
                question, self.models.chat("classify"), decision, threshold=1.0  # the commitment rule asked
            ))
        except TimeoutError:
            return replace(decision, reasons=[*decision.reasons, "model classifier skipped: the deadline was near"])
        except ModelError as err:  # a failed second opinion must never fail the question; a bug still surfaces
            for c in getattr(err, "completions", ()):  # StructuredOutputError carries what was paid for
                usage.add_completion("classify", c)
            return replace(decision, reasons=[*decision.reasons, f"model classifier unavailable: {err}"])
        for c in completions:
            usage.add_completion("classify", c)
        return new_decision

    async def aroute(
        self, question: str, history: HistoryLike = None, budget: Budget | None = None
    ) -> tuple[RouteDecision, Plan]:
        """The decision and plan `aask` starts from, with no model call: the question and history get the same
        checks and limits, but a follow-up is not rewritten and no model second opinion is asked: an expensive route
        below its commitment threshold starts with local search, as offline (`router.commitment`)."""
        from router.classifier import classify

        query_plan = plan_question(question, self.index)
        turns, _ = limit_history(normalise_history(history), self.index.tokenizer)

        def decide() -> tuple[RouteDecision, Plan]:
            decision = classify(query_plan.question, self.index, history=user_turns(turns),
                                linker=query_plan.linker(self.index))
            _, decision = self._commitment(query_plan.question, decision, budget, can_ask=False)
            plan, _ = self.plan(query_plan.question, decision.engine, budget, query_plan)
            return decision, plan

        return await asyncio.to_thread(decide)

    def plan(
        self, question: str, engine: str, budget: Budget | None, query_plan: QueryPlan | None = None
    ) -> tuple[Plan, Engine]:
        """Pick the first engine on the step-down ladder whose estimate fits the budget (no model calls)."""
        ladder = LADDER.get(engine, (engine,))
        if budget is None or budget.unlimited:
            return Plan(chosen=engine), self.engine(engine)
        steps: list[PlanStep] = []
        for name in ladder:
            eng = self._prerank_engine(budget) if name == "global_prerank" else self.engine(name)
            est = eng.estimate(question, query_plan)
            why = check_fit(est, budget)
            steps.append(PlanStep(name, est.llm_calls, est.cost, est.seconds_guess, not why, why))
            if not why:
                return Plan(chosen=name, steps=steps), eng
        raise BudgetError(
            "no engine fits the budget: " + "; ".join(f"{s.engine} needs {s.why_not}" for s in steps)
        )

    async def aask(
        self,
        question: str,
        history: HistoryLike = None,
        mode: str | None = None,
        budget: Budget | None = None,
        *,
        admit: Admit | None = None,
        scope: Scope | None = None,
    ) -> Answer:
        answer: Answer | None = None
        async for event in self.astream(question, history=history, mode=mode, budget=budget, deltas=False,
                                        admit=admit, scope=scope):
            if isinstance(event, Done):
                answer = event.answer
        assert answer is not None  # astream always ends with Done or raises
        return answer

    def ask(
        self,
        question: str,
        history: HistoryLike = None,
        mode: str | None = None,
        budget: Budget | None = None,
        scope: Scope | None = None,
    ) -> Answer:
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
        from engines.events import AnswerDelta, Final

        if scope is not None:  # answered over the index cut to the scope (`router.scoped`)
            from router.scoped import scoped_stream

            async for scoped in scoped_stream(self, scope, question, history, mode, budget, deltas=deltas,
                                              classify_forced=classify_forced):
                yield scoped
            return
        started = time.perf_counter()
        query_plan = plan_question(question, self.index)  # the engines' own limits, checked once, before any call
        q = query_plan.question
        mode = self.config.router.default_mode if mode is None else mode
        usage = Usage()
        cfg_budget = self.config.router
        if budget is None and any(
            v is not None for v in (cfg_budget.max_cost, cfg_budget.max_llm_calls, cfg_budget.deadline_s)
        ):
            budget = Budget(cfg_budget.max_cost, cfg_budget.max_llm_calls, cfg_budget.deadline_s)
        deadline = started + budget.deadline_s if budget and budget.deadline_s is not None else None
        deadline_s = budget.deadline_s if budget and budget.deadline_s is not None else 0.0

        degraded: list[str] = []
        standalone, turns, decision = await self._prepare(q, history, mode, usage, deadline, degraded, query_plan,
                                                          classify_forced, budget)
        await self._vectors.ensure(deadline, degraded)  # a remote embedder's first use: its size, bounded
        if standalone != q:  # a rewritten follow-up is its own question
            query_plan = plan_question(standalone, self.index)
        target: str = "basic" if mode == "basic" else decision.engine
        if mode == "auto" and target == "global":
            target = "global_prerank"  # the router's global step is the cheaper configuration
        try:
            if (budget is None or budget.unlimited) and target in self._engines:
                plan, eng = Plan(chosen=target), self._engines[target]  # nothing to estimate or build
            else:  # building an engine (first use may fit the embedder) and estimates are CPU work: off the loop
                plan, eng = await asyncio.to_thread(self.plan, standalone, target, budget, query_plan)
        except BudgetError as err:
            err.usage = usage  # a rewrite may already have been paid for
            raise
        if admit is not None:
            step = next((s for s in plan.steps if s.engine == plan.chosen), None)
            if step is None:  # no budget: nothing was estimated yet
                est = await asyncio.to_thread(eng.estimate, standalone, query_plan)
                step = PlanStep(plan.chosen, est.llm_calls, est.cost, est.seconds_guess, True)
            await admit(step)
        yield RouteDecided(decision, plan.chosen, plan.describe())

        escalations: list[Escalation] = []
        current = plan.chosen
        tried = [current]
        result = None
        best = None  # the last result any engine produced (an empty one still beats none)
        failure: EngineError | ModelError | None = None
        notes = list(self.notes)
        fell_back = False
        spent_before = (usage.total.llm_calls, usage.total.cost)  # what the steps before the engines cost
        while True:
            result, failure = None, None
            try:
                async for ev in self._stream_engine(eng, standalone, turns, deadline, deadline_s, current,
                                                    query_plan, deltas):
                    if isinstance(ev, Final):
                        result = ev.result
                    elif deltas or not isinstance(ev, AnswerDelta):
                        yield EngineEvent(current, ev)
            except (EngineError, ModelError) as err:
                spent = getattr(err, "usage", None)  # a ModelError carries it once attached
                if spent is not None:
                    usage.merge(spent)
                if isinstance(err, ModelError) and endpoint_failure(err):
                    err.message = f"{public_name(current)} search: {err.message}"  # the engine that met it
                failure = err
                degraded.append(f"{public_name(current)} search failed: {err}")
            if result is not None:
                best = result
                usage.merge(result.usage)
                degraded.extend(f"{d.stage}: {d.reason}" for d in result.degraded)
            if deadline is not None and time.perf_counter() >= deadline:
                break  # whatever the deadline left is the answer
            options, reason = await self._next_step(current, decision, result, failure, standalone, notes,
                                                    may_escalate=mode == "auto" and not fell_back)
            fell_back = fell_back or failure is not None
            nxt = next((e for e in options if e not in tried), None)
            if nxt is None:
                break
            over = await asyncio.to_thread(self._over_remaining_budget, nxt, standalone, budget, usage)
            if over:
                degraded.append(f"escalation to {public_name(nxt)} skipped: {over}")
                break
            so_far = usage.total
            esc = Escalation(public_name(current), public_name(nxt), reason,
                             calls=so_far.llm_calls - spent_before[0], cost=so_far.cost - spent_before[1])
            spent_before = (so_far.llm_calls, so_far.cost)
            escalations.append(esc)
            yield Escalated(esc)
            current, eng = nxt, await asyncio.to_thread(self._routed_engine, nxt, budget)
            tried.append(nxt)

        if result is None and best is not None:
            result = best
            current = best.engine
        if result is None:
            final_error = failure if failure is not None else DeadlineExceeded(deadline_s, stage="answer", engine=current)
            final_error.usage = usage  # everything spent on this question, rewrite and every engine tried included
            raise final_error
        answer = Answer(
            question=q,
            standalone_question=standalone,
            text=result.response,
            route=decision,
            engine=public_name(current),
            usage=usage,
            model=result.model,
            offline=result.offline,
            seconds=time.perf_counter() - started,
            result=result,
            plan=plan.describe(),
            stepped_down_from=target if plan.chosen != target else None,
            escalations=escalations,
            degraded=degraded,
            notes=notes,
        )
        yield Done(answer)

    async def _next_step(self, current: str, decision: RouteDecision, result: SearchResult | None,
                         failure: BaseException | None, question: str, notes: list[str], *, may_escalate: bool
                         ) -> tuple[tuple[str, ...], str]:
        """Where to go after `current` (`router.escalation`), and why; nothing when its answer stands."""
        if failure is not None:
            if endpoint_failure(failure):
                return (), ""  # the same endpoint would fail every engine: fail fast, naming this one
            if not worth_falling_back(failure):
                return (), ""
            reason = "failed"
            if isinstance(failure, EngineError) and failure.stage:
                reason = f"failed at stage {failure.stage}; falling back to an engine that needs no JSON"
            return FALLBACK.get(current, ()), reason
        if result is None:
            return (), ""
        empty = result.empty and self.config.router.escalate_on_empty
        # a forced engine, or one a failure fell back to, is the caller's or the last resort: not escalated past
        insufficient = result.insufficient and self.config.router.escalate_on_insufficient and may_escalate
        if not (empty or insufficient):
            return (), ""
        coverage = await asyncio.to_thread(term_coverage, self.index, question)
        evidence, why = has_evidence(decision, coverage)
        options = next_engines(current, decision, empty=empty, insufficient=insufficient, evidence=evidence)
        if not evidence and not any(n.startswith("not escalated") for n in notes):
            notes.append(f"not escalated beyond {'basic' if options else public_name(current)} search: {why}")
        if empty:
            return options, result.empty_reason or "found nothing"
        return options, (f"the {public_name(current)} answer says its context does not answer the question; {why}")

    def _over_remaining_budget(self, engine: str, question: str, budget: Budget | None, usage: Usage) -> str:
        """Why escalating to `engine` would break the budget ('' when it fits)."""
        if budget is None or budget.unlimited:
            return ""
        spent = usage.total
        calls_left = None if budget.max_llm_calls is None else budget.max_llm_calls - spent.llm_calls
        if calls_left is not None and calls_left < 1:
            return "no model calls left in the budget"
        remaining = Budget(
            None if budget.max_cost is None else max(0.0, budget.max_cost - spent.cost), calls_left, None
        )
        why = check_fit(self.engine(engine).estimate(question), remaining)
        return f"over the remaining budget ({why})" if why else ""

    async def _stream_engine(
        self, eng: Engine, question: str, turns: list[Message], deadline: float | None, deadline_s: float, name: str,
        query_plan: QueryPlan | None = None,
        deltas: bool = True,
    ) -> AsyncGenerator[Event, None]:
        """The engine's events. The engine stops itself at the deadline (returning its partial result);
        the router only steps in when an engine overruns it by more than DEADLINE_GRACE_S."""
        if deadline is not None and time.perf_counter() >= deadline:  # e.g. a slow rewrite took it all
            raise DeadlineExceeded(deadline_s, stage="answer", engine=public_name(name))
        stream = eng.stream(question, history=turns or None, deadline=deadline,
                            deadline_s=deadline_s if deadline is not None else None, plan=query_plan,
                            deltas=deltas)
        try:
            while True:
                try:
                    if deadline is None:
                        ev = await stream.__anext__()
                    else:
                        left = deadline + DEADLINE_GRACE_S - time.perf_counter()
                        ev = await asyncio.wait_for(stream.__anext__(), timeout=max(left, DEADLINE_GRACE_S / 4))
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise DeadlineExceeded(deadline_s, stage="answer", engine=public_name(name)) from None
                yield ev
        finally:
            await stream.aclose()


async def _within(deadline: float | None, coro: Coroutine[object, object, T]) -> T:
    """Await `coro`, cut at the deadline (TimeoutError) when there is one."""
    if deadline is None:
        return await coro
    return await asyncio.wait_for(coro, timeout=max(0.0, deadline - time.perf_counter()))


class _VectorCheck:
    """Whether a remote embedder's vectors fit the index's stored ones, found out without a network call in
    the constructor.

    A configured `dimensions` is checked at once. Otherwise the first question (or `graphroute serve`'s
    start-up check) asks the endpoint for one short embedding, cut at `probe_timeout_s` and the question's
    deadline. Until that has answered, `embedder.dim` is 0, so no engine asks for a query vector: a
    question goes on with names and keywords and says so, naming the endpoint, and the check is tried again
    after `RETRY_S`. Vectors of another size are an `IndexFormatError` naming the table, for every question.
    """

    RETRY_S = 30.0

    def __init__(self, index: Index, models: Models) -> None:
        self._index = index
        self._models = models
        embedding = models.config.embedding
        self.done = embedding.offline or not index.vectors
        self._error: Exception | None = None
        self._retry_at = 0.0
        self._note = ""
        if self.done:
            return
        if embedding.dimensions:
            index.check_embedding_dim(embedding.dimensions, embedding.model)
            self.done = True
        else:
            models.embedder  # noqa: B018 - built now: a missing key is an error here, with no network call

    async def ensure(self, deadline: float | None, notes: list[str]) -> None:
        if self.done:
            return
        if self._error is not None:
            raise self._error
        now = time.perf_counter()
        if now < self._retry_at:
            notes.append(self._note)
            return
        from engines.models.probe import Probed, check_endpoint

        embedder = self._models.embedder
        if embedder.dim or not isinstance(embedder, Probed):  # its size is known (or it cannot be asked)
            self._check_size()
            return
        bound = self._models.config.embedding.probe_timeout_s
        if deadline is not None:
            bound = min(bound, deadline - now)
        if bound <= 0:
            notes.append("embeddings: the deadline left no time to check the embedding endpoint; matched by "
                         "names and keywords, without the index's vectors")
            return
        self.settle(await check_endpoint("embedding", embedder, bound))
        if self._error is not None:
            raise self._error
        if not self.done:
            notes.append(self._note)

    def _check_size(self) -> None:
        """IndexFormatError (kept for every later question) when the embedder's size differs from the stored
        vectors'; done when it fits (or is not known: an embedder of the caller's own that reports none)."""
        embedder = self._models.embedder
        if embedder.dim:
            try:
                self._index.check_embedding_dim(embedder.dim, embedder.name)
            except ValueError as err:
                self._error = err
                raise
        self.done = True

    def settle(self, check: EndpointCheck) -> EndpointCheck:
        """Record what the embedding endpoint's check found; the check, marked "error" when the size differs."""
        if self.done:
            return check
        if not check.ok:
            self._note = (f"embeddings: {check.line()}; matched by names and keywords, without the index's vectors "
                          f"(checked again after {self.RETRY_S:g} s)")
            self._retry_at = time.perf_counter() + self.RETRY_S
            return check
        try:
            self._check_size()
        except ValueError as err:
            return replace(check, status="error", detail=str(err))
        return check


def _foreign_vector_notes(stored: dict[str, tuple[int, str | None]], models: Models) -> list[str]:
    embedding = models.config.embedding
    if not stored:
        return []
    ours = embedding.model
    foreign = {name: dim for name, (dim, model) in stored.items() if model != ours}
    if not foreign or not embedding.offline:
        return []
    tables = ", ".join(f"{name} (dim {dim})" for name, dim in sorted(foreign.items()))
    return [
        f"the index's stored vectors ({tables}) come from an embedding model that is not configured; "
        f"questions are matched with exact names, keywords and the offline embedder ({ours}) fitted on this index"
    ]


def forced_decision(mode: str) -> RouteDecision:
    """The route of a question whose caller chose the engine: no classifier ran, so it has no opinion."""
    from router.classifier import RouteDecision

    return RouteDecision(engine=_route_engine(mode), confidence=1.0, probabilities={mode: 1.0},
                         reasons=[f"mode '{mode}' forced by the caller (the classifier was not run)"], method="forced")


def _route_engine(mode: str) -> RoutedEngine:
    """A forced mode as the route's engine. "basic" is not one of the classifier's classes; a route forced to
    it still names it (the answer says which engine the caller asked for)."""
    return cast("RoutedEngine", mode)


def public_name(engine: str) -> str:
    """Internal variants (global search with pre-ranking) report as the engine users know."""
    return "global" if engine == "global_prerank" else engine


def _build_models(config: GraphrouteConfig, index: Index) -> Models:
    from engines.models.factory import Models

    return Models.from_config(config.models, index=index)
