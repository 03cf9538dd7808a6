"""A question's scope: some documents of an index, and the index cut down to them.

`Scope` selects documents by title or id (`documents`), by glob over title and id (`globs`, `fnmatch` rules,
case-insensitive) and by metadata (`where`: every key must equal the document's metadata value; a list of
values means any of them). Parts combine as AND: a document is in scope when it matches the named documents
(if any are named), a glob (if any), and `where` (if set).

`scoped_index` builds the index a scoped question is answered from, so every engine reads only what the scope
holds: the in-scope documents' text units; the entities, relationships and claims found in those units (their
text-unit lists cut to them); the communities with a unit inside and their reports. Records keep their ids and
short ids, so a citation names the same record as in the whole index. The cut index has no stored vectors:
scoped questions are matched by names and words, or the offline embedder fitted on the cut index.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shared_context.index import Index
    from shared_context.records import Document

MetaValue = str | int | float | bool


class ScopeError(ValueError):
    """A scope that cannot be applied (a `where` value of a type metadata cannot hold)."""


@dataclass(frozen=True)
class Scope:
    documents: tuple[str, ...] = ()  # titles or ids (ids: the document id or its short id)
    globs: tuple[str, ...] = ()
    where: Mapping[str, MetaValue | Sequence[MetaValue]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, value in self.where.items():
            values = value if isinstance(value, list | tuple) else [value]
            if not values or not all(isinstance(v, str | int | float | bool) for v in values):
                raise ScopeError(f"scope where[{key!r}] must be a string, number or boolean, or a list of them")

    @property
    def empty_filter(self) -> bool:
        return not (self.documents or self.globs or self.where)

    def key(self) -> tuple[object, ...]:
        """Hashable: scoped indexes are cached by it."""
        where = tuple(sorted((k, tuple(v) if isinstance(v, list | tuple) else (v,)) for k, v in self.where.items()))
        return (tuple(sorted(self.documents)), tuple(sorted(self.globs)), where)

    def describe(self) -> str:
        parts = []
        if self.documents:
            parts.append("documents " + ", ".join(self.documents))
        if self.globs:
            parts.append("matching " + " or ".join(self.globs))
        if self.where:
            parts.append("where " + ", ".join(f"{k} = {v!r}" for k, v in self.where.items()))
        return "; ".join(parts) or "everything"

    def matches(self, doc: Document) -> bool:
        names = {doc.id, doc.short_id, doc.title}
        if self.documents and not names & set(self.documents):
            return False
        lowered = [n.lower() for n in names if n]
        if self.globs and not any(fnmatch.fnmatchcase(n, g.lower()) for g in self.globs for n in lowered):
            return False
        return all(_meta_matches(doc.metadata.get(k), v) for k, v in self.where.items())


def _meta_matches(found: object, wanted: MetaValue | Sequence[MetaValue]) -> bool:
    options = wanted if isinstance(wanted, list | tuple) else [wanted]
    # metadata read from CSV or front matter may hold "2024" where the caller asks for 2024
    return any(found == w or (found is not None and str(found) == str(w)) for w in options)


def in_scope_documents(index: Index, scope: Scope) -> list[int]:
    """Positions of the documents in scope."""
    return [i for i, doc in enumerate(index.documents) if scope.matches(doc)]


def scoped_index(index: Index, documents: Sequence[int]) -> Index:
    """The index cut to `documents` (positions): see the module docstring."""
    from shared_context.index_build import index_from_records

    doc_ids = {index.documents[d].id for d in documents}
    wanted = set(documents)
    unit_pos = [j for j, d in enumerate(index.text_unit_document) if d in wanted]
    units = [index.text_units[j] for j in unit_pos]
    unit_ids = {u.id for u in units}
    # units a document lists but whose own document id was not resolved still belong to it
    for d in documents:
        for uid in index.documents[d].text_unit_ids:
            if uid not in unit_ids and uid in index.text_unit_pos:
                units.append(index.text_units[index.text_unit_pos[uid]])
                unit_ids.add(uid)
    entities = [replace(e, text_unit_ids=[u for u in e.text_unit_ids if u in unit_ids])
                for e in index.entities if any(u in unit_ids for u in e.text_unit_ids)]
    titles = {e.title for e in entities}
    relationships = [replace(r, text_unit_ids=[u for u in r.text_unit_ids if u in unit_ids])
                     for r in index.relationships
                     if r.source in titles and r.target in titles and any(u in unit_ids for u in r.text_unit_ids)]
    entity_ids = {e.id for e in entities}
    relationship_ids = {r.id for r in relationships}
    claims = [c for c in index.claims if c.text_unit_id in unit_ids and c.subject in titles]
    claim_ids = {c.id for c in claims}
    units = [replace(u, entity_ids=[e for e in u.entity_ids if e in entity_ids],
                     relationship_ids=[r for r in u.relationship_ids if r in relationship_ids],
                     covariate_ids=[c for c in u.covariate_ids if c in claim_ids]) for u in units]
    communities = [replace(c, entity_ids=[e for e in c.entity_ids if e in entity_ids],
                           relationship_ids=[r for r in c.relationship_ids if r in relationship_ids],
                           text_unit_ids=[u for u in c.text_unit_ids if u in unit_ids])
                   for c in index.communities if _touches(c.text_unit_ids, c.entity_ids, unit_ids, entity_ids)]
    kept = {c.community for c in communities}
    communities = [replace(c, parent=c.parent if c.parent in kept else -1,
                           children=[k for k in c.children if k in kept]) for c in communities]
    reports = [replace(r, parent=r.parent if r.parent in kept else -1, children=[k for k in r.children if k in kept])
               for r in index.community_reports if r.community in kept]
    docs = [replace(index.documents[d], text_unit_ids=[u for u in index.documents[d].text_unit_ids if u in unit_ids])
            for d in documents if index.documents[d].id in doc_ids]
    return index_from_records(entities=entities, relationships=relationships, text_units=units,
                              communities=communities, community_reports=reports, claims=claims, documents=docs,
                              version=index.version, tokenizer=index.tokenizer)


def _touches(unit_list: Sequence[str], entity_list: Sequence[str], unit_ids: set[str], entity_ids: set[str]) -> bool:
    """A community with an in-scope unit (or, when it lists no units, an in-scope entity)."""
    if unit_list:
        return any(u in unit_ids for u in unit_list)
    return any(e in entity_ids for e in entity_list)
