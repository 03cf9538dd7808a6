"""The records of a GraphRAG index, and the Arrow-backed lists that hold the large tables' records.

Records: typed dataclasses normalised to the v3 schema whatever version was read. Citation ids (`short_id`) are
`human_readable_id` as a string for every record type; reports are cited by their community number. Lists are
plain Python lists (never numpy arrays) so callers can rely on them.

`RecordTable`: a list of records held as Arrow columns, with record objects made only for the rows a query
reads. The large tables of an index (entities, relationships, text units) are `RecordTable`s when loaded from
files: a 5M-relationship index then costs its Arrow buffers (memory-mapped from the derived store on later loads,
so untouched pages are never read) instead of millions of Python objects. `table[i]` returns a record dataclass
built on first access and kept, so the same row is the same object each time (callers may keep it, compare it,
or - during load - set fields on it). Iteration builds records a chunk of rows at a time and does not keep them.
`column(name)` returns a whole column as a Python list without making records, for code that needs one field of
every row; `values_of` / `field_of` read one field of any list of records, typed by the `kind` the caller names.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast, overload

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    import numpy.typing as npt

__all__ = [
    "Claim",
    "Community",
    "CommunityReport",
    "Document",
    "Entity",
    "RecordTable",
    "Relationship",
    "TextColumn",
    "TextUnit",
    "array_of",
    "field_of",
    "numeric_view",
    "release_arrow_memory",
    "string_array",
    "text_lengths_at",
    "text_lengths_of",
    "texts_of",
    "values_of",
]


@dataclass(slots=True)
class Entity:
    id: str
    short_id: str
    title: str
    type: str = ""
    description: str = ""
    text_unit_ids: list[str] = field(default_factory=list)
    frequency: int = 0
    degree: int = 0


@dataclass(slots=True)
class Relationship:
    id: str
    short_id: str
    source: str  # entity title, as in GraphRAG
    target: str
    description: str = ""
    weight: float = 1.0
    combined_degree: int = 0
    text_unit_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TextUnit:
    id: str
    short_id: str
    text: str
    n_tokens: int = 0
    document_id: str = ""
    entity_ids: list[str] = field(default_factory=list)
    relationship_ids: list[str] = field(default_factory=list)
    covariate_ids: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Community:
    id: str
    community: int
    level: int
    parent: int = -1
    children: list[int] = field(default_factory=list)
    title: str = ""
    entity_ids: list[str] = field(default_factory=list)
    relationship_ids: list[str] = field(default_factory=list)
    text_unit_ids: list[str] = field(default_factory=list)
    size: int = 0


@dataclass(slots=True)
class CommunityReport:
    id: str
    community: int  # also the citation id
    level: int
    title: str
    summary: str = ""
    full_content: str = ""
    rank: float = 0.0
    parent: int = -1
    children: list[int] = field(default_factory=list)
    rating_explanation: str = ""
    findings: list[dict[str, Any]] = field(default_factory=list)
    size: int = 0

    @property
    def short_id(self) -> str:
        return str(self.community)


@dataclass(slots=True)
class Claim:
    id: str
    short_id: str
    subject: str  # entity title
    object: str = ""
    type: str = ""  # claim category
    status: str = ""
    start_date: str = ""
    end_date: str = ""
    description: str = ""
    source_text: str = ""
    text_unit_id: str = ""


@dataclass(slots=True)
class Document:
    id: str
    short_id: str
    title: str
    text: str = ""
    text_unit_ids: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


# Records held as Arrow columns

T = TypeVar("T")
V = TypeVar("V")
_CHUNK = 8192


def numeric_view(values: pa.Array | pa.ChunkedArray, fill: int | None = None) -> np.ndarray:
    """A numeric or boolean Arrow column as numpy, read from its buffers: a zero-copy view when one chunk
    has no nulls; with nulls float64 with NaN there (as pyarrow's `to_numpy`), or `fill` there in the
    column's own dtype. pyarrow's own `to_numpy` / `np.asarray` and `fill_null(<Python value>)` import
    pandas on first use (0.5-4 s, most of a second open); pyarrow's path is kept for other types."""
    if fill is not None:
        out = numeric_view(values)
        if values.null_count == 0:
            return out
        dtype = np.dtype(values.type.to_pandas_dtype())
        return np.where(np.isnan(out), fill, out).astype(dtype)
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 1:
            return numeric_view(values.chunk(0))
        parts = [numeric_view(chunk) for chunk in values.chunks]
        return np.concatenate(parts) if parts else numeric_view(pa.array([], type=values.type))
    arr, kind = values, values.type
    if pa.types.is_null(kind):
        return np.full(len(arr), np.nan)
    if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
        return np.asarray(arr.to_numpy(zero_copy_only=False))
    data = arr.buffers()[1]
    if pa.types.is_boolean(kind):
        out = _bits(data, arr.offset, len(arr))
    else:
        dtype = np.dtype(kind.to_pandas_dtype())
        out = (np.zeros(0, dtype=dtype) if data is None
               else np.frombuffer(data, dtype=dtype, count=len(arr), offset=arr.offset * dtype.itemsize))  # fmt: skip
    if arr.null_count == 0:
        return out
    out = out.astype(np.float64)
    out[~_bits(arr.buffers()[0], arr.offset, len(arr))] = np.nan
    return out


def string_array(values: Sequence[str | None]) -> pa.Array:
    """Python strings as an Arrow string array built from its buffers: `pa.array(list)` imports pandas
    on first use (0.5-4 s) to check for pandas objects. None values take pyarrow's path."""
    if None in values:
        return pa.array(values, type=pa.string())
    joined = "".join(values)  # type: ignore[arg-type]
    if joined.isascii():  # one byte a character: lengths and bytes without a Python object per value
        data, lengths = joined.encode("ascii"), list(map(len, values))  # type: ignore[arg-type]
    else:
        encoded = [v.encode("utf-8") for v in values]  # type: ignore[union-attr]
        data, lengths = b"".join(encoded), list(map(len, encoded))
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    large = offsets[-1] >= 2**31
    kind, ends = (pa.large_string(), offsets) if large else (pa.string(), offsets.astype(np.int32))
    return pa.Array.from_buffers(kind, len(lengths), [None, pa.py_buffer(ends), pa.py_buffer(data)])


def numpy_array(values: np.ndarray) -> pa.Array:
    """A 1-d numeric ndarray as an Arrow array over its buffer: `pa.array(ndarray)` imports pandas."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


def _bits(buffer: pa.Buffer | None, offset: int, n: int) -> np.ndarray:
    """An Arrow bitmap (validity or boolean values) as a bool array."""
    if buffer is None:
        return np.zeros(n, dtype=bool)
    bits = np.unpackbits(np.frombuffer(buffer, dtype=np.uint8), bitorder="little")
    return bits[offset : offset + n].astype(bool)


def row_position(i: int, n: int) -> int:
    """`i` as a row position in `0..n-1` (negative counts from the end, as for a list), or IndexError."""
    if i < 0:
        i += n
    if not 0 <= i < n:
        raise IndexError(f"row {i} out of range for {n} rows")
    return i


class RowSequence(Sequence[T]):
    """A read-only sequence whose rows are made when asked for: a subclass gives `__len__` and `_row(i)` for
    `i` in `0..len-1`; negative positions and slices work as for a list."""

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> list[T]: ...
    def __getitem__(self, i: int | slice) -> T | list[T]:
        if isinstance(i, slice):
            return [self._row(j) for j in range(*i.indices(len(self)))]
        return self._row(row_position(i, len(self)))

    def _row(self, i: int) -> T:
        raise NotImplementedError


class RecordTable(RowSequence[T], Generic[T]):
    """Rows of `table` as `cls` records (column names are the dataclass's field names)."""

    def __init__(self, cls: type[T], table: pa.Table) -> None:
        names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
        missing = [n for n in names if n not in table.column_names]
        if missing:
            raise ValueError(f"record table for {cls.__name__} lacks columns {missing}")
        self.cls = cls
        self.table = table.select(names)
        self._names = names
        self._columns = [_accessor(self.table.column(n)) for n in names]
        self._made: dict[int, T] = {}
        # True when read back from the derived store: the load that stored it checked its ids
        self.validated = False

    def __len__(self) -> int:
        return int(self.table.num_rows)

    def _row(self, i: int) -> T:
        record = self._made.get(i)
        if record is None:
            record = self.cls(*(get(i) for get in self._columns))
            self._made[i] = record
        return record

    def __iter__(self) -> Iterator[T]:
        cls, made = self.cls, self._made
        for start in range(0, len(self), _CHUNK):
            chunk = self.table.slice(start, _CHUNK)
            columns = [chunk.column(n).to_pylist() for n in self._names]
            for offset, values in enumerate(zip(*columns, strict=True)):
                kept = made.get(start + offset)
                yield kept if kept is not None else cls(*values)

    def field(self, name: str) -> Callable[[int], object]:
        """`i -> self[i].<name>` for row positions `0..len-1`, without making the record: a text unit's
        record builds its id lists too (about 200 µs on first access against 2 µs for one field), and a
        question reads a few fields of many rows. A record already made is read instead, so the value is
        always the record's."""
        col, made = self._names.index(name), self._made

        def get(i: int) -> object:
            record = made.get(i)
            return getattr(record, name) if record is not None else self._columns[col](i)

        return get

    def column(self, name: str) -> list[object]:
        """One field of every row (records already made and changed are not consulted)."""
        values: list[object] = self.table.column(name).to_pylist()
        return values

    def arrow_column(self, name: str) -> pa.ChunkedArray:
        return self.table.column(name)

    def with_column(self, name: str, values: Sequence[object] | pa.Array | pa.ChunkedArray) -> None:
        """Replace one field in every row (load-time repairs); records made so far are updated too."""
        array = values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values, self.table.schema.field(name).type)
        self.table = self.table.set_column(self._names.index(name), name, array)
        self._columns = [_accessor(self.table.column(n)) for n in self._names]
        get = self._columns[self._names.index(name)]
        for i, record in self._made.items():
            setattr(record, name, get(i))

    def replace_table(self, table: pa.Table) -> None:
        """Read the rows from `table` from now on: the same rows stored elsewhere (the loader hands over
        the derived store's memory-mapped copy once it is written, so the decoded one can be freed).
        Records made so far are kept."""
        if table.num_rows != len(self) or any(n not in table.column_names for n in self._names):
            raise ValueError(f"replacement table does not hold the rows of {self!r}")
        self.table = table.select(self._names)
        self._columns = [_accessor(self.table.column(n)) for n in self._names]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RecordTable({self.cls.__name__}, rows={len(self)})"


def _accessor(column: pa.ChunkedArray) -> Callable[[int], object]:
    """A fast `i -> Python value` for one column: reads the Arrow buffers directly for text, numbers
    and lists of text (about 1 µs a value, where `column[i].as_py()` costs tens of µs). The chunks are
    read where they are (a parquet file's row groups): combining them would copy the column."""
    if column.num_chunks == 0:
        return _array_accessor(pa.array([], type=column.type))
    if column.num_chunks == 1:
        return _array_accessor(column.chunk(0))
    getters = [_array_accessor(chunk) for chunk in column.chunks]
    starts = np.cumsum([0] + [len(chunk) for chunk in column.chunks[:-1]]).tolist()

    def get(i: int) -> object:
        c = bisect.bisect_right(starts, i) - 1
        return getters[c](i - starts[c])

    return get


def _array_accessor(arr: pa.Array) -> Callable[[int], object]:
    valid = None if arr.null_count == 0 else numeric_view(arr.is_valid())
    kind = arr.type
    get: Callable[[int], object]
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        get = _text_getter(arr)
    elif pa.types.is_integer(kind) or pa.types.is_floating(kind):
        values = numeric_view(arr)
        to_py = int if pa.types.is_integer(kind) else float
        get = lambda i: to_py(values[i])  # noqa: E731
    elif (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and (
        pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type)
    ):
        offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if pa.types.is_large_list(kind) else np.int32)
        offsets = offsets[arr.offset : arr.offset + len(arr) + 1]
        child = _text_getter(arr.values)
        get = lambda i: [child(j) for j in range(int(offsets[i]), int(offsets[i + 1]))]  # noqa: E731
    elif (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and pa.types.is_integer(kind.value_type) and (
        len(arr) > 0 and arr.values.null_count == 0
    ):  # e.g. a community's children: a slice of the flat values (`as_py` costs ~10x more)
        offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64 if pa.types.is_large_list(kind) else np.int32)
        offsets = offsets[arr.offset : arr.offset + len(arr) + 1]
        flat = numeric_view(arr.values)
        get = lambda i: flat[int(offsets[i]) : int(offsets[i + 1])].tolist()  # noqa: E731
    else:
        return lambda i: arr[i].as_py()
    if valid is None:
        return get
    return lambda i: get(i) if valid[i] else None


def _text_getter(arr: pa.Array) -> Callable[[int], str | None]:
    buffers = arr.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64 if pa.types.is_large_string(arr.type) else np.int32)
    offsets = offsets[arr.offset : arr.offset + len(arr) + 1]
    data = memoryview(buffers[2]) if buffers[2] is not None else memoryview(b"")
    valid = None if arr.null_count == 0 else numeric_view(arr.is_valid())

    def get(i: int) -> str | None:
        if valid is not None and not valid[i]:
            return None
        return str(data[int(offsets[i]) : int(offsets[i + 1])], "utf-8")

    return get


class TextColumn(RowSequence[str]):
    """One text field of a `RecordTable` read in place (the loaders never leave one null): `len`, one value by
    position, iteration a chunk of rows at a time and every value's byte length, without a Python string per
    row held at once (a million-unit index's texts are gigabytes as Python strings)."""

    def __init__(self, column: pa.ChunkedArray) -> None:
        self._column = column
        self._get = cast("Callable[[int], str]", _accessor(column))  # a record text field: never null

    def __len__(self) -> int:
        return len(self._column)

    @property
    def arrow(self) -> pa.ChunkedArray:
        """The column itself (`text.lexical_term_ids` reads its buffers)."""
        return self._column

    def _row(self, i: int) -> str:
        return self._get(i)

    def __iter__(self) -> Iterator[str]:
        for start in range(0, len(self), _CHUNK):
            chunk: list[str] = self._column.slice(start, _CHUNK).to_pylist()
            yield from chunk

    def byte_lengths(self) -> np.ndarray:
        """UTF-8 bytes of every value, as int64: from the offsets alone, so the texts'
        pages are never read (a memory-mapped column stays out of memory)."""
        parts = []
        for chunk in self._column.chunks:
            large = pa.types.is_large_string(chunk.type)
            offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int64 if large else np.int32)
            parts.append(np.diff(offsets[chunk.offset : chunk.offset + len(chunk) + 1]).astype(np.int64))
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def texts_of(records: Sequence[object], name: str) -> Sequence[str]:
    """A text field of every record: a `TextColumn` over a `RecordTable`'s column, else a list."""
    if isinstance(records, RecordTable):
        return TextColumn(records.arrow_column(name))
    texts: list[str] = [getattr(r, name) for r in records]
    return texts


@overload
def field_of(records: Sequence[object], name: str) -> Callable[[int], object]: ...
@overload
def field_of(records: Sequence[object], name: str, kind: type[V]) -> Callable[[int], V]: ...
def field_of(records: Sequence[object], name: str, kind: type[V] | None = None) -> Callable[[int], V] | Callable[[int], object]:
    """`i -> records[i].<name>`: straight from the column for a `RecordTable` (`RecordTable.field`). `kind`
    names the field's type for the type checker (`field_of(units, "text", str)`); values are not converted."""
    if isinstance(records, RecordTable):
        return records.field(name)
    return lambda i: cast(object, getattr(records[i], name))


@overload
def values_of(records: Sequence[object], name: str) -> list[object]: ...
@overload
def values_of(records: Sequence[object], name: str, kind: type[V]) -> list[V]: ...
def values_of(records: Sequence[object], name: str, kind: type[V] | None = None) -> list[V] | list[object]:
    """Field `name` of every record, from the column when `records` is a `RecordTable`. `kind` names the
    field's type for the type checker (`values_of(entities, "title", str)`); values are not converted."""
    if isinstance(records, RecordTable):
        return records.column(name)
    return [getattr(r, name) for r in records]


def array_of(records: Sequence[object], name: str, dtype: npt.DTypeLike = np.float64) -> np.ndarray:
    """A numeric field of every record as a numpy array (straight from Arrow for a `RecordTable`)."""
    if isinstance(records, RecordTable):
        return np.asarray(numeric_view(records.arrow_column(name)), dtype=dtype)
    return np.fromiter((getattr(r, name) for r in records), dtype=dtype, count=len(records))


def text_lengths_of(records: Sequence[object], name: str) -> np.ndarray:
    """`len()` of a text field of every record (characters), as int64."""
    if isinstance(records, RecordTable):
        import pyarrow.compute as pc  # imported on first use: ~50 ms at import time

        return np.asarray(numeric_view(pc.utf8_length(records.arrow_column(name)), fill=0), dtype=np.int64)
    return np.fromiter((len(getattr(r, name)) for r in records), dtype=np.int64, count=len(records))


def text_lengths_at(records: Sequence[object], name: str, rows: np.ndarray) -> np.ndarray:
    """`text_lengths_of(records, name)[rows]` without reading the other rows (gathered in Arrow)."""
    if isinstance(records, RecordTable):
        import pyarrow.compute as pc  # imported on first use: ~50 ms at import time

        picked = records.arrow_column(name).take(numpy_array(np.asarray(rows, dtype=np.int64)))  # no pandas
        return np.asarray(numeric_view(pc.utf8_length(picked), fill=0), dtype=np.int64)
    return np.fromiter((len(getattr(records[int(i)], name)) for i in rows), dtype=np.int64, count=len(rows))


def release_arrow_memory() -> None:
    """Hand memory Arrow freed (hash tables of id checks, decoded tables) back to the system now, so the
    next load step does not stack its peak on top of it."""
    try:
        pa.default_memory_pool().release_unused()
    except Exception:  # older pyarrow / allocator without the call: memory is reused anyway
        return
