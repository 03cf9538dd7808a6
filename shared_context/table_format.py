"""The context table format (ARCHITECTURE.md, "Context table format"): cells, rows, sections.

A section is `-----{Name}-----` followed by a `|`-delimited CSV table (QUOTE_MINIMAL, `\\n` line ends,
header first). Sections carry no trailing newline so that joining them with `"\\n\\n"` leaves exactly one
blank line between them. A section with no rows is the empty string (never a bare header or `[]`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import cast

import numpy as np

__all__ = ["format_value", "join_sections", "render_row", "render_table", "section_title"]

_NEEDS_QUOTES = re.compile(r'[|"\n\r]')


def format_value(value: object) -> str:
    """Cell text: None -> "", floats without noise (1.0 -> "1.0", 0.123456 -> "0.1235")."""
    kind = value.__class__
    if kind is str:  # most cells: ids, titles, descriptions, texts
        return cast(str, value)
    if kind is int:  # not bool (a subclass, `str(True)` either way)
        return str(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float | np.floating):
        if not math.isfinite(value):  # NaN or inf: no meaningful figure (and int(inf) would raise)
            return ""
        value = float(value)
        rounded = round(value, 4)
        return str(int(rounded)) + ".0" if rounded == int(rounded) else str(rounded)
    return str(value)


def _quote(cell: str) -> str:
    # csv.QUOTE_MINIMAL with delimiter "|" and quotechar '"' (checked in the tests); a lone "\r" is
    # quoted too, because Python's csv reader rejects it unquoted.
    if _NEEDS_QUOTES.search(cell):
        return '"' + cell.replace('"', '""') + '"'
    return cell


def render_row(cells: Sequence[object]) -> str:
    """One CSV line (without the line terminator)."""
    return "|".join(_quote(format_value(c)) for c in cells)


def section_title(name: str) -> str:
    return f"-----{name}-----"


def render_table(name: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A whole section; "" when there are no rows."""
    if not rows:
        return ""
    lines = [section_title(name), render_row(header), *(render_row(r) for r in rows)]
    return "\n".join(lines)


def join_sections(texts: Sequence[str]) -> str:
    return "\n\n".join(t for t in texts if t)
