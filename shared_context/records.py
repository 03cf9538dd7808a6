"""Typed records of a GraphRAG index, normalised to the v3 schema whatever version was read.

Citation ids (`short_id`) are `human_readable_id` as a string for every record type; reports are cited
by their community number. Lists are plain Python lists (never numpy arrays) so callers can rely on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Entity:
    id: str
    short_id: str
    title: str
    type: str = ""
    description: str = ""
    text_unit_ids: list[str] = field(default_factory=list)
    frequency: int = 0
    degree: int = 0


@dataclass(slots=True)
class Relationship:
    id: str
    short_id: str
    source: str  # entity title, as in GraphRAG
    target: str
    description: str = ""
    weight: float = 1.0
    combined_degree: int = 0
    text_unit_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TextUnit:
    id: str
    short_id: str
    text: str
    n_tokens: int = 0
    document_id: str = ""
    entity_ids: list[str] = field(default_factory=list)
    relationship_ids: list[str] = field(default_factory=list)
    covariate_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Community:
    id: str
    community: int
    level: int
    parent: int = -1
    children: list[int] = field(default_factory=list)
    title: str = ""
    entity_ids: list[str] = field(default_factory=list)
    relationship_ids: list[str] = field(default_factory=list)
    text_unit_ids: list[str] = field(default_factory=list)
    size: int = 0


@dataclass(slots=True)
class CommunityReport:
    id: str
    community: int  # also the citation id
    level: int
    title: str
    summary: str = ""
    full_content: str = ""
    rank: float = 0.0
    parent: int = -1
    children: list[int] = field(default_factory=list)
    rating_explanation: str = ""
    findings: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0

    @property
    def short_id(self) -> str:
        return str(self.community)


@dataclass(slots=True)
class Claim:
    id: str
    short_id: str
    subject: str  # entity title
    object: str = ""
    type: str = ""  # claim category
    status: str = ""
    start_date: str = ""
    end_date: str = ""
    description: str = ""
    source_text: str = ""
    text_unit_id: str = ""


@dataclass(slots=True)
class Document:
    id: str
    short_id: str
    title: str
    text: str = ""
    text_unit_ids: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
