"""The one error a bad GraphRAG index raises.

Every problem found while reading or validating an index (missing folder, missing table, missing
column, wrong type, empty table, duplicate ids, dangling ids, vector dimension mismatch) becomes an
`IndexFormatError` whose message names the file and the column, so users can fix the index without
reading a traceback.
"""

from __future__ import annotations


class IndexFormatError(ValueError):
    """An index folder or table is unusable. `.file` and `.column` name where the problem is."""

    def __init__(self, message: str, *, file: str | None = None, column: str | None = None) -> None:
        self.file = file
        self.column = column
        self.detail = message
        prefix = ""
        if file and column:
            prefix = f"{file}: column {column!r}: "
        elif file:
            prefix = f"{file}: "
        elif column:
            prefix = f"column {column!r}: "
        super().__init__(prefix + message)
