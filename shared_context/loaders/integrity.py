"""Load-time checks that a folder's tables belong together, and repair of duplicate citation ids.

- A graphroute index records the sha256 of every table it wrote in `graphroute/manifest.json`
  (`tables`). A table that differs, is missing, or is present without being listed means the folder
  mixes builds (e.g. new entities beside old text units after an interrupted copy or update) or was
  edited: `IndexFormatError`, since answers over such a folder cite rows that do not match. Folders
  without that manifest (GraphRAG's own, older graphroute builds) are not checked.
- `human_readable_id` values are what answers cite. Duplicates would make a citation resolve to the
  wrong row, so the first row (file order) keeps the value and each later duplicate or missing value
  gets the next unused number after the largest; `Index.warnings` says how many and in which file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from shared_context import arrow_keys
from shared_context.errors import IndexFormatError
from shared_context.records import string_array, values_of

MANIFEST = Path("graphroute") / "manifest.json"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_build_manifest(root: Path, table_files: Sequence[Path]) -> None:
    """Raise `IndexFormatError` when the tables are not the ones the manifest's build wrote together."""
    path = root / MANIFEST
    if not path.is_file():
        return
    try:
        recorded = json.loads(path.read_text(encoding="utf-8")).get("tables")
    except (OSError, ValueError, AttributeError) as exc:
        raise IndexFormatError(f"unreadable build manifest ({exc})", file=str(MANIFEST)) from exc
    if not recorded:
        return  # written before manifests listed their tables
    if not isinstance(recorded, dict):
        raise IndexFormatError("'tables' must map file names to sha256 digests", file=str(MANIFEST))
    advice = "the folder mixes tables from different builds or was edited after the build; rebuild the index"
    for name, expected in sorted(recorded.items()):
        file = root / name
        if not file.is_file():
            raise IndexFormatError(f"listed in {MANIFEST} but missing; {advice}", file=name)
        if sha256_file(file) != expected:
            raise IndexFormatError(f"differs from the table {MANIFEST} recorded (sha256); {advice}", file=name)
    for file in table_files:
        if file.name not in recorded:
            raise IndexFormatError(f"not written by the build {MANIFEST} records; {advice}", file=file.name)


class _ShortIded(Protocol):
    short_id: str


def repair_short_ids(records: Sequence[_ShortIded], file: str, warnings: list[str]) -> None:
    """Make every record's `short_id` unique (see the module docstring); records are changed in place."""
    repaired = repair_short_id_values(values_of(records, "short_id"), file, warnings)
    if repaired is not None:
        for record, sid in zip(records, repaired, strict=True):
            record.short_id = sid


def repair_short_id_values(values: Sequence[str] | pa.Array | pa.ChunkedArray, file: str, warnings: list[str]) -> list[str] | None:
    """The column of citation ids made unique (see the module docstring), or None when it already is."""
    if isinstance(values, pa.Array | pa.ChunkedArray):  # checked in Arrow; Python strings only when a repair is needed
        import pyarrow.compute as pc  # imported on first use: ~50 ms at import time

        missing = string_array(["-1"])[0]  # an Arrow scalar: a Python "-1" here imports pandas (0.8 s)
        if arrow_keys.count_distinct(values) == len(values) and not pc.any(pc.equal(values, missing)).as_py():
            return None
        values = values.to_pylist()
    if len(set(values)) == len(values) and "-1" not in values:
        return None
    seen: set[str] = set()
    bad: list[int] = []
    for i, sid in enumerate(values):
        if sid in seen or sid == "-1":
            bad.append(i)
        else:
            seen.add(sid)
    numeric = [int(s) for s in seen if s.lstrip("-").isdigit()]
    next_id = max(numeric, default=-1) + 1
    example = values[bad[0]]
    out = list(values)
    for i in bad:
        out[i] = str(next_id)
        next_id += 1
    warnings.append(
        f"{file}: {len(bad)} duplicate or missing human_readable_id values (e.g. {example!r}); the first row keeps "
        f"each value and the others were renumbered from {next_id - len(bad)}, so citations of them resolve to one row"
    )
    return out
