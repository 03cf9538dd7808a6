"""Parse `[Data: Sources (1, 2); Reports (5, +more)]` references and resolve them to text units and documents.

Resolution follows the index's own links: Sources are text units; Entities, Relationships and Claims
point to the text units they were extracted from; Reports point to their community's text units. Every
text unit then maps to its document. A citation is valid only when the id exists in the index *and* was
in a context table the model was given (`shown`): a basic-search answer citing "Entities (1)" names a
real entity basic search never supplied, so it is evidence of nothing. An invalid citation is kept with
`resolved=False` (and `exists` / `in_context` saying why), so invented ids are visible, never dropped.
"""

from __future__ import annotations

import csv
import re
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shared_context.records import values_of
from shared_context.tables import CITATION_PART_RE, CITATION_RE

if TYPE_CHECKING:
    from engines.models.base import JSONObject
    from shared_context.index import Index
    from shared_context.tables import ContextTables

KINDS = ("Sources", "Entities", "Relationships", "Claims", "Reports")
_KIND_ALIASES = {k.lower(): k for k in KINDS} | {
    "source": "Sources",
    "entity": "Entities",
    "relationship": "Relationships",
    "claim": "Claims",
    "report": "Reports",
    "covariates": "Claims",
}
_SECTION = re.compile(r"^-----([A-Za-z ]+)-----[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Citation:
    kind: str  # Sources | Entities | Relationships | Claims | Reports
    id: str  # the citation id as written (short id / community number)
    text_unit_ids: list[str] = field(default_factory=list)
    document_ids: list[str] = field(default_factory=list)
    document_titles: list[str] = field(default_factory=list)
    resolved: bool = True  # exists in the index and (when known) was in the model's context
    exists: bool = True  # the index knows this id
    in_context: bool | None = None  # in a context table given to the model; None: not checked

    def to_dict(self) -> JSONObject:
        # Fields copied by hand: `dataclasses.asdict` deep-copies recursively, about 0.7 ms for an answer's
        # citations, paid by every service response.
        return {"kind": self.kind, "id": self.id, "text_unit_ids": list(self.text_unit_ids),
                "document_ids": list(self.document_ids), "document_titles": list(self.document_titles),
                "resolved": self.resolved, "exists": self.exists, "in_context": self.in_context}


def parse_references(text: str) -> list[tuple[str, str]]:
    """(kind, id) pairs in order of first appearance; `+more` and unknown dataset names are skipped."""
    seen: dict[tuple[str, str], None] = {}
    for block in CITATION_RE.finditer(text or ""):
        for name, ids in CITATION_PART_RE.findall(block.group(1)):
            kind = _KIND_ALIASES.get(name.strip().lower())
            if kind is None:
                continue
            for raw in ids.split(","):
                ident = raw.strip()
                if not ident or ident.startswith("+") or ident.lower() == "more":
                    continue
                seen.setdefault((kind, ident), None)
    return list(seen)


@dataclass
class _ShortIdMaps:
    text_units: dict[str, int]
    entities: dict[str, int]
    relationships: dict[str, int]
    claims: dict[str, int]


_MAPS: weakref.WeakKeyDictionary[Index, _ShortIdMaps] = weakref.WeakKeyDictionary()


def _positions_by(ids: list[str]) -> dict[str, int]:
    """id -> position (the last row wins on a duplicate, as a dict comprehension would)."""
    return dict(zip(ids, range(len(ids)), strict=True))


def _maps(index: Index) -> _ShortIdMaps:
    """Short-id -> position maps, computed once per (immutable) index."""
    maps = _MAPS.get(index)
    if maps is None:
        maps = _ShortIdMaps(
            text_units=_positions_by(values_of(index.text_units, "short_id", str)),
            entities=_positions_by(values_of(index.entities, "short_id", str)),
            relationships=_positions_by(values_of(index.relationships, "short_id", str)),
            claims={c.short_id: i for i, c in enumerate(index.claims)},
        )
        _MAPS[index] = maps
    return maps


def text_unit_position(index: Index, ident: str) -> int | None:
    """The position of the text unit whose id or short id (its citation id) is `ident`, from the id maps."""
    pos = index.text_unit_pos.get(ident)
    return pos if pos is not None else _maps(index).text_units.get(ident)


def _text_units_of(index: Index, kind: str, ident: str) -> list[str] | None:
    m = _maps(index)
    if kind == "Sources":
        pos = m.text_units.get(ident)
        return None if pos is None else [index.text_units[pos].id]
    if kind == "Entities":
        pos = m.entities.get(ident)
        return None if pos is None else list(index.entities[pos].text_unit_ids)
    if kind == "Relationships":
        pos = m.relationships.get(ident)
        return None if pos is None else list(index.relationships[pos].text_unit_ids)
    if kind == "Claims":
        pos = m.claims.get(ident)
        if pos is None:
            return None
        unit = index.claims[pos].text_unit_id
        return [unit] if unit else []
    if kind == "Reports":
        try:
            number = int(ident)
        except ValueError:
            return None
        cpos = index.community_pos.get(number)
        if cpos is not None:
            community = index.communities[cpos]
            if community.text_unit_ids:
                return list(community.text_unit_ids)
            # No text-unit list on the community: its entities' text units are the same evidence.
            units: dict[str, None] = {}
            for eid in community.entity_ids:
                epos = index.entity_pos.get(eid)
                if epos is not None:
                    units.update(dict.fromkeys(index.entities[epos].text_unit_ids))
            return list(units)
        return [] if number in index.report_pos else None
    return None


def context_ids(text: str) -> set[tuple[str, str]]:
    """(kind, id) of every row of every citable context table in `text` (format: ARCHITECTURE.md).

    A section is `-----Name-----` then a `|`-delimited CSV table whose first column is the id; it ends
    at the first blank row outside a quoted field (csv handles multi-line quoted cells).
    """
    return set(context_id_list(text))


def context_id_list(text: str) -> list[tuple[str, str]]:
    """`context_ids` in order of appearance, without duplicates."""
    found: dict[tuple[str, str], None] = {}
    heads = list(_SECTION.finditer(text or ""))
    for i, head in enumerate(heads):
        kind = _KIND_ALIASES.get(head.group(1).strip().lower())
        if kind is None:
            continue
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        body = text[head.end():end].lstrip("\n")
        try:
            rows = csv.reader(body.split("\n"), delimiter="|", quotechar='"')
            next(rows, None)  # header row
            for row in rows:
                if not row or not row[0].strip():
                    break
                found.setdefault((kind, row[0].strip()), None)
        except csv.Error:
            continue  # a malformed table supplies the ids read before the fault
    return list(found)


def tables_context_ids(tables: ContextTables) -> list[tuple[str, str]]:
    """`context_id_list(tables.render())`, read from the typed records instead of parsing the rendered text
    (about 1 ms per local question): every shown row's record carries the id its row starts with."""
    found: dict[tuple[str, str], None] = {}
    for name, ident in tables.shown_ids():
        kind = _KIND_ALIASES.get(name.strip().lower())
        if kind is not None:
            found.setdefault((kind, ident.strip()), None)
    return list(found)


def context_ids_of_messages(messages: Iterable[Mapping[str, object]]) -> list[tuple[str, str]]:
    """Ids of the context tables in a model call's messages (data travels in system messages), in order."""
    found: dict[tuple[str, str], None] = {}
    for m in messages:
        if m.get("role") == "system":
            found.update(dict.fromkeys(context_id_list(str(m.get("content", "")))))
    return list(found)


def resolve_position(index: Index, kind: str, ident: str) -> int | None:
    """The position of the record a citation id names in its table (`community_reports` for Reports), or
    None when the index does not know it."""
    m = _maps(index)
    if kind == "Sources":
        return m.text_units.get(ident)
    if kind == "Entities":
        return m.entities.get(ident)
    if kind == "Relationships":
        return m.relationships.get(ident)
    if kind == "Claims":
        return m.claims.get(ident)
    if kind == "Reports":
        try:
            return index.report_pos.get(int(ident))
        except ValueError:
            return None
    return None


def record_text(index: Index, kind: str, ident: str) -> str | None:
    """The main text of the record a citation id names (None when the index does not know it)."""
    m = _maps(index)
    if kind == "Sources":
        pos = m.text_units.get(ident)
        return None if pos is None else index.text_units[pos].text
    if kind == "Entities":
        pos = m.entities.get(ident)
        return None if pos is None else f"{index.entities[pos].title}: {index.entities[pos].description}"
    if kind == "Relationships":
        pos = m.relationships.get(ident)
        if pos is None:
            return None
        rel = index.relationships[pos]
        return f"{rel.source} -> {rel.target}: {rel.description}"
    if kind == "Claims":
        pos = m.claims.get(ident)
        return None if pos is None else f"{index.claims[pos].subject}: {index.claims[pos].description}"
    if kind == "Reports":
        try:
            rpos = index.report_pos.get(int(ident))
        except ValueError:
            return None
        if rpos is None:
            return None
        report = index.community_reports[rpos]
        return f"{report.title}\n{report.full_content or report.summary}"
    return None


def resolve(index: Index, kind: str, ident: str, shown: set[tuple[str, str]] | None = None) -> Citation:
    """One citation; with `shown` (the ids the model was given) a real id outside it is invalid."""
    units = _text_units_of(index, kind, ident)
    in_context = None if shown is None else (kind, ident) in shown
    if units is None:
        return Citation(kind=kind, id=ident, resolved=False, exists=False, in_context=in_context)
    if in_context is False:
        return Citation(kind=kind, id=ident, resolved=False, exists=True, in_context=False)
    doc_ids: list[str] = []
    titles: list[str] = []
    for unit in units:
        doc = index.document_for_text_unit(unit)
        if doc is not None and doc.id not in doc_ids:
            doc_ids.append(doc.id)
            titles.append(doc.title)
    return Citation(kind=kind, id=ident, text_unit_ids=units, document_ids=doc_ids, document_titles=titles,
                    in_context=in_context)


def resolve_citations(index: Index, text: str, shown: set[tuple[str, str]] | None = None) -> list[Citation]:
    """Every `[Data: ...]` reference in `text`, resolved against `index` (and `shown`, when given)."""
    return [resolve(index, kind, ident, shown) for kind, ident in parse_references(text)]


def union_ids(citations: list[Citation]) -> tuple[list[str], list[str]]:
    """(text unit ids, document ids) cited, each in first-seen order without duplicates."""
    units: dict[str, None] = {}
    docs: dict[str, None] = {}
    for c in citations:
        units.update(dict.fromkeys(c.text_unit_ids))
        docs.update(dict.fromkeys(c.document_ids))
    return list(units), list(docs)
