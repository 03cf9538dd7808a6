"""The search seam: lexical (BM25) and vector top-k search, exact in memory or LanceDB on disk.

Two protocols, two implementations each:

| | exact, in memory (the definition) | on disk, above a size threshold |
|---|---|---|
| `LexicalSearch` | `bm25.BM25` (postings memory-mapped by `lexical_store`) | `LanceLexical`: Lance native full-text search |
| `VectorSearch` | `VectorTable` (numpy cosine) | `LanceVector`: IVF_PQ / IVF_HNSW_SQ ANN with exact re-ranking |

One BM25 in the project. The Lance FTS column holds our own `linking.lexical_terms` joined by spaces,
indexed with Lance's whitespace tokenizer and no stemming, stopwords or case folding of its own, so it
sees exactly our terms (CJK bigrams included: Chinese needs no segmenter here either). Lance scores a
term with the same Okapi BM25 as `bm25.BM25` (k1 = 1.2, b = 0.75, idf = ln(1 + (N - df + 0.5) /
(df + 0.5)), document length = number of terms), so both paths give the same scores; the tests compare
them, and `bm25.BM25` stays the definition. Lance's multi-column query does not add the column scores
(entity linking needs 2 x title + description), so `weighted_top_k` combines per-column top-k lists
with the threshold algorithm, which is exact.

ANN recall is not exact by nature: `refine_factor` re-ranks `refine_factor x k` candidates with the
full vectors, so returned similarities are exact and only a miss can differ
(`benchmarks/ann_recall.py` measures recall@10 against `VectorTable.search`).

The thresholds live in `SearchParams` (graphroute.toml `[search]`); below them everything stays in
memory, as before. On-disk tables are built once per index content (`search_store.field_folder`) and
reopened afterwards: a query on a second open never builds.

Vector tables attached to an index (`VectorTable`): one L2-normalised float32 matrix per embedded field. Rows
are aligned with `positions`, the positions of the matching records in the index's lists (entities for
`entity_description`, community reports for `community_full_content`, text units for `text_unit_text`).
`VectorTable.search` is exact cosine similarity with numpy (a few milliseconds up to ~10^5 rows);
`vector_search` switches to a Lance ANN index above `SearchParams.vector_ann_min_rows`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from shared_context.errors import IndexFormatError
from shared_context.search_store import field_folder

if TYPE_CHECKING:  # lancedb loads with the first Lance table, not at `import router`
    from lancedb.db import DBConnection
    from lancedb.index import FTS
    from lancedb.query import LanceVectorQueryBuilder, MatchQuery
    from lancedb.table import Table

__all__ = [
    "VECTOR_TARGETS",
    "LanceLexical",
    "LanceVector",
    "LexicalSearch",
    "SearchParams",
    "VectorSearch",
    "VectorTable",
    "configure_search",
    "derived_vectors",
    "normalise_rows",
    "search_params",
    "vector_search",
    "vector_table",
    "weighted_top_k",
]

Hits = tuple[np.ndarray, np.ndarray]  # (positions int64, scores float64), best first


class SearchParams(BaseModel):
    """Which backend serves a search, by the number of rows searched (graphroute.toml `[search]`)."""

    # defer_build: validators are built on first use, not when `import router` defines the class (import time)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)

    persist_min_rows: int = Field(
        default=2_000, ge=0,
        description="store a field's in-memory BM25 postings on disk from this many rows (an index read from files: always)"
    )
    # The memory-mapped in-memory postings beat Lance FTS at 1M synthetic entities on every query figure
    # (local build p50 50 vs 99 ms CPU, first query of a second open 1.6 vs 3.2 s, peak RSS 4.6 vs 5.8 GB;
    # benchmarks/scale.py), so full-text search on disk starts well above that.
    lexical_on_disk_min_rows: int = Field(
        default=5_000_000, ge=1, description="serve BM25 from Lance full-text search from this many rows"
    )
    vector_ann_min_rows: int = Field(
        default=200_000, ge=1, description="serve vector search from a Lance ANN index from this many rows"
    )
    # HNSW_SQ: recall@10 1.000 at 100k synthetic entities against 0.929 for IVF_PQ at the same nprobes and
    # refine_factor (benchmarks/ann_recall.py); it costs a longer build.
    ann_index: Literal["IVF_PQ", "IVF_HNSW_SQ"] = "IVF_HNSW_SQ"
    nprobes: int = Field(default=32, ge=1, description="IVF partitions probed per query")
    refine_factor: int = Field(default=10, ge=1, description="candidates re-ranked exactly, times k")
    candidate_depth: int = Field(
        default=200, ge=1, description="on-disk linking: lexical and vector candidates scored per query"
    )
    # Licence and edition boilerplate (shared_context/boilerplate_marks.py): its text units, the entities only
    # they support and the reports built mostly from them rank below the story.
    down_rank_boilerplate: bool = Field(
        default=True, description="rank licence and front/back matter below the documents' own text"
    )


def configure_search(index: object, params: SearchParams) -> None:
    """Use `params` for this index's searches (the Router applies the `[search]` config section)."""
    _params_slot(index)["params"] = params


def search_params(index: object) -> SearchParams:
    return _params_slot(index).get("params") or SearchParams()


def _params_slot(index: object) -> dict[str, SearchParams]:
    from shared_context.tables import per_index_cache

    slot: dict[str, SearchParams] = per_index_cache(index, "search.params", dict)
    return slot


class LexicalSearch(Protocol):
    n_docs: int

    def top_k(self, query: Sequence[str], k: int) -> Hits:
        """The `k` best documents with a positive score for the query terms, best first, ties by position."""
        ...

    def scores_at(self, query: Sequence[str], positions: np.ndarray) -> np.ndarray:
        """Scores (float64) of the documents at `positions`."""
        ...


class VectorSearch(Protocol):
    def search(self, query_vector: np.ndarray | list[float], k: int) -> list[tuple[int, float]]:
        """Top-`k` (record position, cosine) pairs, best first."""
        ...


def weighted_top_k(parts: Sequence[tuple[float, LexicalSearch]], query: Sequence[str], k: int) -> Hits:
    """Exact top-`k` of `sum(weight * part score)` from per-part top-k lists (Fagin's threshold
    algorithm): deepen the lists until the k-th combined score reaches what an unseen document could
    still score."""
    if k <= 0 or not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    depth = max(k, 16)
    while True:
        lists = [search.top_k(query, depth) for _, search in parts]
        candidates = np.unique(np.concatenate([pos for pos, _ in lists]))
        if not len(candidates):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        total = np.zeros(len(candidates), dtype=np.float64)
        for (weight, search), (pos, scores) in zip(parts, lists, strict=True):
            exhaustive = len(pos) < depth
            if exhaustive:  # every positive document of this part is in its list
                part = np.zeros(len(candidates), dtype=np.float64)
                part[np.searchsorted(candidates, pos)] = scores
            else:
                part = search.scores_at(query, candidates)
            total += weight * part
        unseen_bound = sum(
            weight * (float(scores[-1]) if len(pos) >= depth else 0.0)
            for (weight, _), (pos, scores) in zip(parts, lists, strict=True)
        )
        order = np.lexsort((candidates, -total))[:k]
        done = all(len(pos) < depth for pos, _ in lists)
        if done or (len(order) == k and total[order[-1]] > unseen_bound):
            return candidates[order].astype(np.int64), total[order]
        depth *= 4


# ---------------------------------------------------------------------------- Lance tables on disk

_build_lock = threading.Lock()


def lance_table(folder: Path, build: Callable[[DBConnection], None], check: str = "") -> Table:
    """Open the Lance table `data` in `folder`, building it first with `build(db)` when absent or
    built from other content (`check`, see `search_store.content_check`).

    `build` writes into a temporary sibling that is renamed into place once complete (indexes
    included), so an interrupted build is never opened and concurrent builders keep the first one.
    """
    import lancedb

    marker = folder / "COMPLETE"
    with _build_lock:
        if not marker.exists() or marker.read_text().strip() != (check or "ok"):
            folder.parent.mkdir(parents=True, exist_ok=True)
            tmp = folder.with_name(f".{folder.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            build(lancedb.connect(str(tmp)))
            (tmp / "COMPLETE").write_text(f"{check or 'ok'}\n")
            shutil.rmtree(folder, ignore_errors=True)  # a stale table of other content
            try:
                os.replace(tmp, folder)
            except OSError:  # built by someone else meanwhile
                shutil.rmtree(tmp, ignore_errors=True)
        return lancedb.connect(str(folder)).open_table("data")


def fts_config() -> FTS:
    """Lance FTS that sees our terms unchanged: whitespace split, no folding, stemming or stopwords."""
    from lancedb.index import FTS

    return FTS(
        base_tokenizer="whitespace",
        lower_case=False,
        stem=False,
        remove_stop_words=False,
        ascii_folding=False,
        max_token_length=None,
    )


class LanceLexical:
    """BM25 top-k from a Lance full-text index over pre-tokenised term columns (`pos` = record position)."""

    def __init__(self, table: Table, column: str, n_docs: int) -> None:
        self.table = table
        self.column = column
        self.n_docs = n_docs

    def _query(self, query: Sequence[str]) -> MatchQuery | None:
        from lancedb.query import MatchQuery

        terms = list(dict.fromkeys(t for t in query if t and not any(c.isspace() for c in t)))
        return MatchQuery(" ".join(terms), self.column) if terms else None  # type: ignore[call-arg]

    def _run(self, match: MatchQuery, limit: int, where: str | None = None) -> Hits:
        builder = self.table.search(match, query_type="fts").select(["pos", "_score"]).limit(limit)
        if where is not None:
            builder = builder.where(where, prefilter=True)
        result = builder.to_arrow()
        pos = result.column("pos").to_numpy().astype(np.int64)
        scores = result.column("_score").to_numpy().astype(np.float64)
        order = np.lexsort((pos, -scores))
        return pos[order], scores[order]

    def top_k(self, query: Sequence[str], k: int) -> Hits:
        match = self._query(query)
        if match is None or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        # a little deeper than k so that ties at the cut are ordered by position, as in memory
        pos, scores = self._run(match, k + 16)
        keep = scores > 0
        return pos[keep][:k], scores[keep][:k]

    def scores_at(self, query: Sequence[str], positions: np.ndarray) -> np.ndarray:
        out = np.zeros(len(positions), dtype=np.float64)
        match = self._query(query)
        if match is None or not len(positions):
            return out
        wanted = np.asarray(positions, dtype=np.int64)
        where = f"pos IN ({','.join(str(int(p)) for p in wanted)})"
        pos, scores = self._run(match, len(wanted), where)
        lookup = {int(p): s for p, s in zip(pos.tolist(), scores.tolist(), strict=True)}
        for i, p in enumerate(wanted.tolist()):
            out[i] = lookup.get(p, 0.0)
        return out


def build_lexical_table(columns: dict[str, list[str]]) -> Callable[[DBConnection], None]:
    """A `lance_table` builder: rows `pos` + one terms column per name, each with an FTS index."""

    def build(db: DBConnection) -> None:
        import pyarrow as pa

        n = len(next(iter(columns.values()))) if columns else 0
        data = {
            "pos": pa.array(np.arange(n, dtype=np.int64)),
            **{c: pa.array(v, pa.string()) for c, v in columns.items()},
        }
        table = db.create_table("data", pa.table(data))
        for column in columns:
            table.create_index(column, config=fts_config())

    return build


class LanceVector:
    """Cosine top-k from a Lance ANN index; candidates re-ranked with the full vectors (`refine_factor`)."""

    def __init__(self, table: Table, dim: int, nprobes: int, refine_factor: int) -> None:
        self.table = table
        self.dim = dim
        self.nprobes = nprobes
        self.refine_factor = refine_factor

    def search(self, query_vector: np.ndarray | list[float], k: int) -> list[tuple[int, float]]:
        q = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        if k <= 0 or q.shape[0] != self.dim:
            return []
        query = cast("LanceVectorQueryBuilder", self.table.search(q))  # a vector query's builder
        result = (
            query
            .distance_type("cosine")
            .nprobes(self.nprobes)
            .refine_factor(self.refine_factor)
            .select(["pos", "_distance"])
            .limit(k)
            .to_arrow()
        )
        pos = result.column("pos").to_pylist()
        sims = [1.0 - float(d) for d in result.column("_distance").to_pylist()]
        return sorted(zip(pos, sims, strict=True), key=lambda h: (-h[1], h[0]))


def build_vector_table(positions: np.ndarray, matrix: np.ndarray, index_type: str) -> Callable[[DBConnection], None]:
    """A `lance_table` builder: rows `pos` + `vector`, with an IVF_PQ or IVF_HNSW_SQ cosine index."""

    def build(db: DBConnection) -> None:
        import pyarrow as pa
        from lancedb.index import HnswSq, IvfPq

        n, dim = matrix.shape
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(matrix).reshape(-1)), dim)
        rows = pa.table({"pos": pa.array(positions.astype(np.int64)), "vector": vectors})
        table = db.create_table("data", rows)
        partitions = max(1, int(np.sqrt(n)))  # lance's own rule of thumb: ~sqrt(rows) partitions
        if index_type == "IVF_HNSW_SQ":
            config: HnswSq | IvfPq = HnswSq(distance_type="cosine", num_partitions=max(1, partitions // 16))
        else:
            sub = next(s for s in (dim // 8, dim // 4, dim // 2, dim, 1) if s >= 1 and dim % s == 0)
            config = IvfPq(distance_type="cosine", num_partitions=partitions, num_sub_vectors=sub)
        table.create_index("vector", config=config)

    return build


# ---------------------------------------------------------------------------- vector tables of an index

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
