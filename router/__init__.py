"""The router: classify each question, plan within a budget, answer with the right engine.

    from router import Router
    answer = await Router.from_index("path/to/index").ask("Who is Scrooge?")
"""

from __future__ import annotations

from router.answer import Answer, Escalation
from router.budget import Budget, BudgetError
from router.classifier import RouteDecision, classify
from router.router import Router

__all__ = ["Answer", "Budget", "BudgetError", "Escalation", "RouteDecision", "Router", "classify"]
