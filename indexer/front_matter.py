"""Document metadata from a text file: its YAML front matter and its file attributes.

A Markdown or text file that opens with a `---` line, YAML, and a closing `---` line carries its metadata there
(`year: 2024`, `customer: acme`); the block is taken out of the text and its top-level scalar values (and lists
of scalars) become the document's metadata, which the index keeps in the documents table and a question's
scope can select on (`where`). Every file also gets its attributes: `path` (relative to the input), `suffix`
and `modified` (ISO time). Front matter that is not a YAML mapping is left in the text, with a note.
"""

from __future__ import annotations

import re
from typing import Any

_BLOCK = re.compile(r"\A\ufeff?---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
Scalar = str | int | float | bool


def split_front_matter(text: str) -> tuple[dict[str, Any], str, str | None]:
    """(metadata, the text without its front matter, a note when a block was there but not read)."""
    found = _BLOCK.match(text)
    if found is None:
        return {}, text, None
    import yaml

    try:
        data = yaml.safe_load(found.group(1))
    except yaml.YAMLError as exc:
        return {}, text, f"front matter is not valid YAML, kept as text ({str(exc).splitlines()[0]})"
    if not isinstance(data, dict):
        return {}, text, "front matter is not a mapping of keys to values, kept as text"
    meta = {str(k): _plain(v) for k, v in data.items() if _plain(v) is not None}
    return meta, text[found.end():], None


def _plain(value: object) -> Scalar | list[Scalar] | None:
    """Scalars as they are, dates as ISO text, lists of scalars as lists; nested mappings are dropped."""
    if isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    if isinstance(value, list) and all(isinstance(v, bool | int | float | str) for v in value):
        return list(value)
    return None


def file_attributes(rel: str, suffix: str, modified: str) -> dict[str, Any]:
    return {"path": rel, "suffix": suffix, "modified": modified}
