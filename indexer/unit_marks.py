"""Which part of each chunk is licence or edition boilerplate, and the text extraction reads instead.

A document's front and back matter (`shared_context.boilerplate.boilerplate_spans`: licence header and
footer, production credits, transcriber's notes, title pages, contents lists) stays in the document and in
its text units, but nothing is extracted from it: no entity, relationship, claim or report comes from a
licence. Each text unit records the share of its characters that is such matter (the `boilerplate` column
of `text_units.parquet`, which GraphRAG's readers ignore and query time reads to down-rank those units).
"""

from __future__ import annotations

from dataclasses import dataclass

from indexer.chunking import Chunk
from indexer.reader import SourceDocument
from shared_context.boilerplate import MARKED_SHARE, boilerplate_spans

__all__ = ["MARKED_SHARE", "UnitMark", "mark_units"]


@dataclass(frozen=True)
class UnitMark:
    share: float  # of the chunk's characters inside front or back matter
    text: str  # what extraction reads: the chunk without that matter ("" when it is all matter)


def mark_units(documents: list[SourceDocument], chunks: list[Chunk]) -> dict[str, UnitMark]:
    """The mark of every chunk that holds any boilerplate, by chunk id (chunks without any are absent)."""
    spans = {d.id: s for d in documents if (s := boilerplate_spans(d.text))}
    marks: dict[str, UnitMark] = {}
    for c in chunks:
        doc_spans = spans.get(c.document_id)
        if not doc_spans or c.char_end <= c.char_start:
            continue
        inside = [(max(a, c.char_start), min(b, c.char_end)) for a, b in doc_spans if a < c.char_end and b > c.char_start]
        if not inside:
            continue
        covered = sum(b - a for a, b in inside)
        kept, at = [], c.char_start
        for a, b in inside:
            kept.append(c.text[at - c.char_start : a - c.char_start])
            at = b
        kept.append(c.text[at - c.char_start :])
        text = "\n\n".join(piece.strip() for piece in kept if piece.strip())
        marks[c.id] = UnitMark(round(covered / (c.char_end - c.char_start), 4), text)
    return marks
