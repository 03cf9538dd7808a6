"""Basic search's context: the Sources table of the text units most similar to the question."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from shared_context.context_records import SourceRecord
from shared_context.context_tables import ContextTables
from shared_context.local_sources import SOURCE_COLUMNS
from shared_context.tables import SectionBuilder

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["BasicContext", "basic_context"]


@dataclass
class BasicContext:
    tables: ContextTables  # one Sources section
    tokens: int  # of the rendered text
    skipped: int  # hits that did not fit the budget

    @cached_property
    def text(self) -> str:
        return self.tables.render()


def basic_context(index: Index, hits: Sequence[tuple[int, float]], budget: int) -> BasicContext:
    """The Sources table of `hits` ((unit position, similarity), best first) in that order; a unit that does
    not fit is skipped, and a later, shorter one may still go in."""
    builder: SectionBuilder[SourceRecord] = SectionBuilder("Sources", SOURCE_COLUMNS, index.tokenizer, budget)
    skipped = 0
    for pos, sim in hits:
        unit = index.text_units[pos]
        if not builder.add(SourceRecord(unit.short_id, unit.text, similarity=round(sim, 4), position=pos)):
            skipped += 1
    section = builder.finish()
    return BasicContext(ContextTables(sources=section), section.tokens, skipped)
