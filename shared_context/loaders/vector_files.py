"""Reading stored embeddings: LanceDB tables in `lancedb/` and `embeddings.<name>[.<model>].parquet`.

Each becomes a `VectorTable` whose rows point at record positions. Vector ids are the record ids
GraphRAG writes (entity uuid, report sha512, text unit id); rows whose id matches no loaded record
are dropped and counted in a warning, as GraphRAG's query side silently does.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from shared_context.errors import IndexFormatError
from shared_context.record_table import numeric_view
from shared_context.vectors import VECTOR_TARGETS, VectorTable

IdLookup = Callable[[str], int]


def _matrix(column: pa.ChunkedArray, file: str, column_name: str) -> np.ndarray:
    """A list / fixed-size-list column of floats as an (n, dim) float32 matrix."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    n = len(arr)
    if n == 0:
        return np.zeros((0, 0), dtype=np.float32)
    if pa.types.is_fixed_size_list(arr.type):
        dim = arr.type.list_size
        flat = numeric_view(arr.flatten())
        return np.asarray(flat, dtype=np.float32).reshape(n, dim)
    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        if arr.null_count:
            raise IndexFormatError(f"{arr.null_count} rows have no vector", file=file, column=column_name)
        offsets = numeric_view(arr.offsets)
        lengths = np.diff(offsets)
        if len(set(lengths.tolist())) != 1:
            raise IndexFormatError(
                f"vectors have different lengths ({int(lengths.min())}..{int(lengths.max())})",
                file=file,
                column=column_name,
            )
        flat = numeric_view(arr.flatten())
        return np.asarray(flat, dtype=np.float32).reshape(n, int(lengths[0]))
    raise IndexFormatError(f"expected a list of floats but found {arr.type}", file=file, column=column_name)


def _to_table(
    name: str,
    ids: list[str],
    matrix: np.ndarray,
    lookup: IdLookup,
    file: str,
    column: str,
    model: str | None,
    embedding_dim: int | None,
    warnings: list[str],
) -> VectorTable | None:
    if len(ids) == 0:
        warnings.append(f"{file}: vector table is empty; ignored")
        return None
    dim = int(matrix.shape[1])
    if embedding_dim is not None and dim != embedding_dim:
        raise IndexFormatError(
            f"has dimension {dim} but the configured embedder produces {embedding_dim}"
            + (f" (the vectors were made with {model})" if model else ""),
            file=file,
            column=column,
        )
    positions = np.fromiter((lookup(i) for i in ids), dtype=np.int64, count=len(ids))
    keep = positions >= 0
    dropped = int((~keep).sum())
    if dropped:
        warnings.append(
            f"{file}: column 'id': {dropped} of {len(ids)} vectors name no {VECTOR_TARGETS[name][:-1].replace('_', ' ')}; dropped"
        )
    # Keep the first vector per record when an id repeats (a re-run appended rows).
    positions, first = np.unique(positions[keep], return_index=True)
    rows = np.flatnonzero(keep)[first]
    return VectorTable.build(name, positions, matrix[rows], source=file, model=model, column=column)


def read_lancedb(
    root: Path, lookups: dict[str, IdLookup], embedding_dim: int | None, warnings: list[str]
) -> dict[str, VectorTable]:
    folder = root / "lancedb"
    if not folder.is_dir():
        return {}
    out: dict[str, VectorTable] = {}
    present = [n for n in VECTOR_TARGETS if (folder / f"{n}.lance").is_dir()]
    if not present:
        return {}
    import lancedb  # heavy import, only when the folder exists

    try:
        db = lancedb.connect(str(folder))
    except Exception as exc:
        raise IndexFormatError(f"cannot open LanceDB database: {exc}", file="lancedb") from exc
    for name in present:
        file = f"lancedb/{name}.lance"
        try:
            data = db.open_table(name).to_arrow()
        except Exception as exc:
            raise IndexFormatError(f"cannot read LanceDB table: {exc}", file=file) from exc
        for col in ("id", "vector"):
            if col not in data.column_names:
                raise IndexFormatError(
                    f"missing required column (columns present: {', '.join(data.column_names)})",
                    file=file,
                    column=col,
                )
        ids = [str(v) for v in data.column("id").to_pylist()]
        matrix = _matrix(data.column("vector"), file, "vector")
        model = _manifest_embedder(root, matrix.shape[1] if matrix.ndim == 2 else 0)
        table = _to_table(name, ids, matrix, lookups[name], file, "vector", model, embedding_dim, warnings)
        if table is not None:
            out[name] = table
    return out


def _manifest_embedder(root: Path, dim: int) -> str | None:
    """The embedding model named by a graphroute-built index's manifest (LanceDB stores no model name)."""
    import json

    try:
        embedder = json.loads((root / "graphroute" / "manifest.json").read_text()).get("embedder") or {}
    except (OSError, ValueError, AttributeError):
        return None
    name = embedder.get("name") if isinstance(embedder, dict) else None
    return str(name) if name and embedder.get("dim") in (None, dim) else None


def parse_embedding_file_name(file_name: str) -> tuple[str, str | None] | None:
    """`embeddings.text_unit_text.bge-large-en-v1.5.parquet` -> ("text_unit_text", "bge-large-en-v1.5")."""
    if not file_name.startswith("embeddings.") or not file_name.endswith(".parquet"):
        return None
    middle = file_name[len("embeddings.") : -len(".parquet")]
    for name in VECTOR_TARGETS:
        if middle == name:
            return name, None
        if middle.startswith(name + "."):
            return name, middle[len(name) + 1 :] or None
    return None


def read_embedding_parquets(
    root: Path,
    lookups: dict[str, IdLookup],
    embedding_dim: int | None,
    warnings: list[str],
    skip: set[str],
) -> dict[str, VectorTable]:
    import pyarrow.parquet as pq  # imported on first use: pyarrow.parquet and .fs cost ~40 ms at import time

    out: dict[str, VectorTable] = {}
    for path in sorted(root.glob("embeddings.*.parquet")):
        parsed = parse_embedding_file_name(path.name)
        if parsed is None:
            warnings.append(f"{path.name}: not a known embedding name ({', '.join(VECTOR_TARGETS)}); ignored")
            continue
        name, model = parsed
        if name in skip or name in out:
            continue
        try:
            with pq.ParquetFile(path, pre_buffer=True) as parquet:  # not pq.read_table: it imports pandas
                data = parquet.read()
        except Exception as exc:
            raise IndexFormatError(f"cannot read table: {exc}", file=path.name) from exc
        vector_col = next((c for c in ("embedding", "vector") if c in data.column_names), None)
        for col in ("id", vector_col or "embedding"):
            if col not in data.column_names:
                raise IndexFormatError(
                    f"missing required column (columns present: {', '.join(data.column_names)})",
                    file=path.name,
                    column=col,
                )
        assert vector_col is not None
        ids = [str(v) for v in data.column("id").to_pylist()]
        matrix = _matrix(data.column(vector_col), path.name, vector_col)
        table = _to_table(
            name, ids, matrix, lookups[name], path.name, vector_col, model, embedding_dim, warnings
        )
        if table is not None:
            out[name] = table
    return out


def read_inline_entity_vectors(
    entities_table: pa.Table, file: str, embedding_dim: int | None, warnings: list[str]
) -> VectorTable | None:
    """v0 kept `description_embedding` inside create_final_entities; rows align with entities."""
    if "description_embedding" not in entities_table.column_names:
        return None
    column = entities_table.column("description_embedding")
    if column.null_count == len(column):
        return None
    valid = np.flatnonzero(~np.asarray(column.is_null().to_numpy(zero_copy_only=False)))
    sub = column.take(pa.array(valid))
    matrix = _matrix(sub, file, "description_embedding")
    dim = int(matrix.shape[1])
    if embedding_dim is not None and dim != embedding_dim:
        raise IndexFormatError(
            f"has dimension {dim} but the configured embedder produces {embedding_dim}",
            file=file,
            column="description_embedding",
        )
    return VectorTable.build("entity_description", valid, matrix, source=file, column="description_embedding")
