"""Table inputs (`.csv`, `.jsonl`, `.parquet`): one document per row, as GraphRAG's input options define.

`text_column` (default "text") holds the document text; `title_column` (default "title" when present,
else `<file>#<row>`) its title; `id_column` (optional) a stable document id kept as the `id` attribute;
every other column is kept as a document attribute (written to `documents.metadata`, GraphRAG's column).

A malformed row (a line that is not JSON, a CSV line with the wrong number of fields, a Parquet row group that
cannot be decoded, a text cell that is not text) is skipped and named with its file and line in the build
summary; the file's other rows are indexed.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from indexer.decode import decode_text

TABLE_SUFFIXES = {".csv", ".jsonl", ".parquet"}


@dataclass(frozen=True)
class ColumnOptions:
    text: str = "text"
    title: str | None = None
    id: str | None = None


class TableInputError(ValueError):
    """The table cannot give documents (missing column, unreadable file); the message says which."""


@dataclass
class TableRows:
    """A table file's readable rows, each with where it stands in the file, and what was skipped."""

    columns: list[str]  # in order of first appearance
    rows: list[tuple[str, dict[str, Any]]]  # ("line 3" / "row 3", the row)
    how: str  # the encoding of a text format, or "parquet"
    skipped: list[str] = field(default_factory=list)  # "line 2: not JSON (...)"
    text_types: dict[str, str] = field(default_factory=dict)  # column -> its type, when the file declares one


def read_rows(path: Path, suffix: str) -> TableRows:
    """The readable rows of a table file; a malformed row is skipped and named with its line (or row) so the
    rest of the file is still indexed. TableInputError when nothing of the file can be read."""
    try:
        if suffix == ".parquet":
            return _parquet_rows(path)
        text, encoding = decode_text(path.read_bytes())
        return _csv_rows(text, encoding) if suffix == ".csv" else _jsonl_rows(text, encoding)
    except TableInputError:
        raise
    except Exception as exc:  # pyarrow and the csv module raise many types for broken files
        raise TableInputError(f"cannot read the table ({type(exc).__name__}: {exc})") from None


def _jsonl_rows(text: str, encoding: str) -> TableRows:
    table = TableRows([], [], encoding)
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            table.skipped.append(f"line {n}: not JSON ({exc})")
            continue
        if not isinstance(row, dict):
            table.skipped.append(f"line {n}: not a JSON object")
            continue
        _add(table, f"line {n}", row)
    return table


def _csv_rows(text: str, encoding: str) -> TableRows:
    reader = csv.reader(io.StringIO(text, newline=""))
    table = TableRows([], [], encoding)
    header: list[str] | None = None
    while True:
        start = reader.line_num + 1  # a quoted field may span lines: a row is named by its first line
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            table.skipped.append(f"line {start}: not CSV ({exc})")
            continue
        if not cells or not any(c.strip() for c in cells):
            continue
        if header is None:
            header = cells
            table.columns = list(cells)
            continue
        if len(cells) != len(header):
            table.skipped.append(f"line {start}: {len(cells)} fields, the header has {len(header)}")
            continue
        table.rows.append((f"line {start}", dict(zip(header, cells, strict=True))))
    if header is None:
        raise TableInputError("no header row")
    return table


def _parquet_rows(path: Path) -> TableRows:
    import pyarrow.parquet as pq

    file = pq.ParquetFile(path)
    schema = file.schema_arrow
    table = TableRows(list(schema.names), [], "parquet", text_types={f.name: str(f.type) for f in schema})
    first = 0
    for group in range(file.num_row_groups):
        size = file.metadata.row_group(group).num_rows
        try:
            rows = file.read_row_group(group).to_pylist()
        except Exception as exc:  # a damaged row group: the others are still read
            where = f"row {first}" if size == 1 else f"rows {first}-{first + size - 1}"
            why = "".join(c if c.isprintable() else "?" for c in " ".join(str(exc).split()))
            table.skipped.append(f"{where}: unreadable ({type(exc).__name__}: {why})")
        else:
            table.rows.extend((f"row {first + i}", row) for i, row in enumerate(rows))
        first += size
    return table


def _add(table: TableRows, where: str, row: dict[str, Any]) -> None:
    for key in row:
        if key not in table.columns:
            table.columns.append(key)
    table.rows.append((where, row))


def table_documents(table: TableRows, name: str, options: ColumnOptions) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows as dicts with `title`, `text`, `attributes`; plus one message per skipped row (or row kind)."""
    if not table.rows and table.skipped:
        more = f"; {len(table.skipped) - 1} more rows like it" if len(table.skipped) > 1 else ""
        raise TableInputError(f"no readable row ({table.skipped[0]}{more})")
    columns = table.columns
    title_col = options.title or ("title" if "title" in columns else None)
    for flag, col in (("--text-column", options.text), ("--title-column", options.title), ("--id-column", options.id)):
        if col is not None and col not in columns:
            hint = "; name the column that holds the text with --text-column" if flag == "--text-column" else ""
            raise TableInputError(f"no column {col!r} for {flag} (columns: {', '.join(columns) or 'none'}){hint}")
    declared = table.text_types.get(options.text)
    if declared is not None and declared not in ("string", "large_string"):
        raise TableInputError(f"column {options.text!r} holds {declared}, not text")
    notes = [f"{name}: {where} skipped: {why}" for where, why in (s.split(": ", 1) for s in table.skipped)]
    docs: list[dict[str, Any]] = []
    empty = 0
    for i, (where, row) in enumerate(table.rows):
        text = row.get(options.text)
        if text is not None and not isinstance(text, str):
            notes.append(f"{name}: {where} skipped: {options.text!r} holds {type(text).__name__}, not text")
            continue
        if text is None or not text.strip():
            empty += 1
            continue
        title = row.get(title_col) if title_col else None
        attributes = {k: _plain(v) for k, v in row.items() if k not in (options.text, title_col)}
        docs.append({"title": str(title) if title not in (None, "") else f"{name}#{i}", "text": text,
                     "attributes": attributes})
    if empty:
        notes.append(f"{name}: {empty} rows with an empty {options.text!r} skipped")
    return docs, notes


def _plain(value: Any) -> Any:
    """A JSON-safe attribute value."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)
