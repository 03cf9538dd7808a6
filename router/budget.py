"""Per-query budgets and the step-down plan that keeps a question inside them before any model call."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from engines.models.base import Usage


class BudgetError(ValueError):
    """The budget cannot be met by any engine (the message says which limit and by how much), or a
    budget value is invalid. `usage` is what the question spent before the refusal (e.g. a rewrite)."""

    usage: Usage | None = None


@dataclass(frozen=True)
class Budget:
    """Hard limits for one question. `None` means unlimited."""

    max_cost: float | None = None  # US dollars, from the price table
    max_llm_calls: int | None = None
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        # NaN compares false with everything, so a plain `< 0` check would let it mean "unlimited".
        _check_number("max_cost", self.max_cost, minimum=0.0, inclusive=True)
        _check_number("max_llm_calls", self.max_llm_calls, minimum=1, inclusive=True, integer=True)
        _check_number("deadline_s", self.deadline_s, minimum=0.0, inclusive=False)

    @property
    def unlimited(self) -> bool:
        return self.max_cost is None and self.max_llm_calls is None and self.deadline_s is None


def _check_number(name: str, value: object, *, minimum: float, inclusive: bool, integer: bool = False) -> None:
    if value is None:
        return
    kind = "a whole number" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, Integral if integer else Real):
        raise BudgetError(f"budget {name} must be {kind} or None, got {value!r} ({type(value).__name__})")
    if not math.isfinite(value):
        raise BudgetError(f"budget {name} must be a finite number, got {value!r} (use None for no limit)")
    if value < minimum or (value == minimum and not inclusive):
        raise BudgetError(f"budget {name} must be {'>=' if inclusive else '>'} {minimum:g}, got {value!r}")


class EstimateLike(Protocol):
    """What a budget check reads of an estimate (`engines.estimate.CostEstimate`)."""

    @property
    def llm_calls(self) -> int: ...

    @property
    def cost(self) -> float: ...

    @property
    def seconds_guess(self) -> float: ...


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
