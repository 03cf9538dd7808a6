"""The routing policy: check the question once, rewrite a follow-up, classify, ask the chat model for a second
opinion where the commitment rule says it pays (`router.commitment`), and hand on one frozen `RoutedQuestion`.

The `RoutedQuestion` is what the estimates and the engine read and never fill: the question as asked and its
standalone form, the bounded history, the deadline, the lexical linking the classifier used (so the engine
links the same text once), the decision and the budget. Estimates made while committing come back beside it,
so the budget ladder does not build the same context again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeVar, cast

from engines.models.errors import ModelError, StructuredOutputError
from engines.plan import Question, check_question, prepare_question
from router.budget import Budget
from router.classifier import NAMES_NOTHING, NOT_COVERED
from router.commitment import Verdict, after_second_opinion, commit
from router.rewrite import rewrite_question, user_turns

if TYPE_CHECKING:
    from engines.estimate import CostEstimate
    from engines.models.base import Usage
    from engines.plan import HistoryLike
    from router.classifier import Engine as RoutedEngine
    from router.classifier import RouteDecision
    from router.lifecycle import RouterLifecycle

T = TypeVar("T")
MODES = ("auto", "local", "global", "drift", "basic")
Estimates = Mapping[str, "CostEstimate"]  # engine name (as the ladder names it) -> its estimate


@dataclass(frozen=True, kw_only=True)
class RoutedQuestion(Question):
    """A question checked once and routed: `asked` is the caller's text (stripped), `text` what the engines
    answer (a rewritten follow-up's standalone form, else the same)."""

    asked: str
    mode: str
    decision: RouteDecision
    budget: Budget | None = None


class RoutingPolicy:
    """Turns a question into its `RoutedQuestion`; the lifecycle gives it the index, models and engines."""

    def __init__(self, lifecycle: RouterLifecycle) -> None:
        self.life = lifecycle

    def budget(self, budget: Budget | None) -> Budget | None:
        """The caller's budget, else the configured one (`[router]`), else none."""
        cfg = self.life.config.router
        if budget is None and any(v is not None for v in (cfg.max_cost, cfg.max_llm_calls, cfg.deadline_s)):
            return Budget(cfg.max_cost, cfg.max_llm_calls, cfg.deadline_s)
        return budget

    async def route(self, question: str, history: HistoryLike, mode: str, budget: Budget | None, usage: Usage,
                    notes: list[str], *, started: float, classify_forced: bool = False
                    ) -> tuple[RoutedQuestion, Estimates]:
        """The routed question and the estimates committing made; ValueError on bad input, before any call."""
        from router.classifier import classify

        deadline_s = budget.deadline_s if budget is not None else None
        checked = prepare_question(question, self.life.index, history, deadline_s=deadline_s, started=started)
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        if checked.history_note:
            notes.append(f"history: {checked.history_note}")
        if checked.history and self.life.config.router.rewrite_followups:
            standalone = await self._rewrite(checked, usage, notes)
            if standalone != checked.text:  # a rewritten follow-up is its own question
                link_text, link_note = check_question(standalone, self.life.index)
                checked = replace(checked, text=standalone.strip(), link_text=link_text, link_note=link_note)
        if mode != "auto" and not classify_forced:  # the caller chose: nothing to classify
            return _routed(checked, question, mode, forced_decision(mode), budget), {}
        t0 = time.perf_counter()
        checked = await asyncio.to_thread(checked.with_linking, self.life.index)  # the engine reuses it
        turns = user_turns(checked.history) if checked.history else ()
        decision = await asyncio.to_thread(classify, checked.text, self.life.index, history=turns,
                                           linker=checked.linker(self.life.index))
        estimates: Estimates = {}
        if mode == "auto":
            decision, estimates = await self._commit(checked, decision, usage, budget)
        usage.add_seconds("classify", time.perf_counter() - t0)
        if mode != "auto":
            forced = _route_engine(mode) if mode != "basic" else decision.engine  # basic is not a routed class
            decision = replace(decision, engine=forced,
                               reasons=[f"mode '{mode}' requested by the caller", *decision.reasons])
        return _routed(checked, question, mode, decision, budget), estimates

    def decide(self, question: str, history: HistoryLike, budget: Budget | None) -> tuple[RoutedQuestion, Estimates]:
        """The route with no model call: no rewrite, no second opinion (an expensive route below its commitment
        threshold starts with local search, as offline). CPU work: run it in a worker thread."""
        from router.classifier import classify

        checked = prepare_question(question, self.life.index, history).with_linking(self.life.index)
        turns = user_turns(checked.history) if checked.history else ()
        decision = classify(checked.text, self.life.index, history=turns, linker=checked.linker(self.life.index))
        _, decision, estimates = self.commitment(checked, decision, budget, can_ask=False)
        return _routed(checked, question, "auto", decision, budget), estimates

    def commitment(self, asked: Question, decision: RouteDecision, budget: Budget | None, *, can_ask: bool
                   ) -> tuple[Verdict, RouteDecision, Estimates]:
        """The commitment rule (`router.commitment`) on this index's estimates; no model call. The estimates are
        keyed as the budget ladder names the engines (a route to global runs pre-ranked)."""
        engines = ("local", decision.engine) if decision.engine != "local" else ()
        estimates = {e: self.life.routed_engine(e, budget).estimate(asked) for e in engines}
        # nothing named in the index for DRIFT to start from: no vote can make it DRIFT, so none is asked
        can_ask = can_ask and decision.method not in (NOT_COVERED, NAMES_NOTHING)
        made = commit(decision, estimates, self.life.config.router, can_ask=can_ask, budget=budget)
        ladder_names = {("global_prerank" if e == "global" else e): est for e, est in estimates.items()}
        return made.verdict, made.decision, ladder_names

    async def _commit(self, asked: Question, decision: RouteDecision, usage: Usage, budget: Budget | None
                      ) -> tuple[RouteDecision, Estimates]:
        """Commit, ask the chat model once where the rule says it pays, or start local (`router.commitment`)."""
        verdict, decision, estimates = await asyncio.to_thread(self.commitment, asked, decision, budget,
                                                               can_ask=not self.life.offline)
        if verdict is Verdict.ASK:
            decision = after_second_opinion(decision, await self._second_opinion(asked, decision, usage))
        return decision, estimates

    async def _rewrite(self, asked: Question, usage: Usage, notes: list[str]) -> str:
        """The standalone form of a follow-up; an optional stage: on any failure the question goes on as asked."""
        t0 = time.perf_counter()
        try:
            standalone, completions = await _within(asked.deadline, rewrite_question(
                asked.text, list(asked.history), self.life.models.chat("rewrite"),
                self.life.config.router.rewrite_prompt))
        except TimeoutError:
            notes.append("rewrite: the deadline left no time to rewrite the follow-up; it was used as asked")
            return asked.text
        except StructuredOutputError as err:
            for c in err.completions:
                usage.add_completion("rewrite", c)
            notes.append(f"rewrite: failed, the follow-up was used as asked ({err})")
            return asked.text
        except ModelError as err:
            notes.append(f"rewrite: failed, the follow-up was used as asked ({err})")
            return asked.text
        finally:
            usage.add_seconds("rewrite", time.perf_counter() - t0)
        for c in completions:
            usage.add_completion("rewrite", c)
        return standalone

    async def _second_opinion(self, asked: Question, decision: RouteDecision, usage: Usage) -> RouteDecision:
        from router.classifier import classify_with_llm

        try:
            new_decision, completions = await _within(asked.deadline, classify_with_llm(
                asked.text, self.life.models.chat("classify"), decision, threshold=1.0  # the commitment rule asked
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


def _routed(checked: Question, asked: str, mode: str, decision: RouteDecision, budget: Budget | None
            ) -> RoutedQuestion:
    fields = {name: getattr(checked, name) for name in Question.__dataclass_fields__}
    return RoutedQuestion(**fields, asked=asked.strip(), mode=mode, decision=decision, budget=budget)


async def _within(deadline: float | None, coro: Coroutine[object, object, T]) -> T:
    """Await `coro`, cut at the deadline (TimeoutError) when there is one."""
    if deadline is None:
        return await coro
    return await asyncio.wait_for(coro, timeout=max(0.0, deadline - time.perf_counter()))


def forced_decision(mode: str) -> RouteDecision:
    """The route of a question whose caller chose the engine: no classifier ran, so it has no opinion."""
    from router.classifier import RouteDecision

    return RouteDecision(engine=_route_engine(mode), confidence=1.0, probabilities={mode: 1.0},
                         reasons=[f"mode '{mode}' forced by the caller (the classifier was not run)"], method="forced")


def _route_engine(mode: str) -> RoutedEngine:
    """A forced mode as the route's engine. "basic" is not one of the classifier's classes; a route forced to
    it still names it (the answer says which engine the caller asked for)."""
    return cast("RoutedEngine", mode)
