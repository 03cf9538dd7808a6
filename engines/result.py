"""`SearchResult`: the one typed result every engine returns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from engines.citations import Citation
from engines.models.base import JSON, JSONObject, Usage


@dataclass(frozen=True)
class Degradation:
    """A part of the pipeline that failed while the answer still came from the rest."""

    stage: str
    reason: str

    def to_dict(self) -> JSONObject:
        return {"stage": self.stage, "reason": self.reason}


@dataclass
class SearchResult:
    engine: str  # "local" | "global" | "drift" | "basic"
    question: str
    response: str
    context_text: str = ""
    context_records: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    citations: list[Citation] = field(default_factory=list)
    # (kind, id) of every context row any model call was given, in order: what citations may cite.
    context_ids: list[tuple[str, str]] = field(default_factory=list)
    text_unit_ids: list[str] = field(default_factory=list)
    document_ids: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    degraded: list[Degradation] = field(default_factory=list)
    empty: bool = False  # nothing relevant was found (the router escalates on it)
    empty_reason: str = ""  # why, when `empty` (the router reports it when it escalates)
    # the model marked its context as not answering the question (`engines.models.base.INSUFFICIENT_MARKER`)
    insufficient: bool = False
    model: str = ""
    offline: bool = False
    seconds: float = 0.0
    # engine-specific diagnostics shown to users as JSON (linked entities, map batches, the DRIFT tree); no
    # other package reads them: what a caller decides on is a typed field above
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def unresolved_citations(self) -> list[Citation]:
        return [c for c in self.citations if not c.resolved]

    def to_dict(self) -> JSONObject:
        return {
            "engine": self.engine,
            "question": self.question,
            "response": self.response,
            "context_text": self.context_text,
            "context_records": _jsonable(self.context_records),
            "citations": [c.to_dict() for c in self.citations],
            "context_ids": [list(k) for k in self.context_ids],
            "text_unit_ids": list(self.text_unit_ids),
            "document_ids": list(self.document_ids),
            "usage": self.usage.to_dict(),
            "degraded": [d.to_dict() for d in self.degraded],
            "empty": self.empty,
            "empty_reason": self.empty_reason,
            "insufficient": self.insufficient,
            "model": self.model,
            "offline": self.offline,
            "seconds": self.seconds,
            "details": _jsonable(self.details),
        }


def _jsonable(value: object) -> JSON:
    """Plain JSON types only (numpy scalars, tuples, sets and dataclasses are converted)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return _jsonable(value.item())
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return _jsonable(value.to_dict())
    return str(value)
