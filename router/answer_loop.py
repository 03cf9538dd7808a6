"""The answer loop: pick the first engine on the budget's step-down ladder whose estimate fits, run it on the
`RoutedQuestion`, and escalate or fall back where `router.escalation` says (an empty or insufficient answer
where the index has evidence; a failed engine to one that needs no JSON), within what the budget has left.

The step-down plan lives here too (`Plan`, `LADDER`, `check_fit`): from the routed engine towards cheaper ones,
the first whose estimate fits the budget (`router.budget`) before any model call. `Admit` is what the loop awaits
with the chosen engine's estimate before answering.

The engine owns the deadline (it stops itself and returns its partial result); this loop only stops
escalating once the deadline has passed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engines.errors import DeadlineExceeded, EngineError
from engines.events import AnswerDelta, Final
from engines.models.errors import ModelError
from router.answer import Answer, Escalation
from router.budget import Budget, BudgetError
from router.escalation import (
    FALLBACK,
    endpoint_failure,
    has_evidence,
    next_engines,
    term_coverage,
    worth_falling_back,
)
from router.events import Done, EngineEvent, Escalated, RouteDecided

if TYPE_CHECKING:
    from engines.engine import Engine
    from engines.models.base import Usage
    from engines.plan import Prebuilt, Question
    from engines.result import SearchResult
    from router.budget import EstimateLike
    from router.classifier import RouteDecision
    from router.events import RouterEvent
    from router.lifecycle import RouterLifecycle
    from router.routing import Estimates, RoutedQuestion


@dataclass
class PlanStep:
    engine: str  # "local" | "global" | "global_prerank" | "drift" | "basic"
    llm_calls: int
    cost: float
    seconds_guess: float
    fits: bool
    why_not: str = ""


@dataclass
class Plan:
    chosen: str
    steps: list[PlanStep] = field(default_factory=list)

    @property
    def stepped_down(self) -> bool:
        return bool(self.steps) and self.steps[0].engine != self.chosen

    def describe(self) -> list[str]:
        return [
            f"{s.engine}: ~{s.llm_calls} calls, ~${s.cost:.4f}, ~{s.seconds_guess:.1f}s"
            + ("" if s.fits else f" — over budget ({s.why_not})")
            for s in self.steps
        ]


# The step-down ladder: from the routed engine towards cheaper ones.
LADDER: dict[str, tuple[str, ...]] = {
    "drift": ("drift", "global_prerank", "local"),
    "global": ("global", "global_prerank", "local"),
    "global_prerank": ("global_prerank", "local"),
    "local": ("local",),
    "basic": ("basic",),
}


def check_fit(estimate: EstimateLike, budget: Budget) -> str:
    """Return '' when the estimate fits, else the reason it does not."""
    reasons = []
    if budget.max_llm_calls is not None and estimate.llm_calls > budget.max_llm_calls:
        reasons.append(f"{estimate.llm_calls} calls > {budget.max_llm_calls}")
    if budget.max_cost is not None and estimate.cost > budget.max_cost:
        reasons.append(f"${estimate.cost:.4f} > ${budget.max_cost:.4f}")
    # A deadline refuses only on observed latency: the default figures are a guess (~11 s for a local
    # answer) that would refuse every question on a fast endpoint. The run itself stops at the deadline.
    latency_known = getattr(estimate, "latency_known", True)
    if budget.deadline_s is not None and latency_known and estimate.seconds_guess > budget.deadline_s:
        reasons.append(f"~{estimate.seconds_guess:.1f}s > {budget.deadline_s:.1f}s deadline")
    return "; ".join(reasons)


# What `astream` awaits with the chosen engine's estimate before answering (the service's spending limits).
Admit = Callable[[PlanStep], Awaitable[None]]


class AnswerLoop:
    """Plans within the budget and answers, escalating; the lifecycle gives it the engines."""

    def __init__(self, lifecycle: RouterLifecycle) -> None:
        self.life = lifecycle

    def plan(self, question: str | Question, engine: str, budget: Budget | None, known: Estimates | None = None
             ) -> tuple[Plan, Engine, Prebuilt | None]:
        """The first engine on the step-down ladder whose estimate fits the budget (no model calls), and the
        estimate that chose it (`known`: estimates already made for this question, by ladder name)."""
        ladder = LADDER.get(engine, (engine,))
        if budget is None or budget.unlimited:
            return Plan(chosen=engine), self.life.engine(engine), None
        steps: list[PlanStep] = []
        for name in ladder:
            eng = self.life.routed_engine(name, budget)
            est = known[name] if known and name in known else eng.estimate(question)
            why = check_fit(est, budget)
            steps.append(PlanStep(name, est.llm_calls, est.cost, est.seconds_guess, not why, why))
            if not why:
                return Plan(chosen=name, steps=steps), eng, est.prebuilt
        raise BudgetError("no engine fits the budget: " + "; ".join(f"{s.engine} needs {s.why_not}" for s in steps))

    async def answer(self, routed: RoutedQuestion, known: Estimates, usage: Usage, degraded: list[str], *,
                     started: float, deltas: bool, admit: Admit | None) -> AsyncIterator[RouterEvent]:
        """`RouteDecided`, the engines' events (`EngineEvent`), `Escalated`, then `Done` with the `Answer`."""
        decision, budget = routed.decision, routed.budget
        target: str = "basic" if routed.mode == "basic" else decision.engine
        if routed.mode == "auto" and target == "global":
            target = "global_prerank"  # the router's global step is the cheaper configuration
        try:
            if (budget is None or budget.unlimited) and target in self.life.engines:
                plan, eng, prebuilt = Plan(chosen=target), self.life.engines[target], None  # nothing to estimate
            else:  # building an engine (first use may fit the embedder) and estimates are CPU work: off the loop
                plan, eng, prebuilt = await asyncio.to_thread(self.plan, routed, target, budget, known)
        except BudgetError as err:
            err.usage = usage  # a rewrite may already have been paid for
            raise
        asked: Question = routed.with_context(prebuilt)  # the estimate's context, handed on as it was built
        if admit is not None:
            step = next((s for s in plan.steps if s.engine == plan.chosen), None)
            if step is None:  # no budget: nothing was estimated yet
                est = await asyncio.to_thread(eng.estimate, asked)
                step = PlanStep(plan.chosen, est.llm_calls, est.cost, est.seconds_guess, True)
            await admit(step)
        yield RouteDecided(decision, plan.chosen, plan.describe())

        escalations: list[Escalation] = []
        current, tried = plan.chosen, [plan.chosen]
        result: SearchResult | None = None
        best = None  # the last result any engine produced (an empty one still beats none)
        failure: EngineError | ModelError | None = None
        notes = list(self.life.notes)
        fell_back = False
        spent_before = (usage.total.llm_calls, usage.total.cost)  # what the steps before the engines cost
        while True:
            result, failure = None, None
            try:
                async for ev in eng.stream(asked, deltas=deltas):
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
            if routed.deadline is not None and time.perf_counter() >= routed.deadline:
                break  # whatever the deadline left is the answer
            options, reason = await self._next_step(current, decision, result, failure, routed.text, notes,
                                                    may_escalate=routed.mode == "auto" and not fell_back)
            fell_back = fell_back or failure is not None
            nxt = next((e for e in options if e not in tried), None)
            if nxt is None:
                break
            over = await asyncio.to_thread(self._over_remaining_budget, nxt, asked, budget, usage)
            if over:
                degraded.append(f"escalation to {public_name(nxt)} skipped: {over}")
                break
            so_far = usage.total
            esc = Escalation(public_name(current), public_name(nxt), reason,
                             calls=so_far.llm_calls - spent_before[0], cost=so_far.cost - spent_before[1])
            spent_before = (so_far.llm_calls, so_far.cost)
            escalations.append(esc)
            yield Escalated(esc)
            current, eng = nxt, await asyncio.to_thread(self.life.routed_engine, nxt, budget)
            tried.append(nxt)

        if result is None and best is not None:
            result, current = best, best.engine
        if result is None:
            final_error = failure if failure is not None else DeadlineExceeded(
                routed.deadline_s or 0.0, stage="answer", engine=public_name(current))
            final_error.usage = usage  # everything spent on this question, rewrite and every engine tried included
            raise final_error
        yield Done(Answer(
            question=routed.asked, standalone_question=routed.text, text=result.response, route=decision,
            engine=public_name(current), usage=usage, model=result.model, offline=result.offline,
            seconds=time.perf_counter() - started, result=result, plan=plan.describe(),
            stepped_down_from=target if plan.chosen != target else None, escalations=escalations,
            degraded=degraded, notes=notes,
        ))

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
        cfg = self.life.config.router
        empty = result.empty and cfg.escalate_on_empty
        # a forced engine, or one a failure fell back to, is the caller's or the last resort: not escalated past
        insufficient = result.insufficient and cfg.escalate_on_insufficient and may_escalate
        if not (empty or insufficient):
            return (), ""
        coverage = await asyncio.to_thread(term_coverage, self.life.index, question)
        evidence, why = has_evidence(decision, coverage)
        options = next_engines(current, decision, empty=empty, insufficient=insufficient, evidence=evidence)
        if not evidence and not any(n.startswith("not escalated") for n in notes):
            notes.append(f"not escalated beyond {'basic' if options else public_name(current)} search: {why}")
        if empty:
            return options, result.empty_reason or "found nothing"
        return options, (f"the {public_name(current)} answer says its context does not answer the question; {why}")

    def _over_remaining_budget(self, engine: str, question: Question, budget: Budget | None, usage: Usage) -> str:
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
        why = check_fit(self.life.engine(engine).estimate(question), remaining)
        return f"over the remaining budget ({why})" if why else ""


def public_name(engine: str) -> str:
    """Internal variants (global search with pre-ranking) report as the engine users know."""
    return "global" if engine == "global_prerank" else engine
