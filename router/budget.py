"""Per-query budgets and the step-down plan that keeps a question inside them before any model call."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


class BudgetError(ValueError):
    """The budget cannot be met by any engine (the message says which limit and by how much)."""


@dataclass(frozen=True)
class Budget:
    """Hard limits for one question. `None` means unlimited."""

    max_cost: float | None = None  # US dollars, from the price table
    max_llm_calls: int | None = None
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        if self.max_cost is not None and self.max_cost < 0:
            raise BudgetError(f"budget max_cost must be >= 0, got {self.max_cost}")
        if self.max_llm_calls is not None and self.max_llm_calls < 1:
            raise BudgetError(f"budget max_llm_calls must be >= 1, got {self.max_llm_calls}")
        if self.deadline_s is not None and self.deadline_s <= 0:
            raise BudgetError(f"budget deadline_s must be > 0, got {self.deadline_s}")

    @property
    def unlimited(self) -> bool:
        return self.max_cost is None and self.max_llm_calls is None and self.deadline_s is None


class EstimateLike(Protocol):
    llm_calls: int
    cost: float
    seconds_guess: float


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
    if budget.deadline_s is not None and estimate.seconds_guess > budget.deadline_s:
        reasons.append(f"~{estimate.seconds_guess:.1f}s > {budget.deadline_s:.1f}s deadline")
    return "; ".join(reasons)
