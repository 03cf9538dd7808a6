"""Table inputs (`.csv`, `.jsonl`, `.parquet`): one document per row, as GraphRAG's input options define.

`text_column` (default "text") holds the document text; `title_column` (default "title" when present,
else `<file>#<row>`) its title; `id_column` (optional) a stable document id kept as the `id` attribute;
every other column is kept as a document attribute (written to `documents.raw_data` as JSON).
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from indexer.decode import decode_text

TABLE_SUFFIXES = {".csv", ".jsonl", ".parquet"}


@dataclass(frozen=True)
class ColumnOptions:
    text: str = "text"
    title: str | None = None
    id: str | None = None


class TableInputError(ValueError):
    """The table cannot give documents (missing column, unreadable file); the message says which."""


def read_rows(path: Path, suffix: str) -> tuple[pa.Table, str]:
    """The table and a description of how it was decoded (encoding for text formats)."""
    try:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            return pq.read_table(path), "parquet"
        text, encoding = decode_text(path.read_bytes())
        if suffix == ".csv":
            import pandas as pd

            frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
            return pa.Table.from_pandas(frame, preserve_index=False), encoding
        rows = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    row = json.loads(line)
                except ValueError as exc:
                    raise TableInputError(f"line {n} is not JSON ({exc})") from None
                if not isinstance(row, dict):
                    raise TableInputError(f"line {n} is not a JSON object")
                rows.append(row)
        return pa.Table.from_pylist(rows), encoding
    except TableInputError:
        raise
    except Exception as exc:  # pandas / pyarrow parse errors come in many types
        raise TableInputError(f"cannot read the table ({type(exc).__name__}: {exc})") from None


def table_documents(table: pa.Table, name: str, options: ColumnOptions) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows as dicts with `title`, `text`, `attributes`; plus one message per skipped row kind."""
    columns = table.column_names
    title_col = options.title or ("title" if "title" in columns else None)
    for flag, col in (("--text-column", options.text), ("--title-column", options.title), ("--id-column", options.id)):
        if col is not None and col not in columns:
            hint = "; name the column that holds the text with --text-column" if flag == "--text-column" else ""
            raise TableInputError(f"no column {col!r} for {flag} (columns: {', '.join(columns) or 'none'}){hint}")
    if not pa.types.is_string(table.schema.field(options.text).type) and not pa.types.is_large_string(
        table.schema.field(options.text).type
    ):
        raise TableInputError(f"column {options.text!r} holds {table.schema.field(options.text).type}, not text")
    docs: list[dict[str, Any]] = []
    empty = 0
    for i, row in enumerate(table.to_pylist()):
        text = row.get(options.text)
        if not isinstance(text, str) or not text.strip():
            empty += 1
            continue
        title = row.get(title_col) if title_col else None
        attributes = {k: _plain(v) for k, v in row.items() if k not in (options.text, title_col)}
        docs.append({"title": str(title) if title not in (None, "") else f"{name}#{i}", "text": text,
                     "attributes": attributes})
    notes = [f"{name}: {empty} rows with an empty {options.text!r} skipped"] if empty else []
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
