"""Commit by expected cost: how sure the router must be before it spends DRIFT's or global search's calls.

A wrong local answer costs one call and can escalate; a wrong DRIFT answer costs twenty and nothing catches it.
So the confidence an engine needs grows with what it costs here, against local search on the same question
(`CostEstimate`s: dollars when priced, else model calls):

    threshold(engine) = clamp(1 - commit_cost_slack / ratio, llm_classifier_threshold, commit_ceiling)

With the default slack of 2, an engine at 11 times local's cost (global search on a small index) needs 0.82,
one at 21 times (DRIFT) 0.90. Starting local and escalating costs 1 + q x ratio calls when a share q of the
local answers turns out insufficient, against `ratio` for committing at once: committing pays only when the
route is nearly certain. The slack of 2 allows for escalation's misses (an answer that looks sufficient but is
not); the ceiling keeps the most expensive routes reachable by confident questions at all.

Below its threshold an expensive route is confirmed or corrected by one classification call to the chat model
(`Verdict.ASK`); offline, or when the budget leaves no room for that call, the question starts with local search
and escalates to the routed engine if local's answer is insufficient (`Verdict.START_LOCAL`). A local route is
never held back; below `llm_classifier_threshold` it is checked by the model as before.

**The index decides DRIFT.** The wording alone is rarely sure a question needs DRIFT (local search also answers
most questions worded like DRIFT ones, so a calibrated DRIFT confidence seldom reaches its threshold). What shows
DRIFT is needed is where the evidence sits: a question that names two or more things of the index whose evidence
spreads over several documents (`evidence_spread.drift_needed`) is committed to DRIFT below its threshold
(`[router] commit_drift_on_index_evidence`, on by default). Without that evidence the rule above applies. `reasons` says which
rule decided and what it saved.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import TYPE_CHECKING

from router.evidence_spread import drift_needed

if TYPE_CHECKING:
    from engines.config import RouterConfig
    from router.budget import Budget, EstimateLike
    from router.classifier import RouteDecision

COMMITTED = "+committed"
START_LOCAL = "+local-first"


class Verdict(Enum):
    COMMIT = "commit"  # run the routed engine
    ASK = "ask"  # ask the chat model once, then run what it confirms or corrects to
    START_LOCAL = "start_local"  # local search first, escalating to the routed engine


@dataclass(frozen=True)
class Commitment:
    verdict: Verdict
    decision: RouteDecision  # what to run (for START_LOCAL: local, with the routed engine as fallback)
    threshold: float
    ratio: float  # the routed engine's estimated cost over local's on this question


def cost_ratio(engine: EstimateLike, local: EstimateLike) -> float:
    """How many times local search's cost `engine` is estimated to cost: by dollars when both are priced, else
    by model calls (an offline or unpriced model costs $0, but its calls still take time)."""
    if engine.cost > 0 and local.cost > 0:
        return engine.cost / local.cost
    return engine.llm_calls / max(1, local.llm_calls)


def threshold(ratio: float, config: RouterConfig) -> float:
    """The confidence an engine costing `ratio` times local search needs to be committed to."""
    floor = config.llm_classifier_threshold
    if ratio <= 1.0:
        return floor
    return max(floor, min(config.commit_ceiling, 1.0 - config.commit_cost_slack / ratio))


def commit(decision: RouteDecision, estimates: Mapping[str, EstimateLike], config: RouterConfig, *,
           can_ask: bool, budget: Budget | None) -> Commitment:
    """What to do with a classifier decision, given the estimates of its engine and of local search (no call).

    `can_ask`: a chat model that is not the offline one is configured. A budget whose calls cannot pay for the
    classification call and the routed engine leaves no room to ask.
    """
    engine = decision.engine
    if engine == "local" or engine not in estimates:
        below = decision.confidence < config.llm_classifier_threshold
        return Commitment(Verdict.ASK if below and can_ask else Verdict.COMMIT, decision,
                          config.llm_classifier_threshold, 1.0)
    routed, local = estimates[engine], estimates["local"]
    ratio = cost_ratio(routed, local)
    needed = threshold(ratio, config)
    cost = f"about {ratio:.0f}x local search's cost here ({routed.llm_calls} calls against {local.llm_calls})"
    if decision.confidence >= needed:
        why = f"committed to {engine}: confidence {decision.confidence:.2f} >= {needed:.2f}, the threshold of an " \
              f"engine at {cost}"
        return Commitment(Verdict.COMMIT, _noted(decision, why, COMMITTED), needed, ratio)
    spread = drift_needed(decision.signals) if engine == "drift" and config.commit_drift_on_index_evidence else ""
    if spread:
        why = f"committed to drift: {spread}, which the question's named things connect across (confidence " \
              f"{decision.confidence:.2f}, below the {needed:.2f} of an engine at {cost}, is not needed then)"
        return Commitment(Verdict.COMMIT, _noted(decision, why, COMMITTED), needed, ratio)
    room = budget is None or budget.max_llm_calls is None or budget.max_llm_calls >= routed.llm_calls + 1
    if can_ask and room:
        why = f"{engine} below its threshold ({decision.confidence:.2f} < {needed:.2f}; {cost}): the chat model " \
              "was asked to confirm or correct it"
        return Commitment(Verdict.ASK, _noted(decision, why, ""), needed, ratio)
    saved = routed.llm_calls - local.llm_calls
    unasked = "offline" if not can_ask else "the budget leaves no room for a second opinion"
    why = f"{engine} below its threshold ({decision.confidence:.2f} < {needed:.2f}; {cost}) and {unasked}: " \
          f"started with local search, saving about {saved} calls unless its answer is insufficient, when it " \
          f"escalates to {engine}"
    start = replace(_noted(decision, why, START_LOCAL), engine="local", fallbacks=(engine, *decision.fallbacks))
    return Commitment(Verdict.START_LOCAL, start, needed, ratio)


def after_second_opinion(asked: RouteDecision, answered: RouteDecision) -> RouteDecision:
    """The decision the chat model's vote left, saying whether it confirmed or corrected the routed engine."""
    if answered.method == asked.method:  # the call failed: the decision was kept, the reason says why
        return answered
    if answered.engine == "drift" and asked.engine != "drift":
        from router.evidence_spread import drift_ruled_out

        ruled_out = drift_ruled_out(asked.signals)
        if ruled_out:  # a vote from the wording alone does not override where the index has the evidence
            return _noted(asked, f"second opinion said drift, but {ruled_out}: kept {asked.engine}", "")
    verb = "confirmed" if answered.engine == asked.engine else f"corrected {asked.engine} to"
    return _noted(answered, f"second opinion {verb} {answered.engine}", "")


def _noted(decision: RouteDecision, why: str, method_suffix: str) -> RouteDecision:
    return replace(decision, reasons=[*decision.reasons, why], method=decision.method + method_suffix)
