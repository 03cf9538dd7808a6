"""The events `Router.astream` (and `MultiRouter.astream`) yield: the route, engine progress, escalations, the answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engines.events import AnswerDelta, ContextReady, Progress
    from router.answer import Answer, Escalation
    from router.classifier import RouteDecision


@dataclass
class RouteDecided:
    decision: RouteDecision
    engine: str  # engine chosen after the budget plan
    plan: list[str]


@dataclass
class EngineEvent:
    engine: str
    event: Progress | ContextReady | AnswerDelta


@dataclass
class Escalated:
    escalation: Escalation


@dataclass
class Done:
    answer: Answer


RouterEvent = RouteDecided | EngineEvent | Escalated | Done  # what `Router.astream` yields
