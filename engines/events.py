"""Streaming events every engine yields from `stream()`: progress, then answer deltas, then `Final`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engines.result import SearchResult


@dataclass(frozen=True)
class Progress:
    """A step of a multi-call stage, e.g. stage="map", message="map batch 3/9", step=3, total=9."""

    stage: str
    message: str
    step: int = 0
    total: int = 0


@dataclass(frozen=True)
class ContextReady:
    """The context of `stage` is built (tokens = its size); the model calls follow."""

    stage: str
    tokens: int


@dataclass(frozen=True)
class AnswerDelta:
    """A piece of the final answer text, in order."""

    text: str


@dataclass(frozen=True)
class Final:
    """The last event: the complete result, identical to what `search()` returns."""

    result: SearchResult


Event = Progress | ContextReady | AnswerDelta | Final
