"""Vector tables attached to an index: one L2-normalised float32 matrix per embedded field.

Rows are aligned with `positions`, the positions of the matching records in the index's lists
(entities for `entity_description`, community reports for `community_full_content`, text units for
`text_unit_text`). `VectorTable.search` is exact cosine similarity with numpy (a few milliseconds up to
~10^5 rows); `vector_search` switches to a Lance ANN index above `SearchParams.vector_ann_min_rows`
(see `search_backend`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from shared_context.errors import IndexFormatError
from shared_context.search_backend import (
    LanceVector,
    SearchParams,
    VectorSearch,
    build_vector_table,
    lance_table,
    search_params,
)
from shared_context.search_store import field_folder

# Embedding name -> the record list (attribute of Index) its rows point into.
VECTOR_TARGETS: dict[str, str] = {
    "entity_description": "entities",
    "community_full_content": "community_reports",
    "text_unit_text": "text_units",
}


def normalise_rows(matrix: np.ndarray) -> np.ndarray:
    """Return a float32 copy of `matrix` with unit-length rows (zero rows stay zero)."""
    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(m / norms, dtype=np.float32)


@dataclass(frozen=True, eq=False)
class VectorTable:
    """Embeddings of one field, row i belonging to record `positions[i]`."""

    name: str
    positions: np.ndarray  # int64 record positions, aligned with matrix rows
    matrix: np.ndarray  # float32 (n, dim), rows L2-normalised
    source: str  # file or folder the vectors came from, or e.g. "offline-embedder"
    model: str | None = None  # embedding model name when known
    column: str | None = None  # column the vectors were read from ("vector", "embedding", ...)

    def __post_init__(self) -> None:
        if self.name not in VECTOR_TARGETS:
            raise IndexFormatError(
                f"unknown vector table name {self.name!r}; expected one of {', '.join(VECTOR_TARGETS)}",
                file=self.source,
            )
        if self.matrix.ndim != 2:
            raise IndexFormatError(
                f"vectors must be a 2-d matrix, got shape {self.matrix.shape}", file=self.source
            )
        if len(self.positions) != self.matrix.shape[0]:
            raise IndexFormatError(
                f"{len(self.positions)} positions for {self.matrix.shape[0]} vectors", file=self.source
            )
        if self.matrix.dtype != np.float32:
            raise IndexFormatError(f"vectors must be float32, got {self.matrix.dtype}", file=self.source)

    @classmethod
    def build(
        cls,
        name: str,
        positions: np.ndarray | list[int],
        matrix: np.ndarray,
        source: str,
        model: str | None = None,
        column: str | None = None,
    ) -> VectorTable:
        """Construct a table, normalising rows and coercing dtypes."""
        return cls(
            name=name,
            positions=np.asarray(positions, dtype=np.int64),
            matrix=normalise_rows(matrix),
            source=source,
            model=model,
            column=column,
        )

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    def _query(self, query_vector: np.ndarray | list[float]) -> np.ndarray:
        q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise IndexFormatError(
                f"query vector has dimension {q.shape[0]} but the table has {self.dim}", file=self.source
            )
        norm = float(np.linalg.norm(q))
        return q / norm if norm > 0 else q

    def similarities(self, query_vector: np.ndarray | list[float]) -> np.ndarray:
        """Cosine similarity of the query with every row (aligned with `positions`)."""
        if len(self) == 0:
            return np.zeros(0, dtype=np.float32)
        result: np.ndarray = self.matrix @ self._query(query_vector)
        return result

    def search(self, query_vector: np.ndarray | list[float], k: int) -> list[tuple[int, float]]:
        """Top-`k` (record position, cosine) pairs, best first; ties broken by position."""
        if k <= 0 or len(self) == 0:
            return []
        sims = self.similarities(query_vector)
        k = min(k, len(sims))
        top = np.argpartition(-sims, k - 1)[:k] if k < len(sims) else np.arange(len(sims))
        order = sorted(top.tolist(), key=lambda r: (-float(sims[r]), int(self.positions[r])))
        return [(int(self.positions[r]), float(sims[r])) for r in order]


# ---------------------------------------------------------------------------- vectors beside the Index

_DERIVED = "vectors.derived"


def derived_vectors(index: object) -> dict[str, VectorTable]:
    """Vector tables computed for an index after load (the offline embedder's), kept beside it in its
    per-index cache: the Index itself stays read-only and shared."""
    from shared_context.tables import per_index_cache

    tables: dict[str, VectorTable] = per_index_cache(index, _DERIVED, dict)
    return tables


def vector_table(index: object, name: str) -> VectorTable | None:
    """The vector table `name` queries should use: one derived for this index, else the stored one."""
    derived = derived_vectors(index).get(name)
    if derived is not None:
        return derived
    stored: dict[str, VectorTable] = getattr(index, "vectors", {})
    return stored.get(name)


def vector_search(index: object, name: str) -> VectorSearch | None:
    """The search serving vector table `name`: the exact `VectorTable` below
    `SearchParams.vector_ann_min_rows` rows, else a Lance ANN index built once per index content."""
    table = vector_table(index, name)
    if table is None:
        return None
    params = search_params(index)
    if len(table) < params.vector_ann_min_rows:
        return table
    from shared_context.tables import per_index_cache

    slot = f"search.ann.{name}.{id(table)}.{params.ann_index}.{params.nprobes}.{params.refine_factor}"
    return per_index_cache(index, slot, lambda: _lance_vector(index, table, params))


def _lance_vector(index: object, table: VectorTable, params: SearchParams) -> LanceVector:
    field = f"ann.{table.name}.{params.ann_index}"
    identity = f"{table.source}|{table.model}|{table.dim}|{len(table)}"

    def content() -> list[bytes]:
        return [identity.encode(), table.positions.tobytes(), table.matrix.tobytes()]

    folder = field_folder(index, f"{field}.{hashlib.sha256(identity.encode()).hexdigest()[:12]}", content)
    lance = lance_table(folder, build_vector_table(table.positions, table.matrix, params.ann_index))
    return LanceVector(lance, table.dim, params.nprobes, params.refine_factor)
