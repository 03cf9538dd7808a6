"""Turning each table (any schema version) into v3-normalised records.

Column differences handled here (older name -> v3 name):
- entities: `name` -> `title` (v0); `degree`/`frequency` missing before v2 (taken from
  `create_final_nodes`, else derived from the relationships by the Index);
- relationships: `rank` -> `combined_degree` (v0/v1);
- text units: `document_ids[0]` -> `document_id` (v0–v2);
- community reports: `rank_explanation` -> `rating_explanation`, `community` as text, `id` missing (v0);
- communities: `community` missing (v0 used `id`), `entity_ids` missing (v0: from nodes),
  `parent`/`children` missing (before v2: derived by the Index from entity membership);
- covariates: `subject_id` -> `subject`, `object_id` -> `object`;
- documents: `raw_content` -> `text` (v0), `metadata` / `raw_data` / `attributes`.
`human_readable_id` missing -> the row position (reports are cited by community number).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Sequence
from typing import Any, TypeAlias, TypeVar

import numpy as np
import pyarrow as pa

from shared_context.loaders.columns import TableData
from shared_context.records import (
    Claim,
    Community,
    CommunityReport,
    Document,
    Entity,
    Relationship,
    TextUnit,
    numpy_array,
)

R = TypeVar("R")
# a normalised column: Arrow, a numpy array, or Python values
Column: TypeAlias = "pa.Array | pa.ChunkedArray | np.ndarray | Sequence[object]"


def _short_ids(t: TableData) -> list[str]:
    if t.has("human_readable_id"):
        return [str(v) for v in t.ints("human_readable_id", default=-1)]
    return [str(i) for i in range(len(t))]


def _short_id_array(t: TableData) -> pa.Array:
    """`_short_ids` as an Arrow string array (the large tables: no Python string per row). Built from
    the int64 buffer (`numpy_array`: `pa.array(ndarray)` imports pandas, 0.8 s CPU of a first load)."""
    ids = t.int_array("human_readable_id", default=-1) if t.has("human_readable_id") else np.arange(len(t))
    return numpy_array(np.asarray(ids, dtype=np.int64)).cast(pa.string())


def _require_rows(t: TableData, key: str) -> None:
    if len(t) == 0:
        raise t.error("table is empty (0 rows); the index needs at least one", key)


def node_stats(nodes: TableData | None) -> tuple[dict[str, int], dict[tuple[int, int], list[str]]]:
    """From v0/v1 `create_final_nodes`: degree per title and members per (community, level)."""
    if nodes is None or len(nodes) == 0:
        return {}, {}
    title_col = nodes.first_present("title", "name") or "title"
    titles = nodes.strings(title_col)
    degree: dict[str, int] = {}
    if nodes.has("degree"):
        for title, d in zip(titles, nodes.ints("degree"), strict=True):
            degree[title] = max(d, degree.get(title, 0))
    members: dict[tuple[int, int], list[str]] = defaultdict(list)
    if nodes.has("community") and nodes.has("level"):
        for title, comm, level in zip(
            titles, nodes.ints("community", default=-1), nodes.ints("level"), strict=True
        ):
            if comm >= 0:
                members[(comm, level)].append(title)
    return degree, dict(members)


def entity_columns(t: TableData, node_degree: dict[str, int]) -> dict[str, Column]:
    """The entity fields of every row, by field name (see `records.Entity`)."""
    title_col = t.first_present("title", "name")
    if title_col is None:
        t.require("title")
    assert title_col is not None
    t.require("id")
    _require_rows(t, "id")
    ids = t.arrow_strings("id", non_empty=True)
    titles = t.arrow_strings(title_col, non_empty=True)
    if t.has("degree"):
        degrees: Any = t.int_array("degree")
    else:
        names = titles.to_pylist() if isinstance(titles, pa.Array | pa.ChunkedArray) else titles
        degrees = [node_degree.get(title, 0) for title in names]
    return {
        "id": ids,
        "short_id": _short_id_array(t),
        "title": titles,
        "type": t.strings("type", required=False),
        "description": t.arrow_text("description", required=False),
        "text_unit_ids": t.arrow_str_lists("text_unit_ids"),
        "frequency": t.int_array("frequency", required=False),
        "degree": degrees,
    }


def relationship_columns(t: TableData) -> dict[str, Column]:
    t.require("id", "source", "target")
    _require_rows(t, "id")
    degree_col = t.first_present("combined_degree", "rank")
    return {
        "id": t.arrow_strings("id", non_empty=True),
        "short_id": _short_id_array(t),
        "source": t.arrow_strings("source", non_empty=True),
        "target": t.arrow_strings("target", non_empty=True),
        "description": t.arrow_text("description", required=False),
        "weight": t.float_array("weight", required=False, default=1.0),
        "combined_degree": t.int_array(degree_col, required=False) if degree_col else np.zeros(len(t), np.int64),
        "text_unit_ids": t.arrow_str_lists("text_unit_ids"),
    }


def text_unit_columns(t: TableData) -> dict[str, Column]:
    t.require("id", "text")
    _require_rows(t, "id")
    if t.has("document_id"):
        doc_ids = t.arrow_strings("document_id", required=False)
    else:
        doc_ids = [d[0] if d else "" for d in t.str_lists("document_ids")]
    return {
        "id": t.arrow_strings("id", non_empty=True),
        "short_id": _short_id_array(t),
        "text": t.arrow_text("text"),
        "n_tokens": t.int_array("n_tokens", required=False),
        "document_id": doc_ids,
        "entity_ids": t.arrow_str_lists("entity_ids"),
        "relationship_ids": t.arrow_str_lists("relationship_ids"),
        "covariate_ids": t.arrow_str_lists("covariate_ids"),
    }


def _records(cls: type[R], columns: dict[str, Column]) -> list[R]:
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    values = [
        c.to_pylist() if isinstance(c, pa.Array | pa.ChunkedArray) else c.tolist() if isinstance(c, np.ndarray) else c
        for c in (columns[n] for n in names)
    ]
    return [cls(*row) for row in zip(*values, strict=True)]


def build_entities(t: TableData, node_degree: dict[str, int]) -> list[Entity]:
    return _records(Entity, entity_columns(t, node_degree))


def build_relationships(t: TableData) -> list[Relationship]:
    return _records(Relationship, relationship_columns(t))


def build_text_units(t: TableData) -> list[TextUnit]:
    return _records(TextUnit, text_unit_columns(t))


def build_communities(
    t: TableData | None,
    node_members: dict[tuple[int, int], list[str]],
    title_to_id: dict[str, str],
) -> list[Community]:
    """Communities from the table, or (v0 without one) from the nodes' per-level membership."""
    if t is None:
        return [
            Community(
                id=str(comm),
                community=comm,
                level=level,
                title=f"Community {comm}",
                entity_ids=[title_to_id[x] for x in titles if x in title_to_id],
                size=len(titles),
            )
            for (comm, level), titles in sorted(node_members.items(), key=lambda kv: (kv[0][1], kv[0][0]))
        ]
    if len(t) == 0:
        return []
    number_col = t.first_present("community", "id")
    t.require(number_col or "community", "level")
    assert number_col is not None
    numbers = t.ints(number_col)
    levels = t.ints("level")
    if t.has("entity_ids"):
        entity_ids = t.str_lists("entity_ids")
    else:
        entity_ids = [
            [title_to_id[x] for x in node_members.get((c, lvl), []) if x in title_to_id]
            for c, lvl in zip(numbers, levels, strict=True)
        ]
    ids = t.strings("id") if t.has("id") and number_col != "id" else [str(c) for c in numbers]
    sizes = t.ints("size", required=False, default=-1)
    return [
        Community(
            id=i,
            community=c,
            level=lvl,
            parent=p,
            children=ch,
            title=title or f"Community {c}",
            entity_ids=ents,
            relationship_ids=rels,
            text_unit_ids=tus,
            size=size if size >= 0 else len(ents),
        )
        for i, c, lvl, p, ch, title, ents, rels, tus, size in zip(
            ids,
            numbers,
            levels,
            t.ints("parent", required=False, default=-1),
            t.int_lists("children"),
            t.strings("title", required=False),
            entity_ids,
            t.str_lists("relationship_ids"),
            t.str_lists("text_unit_ids"),
            sizes,
            strict=True,
        )
    ]


def build_reports(t: TableData | None) -> list[CommunityReport]:
    if t is None or len(t) == 0:
        return []
    t.require("community", "level", "full_content")
    numbers = t.ints("community")
    ids = t.strings("id") if t.has("id") else [str(c) for c in numbers]
    explanation_col = t.first_present("rating_explanation", "rank_explanation")
    return [
        CommunityReport(
            id=i,
            community=c,
            level=lvl,
            title=title,
            summary=summary,
            full_content=content,
            rank=rank,
            parent=p,
            children=ch,
            rating_explanation=expl,
            findings=findings,
            size=size,
        )
        for i, c, lvl, title, summary, content, rank, p, ch, expl, findings, size in zip(
            ids,
            numbers,
            t.ints("level"),
            t.strings("title", required=False),
            t.strings("summary", required=False),
            t.strings("full_content"),
            t.floats("rank", required=False),
            t.ints("parent", required=False, default=-1),
            t.int_lists("children"),
            t.strings(explanation_col, required=False) if explanation_col else [""] * len(t),
            t.records("findings"),
            t.ints("size", required=False),
            strict=True,
        )
    ]


def _none_to_empty(values: list[str]) -> list[str]:
    # GraphRAG writes the literal "NONE" for absent claim dates/objects.
    return ["" if v == "NONE" else v for v in values]


def build_claims(t: TableData | None) -> list[Claim]:
    if t is None or len(t) == 0:
        return []
    subject_col = t.first_present("subject_id", "subject")
    t.require("id", subject_col or "subject_id")
    assert subject_col is not None
    object_col = t.first_present("object_id", "object")
    return [
        Claim(
            id=i,
            short_id=s,
            subject=subj,
            object=obj,
            type=ty,
            status=st,
            start_date=sd,
            end_date=ed,
            description=desc,
            source_text=src,
            text_unit_id=tu,
        )
        for i, s, subj, obj, ty, st, sd, ed, desc, src, tu in zip(
            t.strings("id", non_empty=True),
            _short_ids(t),
            t.strings(subject_col),
            _none_to_empty(t.strings(object_col, required=False)) if object_col else [""] * len(t),
            t.strings("type", required=False),
            t.strings("status", required=False),
            _none_to_empty(t.strings("start_date", required=False)),
            _none_to_empty(t.strings("end_date", required=False)),
            t.strings("description", required=False),
            t.strings("source_text", required=False),
            t.strings("text_unit_id", required=False),
            strict=True,
        )
    ]


def build_documents(t: TableData | None) -> list[Document]:
    if t is None or len(t) == 0:
        return []
    t.require("id")
    text_col = t.first_present("text", "raw_content")
    # GraphRAG v3 and our indexer write `metadata`; our older builds and some GraphRAG versions `raw_data`
    metas = _first_mappings(t, ("metadata", "raw_data", "attributes"))
    return [
        Document(id=i, short_id=s, title=title, text=text, text_unit_ids=tus, metadata=meta)
        for i, s, title, text, tus, meta in zip(
            t.strings("id", non_empty=True),
            _short_ids(t),
            t.strings("title", required=False),
            t.strings(text_col, required=False) if text_col else [""] * len(t),
            t.str_lists("text_unit_ids"),
            metas,
            strict=True,
        )
    ]


def _first_mappings(t: TableData, columns: Sequence[str]) -> list[dict[str, object]]:
    """Per row, the first of `columns` holding a non-empty mapping (an index may carry an empty `metadata`
    beside a filled `raw_data`)."""
    out: list[dict[str, object]] = [{} for _ in range(len(t))]
    for column in (c for c in columns if t.has(c)):
        for row, mapping in enumerate(t.mappings(column)):
            if not out[row]:
                out[row] = mapping
    return out
