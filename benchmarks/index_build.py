"""Offline index build over the whole GraphRAG-Bench novel corpus (20 books, ~4.8 M characters).

    .venv/bin/python -m benchmarks.index_build [--out DIR] [--books N] [--keep]

Prints wall time, peak RSS, chunks, entities, relationships, communities and seconds per step.
Target (issue 6): <= 10 minutes and <= 4 GB on 2 cores. The index is written to a temporary folder
(deleted afterwards unless --out or --keep is given) and loaded back with `load_index` as a check.
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
    args = ap.parse_args(argv)

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


if __name__ == "__main__":
    sys.exit(main())
