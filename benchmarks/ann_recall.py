"""Recall and speed of the on-disk search backends against the exact in-memory ones.

For each size, a synthetic index (`benchmarks/synthetic_index.py`, with deterministic clustered
embeddings) is written once under `--work`, then:
- vectors (`entity_description`): exact `VectorTable.search` against `LanceVector` (IVF_PQ or
  IVF_HNSW_SQ ANN, `nprobes`, `refine_factor` re-ranking): build time, query p50, recall@10 (share of
  the exact top 10 the ANN returns). Queries are stored entity vectors plus noise, i.e. questions
  about one entity.
- lexical (entity descriptions): the in-memory `BM25` against Lance full-text search over the same
  terms: build time, query p50, and recall@10 (1.0 expected: same terms, same BM25).
Both paths go through `shared_context.search_backend`, the code queries use.

    python -m benchmarks.ann_recall                      # 10k and 100k entities
    python -m benchmarks.ann_recall --sizes 10000 --queries 100 --ann-index IVF_PQ --nprobes 32

`scale.py` can call `run(sizes, ...)` and print `format_rows(...)`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from benchmarks.synthetic_index import write_synthetic_index
from shared_context.linking import lexical_index, lexical_terms
from shared_context.search_backend import (
    LanceLexical,
    LanceVector,
    VectorTable,
    build_lexical_table,
    build_vector_table,
    lance_table,
)

K = 10


def _index_folder(work: Path, n: int, dim: int) -> Path:
    folder = work / f"synth-{n}-d{dim}"
    if not (folder / "embeddings.entity_description.parquet").exists():
        write_synthetic_index(folder, n, vector_dim=dim)
    return folder


def _p50_ms(times: list[float]) -> float:
    return float(np.median(times) * 1000)


def _vector_rows(folder: Path, work: Path, n: int, args: Any, rng: np.random.Generator) -> list[dict[str, Any]]:
    data = pq.read_table(folder / "embeddings.entity_description.parquet")
    dim = data.schema.field("vector").type.list_size
    raw = data.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, dim)
    start = time.perf_counter()
    exact = VectorTable.build("entity_description", np.arange(len(raw)), raw, "synthetic")
    exact_build = time.perf_counter() - start
    picks = rng.integers(0, len(exact), size=args.queries)
    # a question about one entity: its vector plus noise of half its length
    noise = (0.5 / np.sqrt(dim)) * rng.standard_normal((args.queries, dim)).astype(np.float32)
    queries = exact.matrix[picks] + noise
    truth, exact_times = [], []
    for q in queries:
        t0 = time.perf_counter()
        truth.append({p for p, _ in exact.search(q, K)})
        exact_times.append(time.perf_counter() - t0)
    rows = [{"size": n, "search": f"vector exact (dim {dim})", "build_s": exact_build,
             "p50_ms": _p50_ms(exact_times), "recall": 1.0}]  # fmt: skip
    for index_type in args.ann_index:
        lance_dir = work / f"ann-{n}-{index_type}"
        shutil.rmtree(lance_dir, ignore_errors=True)
        start = time.perf_counter()
        table = lance_table(lance_dir, build_vector_table(exact.positions, exact.matrix, index_type))
        ann_build = time.perf_counter() - start
        for nprobes in args.nprobes:
            for refine in args.refine:
                ann = LanceVector(table, dim, nprobes, refine)
                ann.search(queries[0], K)  # first query opens the index files
                hits, times = [], []
                for q, want in zip(queries, truth, strict=True):
                    t0 = time.perf_counter()
                    got = {p for p, _ in ann.search(q, K)}
                    times.append(time.perf_counter() - t0)
                    hits.append(len(got & want) / K)
                rows.append({"size": n, "search": f"{index_type} nprobes={nprobes} refine={refine}",
                             "build_s": ann_build, "p50_ms": _p50_ms(times), "recall": float(np.mean(hits))})  # fmt: skip
    return rows


def _lexical_rows(folder: Path, work: Path, n: int, args: Any, rng: np.random.Generator) -> list[dict[str, Any]]:
    entities = pq.read_table(folder / "entities.parquet", columns=["title", "description"])
    titles = entities.column("title").to_pylist()
    texts = entities.column("description").to_pylist()
    start = time.perf_counter()
    bm25 = lexical_index(texts)
    exact_build = time.perf_counter() - start
    lance_dir = work / f"fts-{n}"
    shutil.rmtree(lance_dir, ignore_errors=True)
    start = time.perf_counter()
    table = lance_table(lance_dir, build_lexical_table({"terms": [" ".join(lexical_terms(t)) for t in texts]}))
    fts_build = time.perf_counter() - start
    fts = LanceLexical(table, "terms", len(texts))
    picks = rng.integers(0, len(texts), size=args.queries).tolist()
    queries = [lexical_terms(f"{titles[i]} {texts[i].split('.')[-1]}")[:6] for i in picks]
    fts.top_k(queries[0], K)
    truth, exact_times, fts_times, hits = [], [], [], []
    for q in queries:
        t0 = time.perf_counter()
        want = bm25.top_k(q, K)[0].tolist()
        exact_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        got = fts.top_k(q, K)[0].tolist()
        fts_times.append(time.perf_counter() - t0)
        truth.append(want)
        hits.append(len(set(got) & set(want)) / max(len(want), 1))
    return [
        {"size": n, "search": "BM25 in memory", "build_s": exact_build, "p50_ms": _p50_ms(exact_times), "recall": 1.0},
        {"size": n, "search": "Lance FTS", "build_s": fts_build, "p50_ms": _p50_ms(fts_times),
         "recall": float(np.mean(hits))},
    ]  # fmt: skip


def run(sizes: list[int], args: Any) -> list[dict[str, Any]]:
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for n in sizes:
        folder = _index_folder(work, n, args.dim)
        rng = np.random.default_rng(n)
        rows += _vector_rows(folder, work, n, args, rng)
        if not args.skip_lexical:
            rows += _lexical_rows(folder, work, n, args, rng)
    return rows


def format_rows(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'entities':>9} | {'search':<38} | {'build s':>8} | {'p50 ms':>7} | recall@{K}"]
    for r in rows:
        lines.append(
            f"{r['size']:>9} | {r['search']:<38} | {r['build_s']:>8.2f} | {r['p50_ms']:>7.2f} | {r['recall']:.3f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dim", type=int, default=64, help="embedding dimension of the synthetic vectors")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--ann-index", choices=["IVF_PQ", "IVF_HNSW_SQ"], nargs="+", default=["IVF_HNSW_SQ", "IVF_PQ"])
    parser.add_argument("--nprobes", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--refine", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--skip-lexical", action="store_true")
    parser.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "graphroute-ann-recall"))
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    print(f"load average at start: {load:.1f} on {os.cpu_count()} cores; {args.queries} queries per row")
    print(format_rows(run(args.sizes, args)))


if __name__ == "__main__":
    main()
