"""Citations of an answer drawn from several indexes: each names the index its record ids belong to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engines.citations import Citation

if TYPE_CHECKING:
    from engines.models.base import JSONObject


@dataclass(frozen=True)
class IndexCitation(Citation):
    """A citation of a fanned-out answer: the record ids are those of `index`."""

    index: str = ""

    def to_dict(self) -> JSONObject:
        return {**super().to_dict(), "index": self.index}


def indexed(c: Citation, index: str) -> IndexCitation:
    return IndexCitation(c.kind, c.id, list(c.text_unit_ids), list(c.document_ids), list(c.document_titles),
                         c.resolved, c.exists, c.in_context, index=index)
