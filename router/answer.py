"""`Answer`: what `Router.ask` returns — the text, the route, the engine used, citations and usage."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engines.models.base import Usage

if TYPE_CHECKING:
    from engines.citations import Citation
    from engines.models.base import JSON, JSONObject
    from engines.result import SearchResult
    from router.classifier import RouteDecision


@dataclass
class Escalation:
    from_engine: str
    to_engine: str
    reason: str
    calls: int = 0  # model calls the step it left made (`from_engine`'s)
    cost: float = 0.0  # and their cost, US dollars


@dataclass
class Answer:
    question: str
    standalone_question: str
    text: str
    route: RouteDecision
    engine: str  # the engine that produced `text` (may differ from route.engine after step-down or escalation)
    usage: Usage
    model: str
    offline: bool
    seconds: float
    result: SearchResult | None = None
    plan: list[str] = field(default_factory=list)
    stepped_down_from: str | None = None
    escalations: list[Escalation] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # facts about how the answer was made (not failures)

    @property
    def citations(self) -> list[Citation]:
        return list(self.result.citations) if self.result is not None else []

    @property
    def document_ids(self) -> list[str]:
        return list(self.result.document_ids) if self.result is not None else []

    @property
    def text_unit_ids(self) -> list[str]:
        return list(self.result.text_unit_ids) if self.result is not None else []

    def to_dict(self) -> JSONObject:
        route = self.route
        index: JSON = [*route.index] if isinstance(route.index, list) else route.index
        return {
            "question": self.question,
            "standalone_question": self.standalone_question,
            "text": self.text,
            "route": {
                "engine": route.engine,
                "confidence": route.confidence,
                "probabilities": dict(route.probabilities),
                "reasons": list(route.reasons),
                "method": getattr(route, "method", "model"),
                "index": index,
            },
            "engine": self.engine,
            "stepped_down_from": self.stepped_down_from,
            "plan": list(self.plan),
            "escalations": [e.__dict__ for e in self.escalations],
            "degraded": list(self.degraded),
            "notes": list(self.notes),
            "model": self.model,
            "offline": self.offline,
            "seconds": self.seconds,
            "citations": [c.to_dict() for c in self.citations],
            "document_ids": [*self.document_ids],
            "text_unit_ids": [*self.text_unit_ids],
            "usage": self.usage.to_dict(),
        }
