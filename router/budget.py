"""Per-query budgets: a question's hard limits (checked when made), and what a budget check reads of an estimate.

The step-down plan that keeps a question inside its budget before any model call is the answer loop's
(`router.answer_loop`: `Plan`, `LADDER`, `check_fit`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
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
