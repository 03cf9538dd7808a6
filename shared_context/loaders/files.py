"""Finding the tables of a GraphRAG output folder and detecting its schema version.

File names by version (parquet; the CSV table provider writes the same names with `.csv`):
- v2/v3 (GraphRAG ≥ 2.0): `entities`, `relationships`, `communities`, `community_reports`,
  `text_units`, `documents`, optional `covariates`. v3 text units have `document_id`; v2 ones have
  the list `document_ids`.
- v0/v1 (GraphRAG 0.x / 1.x): `create_final_<table>` plus `create_final_nodes` (one row per entity
  and level, with `community` and `level`). v0 entities use `name` instead of `title`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from shared_context.errors import IndexFormatError
from shared_context.loaders.columns import TableData
from shared_context.loaders.uri import local_folder

TABLES = (
    "entities",
    "relationships",
    "text_units",
    "communities",
    "community_reports",
    "covariates",
    "documents",
    "nodes",
)
REQUIRED_TABLES = ("entities", "relationships", "text_units")
_SUFFIXES = (".parquet", ".csv")


def candidate_names(table: str) -> list[str]:
    stems = [f"create_final_{table}"] if table == "nodes" else [table, f"create_final_{table}"]
    return [stem + suffix for suffix in _SUFFIXES for stem in stems]


@dataclass
class IndexFiles:
    root: Path
    files: dict[str, Path] = field(default_factory=dict)  # table -> file

    def rel(self, table: str) -> str:
        return self.files[table].name

    @property
    def prefixed(self) -> bool:
        return any(p.name.startswith("create_final_") for p in self.files.values())

    @property
    def is_csv(self) -> bool:
        return any(p.suffix == ".csv" for p in self.files.values())


def locate(path: str | Path) -> IndexFiles:
    """The tables of the index at `path`: a local folder or a URI (see `uri.py`; remote ones are mirrored)."""
    root = local_folder(path)
    if not root.exists():
        raise IndexFormatError("index folder does not exist", file=str(root))
    if not root.is_dir():
        raise IndexFormatError("not a folder; pass the GraphRAG output folder", file=str(root))
    found = IndexFiles(root=root)
    for table in TABLES:
        for name in candidate_names(table):
            candidate = root / name
            if candidate.is_file():
                found.files[table] = candidate
                break
    for table in REQUIRED_TABLES:
        if table not in found.files:
            tried = ", ".join(candidate_names(table))
            raise IndexFormatError(
                f"missing required table {table!r} (looked for {tried}); is this a GraphRAG output folder?",
                file=f"{root.name}/{table}.parquet",
            )
    return found


def read_table(files: IndexFiles, table: str, skip: tuple[str, ...] = ()) -> TableData | None:
    """Read one table (None when the folder has no such file), leaving out the `skip` columns."""
    path = files.files.get(table)
    if path is None:
        return None
    try:
        if path.suffix == ".csv":
            # Every CSV value is text; typed accessors convert them column by column.
            import pandas as pd  # only CSV indexes need it; importing the loaders must stay cheap

            df = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
            df = df.loc[:, [c for c in df.columns if not str(c).startswith("Unnamed:")]]
            data = pa.Table.from_pandas(df.astype(object).where(df.notna(), None), preserve_index=False)
            return TableData(
                table,
                path.name,
                data.drop_columns([c for c in skip if c in data.column_names]),
                from_csv=True,
            )
        import pyarrow.parquet as pq  # imported on first use: pyarrow.parquet and .fs cost ~40 ms at import time

        # ParquetFile.read, not pq.read_table: the latter goes through pyarrow.dataset, whose import pulls
        # in pandas (0.5-4 s of a second open, which reads only the small tables). pre_buffer as read_table.
        with pq.ParquetFile(path, pre_buffer=True) as parquet:
            names = parquet.schema_arrow.names
            return TableData(table, path.name, parquet.read(columns=[c for c in names if c not in skip]))
    except IndexFormatError:
        raise
    except Exception as exc:  # pyarrow / pandas parse errors of many types
        raise IndexFormatError(f"cannot read table: {exc}", file=path.name) from exc


def detect_version(files: IndexFiles, entity_columns: list[str], text_unit_columns: list[str]) -> str:
    has_community_data = any(t in files.files for t in ("communities", "community_reports", "nodes"))
    if files.prefixed:
        return "v0" if "name" in entity_columns and "title" not in entity_columns else "v1"
    if not has_community_data:
        return "v3-partial"
    if "document_ids" in text_unit_columns and "document_id" not in text_unit_columns:
        return "v2"
    return "v3"
