"""`index_from_records`: validate the records, derive missing links and precompute everything a query
needs, then hand it all to a read-only `Index`.

The steps, each in its own module: token counts start on worker threads (`index_tokens`), ids are
checked unique, the graph and links are derived (`index_links`), the community hierarchy is repaired
(`index_hierarchy`); what a step derives is kept in the loader's `DerivedStore` (`derived_entries`), so
the next load maps it instead of computing it. Arrow's scratch memory is handed back between steps.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from shared_context import arrow_keys
from shared_context.derived_entries import DerivedArrays
from shared_context.derived_store import DerivedStore
from shared_context.errors import IndexFormatError
from shared_context.index import ID_MAPS, Adjacency, Index
from shared_context.index_hierarchy import derive_hierarchy, levels_of
from shared_context.index_links import (
    LoadNotes,
    LoadTables,
    apply_degrees,
    claim_arrays,
    entity_communities,
    fill_link_lists,
    graph_arrays,
    text_unit_documents,
    text_unit_link_arrays,
)
from shared_context.index_tokens import TokenCountLoad
from shared_context.record_list import RecordList
from shared_context.records import (
    Claim,
    Community,
    CommunityReport,
    Document,
    Entity,
    RecordTable,
    Relationship,
    TextUnit,
    release_arrow_memory,
    values_of,
)
from shared_context.search_backend import VectorTable
from shared_context.tokens import Tokenizer, get_tokenizer

__all__ = ["index_from_records"]

R = TypeVar("R")
K = TypeVar("K", bound=Hashable)


def index_from_records(
    *,
    entities: Iterable[Entity],
    relationships: Iterable[Relationship],
    text_units: Iterable[TextUnit],
    communities: Iterable[Community] = (),
    community_reports: Iterable[CommunityReport] = (),
    claims: Iterable[Claim] = (),
    documents: Iterable[Document] = (),
    vectors: Iterable[VectorTable] | dict[str, VectorTable] | None = None,
    version: str = "graphroute",
    path: str | Path | None = None,
    tokenizer: Tokenizer | str | None = None,
    source_files: dict[str, str] | None = None,
    warnings: Iterable[str] = (),
    store: DerivedStore | None = None,
) -> Index:
    """Validate the records, derive missing links and precompute everything a query needs.

    `store` (set by the loaders: keyed by the fingerprints of the index's table files) keeps what
    is derived here on disk - adjacency, links, claims and community membership per entity, token
    counts - so the next load maps it instead of computing it; each entry depends only on the
    tables it is computed from. In-memory indexes are computed every time.
    """
    if tokenizer is None or isinstance(tokenizer, str):
        tokenizer = get_tokenizer(tokenizer) if tokenizer else get_tokenizer()
    notes = LoadNotes(dict(source_files or {}), list(warnings))
    t = LoadTables(
        # RecordTables (from the loaders) stay columnar; anything else becomes a list of records
        entities=entities if isinstance(entities, RecordTable) else list(entities),
        relationships=relationships if isinstance(relationships, RecordTable) else list(relationships),
        text_units=text_units if isinstance(text_units, RecordTable) else list(text_units),
        # small tables: a RecordList (from the loaders' store) makes its records as rows are read
        communities=_records(communities),
        community_reports=_records(community_reports),
        claims=_records(claims),
        documents=_records(documents),
        notes=notes,
    )
    derived = DerivedArrays(store, notes.warnings)
    tokens = TokenCountLoad(t, tokenizer, derived)  # counted on other threads meanwhile
    try:
        ids = _check_ids(t)
        release_arrow_memory()  # each step's Arrow scratch (id hash tables) goes before the next
        graph = derived.get("graph", ["entities", "relationships", "nodes"], lambda: graph_arrays(t))
        apply_degrees(t, graph)
        release_arrow_memory()
        links = derived.get("text_unit_links", ["entities", "relationships", "text_units"],
                            lambda: text_unit_link_arrays(t))
        entity_units = Adjacency(links["etu_indptr"], links["etu_indices"])
        unit_entities = Adjacency(links["tue_indptr"], links["tue_indices"])
        unit_relationships = Adjacency(links["tur_indptr"], links["tur_indices"])
        fill_link_lists(t, links["fill"].tolist(), entity_units, unit_entities, unit_relationships)
        release_arrow_memory()
        claims_of = derived.get("claims", ["entities", "covariates", "text_units"], lambda: claim_arrays(t))
        membership = derived.get("entity_communities", ["entities", "communities", "nodes"],
                                 lambda: entity_communities(t))
        entity_comms = Adjacency(membership["ecm_indptr"], membership["ecm_indices"])
        derive_hierarchy(t, ids.community_pos, lambda: _entity_pos(t), entity_comms)
        levels = levels_of(t, ids.community_pos)
        unit_documents = text_unit_documents(t, ids.document_pos)
        counts, anchors = tokens.finish()
    finally:
        tokens.cancel()
    index = Index(
        path=Path(path) if path is not None else None,
        version=version,
        tokenizer=tokenizer,
        warnings=notes.warnings,
        source_files=notes.source_files,
        entities=t.entities,
        relationships=t.relationships,
        text_units=t.text_units,
        communities=t.communities,
        community_reports=t.community_reports,
        claims=t.claims,
        documents=t.documents,
        document_pos=ids.document_pos,
        claim_pos=ids.claim_pos,
        community_pos=ids.community_pos,
        report_pos=ids.report_pos,
        entity_relationships=Adjacency(graph["er_indptr"], graph["er_indices"]),
        entity_text_units=entity_units,
        text_unit_entities=unit_entities,
        text_unit_relationships=unit_relationships,
        entity_claims=Adjacency(claims_of["ec_indptr"], claims_of["ec_indices"]),
        entity_communities=entity_comms,
        relationship_endpoints=graph["endpoints"],
        communities_by_level=levels.communities_by_level,
        reports_by_level=levels.reports_by_level,
        levels=levels.levels,
        text_unit_document=unit_documents,
        relationship_tokens=counts["relationship_tokens"],
        text_unit_tokens=counts["text_unit_tokens"],
        text_unit_token_anchors=anchors,
        report_tokens=counts["report_tokens"],
        report_summary_tokens=counts["report_summary_tokens"],
        claim_tokens=counts["claim_tokens"],
        vectors={},
        derived_store=store,
        id_maps=t.id_maps,
    )
    if vectors is not None:
        for table in vectors.values() if isinstance(vectors, dict) else vectors:
            index.add_vectors(table)
    return index


@dataclass(frozen=True)
class _Ids:
    """The id maps of the small tables (the large tables' are in `LoadTables.id_maps` or built on use)."""

    document_pos: dict[str, int]
    claim_pos: dict[str, int]
    community_pos: dict[int, int]
    report_pos: dict[int, int]


def _check_ids(t: LoadTables) -> _Ids:
    """Every id column unique (IndexFormatError naming the file otherwise); the id maps of tables held as
    lists made on the way."""
    file = t.notes.file
    for attr, (records_attr, field, table, column) in ID_MAPS.items():
        records = t.table(records_attr)
        if isinstance(records, RecordTable):  # map built on first use; ids checked unless stored checked
            if not records.validated:
                _check_unique_column(records, field, file(table), column)
        else:
            t.id_maps[attr] = _check_unique(values_of(records, field, str), file(table), column)
    return _Ids(
        document_pos=_check_unique(values_of(t.documents, "id", str), file("documents"), "id"),
        claim_pos=_check_unique(values_of(t.claims, "id", str), file("covariates"), "id"),
        community_pos=_check_unique(values_of(t.communities, "community", int), file("communities"), "community"),
        report_pos=_check_unique(values_of(t.community_reports, "community", int), file("community_reports"), "community"),
    )


def _entity_pos(t: LoadTables) -> dict[str, int]:
    """Entity id -> position (hierarchy repair needs it; the Index keeps the map made here)."""
    found = t.id_maps.get("entity_pos")
    if found is None:
        values = values_of(t.entities, "id", str)
        found = t.id_maps["entity_pos"] = dict(zip(values, range(len(values)), strict=True))
    return found


def _check_unique_column(records: RecordTable[R], field: str, file: str, column: str) -> None:
    """IndexFormatError on duplicates, checked in Arrow without building a dict."""
    col = records.arrow_column(field)
    if arrow_keys.count_distinct(col) == len(col):
        return
    _check_unique(records.column(field), file, column)


def _check_unique(values: Sequence[K], file: str, column: str) -> dict[K, int]:
    """Map value -> position, raising IndexFormatError on duplicates."""
    pos = {v: i for i, v in enumerate(values)}
    if len(pos) != len(values):
        dups = [v for v, n in Counter(values).items() if n > 1]
        raise IndexFormatError(
            f"{len(dups)} duplicate values (e.g. {dups[0]!r}); every row needs a unique value",
            file=file,
            column=column,
        )
    return pos


def _records(records: Iterable[R]) -> Sequence[R]:
    return records if isinstance(records, RecordList) else list(records)
