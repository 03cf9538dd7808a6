"""Write the GraphRAG v3 parquet tables with exactly the column names, order and Arrow types of
`graphrag/data_model/schemas.py` (checked against Microsoft's own Christmas Carol index).

Each file is written to a temporary name and renamed, so an interrupted build never leaves a
half-written table next to a valid one. Rows come from generators and are written in row groups of
`BATCH_ROWS`, so a large index (a text unit can list thousands of relationship ids) is never held
as Python rows and an Arrow table at the same time.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from indexer.chunking import Chunk
from indexer.communities import CommunityRow
from indexer.graph import Graph
from indexer.reader import SourceDocument
from indexer.reports import ReportRow

_STR_LIST = pa.list_(pa.string())
_INT_LIST = pa.list_(pa.int64())

SCHEMAS: dict[str, pa.Schema] = {
    "entities": pa.schema(
        [("id", pa.string()), ("human_readable_id", pa.int64()), ("title", pa.string()), ("type", pa.string()),
         ("description", pa.string()), ("text_unit_ids", _STR_LIST), ("frequency", pa.int64()), ("degree", pa.int64())]
    ),
    "relationships": pa.schema(
        [("id", pa.string()), ("human_readable_id", pa.int64()), ("source", pa.string()), ("target", pa.string()),
         ("description", pa.string()), ("weight", pa.float64()), ("combined_degree", pa.int64()),
         ("text_unit_ids", _STR_LIST)]
    ),
    "communities": pa.schema(
        [("id", pa.string()), ("human_readable_id", pa.int64()), ("community", pa.int64()), ("level", pa.int64()),
         ("parent", pa.int64()), ("children", _INT_LIST), ("title", pa.string()), ("entity_ids", _STR_LIST),
         ("relationship_ids", _STR_LIST), ("text_unit_ids", _STR_LIST), ("period", pa.string()), ("size", pa.int64())]
    ),
    "community_reports": pa.schema(
        [("id", pa.string()), ("human_readable_id", pa.int64()), ("community", pa.int64()), ("level", pa.int64()),
         ("parent", pa.int64()), ("children", _INT_LIST), ("title", pa.string()), ("summary", pa.string()),
         ("full_content", pa.string()), ("rank", pa.float64()), ("rating_explanation", pa.string()),
         ("findings", pa.list_(pa.struct([("explanation", pa.string()), ("summary", pa.string())]))),
         ("full_content_json", pa.string()), ("period", pa.string()), ("size", pa.int64())]
    ),
    "text_units": pa.schema(
        [("id", pa.string()), ("human_readable_id", pa.int64()), ("text", pa.string()), ("n_tokens", pa.int64()),
         ("document_id", pa.string()), ("entity_ids", _STR_LIST), ("relationship_ids", _STR_LIST),
         ("covariate_ids", _STR_LIST), ("boilerplate", pa.float64())]
    ),
    "documents": pa.schema(
        [("id", pa.string()), ("human_readable_id", pa.int64()), ("title", pa.string()), ("text", pa.string()),
         ("text_unit_ids", _STR_LIST), ("creation_date", pa.string()), ("metadata", pa.null())]
    ),
    "covariates": pa.schema(
        [("id", pa.string()), ("human_readable_id", pa.int64()), ("covariate_type", pa.string()), ("type", pa.string()),
         ("description", pa.string()), ("subject_id", pa.string()), ("object_id", pa.string()), ("status", pa.string()),
         ("start_date", pa.string()), ("end_date", pa.string()), ("source_text", pa.string()), ("text_unit_id", pa.string())]
    ),
}


# Columns of ours after GraphRAG's (which GraphRAG's readers ignore): a text unit's share of licence and
# front/back matter (`indexer.unit_marks`), read at query time by `shared_context.boilerplate_marks`.
EXTRA_COLUMNS: dict[str, tuple[str, ...]] = {"text_units": ("boilerplate",)}


def today() -> str:
    return datetime.now(UTC).date().isoformat()


BATCH_ROWS = 2048


def write_table(out_dir: Path, name: str, rows: Iterable[dict[str, Any]]) -> Path:
    """Write `rows` (a list or any iterable, consumed once) as `name`.parquet, `BATCH_ROWS` rows at a time."""
    schema = SCHEMAS[name]
    if name == "documents":
        rows = list(rows)
        schema = schema.set(schema.get_field_index("metadata"), pa.field("metadata", metadata_type(rows)))
    path = out_dir / f"{name}.parquet"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with pq.ParquetWriter(tmp, schema) as writer:
            written = 0
            for batch in _batches(rows, BATCH_ROWS):
                writer.write_table(pa.Table.from_pydict({f.name: [r.get(f.name) for r in batch] for f in schema}, schema=schema))
                written += len(batch)
            if not written:
                writer.write_table(schema.empty_table())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return path


def metadata_type(rows: list[dict[str, Any]]) -> pa.DataType:
    """The Arrow type of the documents' `metadata` column, each row's value made to fit it.

    GraphRAG v3 keeps a document's metadata as a dict, which it writes as a struct (null-typed when no document
    has any): so do we, with every key any document has (a key a document lacks is null there). When a struct
    cannot hold it (a key that is 2024 in one document's front matter and "2023" in a CSV row), the column is
    JSON text instead, so each document keeps its values as they were; the loader reads both."""
    metas = [r.get("metadata") or None for r in rows]
    if all(m is None for m in metas):
        return pa.null()
    try:
        kind = pa.array(metas).type
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        kind = pa.string()
        metas = [None if m is None else json.dumps(m, ensure_ascii=False, sort_keys=True, default=str) for m in metas]
    for r, m in zip(rows, metas, strict=True):
        r["metadata"] = m
    return kind


def _batches(rows: Iterable[dict[str, Any]], n: int) -> Iterator[list[dict[str, Any]]]:
    it = iter(rows)
    while batch := list(itertools.islice(it, n)):
        yield batch


def entity_rows(graph: Graph) -> Iterator[dict[str, Any]]:
    return (
        {"id": e.id, "human_readable_id": e.human_readable_id, "title": e.title, "type": e.type,
         "description": e.description, "text_unit_ids": e.text_unit_ids, "frequency": e.frequency, "degree": e.degree}
        for e in graph.entities
    )


def relationship_rows(graph: Graph) -> Iterator[dict[str, Any]]:
    return (
        {"id": r.id, "human_readable_id": r.human_readable_id, "source": r.source, "target": r.target,
         "description": r.description, "weight": r.weight, "combined_degree": r.combined_degree,
         "text_unit_ids": r.text_unit_ids}
        for r in graph.relationships
    )


def community_rows(communities: list[CommunityRow], period: str) -> list[dict[str, Any]]:
    return [
        {"id": c.id, "human_readable_id": c.community, "community": c.community, "level": c.level, "parent": c.parent,
         "children": c.children, "title": c.title, "entity_ids": c.entity_ids, "relationship_ids": c.relationship_ids,
         "text_unit_ids": c.text_unit_ids, "period": period, "size": c.size}
        for c in communities
    ]


def report_rows(reports: list[ReportRow], period: str) -> list[dict[str, Any]]:
    return [
        {"id": r.id, "human_readable_id": r.community, "community": r.community, "level": r.level, "parent": r.parent,
         "children": r.children, "title": r.title, "summary": r.summary, "full_content": r.full_content,
         "rank": float(r.rank), "rating_explanation": r.rating_explanation,
         "findings": [{"explanation": f["explanation"], "summary": f["summary"]} for f in r.findings],
         "full_content_json": r.full_content_json, "period": period, "size": r.size}
        for r in reports
    ]


def stable_ids(keys: list[str], previous: Mapping[str, int] | None) -> list[int]:
    """human_readable_id per key: the previous build's value when the key survives, else a number after
    the largest ever used (so a saved citation never changes meaning)."""
    prev = previous or {}
    fresh = max(prev.values(), default=-1) + 1
    out = []
    for key in keys:
        if key in prev:
            out.append(prev[key])
        else:
            out.append(fresh)
            fresh += 1
    return out


def text_unit_rows(
    chunks: list[Chunk],
    graph: Graph,
    claims_by_unit: dict[str, list[str]],
    previous_ids: Mapping[str, int] | None = None,
    boilerplate: Mapping[str, float] | None = None,
) -> Iterator[dict[str, Any]]:
    """Reverse lookups of `entities.text_unit_ids` and `relationships.text_unit_ids`, as GraphRAG builds them,
    and each unit's share of licence or front/back matter (`boilerplate`, a column GraphRAG's readers ignore:
    `indexer.unit_marks`)."""
    shares = boilerplate or {}
    ents: dict[str, list[str]] = {c.id: [] for c in chunks}
    rels: dict[str, list[str]] = {c.id: [] for c in chunks}
    for e in graph.entities:
        for tu in e.text_unit_ids:
            ents[tu].append(e.id)
    for r in graph.relationships:
        for tu in r.text_unit_ids:
            rels[tu].append(r.id)
    return (
        {"id": c.id, "human_readable_id": i, "text": c.text, "n_tokens": c.n_tokens, "document_id": c.document_id,
         "entity_ids": ents[c.id], "relationship_ids": rels[c.id], "covariate_ids": claims_by_unit.get(c.id, []),
         "boilerplate": shares.get(c.id, 0.0)}
        for i, c in zip(stable_ids([c.id for c in chunks], previous_ids), chunks, strict=True)
    )


def document_rows(
    documents: list[SourceDocument], chunks: list[Chunk], previous_ids: Mapping[str, int] | None = None
) -> list[dict[str, Any]]:
    by_doc: dict[str, list[str]] = {d.id: [] for d in documents}
    for c in chunks:
        by_doc[c.document_id].append(c.id)
    return [
        {"id": d.id, "human_readable_id": i, "title": d.title, "text": d.text, "text_unit_ids": by_doc[d.id],
         "creation_date": d.creation_date,
         "metadata": dict(d.metadata) if d.metadata else None}
        for i, d in zip(stable_ids([d.id for d in documents], previous_ids), documents, strict=True)
    ]
