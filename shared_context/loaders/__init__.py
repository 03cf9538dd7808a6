"""`load_index(path)`: read a GraphRAG output folder of any schema version into an `Index`.

Supported layouts (see `files.py` and `schema.py` for the column differences):
v3 and v2 parquet tables, v1 and v0 `create_final_*` tables (with `create_final_nodes`), the same
tables written as CSV, and partial exports with only entities / relationships / text units
(e.g. a LightRAG knowledge graph; `version == "v3-partial"`, no community reports).
Vectors come from `lancedb/<name>.lance`, `embeddings.<name>[.<model>].parquet` and v0's
`description_embedding` column. Every problem raises `IndexFormatError` naming file and column.
"""

from __future__ import annotations

import gc
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from shared_context.derived_store import DerivedStore
from shared_context.errors import IndexFormatError
from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.loaders import record_tables, small_records
from shared_context.loaders.columns import TableData
from shared_context.loaders.files import IndexFiles, detect_version, locate, read_table
from shared_context.loaders.integrity import check_build_manifest, repair_short_ids
from shared_context.loaders.schema import (
    build_claims,
    build_communities,
    build_documents,
    build_reports,
    entity_columns,
    node_stats,
    relationship_columns,
    text_unit_columns,
)
from shared_context.loaders.small_tables import read_small_table
from shared_context.loaders.vector_files import (
    IdLookup,
    read_embedding_parquets,
    read_inline_entity_vectors,
    read_lancedb,
)
from shared_context.records import Claim, Community, CommunityReport, release_arrow_memory, values_of
from shared_context.search_backend import VectorTable
from shared_context.tokens import get_tokenizer

__all__ = ["IndexFormatError", "load_index"]


# Columns no query reads; skipping them keeps large indexes within memory. Community
# relationship_ids / text_unit_ids are left empty in the records (GraphRAG's query side does not
# read them either: its Community objects carry None there), and documents keep their id, title,
# text units and metadata but not the full text, which is the corpus a second time over (it is the
# concatenation of the document's text units; no query engine reads it).
_UNUSED: dict[str, tuple[str, ...]] = {
    "communities": ("relationship_ids", "text_unit_ids"),
    "community_reports": ("full_content_json",),
    "documents": ("text", "raw_content"),
}


def _read_required(files: IndexFiles, table: str) -> TableData:
    data = read_table(files, table)
    assert data is not None  # locate() guarantees required tables exist
    return data




def load_index(
    path: str | Path,
    *,
    embedding_dim: int | None = None,
    tokenizer: str = "o200k_base",
) -> Index:
    """Load, validate and precompute a GraphRAG index folder: a local path or a URI (`file://`,
    `s3://`, `gs://`, `az://`...; remote folders are mirrored into the local cache, see `loaders/uri.py`).

    `embedding_dim`: the configured embedder's dimension; a stored vector table of another
    dimension raises `IndexFormatError` naming the table. `tokenizer`: tiktoken encoding used for
    every token count (GraphRAG 3 uses o200k_base).
    """
    # Loading creates millions of acyclic containers (records, id lists); the cyclic collector's
    # generational scans over them cost ~25% of the load time and reclaim nothing.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(path, embedding_dim=embedding_dim, tokenizer=tokenizer)
    finally:
        if was_enabled:
            gc.enable()


def _load(path: str | Path, *, embedding_dim: int | None, tokenizer: str) -> Index:
    files = locate(path)
    check_build_manifest(files.root, list(files.files.values()))
    # The tokenizer's BPE tables take about a second to parse; that overlaps with reading the tables.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="graphroute-tokenizer")
    tok_future = pool.submit(get_tokenizer, tokenizer)
    pool.shutdown(wait=False)
    warnings: list[str] = []

    store = DerivedStore.for_tables(files.root.resolve(), files.files)
    nodes_t = read_small_table(files, store, "nodes")
    node_degree, node_members = node_stats(nodes_t)
    del nodes_t
    large = record_tables.load(store)
    inline: VectorTable | None = None
    if large is None:
        large = _read_large_tables(files, node_degree, embedding_dim, warnings)
        inline = large.inline
    elif "description_embedding" in large.columns["entities"]:  # v0 vectors inside the entities table
        entities_t = _read_required(files, "entities")
        inline = read_inline_entity_vectors(entities_t.table, entities_t.file, embedding_dim, warnings)
        del entities_t
    entities = large.tables["entities"]

    def communities_built() -> list[Community]:
        title_to_id = dict(zip(values_of(entities, "title", str), values_of(entities, "id", str), strict=True)) if node_members else {}
        table = read_small_table(files, store, "communities", skip=_UNUSED["communities"])
        return build_communities(table, node_members, title_to_id)

    # v0 communities come from the nodes and name members by the entities' titles
    communities = small_records.records(
        store, Community, "communities", ["communities", "nodes", "entities"], communities_built,
        extra=",".join(_UNUSED["communities"]),
    )
    reports = small_records.records(
        store, CommunityReport, "community_reports", ["community_reports"],
        lambda: build_reports(read_small_table(files, store, "community_reports", skip=_UNUSED["community_reports"])),
        extra=",".join(_UNUSED["community_reports"]),
    )
    claims = small_records.records(
        store, Claim, "covariates", ["covariates"], lambda: build_claims(read_small_table(files, store, "covariates"))
    )
    documents = build_documents(read_small_table(files, store, "documents", skip=_UNUSED["documents"]))
    release_arrow_memory()
    version = detect_version(files, large.columns["entities"], large.columns["text_units"])
    for name in record_tables.DEPENDS_ON:
        warnings.extend(large.warnings.get(name, []))
    for name, records in (("covariates", claims), ("documents", documents)):
        if records:
            repair_short_ids(records, files.rel(name), warnings)
    if not communities and "communities" not in files.files and reports:
        warnings.append(
            f"{files.rel('community_reports')}: no communities table; community membership unknown"
        )

    index = index_from_records(
        entities=entities,
        relationships=large.tables["relationships"],
        text_units=large.tables["text_units"],
        communities=communities,
        community_reports=reports,
        claims=claims,
        documents=documents,
        version=version,
        path=files.root,
        tokenizer=tok_future.result(),
        source_files={table: p.name for table, p in files.files.items()},
        warnings=warnings,
        store=store,
    )
    if not large.from_store:  # stored only once the index validated and filled its derived fields
        record_tables.save(store, large)
    for table in _read_vectors(files, index, embedding_dim, inline):
        index.add_vectors(table)
    return index


@dataclass
class _ReadTables(record_tables.LargeTables):
    inline: VectorTable | None = None


def _read_large_tables(
    files: IndexFiles, node_degree: dict[str, int], embedding_dim: int | None, warnings: list[str]
) -> _ReadTables:
    """Entities, relationships and text units read from their files, one table at a time (each Arrow
    table released before the next is read, so peak memory is one table plus the columns kept)."""
    entities_t = _read_required(files, "entities")
    inline = read_inline_entity_vectors(entities_t.table, entities_t.file, embedding_dim, warnings)
    repairs: dict[str, list[str]] = {name: [] for name in record_tables.DEPENDS_ON}
    tables = {"entities": record_tables.build(
        "entities", entities_t, entity_columns(entities_t, node_degree), repairs["entities"]
    )}  # fmt: skip
    columns = {"entities": entities_t.columns}
    del entities_t
    for name, normalise in (("relationships", relationship_columns), ("text_units", text_unit_columns)):
        data = _read_required(files, name)
        tables[name] = record_tables.build(name, data, normalise(data), repairs[name])
        columns[name] = data.columns
        del data
        release_arrow_memory()
    return _ReadTables(tables, columns, repairs, from_store=False, inline=inline)


def _read_vectors(
    files: IndexFiles, index: Index, embedding_dim: int | None, inline: VectorTable | None
) -> list[VectorTable]:
    reports: dict[str, dict[str, int]] = {}  # built only when vectors are read rather than mapped from the store

    def report_maps() -> dict[str, dict[str, int]]:
        if not reports:
            reports["number"] = {str(c): i for i, c in enumerate(values_of(index.community_reports, "community"))}
            reports["id"] = {rid: i for i, rid in enumerate(values_of(index.community_reports, "id", str))}
        return reports

    def entity_lookup(vid: str) -> int:
        pos = index.entity_pos.get(vid)
        if pos is None and len(vid) == 32 and "-" not in vid:  # uuid stored without dashes
            pos = index.entity_pos.get(f"{vid[:8]}-{vid[8:12]}-{vid[12:16]}-{vid[16:20]}-{vid[20:]}")
        return -1 if pos is None else pos

    def report_lookup(vid: str) -> int:
        # v0 reports had no id column and were keyed by community number
        maps = report_maps()
        return maps["id"].get(vid, maps["number"].get(vid, -1))

    def text_unit_lookup(vid: str) -> int:
        return index.text_unit_pos.get(vid, -1)

    lookups: dict[str, IdLookup] = {
        "entity_description": entity_lookup,
        "community_full_content": report_lookup,
        "text_unit_text": text_unit_lookup,
    }
    store = index.derived_store
    found = read_lancedb(files.root, lookups, embedding_dim, index.warnings, store)
    found.update(read_embedding_parquets(files.root, lookups, embedding_dim, index.warnings, skip=set(found),
                                         store=store))
    if inline is not None and "entity_description" not in found:
        found["entity_description"] = inline
    return list(found.values())
