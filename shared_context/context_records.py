"""Typed records of a built context: one class per table, each with the citation id its row starts with.

A record holds what the model is shown (a cut report or an excerpt of a unit is the shown text, with
`truncated` and the `excerpts` offsets saying so) and where it comes from (`position`: its row in the index's
table, -1 when it was not read from an index). How a record becomes a table row is the section's `Column`s
(`context_tables.py`); the records themselves know nothing of the text format.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = [
    "ClaimRecord",
    "ContextRecord",
    "EntityRecord",
    "HistoryRecord",
    "RelationshipRecord",
    "ReportRecord",
    "SourceRecord",
    "record_dict",
]

@dataclass(frozen=True, slots=True)
class HistoryRecord:
    """One message of the conversation so far (`id` "turn-N" names its question-answer turn)."""

    id: str
    role: str  # "user" | "assistant"
    content: str
    turn: int  # 1-based question-answer turn


@dataclass(frozen=True, slots=True)
class ReportRecord:
    """A community report; `id` is its community number as text."""

    id: str
    title: str
    content: str  # the full text, or the summary, or the cut text shown (`truncated`)
    rank: float | None = None
    level: int | None = None
    matches: int = 0  # local context: how many linked entities the community holds
    weight: float | None = None  # global search: GraphRAG's occurrence weight, normalised per call
    truncated: bool = False
    position: int = -1


@dataclass(frozen=True, slots=True)
class EntityRecord:
    id: str
    title: str
    description: str
    rank: int | float | None = None  # GraphRAG's entity rank: the number of relationships (degree)
    type: str = ""  # not a column of the table; what the index says the entity is
    position: int = -1


@dataclass(frozen=True, slots=True)
class RelationshipRecord:
    id: str
    source: str  # entity titles, as GraphRAG names the ends
    target: str
    description: str
    weight: float | None = None
    position: int = -1


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    id: str
    subject: str
    object: str
    status: str
    start_date: str
    end_date: str
    description: str
    type: str = ""  # not a column of the table: the claim's category
    position: int = -1


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """A text unit shown as Sources: whole, or the `excerpts` (character offsets in the unit's text) joined
    by "…" when `truncated`."""

    id: str
    text: str  # what is shown
    entity: str = ""  # the linked entity it was picked for ("" when picked for the question's words)
    reasons: tuple[str, ...] = ()  # "entity", "lexical", "vector": why the hybrid Sources picked it
    score: float | None = None  # the fused rank score of the hybrid Sources
    similarity: float | None = None  # basic search: similarity to the question
    truncated: bool = False
    excerpts: tuple[tuple[int, int], ...] = ()
    position: int = -1


ContextRecord = HistoryRecord | ReportRecord | EntityRecord | RelationshipRecord | ClaimRecord | SourceRecord


def record_dict(record: ContextRecord, in_context: bool) -> dict[str, object]:
    """The record as JSON-ready fields (what `SearchResult.context_records` carries), with `in_context`."""
    out: dict[str, object] = asdict(record)
    if isinstance(record, SourceRecord):
        out["reasons"] = list(record.reasons)
        out["excerpts"] = [list(span) for span in record.excerpts]
    out["in_context"] = in_context
    return out
