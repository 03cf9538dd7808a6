"""Reading stored embeddings: LanceDB tables in `lancedb/` and `embeddings.<name>[.<model>].parquet`.

Each becomes a `VectorTable` whose rows point at record positions. Vector ids are the record ids
GraphRAG writes (entity uuid, report sha512, text unit id); rows whose id matches no loaded record
are dropped and counted in a warning, as GraphRAG's query side silently does.

A Lance table is read once: its rows' record positions and L2-normalised vectors are copied into the
derived store (`vectors.<name>` entry, keyed by the Lance dataset's version files and the fingerprint
of the record table the ids point into) and memory-mapped from there on every later open, so no
process after the first imports `lance` or `lancedb` to answer a question (`import lancedb` alone
costs seconds: its namespace client builds pydantic validators at import time). The first read goes
through `pylance` a batch at a time (the vectors never held whole in memory), and so does copying an
`embeddings.*.parquet` file, keyed by that file's fingerprint.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa

from shared_context.derived_store import DerivedStore, table_fingerprint
from shared_context.errors import IndexFormatError
from shared_context.records import numeric_view
from shared_context.search_backend import VECTOR_TARGETS, VectorTable

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


def lance_version(dataset: Path) -> str:
    """The identity of a Lance dataset's current content: its version manifests (names, sizes, mtimes);
    every write to the dataset adds one."""
    entries = []
    for folder in (dataset, dataset / "_versions"):
        try:
            for p in sorted(folder.iterdir()):
                if p.name.endswith(".manifest"):
                    st = p.stat()
                    entries.append(f"{p.relative_to(dataset)}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            continue
    return hashlib.sha256("|".join(entries).encode()).hexdigest()


_BATCH_ROWS = 32_768


def _stored_vectors(
    store: DerivedStore | None,
    name: str,
    source: str,
    key: str,
    read: Callable[[], tuple[pa.ChunkedArray | pa.Array, Callable[[], Iterator[pa.RecordBatch]]]],
    lookup: IdLookup,
    column: str,
    model: Callable[[int], str | None],
    embedding_dim: int | None,
    warnings: list[str],
) -> VectorTable | None:
    """The vector table of one source: memory-mapped from the derived store when copied there before
    (same `key`), else read (`read()` gives the id column and a generator of `column` batches in the
    same row order), copied a batch at a time and mapped."""
    depends = [VECTOR_TARGETS[name]]
    entry = f"vectors.{name}"
    arrays = store.load_arrays(entry, depends, extra=key) if store is not None else None
    if arrays is None:
        ids, batches = read()
        n = len(ids)
        if n == 0:
            warnings.append(f"{source}: vector table is empty; ignored")
            return None
        positions = np.fromiter((lookup(str(i)) for i in ids.to_pylist()), dtype=np.int64, count=n)
        keep = positions >= 0
        _, first = np.unique(positions[keep], return_index=True)  # the first vector per record when ids repeat
        rows = np.sort(np.flatnonzero(keep)[first])
        arrays = _copy_vectors(store, entry, depends, key, positions, rows, batches, source, column)
        if arrays is None:
            return None
        arrays["dropped"] = np.asarray([int((~keep).sum()), n], dtype=np.int64)
        if store is not None:  # the rows' positions and counts beside the matrix written above
            loaded = store.load_arrays(entry, depends, extra=key)
            arrays = loaded if loaded is not None else arrays
    matrix, positions = arrays["matrix"], arrays["positions"]
    dropped, total = (int(v) for v in arrays["dropped"])
    dim = int(matrix.shape[1])
    found_model = model(dim)
    if embedding_dim is not None and dim != embedding_dim:
        raise IndexFormatError(
            f"has dimension {dim} but the configured embedder produces {embedding_dim}"
            + (f" (the vectors were made with {found_model})" if found_model else ""),
            file=source,
            column=column,
        )
    if dropped:
        warnings.append(
            f"{source}: column 'id': {dropped} of {total} vectors name no {VECTOR_TARGETS[name][:-1].replace('_', ' ')}; dropped"
        )
    return VectorTable(name, positions, matrix, source=source, model=found_model, column=column)


def _copy_vectors(
    store: DerivedStore | None,
    entry: str,
    depends: list[str],
    key: str,
    positions: np.ndarray,
    rows: np.ndarray,
    batches: Callable[[], Iterator[pa.RecordBatch]],
    source: str,
    column: str,
) -> dict[str, np.ndarray] | None:
    """Normalise the vectors of `rows` batch by batch into the store's `matrix.npy` (a plain file
    write, so the copy is never resident as a whole); without a store, into memory."""
    import contextlib
    import tempfile

    parts: list[np.ndarray] = []
    dim: int | None = None
    with contextlib.ExitStack() as stack:
        if store is not None:
            folder = stack.enter_context(store.write_entry(entry, depends, extra=key))
        else:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        out = stack.enter_context((folder / "matrix.npy").open("wb")) if store is not None else None
        start = 0
        for batch in batches():
            block = _matrix(batch.column(0), source, column)
            wanted = rows[(rows >= start) & (rows < start + len(block))] - start
            start += len(block)
            if block.shape[0] and dim is None:
                dim = int(block.shape[1])
                if out is not None:
                    np.lib.format.write_array_header_1_0(
                        out, {"descr": np.dtype(np.float32).str, "fortran_order": False, "shape": (len(rows), dim)}
                    )
            if block.shape[0] and block.shape[1] != dim:
                raise IndexFormatError(f"vectors have different lengths ({dim}, {block.shape[1]})", file=source,
                                       column=column)
            normalised = _normalise(block[wanted])
            if out is not None:
                out.write(normalised.tobytes())
            else:
                parts.append(normalised)
        if dim is None:
            return None
        if out is not None:
            out.close()
            np.save(folder / "positions.npy", positions[rows])
            np.save(folder / "dropped.npy", np.asarray([len(positions) - len(rows), len(positions)], dtype=np.int64))
            return {"matrix": np.load(folder / "matrix.npy"), "positions": positions[rows]}  # only if unwritable
    return {"matrix": np.concatenate(parts) if parts else np.zeros((0, dim), np.float32), "positions": positions[rows]}


def _normalise(block: np.ndarray) -> np.ndarray:
    from shared_context.search_backend import normalise_rows

    return normalise_rows(block)


def read_lancedb(
    root: Path,
    lookups: dict[str, IdLookup],
    embedding_dim: int | None,
    warnings: list[str],
    store: DerivedStore | None = None,
) -> dict[str, VectorTable]:
    folder = root / "lancedb"
    if not folder.is_dir():
        return {}
    out: dict[str, VectorTable] = {}
    for name in VECTOR_TARGETS:
        dataset = folder / f"{name}.lance"
        if not dataset.is_dir():
            continue
        file = f"lancedb/{name}.lance"

        def read(dataset: Path = dataset, file: str = file) -> tuple[pa.ChunkedArray, Callable[[], Iterator[pa.RecordBatch]]]:
            return _read_lance(dataset, file)

        table = _stored_vectors(store, name, file, "lance:" + lance_version(dataset), read, lookups[name], "vector",
                                lambda dim: _manifest_embedder(root, dim), embedding_dim, warnings)
        if table is not None:
            out[name] = table
    return out


def _read_lance(dataset: Path, file: str) -> tuple[pa.ChunkedArray, Callable[[], Iterator[pa.RecordBatch]]]:
    """The id column and the vector batches of a Lance dataset, through pylance (not lancedb)."""
    import lance  # only when the derived store has no copy of this version

    try:
        ds = lance.dataset(str(dataset))
        names = ds.schema.names
    except Exception as exc:
        raise IndexFormatError(f"cannot read LanceDB table: {exc}", file=file) from exc
    for col in ("id", "vector"):
        if col not in names:
            raise IndexFormatError(f"missing required column (columns present: {', '.join(names)})", file=file,
                                   column=col)
    try:
        ids = ds.to_table(columns=["id"]).column("id")
    except Exception as exc:
        raise IndexFormatError(f"cannot read LanceDB table: {exc}", file=file) from exc

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            yield from ds.to_batches(columns=["vector"], batch_size=_BATCH_ROWS, scan_in_order=True)
        except IndexFormatError:
            raise
        except Exception as exc:
            raise IndexFormatError(f"cannot read LanceDB table: {exc}", file=file) from exc

    return ids, batches


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
    store: DerivedStore | None = None,
) -> dict[str, VectorTable]:
    out: dict[str, VectorTable] = {}
    for path in sorted(root.glob("embeddings.*.parquet")):
        parsed = parse_embedding_file_name(path.name)
        if parsed is None:
            warnings.append(f"{path.name}: not a known embedding name ({', '.join(VECTOR_TARGETS)}); ignored")
            continue
        name, model = parsed
        if name in skip or name in out:
            continue
        vector_col = _parquet_vector_column(path)

        def read(path: Path = path, vector_col: str = vector_col) -> tuple[pa.ChunkedArray, Callable[[], Iterator[pa.RecordBatch]]]:
            return _read_parquet(path, vector_col)

        def named(_dim: int, model: str | None = model) -> str | None:
            return model

        table = _stored_vectors(store, name, path.name, f"parquet:{path.name}:{table_fingerprint(path)}", read,
                                lookups[name], vector_col, named, embedding_dim, warnings)
        if table is not None:
            out[name] = table
    return out


def _parquet_vector_column(path: Path) -> str:
    import pyarrow.parquet as pq  # imported on first use: pyarrow.parquet and .fs cost ~40 ms at import time

    try:
        names = pq.read_schema(path).names
    except Exception as exc:
        raise IndexFormatError(f"cannot read table: {exc}", file=path.name) from exc
    vector_col = next((c for c in ("embedding", "vector") if c in names), None)
    for col in ("id", vector_col or "embedding"):
        if col not in names:
            raise IndexFormatError(f"missing required column (columns present: {', '.join(names)})", file=path.name,
                                   column=col)
    assert vector_col is not None
    return vector_col


def _read_parquet(path: Path, vector_col: str) -> tuple[pa.ChunkedArray, Callable[[], Iterator[pa.RecordBatch]]]:
    import pyarrow.parquet as pq

    try:
        with pq.ParquetFile(path) as parquet:  # not pq.read_table: it imports pandas
            ids = parquet.read(columns=["id"]).column("id")
    except Exception as exc:
        raise IndexFormatError(f"cannot read table: {exc}", file=path.name) from exc

    def batches() -> Iterator[pa.RecordBatch]:
        with pq.ParquetFile(path) as parquet:
            yield from parquet.iter_batches(batch_size=_BATCH_ROWS, columns=[vector_col])

    return ids, batches


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
