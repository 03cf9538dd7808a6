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
from collections.abc import Callable, Iterator, Sequence, Sized
from itertools import chain
from typing import TypeGuard, TypeVar, cast

import numpy as np
import pyarrow as pa

from shared_context.records import RecordTable, numpy_array, string_array

__all__ = ["RecordList", "to_arrow"]

T = TypeVar("T")
V = TypeVar("V")

# dataclass field annotation -> Arrow type; any other field is stored as JSON text (findings, metadata)
_TYPES = {
    "str": pa.string(),
    "int": pa.int64(),
    "float": pa.float64(),
    "list[str]": pa.list_(pa.string()),
    "list[int]": pa.list_(pa.int64()),
}
_CHUNK = 4096  # rows decoded at once by a whole-table pass
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
        # Every record made and kept, so later passes see the same objects. Rows are decoded a chunk at a
        # time in Arrow (a global search's first pass over 60k reports: ~3x faster than row by row); a
        # row's kept record, if any, is looked up when it is reached, so a record made or changed earlier
        # in this same pass (e.g. a parent's children filled in) is the one yielded.
        made, json_at = self._made, [self._names.index(name) for name in self._json]
        for start in range(0, len(self), _CHUNK):
            chunk = self.table.slice(start, _CHUNK)
            columns = [chunk.column(name).to_pylist() for name in self._names]
            for c in json_at:
                columns[c] = [json.loads(v) for v in columns[c]]
            for i, values in enumerate(zip(*columns, strict=True), start):
                record = made.get(i)
                if record is None:
                    record = made[i] = self.cls(*values)
                yield record

    def column(self, name: str) -> list[object]:
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
            built = string_array(cast("list[str | None]", values)) if kind == pa.string() else pa.array(values, kind)
            return pa.chunked_array([built])
        return super().arrow_column(name)  # the stored column: no record made for the other rows

    def with_column(self, name: str, values: Sequence[object] | pa.Array | pa.ChunkedArray) -> None:
        """Set one field of every record (made for the purpose): the records are what is read."""
        items = values.to_pylist() if isinstance(values, pa.Array | pa.ChunkedArray) else values
        for i, value in enumerate(items):
            setattr(self[i], name, value)

    def __repr__(self) -> str:
        return f"RecordList({self.cls.__name__}, rows={len(self)})"


def _decoded(get: Callable[[int], object]) -> Callable[[int], object]:
    return lambda i: cast(object, json.loads(cast(str, get(i))))  # a JSON field's column holds text


def _offsets(lists: Sequence[Sized]) -> pa.Array:
    ends = np.zeros(len(lists) + 1, dtype=np.int32)
    np.cumsum([len(v) for v in lists], out=ends[1:])
    return numpy_array(ends)


def _only(values: Sequence[object], kind: type[V]) -> TypeGuard[Sequence[V]]:
    """Every value exactly of type `kind` (no subclass, no None); `map(type)` runs in C."""
    return not values or set(map(type, values)) == {kind}


def _array(values: list[object], kind: pa.DataType) -> tuple[pa.Array, bool]:
    """`pa.array(values, kind)`, and whether it is exact by construction: built from buffers for the
    plain cases (every value exactly of the field's Python type, no None, no NaN), which also keeps
    `pa.array(list)` from importing pandas (0.8 s of a first load). Anything else: pa.array, not exact."""
    if kind == pa.string() and _only(values, str):
        return string_array(values), True
    if kind == pa.int64() and _only(values, int):
        return numpy_array(np.array(values, dtype=np.int64)), True
    if kind == pa.float64() and _only(values, float) and not np.isnan(values).any():
        return numpy_array(np.array(values, dtype=np.float64)), True
    if pa.types.is_list(kind) and _only(values, list):
        flat = list(chain.from_iterable(values))
        if kind.value_type == pa.string() and _only(flat, str):
            return pa.ListArray.from_arrays(_offsets(values), string_array(flat), type=kind), True
        if kind.value_type == pa.int64() and _only(flat, int):
            ints = numpy_array(np.array(flat, dtype=np.int64))
            return pa.ListArray.from_arrays(_offsets(values), ints, type=kind), True
    return pa.array(values, kind), False


def _same(back: list[object], values: list[object]) -> bool:
    # repr tells apart what == does not (1 vs 1.0, a tuple vs a list); NaN != NaN fails == and is refused
    return back == values and repr(back) == repr(values)


def to_arrow(cls: type[T], records: Sequence[T]) -> pa.Table | None:
    """`records` as the table a `RecordList` reads them back from, or None when some value would not
    come back identical (a type Arrow or JSON changes, NaN, an int beyond int64). Only fields not exact
    by construction are read back and compared (comparing whole records cost ~1.4 s of a 100k first load)."""
    json_fields = _json_fields(cls)
    arrays = {}
    try:
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            values = [getattr(r, f.name) for r in records]
            if f.name in json_fields:
                dumped = [json.dumps(v) for v in values]
                # JSON gives back only plain types, so == suffices: a tuple (a list back), a non-text key
                # (text back) or NaN (another object, unequal) fails it
                if [json.loads(d) for d in dumped] != values:
                    return None
                arrays[f.name] = string_array(dumped)
                continue
            array, exact = _array(values, _TYPES[str(f.type)])
            if not exact and not _same(array.to_pylist(), values):
                return None
            arrays[f.name] = array
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None
    return pa.table(arrays).replace_schema_metadata({_JSON_KEY: json.dumps(json_fields)})
