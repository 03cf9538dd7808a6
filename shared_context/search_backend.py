"""The search seam: lexical (BM25) and vector top-k search, exact in memory or LanceDB on disk.

Two protocols, two implementations each:

| | exact, in memory (the definition) | on disk, above a size threshold |
|---|---|---|
| `LexicalSearch` | `bm25.BM25` (postings memory-mapped by `lexical_store`) | `LanceLexical`: Lance native full-text search |
| `VectorSearch` | `vectors.VectorTable` (numpy cosine) | `LanceVector`: IVF_PQ / IVF_HNSW_SQ ANN with exact re-ranking |

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
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:  # lancedb loads with the first Lance table, not at `import router`
    from lancedb.db import DBConnection
    from lancedb.index import FTS
    from lancedb.query import LanceVectorQueryBuilder, MatchQuery
    from lancedb.table import Table

__all__ = [
    "LanceLexical",
    "LanceVector",
    "LexicalSearch",
    "SearchParams",
    "VectorSearch",
    "configure_search",
    "search_params",
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
