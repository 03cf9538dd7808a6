"""Typed column access over one table, with errors that name the file and the column.

Tables are held as pyarrow tables: parquet columns keep their native types (list columns come back
as Python lists without a pandas detour), CSV columns are all strings and are parsed the way
GraphRAG's `split_list_column` does (brackets and quotes stripped, split on commas or newlines).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Callable
from itertools import pairwise
from operator import itemgetter
from typing import Any, cast

import numpy as np
import pyarrow as pa

from shared_context.errors import IndexFormatError
from shared_context.records import TextColumn, numeric_view

_QUOTED = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")


def split_list_value(value: object) -> list[object]:
    """A list column value written as text (CSV) back to a list; lists pass through."""
    if value is None:
        return []
    if isinstance(value, list):
        return value
    if isinstance(value, np.ndarray | tuple):
        return list(value)
    if not isinstance(value, str):
        raise TypeError(type(value).__name__)
    text = value.strip()
    if not text or text in ("[]", "nan", "None"):
        return []
    if text.startswith("["):
        parsed = _parse_literal(text, json.loads)
        if parsed is not None:
            return parsed
        quoted = _QUOTED.findall(text)
        if quoted and "," not in _QUOTED.sub("", text):
            # numpy's repr, as pandas to_csv writes arrays: ['a' 'b'\n 'c'] (literal_eval would
            # concatenate the adjacent strings into one)
            return [a or b for a, b in quoted]
        parsed = _parse_literal(text, ast.literal_eval)
        if parsed is not None:
            return parsed
        if quoted:
            return [a or b for a, b in quoted]
        if "," not in text:  # numpy's repr of numbers: [7 8 9]
            return list[object](text.strip("[]").split())
    parts = re.split(r"[,\n]", text.strip("[]"))
    return [p.strip().strip("'\"") for p in parts if p.strip().strip("'\"")]


def _parse_literal(text: str, parse: Callable[[str], object]) -> list[object] | None:
    try:
        parsed = parse(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return list(parsed) if isinstance(parsed, list | tuple) else None


class TableData:
    """One loaded table (`name` is the canonical v3 table name, `file` the file it came from)."""

    def __init__(self, name: str, file: str, table: pa.Table, *, from_csv: bool = False) -> None:
        self.name = name
        self.file = file
        self.table = table
        self.from_csv = from_csv

    def __len__(self) -> int:
        return int(self.table.num_rows)

    @property
    def columns(self) -> list[str]:
        return list(self.table.column_names)

    def has(self, column: str) -> bool:
        return column in self.table.column_names

    def first_present(self, *columns: str) -> str | None:
        return next((c for c in columns if self.has(c)), None)

    def error(self, message: str, column: str | None = None) -> IndexFormatError:
        return IndexFormatError(message, file=self.file, column=column)

    def _column(self, column: str, required: bool) -> pa.ChunkedArray | None:
        if column in self.table.column_names:
            return self.table.column(column)
        if required:
            raise self.error(f"missing required column (columns present: {', '.join(self.columns)})", column)
        return None

    def require(self, *columns: str) -> None:
        for column in columns:
            self._column(column, True)

    # -------------------------------------------------------------- scalars

    def strings(
        self,
        column: str,
        *,
        required: bool = True,
        default: str = "",
        non_empty: bool = False,
        intern: bool = False,
    ) -> list[str]:
        col = self._column(column, required)
        if col is None:
            return [default] * len(self)
        if pa.types.is_list(col.type) or pa.types.is_large_list(col.type) or pa.types.is_struct(col.type):
            raise self.error(f"expected text but found {col.type}", column)
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            try:
                col = col.cast(pa.string())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:  # e.g. binary that is not UTF-8
                raise self.error(f"expected text but found {col.type} that is not UTF-8 text ({err})", column) from None
        if non_empty:
            missing = _missing_texts(col)
            if missing:
                raise self.error(f"{missing} rows have no value; every row needs one", column)
        if intern and col.null_count == 0:  # titles and ids repeat across tables: share one object
            shared = _shared_strings(col.combine_chunks())
            if shared is not None:
                return shared
        return [default if v is None else v for v in col.to_pylist()]

    def arrow_strings(
        self, column: str, *, required: bool = True, default: str = "", non_empty: bool = False
    ) -> pa.ChunkedArray | list[str]:
        """`strings` kept in Arrow when the file stored text (ids, titles of the large tables): no Python
        string per row at load; the same checks and null handling."""
        col = self._column(column, required)
        if col is None or self.from_csv or not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            return self.strings(column, required=required, default=default, non_empty=non_empty)
        if non_empty:
            missing = _missing_texts(col)
            if missing:
                raise self.error(f"{missing} rows have no value; every row needs one", column)
        return _as_string(col, default)

    def arrow_text(self, column: str, *, required: bool = True, default: str = "") -> pa.ChunkedArray | list[str]:
        """A text column kept in Arrow (nulls -> `default`) when the file stored it as text; otherwise
        the same as `strings`. Large tables then never hold their texts as Python strings at load."""
        col = self._column(column, required)
        if col is not None and not self.from_csv and (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            return _as_string(col, default)
        return self.strings(column, required=required, default=default)

    def arrow_str_lists(self, column: str) -> pa.ChunkedArray | list[list[str]]:
        """A list<string> column kept in Arrow when it has no null lists or items; else `str_lists`."""
        col = self._column(column, False)
        if (
            col is not None and not self.from_csv and pa.types.is_list(col.type)
            and pa.types.is_string(col.type.value_type)
            and col.null_count == 0 and not any(chunk.flatten().null_count for chunk in col.chunks)
        ):
            return col  # the file's chunks as they are: no copy while the file's table is still alive
        return self.str_lists(column)

    def _numeric(self, column: str, required: bool) -> np.ndarray | None:
        arr = self._numeric_values(column, required)
        if arr is not None:
            infinite = np.isinf(arr)
            if infinite.any():  # it would sort first everywhere and cannot be rendered; NaN means "missing"
                raise self.error(
                    f"{int(infinite.sum())} values are infinite (e.g. {float(arr[infinite][0])!r}); "
                    "weights, ranks and degrees must be finite numbers", column,
                )
        return arr

    def _numeric_values(self, column: str, required: bool) -> np.ndarray | None:
        col = self._column(column, required)
        if col is None:
            return None
        if pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type):
            return np.asarray(numeric_view(col), dtype=np.float64)
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_null(col.type):
            import pandas as pd  # only CSV-typed indexes need it; importing the loaders must stay cheap

            raw = pd.Series(col.to_pylist(), dtype=object)
            blank = raw.isna() | (raw.astype(str).str.strip() == "")
            nums = pd.to_numeric(raw.where(~blank, None), errors="coerce")
            bad = nums.isna() & ~blank
            if bad.any():
                example = raw[bad].iloc[0]
                raise self.error(f"{int(bad.sum())} values are not numbers (e.g. {example!r})", column)
            return np.asarray(nums.to_numpy(dtype=np.float64, na_value=np.nan))
        raise self.error(f"expected a number but found {col.type}", column)

    def float_array(self, column: str, *, required: bool = True, default: float = 0.0) -> np.ndarray:
        """`floats` as a float64 array."""
        arr = self._numeric(column, required)
        return np.full(len(self), default) if arr is None else np.where(np.isnan(arr), default, arr)

    def floats(self, column: str, *, required: bool = True, default: float = 0.0) -> list[float]:
        arr = self._numeric(column, required)
        if arr is None:
            return [default] * len(self)
        values: list[float] = np.where(np.isnan(arr), default, arr).tolist()
        return values

    def int_array(self, column: str, *, required: bool = True, default: int = 0) -> np.ndarray:
        """`ints` as an int64 array (no Python int per row)."""
        arr = self._numeric(column, required)
        if arr is None:
            return np.full(len(self), default, dtype=np.int64)
        return np.where(np.isnan(arr), default, arr).astype(np.int64)

    def ints(self, column: str, *, required: bool = True, default: int = 0) -> list[int]:
        arr = self._numeric(column, required)
        if arr is None:
            return [default] * len(self)
        values: list[int] = np.where(np.isnan(arr), default, arr).astype(np.int64).tolist()
        return values

    # -------------------------------------------------------------- lists

    def lists(self, column: str, *, required: bool = False) -> list[list[object]]:
        """A list column (str[] or int[]); CSV strings are split like GraphRAG's split_list_column."""
        col = self._column(column, required)
        if col is None:
            return [[] for _ in range(len(self))]
        if (
            pa.types.is_list(col.type)
            or pa.types.is_large_list(col.type)
            or pa.types.is_fixed_size_list(col.type)
        ):
            return [v if v is not None else [] for v in col.to_pylist()]
        if pa.types.is_string(col.type) or pa.types.is_large_string(col.type) or pa.types.is_null(col.type):
            return [split_list_value(v) for v in col.to_pylist()]
        raise self.error(f"expected a list column but found {col.type}", column)

    def str_lists(self, column: str, *, required: bool = False) -> list[list[str]]:
        values = self.lists(column, required=required)
        if values and any(v and not isinstance(v[0], str) for v in values[:100]):
            return [[str(x) for x in v] for v in values]
        return cast("list[list[str]]", values)  # text where the first 100 rows hold text, as read

    def int_lists(self, column: str, *, required: bool = False) -> list[list[int]]:
        fast = self._arrow_int_lists(column)
        if fast is not None:
            return fast
        out: list[list[int]] = []
        for row in self.lists(column, required=required):
            try:
                out.append([int(float(x if isinstance(x, int | float) else str(x))) for x in row])
            except (TypeError, ValueError) as exc:
                raise self.error(f"list values must be integers (e.g. {row!r})", column) from exc
        return out

    def _arrow_int_lists(self, column: str) -> list[list[int]] | None:
        """An Arrow list<integer> column without nulls, split from one flat int64 list (the general path
        converts each value through float: ~1 s a second open for two 60k-row `children` columns)."""
        col = self._column(column, False)
        if col is None or self.from_csv or col.null_count or col.num_chunks == 0:
            return None
        if not (pa.types.is_list(col.type) or pa.types.is_large_list(col.type)) or not pa.types.is_integer(
            col.type.value_type
        ):
            return None
        arr = col.combine_chunks()
        flat = arr.flatten()  # the values the (possibly sliced) lists cover, in order
        if flat.null_count:
            return None
        values = numeric_view(flat).astype(np.int64).tolist()
        offsets = numeric_view(arr.offsets).astype(np.int64)
        ends = (offsets - offsets[0]).tolist()
        return [values[a:b] for a, b in pairwise(ends)]

    def records(self, column: str) -> list[list[dict[str, object]]]:
        """Findings: a list of {summary, explanation} per row (JSON text in CSV files)."""
        col = self._column(column, False)
        if col is None:
            return [[] for _ in range(len(self))]
        out: list[list[dict[str, object]]] = []
        for value in col.to_pylist():
            if isinstance(value, str):
                out.append([dict(x) for x in split_list_value(value) if isinstance(x, dict)])
            else:  # an Arrow list of structs: to_pylist made these dicts for this call alone
                out.append([x for x in value or [] if isinstance(x, dict)])
        return out

    def mappings(self, column: str) -> list[dict[str, object]]:
        col = self._column(column, False)
        if col is None:
            return [{} for _ in range(len(self))]
        out: list[dict[str, object]] = []
        for value in col.to_pylist():
            if isinstance(value, str) and value.strip().startswith("{"):
                try:
                    value = json.loads(value)
                except ValueError:
                    value = {}
            # a struct column holds every key of every row: a key this row lacks reads as None
            out.append({k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else {})
        return out


def _missing_texts(col: pa.ChunkedArray) -> int:
    """Null or empty values of a text column, from its validity bitmap and offsets (comparing with a
    Python "" in pyarrow.compute would import pandas, most of a second open's cost)."""
    lengths = TextColumn(col).byte_lengths()
    valid = np.concatenate([numeric_view(chunk.is_valid()) for chunk in col.chunks]) if col.null_count else True
    return int(col.null_count) + int(np.count_nonzero((lengths == 0) & valid))


def _as_string(col: pa.ChunkedArray, default: str) -> pa.ChunkedArray:
    """A text column as `string` with nulls -> `default`, copied only when one of those changes it."""
    if col.null_count:
        col = col.fill_null(default)
    return col if col.type == pa.string() else col.cast(pa.string())


def _string_lists(col: pa.ChunkedArray) -> list[list[object]] | None:
    """A list<string> column as Python lists whose equal strings are one interned object.

    Id lists repeat the same few ids millions of times (every relationship names its text units);
    decoding each occurrence separately costs memory and re-hashing. None for other value types.
    """
    arr = col.combine_chunks()
    if not (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        return None
    flat = arr.flatten()
    if not (pa.types.is_string(flat.type) or pa.types.is_large_string(flat.type)) or flat.null_count:
        return None
    import pyarrow.compute as pc  # imported on first use: ~50 ms at import time

    lengths = np.asarray(
        numeric_view(pc.list_value_length(arr), fill=0), dtype=np.int64
    )
    if len(flat) == 0:
        return [[] for _ in range(len(arr))]
    encoded = flat.dictionary_encode()
    uniques = [sys.intern(v) for v in encoded.dictionary.to_pylist()]
    indices = numeric_view(encoded.indices).tolist()
    items: tuple[Any, ...] = itemgetter(*indices)(uniques) if len(indices) > 1 else (uniques[indices[0]],)
    ends = np.cumsum(lengths).tolist()
    starts = [0, *ends[:-1]]
    return [list(items[a:b]) for a, b in zip(starts, ends, strict=True)]


def _shared_strings(arr: pa.Array) -> list[str] | None:
    """A string array as a list in which equal values are one interned object (None if not text)."""
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)) or arr.null_count:
        return None
    if len(arr) == 0:
        return []
    encoded = arr.dictionary_encode()
    uniques = [sys.intern(v) for v in encoded.dictionary.to_pylist()]
    indices = numeric_view(encoded.indices).tolist()
    if len(indices) == 1:
        return [uniques[indices[0]]]
    return list(itemgetter(*indices)(uniques))
