"""The router: classify each question, plan within a budget, answer with the right engine.

Public names: `Router`, `Answer`, `Budget`, `classify`, `RouteDecision`.
Imports are lazy so `from router import classify` stays fast and does not import the engines.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real types for mypy; at run time the names load on first use (below)
    from router.answer import Answer as Answer
    from router.answer import Escalation as Escalation
    from router.budget import Budget as Budget
    from router.budget import BudgetError as BudgetError
    from router.classifier import RouteDecision as RouteDecision
    from router.classifier import classify as classify
    from router.router import Router as Router

_EXPORTS = {
    "Router": "router.router",
    "Answer": "router.answer",
    "Escalation": "router.answer",
    "Budget": "router.budget",
    "BudgetError": "router.budget",
    "classify": "router.classifier",
    "RouteDecision": "router.classifier",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'router' has no attribute {name!r}")
