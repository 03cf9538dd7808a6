"""`ContextTables`: the typed data of one prompt, one optional section per table, in the order the prompt
shows them, and its rendering (the sections joined by one blank line, empty ones left out).

Every builder's context carries one: a local context's six tables, a global map batch's history and
reports, a DRIFT primer fold's reports, basic search's sources. The model gets it beside the rendered
messages, so an offline model reads the records instead of parsing the prompt.
"""

from __future__ import annotations

from dataclasses import dataclass

from shared_context.context_records import (
    ClaimRecord,
    EntityRecord,
    HistoryRecord,
    RelationshipRecord,
    ReportRecord,
    SourceRecord,
    record_dict,
)
from shared_context.tables import Section, join_sections

__all__ = ["AnySection", "ContextTables"]

AnySection = (
    Section[HistoryRecord]
    | Section[ReportRecord]
    | Section[EntityRecord]
    | Section[RelationshipRecord]
    | Section[ClaimRecord]
    | Section[SourceRecord]
)


@dataclass
class ContextTables:
    """The context tables of one prompt (None: the prompt has no such table)."""

    history: Section[HistoryRecord] | None = None
    reports: Section[ReportRecord] | None = None
    entities: Section[EntityRecord] | None = None
    relationships: Section[RelationshipRecord] | None = None
    claims: Section[ClaimRecord] | None = None
    sources: Section[SourceRecord] | None = None

    def sections(self) -> list[AnySection]:
        """The sections present, in prompt order."""
        found: list[AnySection | None] = [
            self.history, self.reports, self.entities, self.relationships, self.claims, self.sources,
        ]
        return [s for s in found if s is not None]

    def section(self, name: str) -> AnySection | None:
        return next((s for s in self.sections() if s.name == name), None)

    def render(self) -> str:
        """The prompt's data text: every section with rows, joined by one blank line."""
        return join_sections([s.text for s in self.sections()])

    def shown_ids(self) -> list[tuple[str, str]]:
        """(section name, id) of every row shown, in prompt order."""
        return [(s.name, r.id) for s in self.sections() for r in s.rows]

    def to_dict(self) -> dict[str, list[dict[str, object]]]:
        """Each section's records as JSON-ready fields: rows shown first (`in_context` true), then candidates."""
        out: dict[str, list[dict[str, object]]] = {}
        for s in self.sections():
            records = [record_dict(r, True) for r in s.rows] + [record_dict(r, False) for r in s.candidates]
            if records:
                out[s.name] = records
        return out
