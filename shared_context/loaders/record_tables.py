"""The three large tables (entities, relationships, text units) as `RecordTable`s, stored once normalised.

First load: each table is read, normalised to the v3 record fields (`schema.py`), its citation ids
repaired, and turned into an Arrow table. After the `Index` is built (which may fill derived fields
such as degrees or a text unit's document id), `save` writes each table with Arrow IPC into the
derived store, together with the table's original column names and the warnings its repair raised.
Next load: `load` maps the three tables from the store - no parquet decoding, no Python objects -
as long as the tables each was derived from are unchanged (an entities entry depends on every table
that can fill an entity field: entities, nodes, relationships, text units).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from shared_context.derived_store import DerivedStore
from shared_context.loaders.columns import TableData
from shared_context.loaders.integrity import repair_short_id_values
from shared_context.loaders.schema import Column
from shared_context.records import (
    Entity,
    RecordTable,
    Relationship,
    TextUnit,
    numpy_array,
    release_arrow_memory,
    string_array,
)

__all__ = ["LargeTables", "build", "load", "save"]

_FORMAT = "1"
_CLASSES: dict[str, type] = {"entities": Entity, "relationships": Relationship, "text_units": TextUnit}
LargeTable = RecordTable[Entity] | RecordTable[Relationship] | RecordTable[TextUnit]
DEPENDS_ON = {
    "entities": ["entities", "nodes", "relationships", "text_units"],
    "relationships": ["relationships", "entities", "text_units"],
    "text_units": ["text_units", "entities", "relationships", "documents"],
}
_LIST_STR = pa.list_(pa.string())
_TYPES = {
    "frequency": pa.int64(),
    "degree": pa.int64(),
    "combined_degree": pa.int64(),
    "weight": pa.float64(),
    "n_tokens": pa.int64(),
    "text_unit_ids": _LIST_STR,
    "entity_ids": _LIST_STR,
    "relationship_ids": _LIST_STR,
    "covariate_ids": _LIST_STR,
}


@dataclass
class LargeTables:
    tables: dict[str, RecordTable[Any]]
    columns: dict[str, list[str]]  # original column names per table (version detection)
    warnings: dict[str, list[str]] = field(default_factory=dict)  # repair warnings per table
    from_store: bool = False


def build(name: str, data: TableData, columns: dict[str, Column], warnings: list[str]) -> LargeTable:
    """A RecordTable from normalised columns, citation ids repaired (warnings appended)."""
    repaired = repair_short_id_values(columns["short_id"], data.file, warnings)
    if repaired is not None:
        columns["short_id"] = repaired
    arrays = {k: _arrow(v, _TYPES.get(k, pa.string())) for k, v in columns.items()}
    columns.clear()  # the Python lists can go before the next table is read
    return RecordTable(_CLASSES[name], pa.table(arrays))


def _arrow(values: Column, kind: pa.DataType) -> pa.Array | pa.ChunkedArray:
    """A normalised column as Arrow, from buffers where it can be: `pa.array` of a list or an ndarray
    imports pandas (0.8 s CPU of a first load that otherwise never needs it)."""
    if isinstance(values, pa.Array | pa.ChunkedArray):
        return values
    if kind == pa.string() and isinstance(values, list):
        return string_array(values)
    if isinstance(values, np.ndarray) and values.dtype.kind in "iuf":
        array = numpy_array(values)
        return array if array.type == kind else array.cast(kind)
    return pa.array(values, type=kind)


def load(store: DerivedStore) -> LargeTables | None:
    """The three tables mapped from the store, or None unless all are stored and readable."""
    tables: dict[str, RecordTable[Any]] = {}
    columns: dict[str, list[str]] = {}
    warnings: dict[str, list[str]] = {}
    for name, cls in _CLASSES.items():
        table = store.load_table(f"records-{name}", DEPENDS_ON[name], extra=_FORMAT)
        if table is None:
            return None
        meta = json.loads((table.schema.metadata or {}).get(b"graphroute", b"{}"))
        try:
            tables[name] = RecordTable(cls, table)
        except ValueError:
            return None
        tables[name].validated = True  # stored only after the Index built from it validated
        columns[name] = list(meta.get("columns", []))
        warnings[name] = list(meta.get("warnings", []))
    return LargeTables(tables, columns, warnings, from_store=True)


def save(store: DerivedStore, large: LargeTables) -> None:
    """Write each table into the store, then read it from there (write-then-map): the decoded copy is
    freed and the process holds only the stored pages queries touch, so what the first query builds
    (linking and excerpt tables) does not stack on top of every table decoded in memory."""
    for name, records in large.tables.items():
        meta = {"columns": large.columns.get(name, []), "warnings": large.warnings.get(name, [])}
        table = records.table.replace_schema_metadata({"graphroute": json.dumps(meta)})
        store.save_table(f"records-{name}", DEPENDS_ON[name], table, extra=_FORMAT)
        del table
        mapped = store.load_table(f"records-{name}", DEPENDS_ON[name], extra=_FORMAT)
        if mapped is not None:  # an unwritable cache keeps the decoded table
            records.replace_table(mapped)
        release_arrow_memory()
