"""A small table's records (communities, reports, claims) read from Arrow row by row, kept once made.

At 1M entities the small tables hold millions of values (every community's member ids, every
report's findings); making a Python object of each on every open was seconds of a second load, and
a local question reads a few rows. A `RecordList` makes a row's record when it is first read and
keeps it, so it behaves as the list it replaces: the same row is the same object, a change to a
record persists, and iterating makes (and keeps) every record - a whole-table pass costs what the
eager list cost, once. `to_arrow` turns the list the loader built into such a table; it refuses
(None) unless every record reads back identical, so a table that Arrow cannot hold exactly stays a
plain list.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Sequence
from itertools import chain
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa

from shared_context.record_table import RecordTable, numpy_array, string_array

__all__ = ["RecordList", "to_arrow"]

T = TypeVar("T")

# dataclass field annotation -> Arrow type; any other field is stored as JSON text (findings, metadata)
_TYPES = {
    "str": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "list[str]": pa.list_(pa.string()),
    "list[int]": pa.list_(pa.int64()),
}
_JSON_KEY = b"graphroute_json"  # schema metadata: the fields held as JSON text


def _json_fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if str(f.type) not in _TYPES]


class RecordList(RecordTable[T]):
    """Rows of an Arrow table as records made on first read and kept (see the module docstring)."""

    def __init__(self, cls: type[T], table: pa.Table) -> None:
        super().__init__(cls, table)
        meta = table.schema.metadata or {}
        stored = json.loads(meta.get(_JSON_KEY, b"[]"))
        if stored != _json_fields(cls):
            raise ValueError(f"table does not hold {cls.__name__} records as `to_arrow` writes them")
        self._json = stored
        for name in stored:  # JSON text -> the value it encodes
            col = self._names.index(name)
            self._columns[col] = _decoded(self._columns[col])

    def __iter__(self) -> Iterator[T]:
        # every record made and kept: later passes (and changes made during this one) see the same objects
        for i in range(len(self)):
            yield self[i]

    def column(self, name: str) -> list[Any]:
        """One field of every row; once any record was made, read through the records (they may have
        been changed, e.g. by the load-time repairs), else straight from the column."""
        if self._made:
            get = self.field(name)
            return [get(i) for i in range(len(self))]
        return super().column(name)

    def arrow_column(self, name: str) -> pa.ChunkedArray:
        if name in self._json:
            raise ValueError(f"{name!r} is stored as JSON text; read it through `column`")
        stored = self._columns[self._names.index(name)]
        if any(getattr(record, name) != stored(i) for i, record in self._made.items()):
            # a record was changed since it was read: the column is rebuilt from the records
            kind, values = self.table.schema.field(name).type, self.column(name)
            # string_array: pa.array(list) imports pandas on first use (0.5-4 s of a first question)
            built = string_array(values) if kind == pa.string() else pa.array(values, kind)
            return pa.chunked_array([built])
        return super().arrow_column(name)  # the stored column: no record made for the other rows

    def with_column(self, name: str, values: Sequence[Any] | pa.Array) -> None:
        """Set one field of every record (made for the purpose): the records are what is read."""
        items = values.to_pylist() if isinstance(values, pa.Array | pa.ChunkedArray) else values
        for i, value in enumerate(items):
            setattr(self[i], name, value)

    def __repr__(self) -> str:
        return f"RecordList({self.cls.__name__}, rows={len(self)})"


def _decoded(get: Callable[[int], Any]) -> Callable[[int], Any]:
    return lambda i: json.loads(get(i))


def _offsets(lists: list[Any]) -> pa.Array:
    ends = np.zeros(len(lists) + 1, dtype=np.int32)
    np.cumsum([len(v) for v in lists], out=ends[1:])
    return numpy_array(ends)


def _array(values: list[Any], kind: pa.DataType) -> pa.Array:
    """`pa.array(values, kind)` built from buffers for the plain cases (every value of the field's Python
    type, no None): `pa.array(list)` imports pandas (0.8 s of a first load). Anything else: pa.array."""
    if kind == pa.string() and all(type(v) is str for v in values):
        return string_array(values)
    if kind == pa.int64() and all(type(v) is int for v in values):
        return numpy_array(np.array(values, dtype=np.int64))
    if kind == pa.float64() and all(type(v) is float for v in values):
        return numpy_array(np.array(values, dtype=np.float64))
    if pa.types.is_list(kind) and all(type(v) is list for v in values):
        flat = list(chain.from_iterable(values))
        if kind.value_type == pa.string() and all(type(v) is str for v in flat):
            return pa.ListArray.from_arrays(_offsets(values), string_array(flat), type=kind)
        if kind.value_type == pa.int64() and all(type(v) is int for v in flat):
            return pa.ListArray.from_arrays(_offsets(values), numpy_array(np.array(flat, dtype=np.int64)), type=kind)
    return pa.array(values, kind)


def to_arrow(cls: type[T], records: Sequence[T]) -> pa.Table | None:
    """`records` as the table a `RecordList` reads them back from, or None when some value would not
    come back identical (a type Arrow or JSON changes, NaN, an int beyond int64)."""
    json_fields = _json_fields(cls)
    arrays = {}
    try:
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            values = [getattr(r, f.name) for r in records]
            if f.name in json_fields:
                arrays[f.name] = string_array([json.dumps(v) for v in values])
            else:
                arrays[f.name] = _array(values, _TYPES[str(f.type)])
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
    table = pa.table(arrays).replace_schema_metadata({_JSON_KEY: json.dumps(json_fields)})
    back = RecordList(cls, table)
    # repr tells apart what == does not (1 vs 1.0, a tuple vs a list); NaN != NaN fails == and is refused
    if any(a != b or repr(a) != repr(b) for a, b in zip(back, records, strict=True)):
        return None
    return table
