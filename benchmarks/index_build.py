"""Offline index build over the whole GraphRAG-Bench novel corpus (20 books, ~4.8 M characters).

    .venv/bin/python -m benchmarks.index_build [--out DIR] [--books N] [--keep]
    .venv/bin/python -m benchmarks.index_build --update-share 0.1 [--books N]

Prints wall time, peak RSS, chunks, entities, relationships, communities and seconds per step.
Target: <= 10 minutes and <= 4 GB on 2 cores. The index is written to a temporary folder
(deleted afterwards unless --out or --keep is given) and loaded back with `load_index` as a check.

With --update-share F: a full build of all books, then a build of the first (1 - F) of them updated
with the rest (the last books, in corpus order), each timed (build only, books already in memory).
Target: the update takes <= 25 % of the full build.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from indexer import IndexerConfig, SourceDocument
from indexer.pipeline import build_index_from_documents

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "graphrag_bench" / "corpus" / "novel.parquet"


def peak_rss_mb() -> float:
    # ru_maxrss is KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def load_books(path: Path, limit: int | None) -> list[SourceDocument]:
    if not path.exists():
        raise SystemExit(f"corpus not found: {path}")
    books = pd.read_parquet(path, columns=["corpus_name", "context"])
    if limit is not None:
        books = books.head(limit)
    return [SourceDocument(title=str(n), text=str(t)) for n, t in zip(books["corpus_name"], books["context"], strict=True)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--out", type=Path, default=None, help="index folder (default: a temporary folder)")
    ap.add_argument("--books", type=int, default=None, help="only the first N books")
    ap.add_argument("--keep", action="store_true", help="keep the temporary index and print its path")
    ap.add_argument("--progress", action="store_true", help="show progress bars")
    ap.add_argument("--update-share", type=float, default=None, help="time an update adding this share of the books")
    args = ap.parse_args(argv)
    if args.update_share is not None:
        return update_cost(load_books(args.corpus, args.books), args.update_share, args.progress)

    t0 = time.perf_counter()
    docs = load_books(args.corpus, args.books)
    chars = sum(len(d.text) for d in docs)
    out = args.out or Path(tempfile.mkdtemp(prefix="graphroute-novels-")) / "index"
    report = build_index_from_documents(docs, out, config=IndexerConfig(), progress=args.progress)
    build_s = time.perf_counter() - t0

    from shared_context import load_index

    t1 = time.perf_counter()
    index = load_index(out)
    load_s = time.perf_counter() - t1
    levels = sorted({c.level for c in index.communities})
    print(f"corpus: {len(docs)} books, {chars:,} characters ({args.corpus})")
    print(f"wall time (read + build): {build_s:.1f} s   peak RSS: {peak_rss_mb():.0f} MB")
    print(
        f"chunks {report.chunks}, entities {report.entities}, relationships {report.relationships}, "
        f"communities {report.communities} (levels {levels}), reports {report.reports}"
    )
    print("seconds per step: " + ", ".join(f"{k} {v:.1f}" for k, v in report.step_seconds.items()))
    print(f"load_index check: {load_s:.1f} s, vectors {sorted(index.vectors)}")
    target_ok = build_s <= 600 and peak_rss_mb() <= 4096
    print(f"target <= 600 s and <= 4096 MB: {'met' if target_ok else 'NOT met'}")
    if args.out is None and not args.keep:
        shutil.rmtree(out.parent, ignore_errors=True)
    elif args.keep:
        print(f"index kept at {out}")
    return 0 if target_ok else 1


def update_cost(docs: list[SourceDocument], share: float, progress: bool) -> int:
    if not 0 < share < 1:
        raise SystemExit("--update-share must be between 0 and 1")
    n_new = max(1, round(len(docs) * share))
    base = docs[: len(docs) - n_new]
    with tempfile.TemporaryDirectory(prefix="graphroute-update-") as tmp:
        # CPU seconds as well as wall time: on a shared machine the wall-time ratio mostly measures the neighbours
        t0, c0 = time.perf_counter(), time.process_time()
        full = build_index_from_documents(docs, Path(tmp) / "full", config=IndexerConfig(), progress=progress)
        full_s, full_cpu = time.perf_counter() - t0, time.process_time() - c0
        shutil.rmtree(Path(tmp) / "full")
        t0 = time.perf_counter()
        build_index_from_documents(base, Path(tmp) / "incr", config=IndexerConfig(), progress=progress)
        base_s = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        update = build_index_from_documents(docs, Path(tmp) / "incr", config=IndexerConfig(), progress=progress)
        update_s, update_cpu = time.perf_counter() - t0, time.process_time() - c0
    ratio, cpu_ratio = update_s / full_s, update_cpu / full_cpu
    print(f"corpus: {len(docs)} books; update adds {n_new} ({n_new / len(docs):.0%}) to {len(base)}")
    print(f"full build {full_s:.1f} s wall, {full_cpu:.1f} s CPU; base build {base_s:.1f} s wall")
    print(f"update {update_s:.1f} s wall = {ratio:.1%} of the full build; {update_cpu:.1f} s CPU = {cpu_ratio:.1%}")
    print("full build seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in full.step_seconds.items()))
    print("update seconds:     " + ", ".join(f"{k} {v:.1f}" for k, v in update.step_seconds.items()))
    print("full build CPU s:   " + ", ".join(f"{k} {v:.1f}" for k, v in full.step_cpu_seconds.items()))
    print("update CPU s:       " + ", ".join(f"{k} {v:.1f}" for k, v in update.step_cpu_seconds.items()))
    print(
        f"update: {update.new_chunks} of {update.chunks} chunks extracted, "
        f"{sum(update.embedded.values())} texts embedded ({update.embedded}), {update.vectors_reused} vectors reused; "
        f"communities kept {update.communities_reused} of {update.communities}, "
        f"reports reused {update.reports_reused} of {update.reports}"
    )
    print(f"target update <= 25 % of a full build (CPU time): {'met' if cpu_ratio <= 0.25 else 'NOT met'}")
    return 0 if cpu_ratio <= 0.25 else 1


if __name__ == "__main__":
    sys.exit(main())
