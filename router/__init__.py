"""The router: classify each question, plan within a budget, answer with the right engine.

Public names: `Router`, `Answer`, `Budget`, `classify`, `RouteDecision`.
Imports are lazy so `from router import classify` stays fast and does not import the engines.
"""

from __future__ import annotations

import importlib
from typing import Any

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
