"""Chunking time against input size: is it linear?

    .venv/bin/python -m benchmarks.chunking_scale [--sizes 10,50,100] [--extract-mb 0] [--index-mb 5,10,20]

For each size (MB of UTF-8 text) a deterministic synthetic document is generated: paragraphs of
sentences over made-up words, with a Markdown heading and a small table every few paragraphs, so
every boundary kind occurs. One document per size (the case that was quadratic: the document id was
re-hashed for every chunk). Prints seconds, chunks and MB/s per size, and the time per MB relative to
the smallest size (1.0 = linear). `--extract-mb N` also runs offline extraction over the first N MB's
chunks; `--index-mb 5,10,20` indexes a file of each size end to end (`build_index`, offline) into a
temporary folder, each in a fresh process so its peak RSS is its own, and prints seconds and peak RSS
per stage, and the whole build's seconds per MB relative to the first size (1.0 = linear).
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import tempfile
import time
from pathlib import Path

from indexer import IndexerConfig, SourceDocument
from indexer.chunking import chunk_documents

_SYLLABLES = ("ka", "lo", "mi", "ren", "sto", "va", "dor", "en", "qui", "tha", "bel", "run", "sa", "vor", "in")


def synthetic_text(n_bytes: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    words = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(5000)]
    names = [w.capitalize() for w in words[:300]]
    parts: list[str] = []
    size = 0
    paragraph = 0
    while size < n_bytes:
        if paragraph % 12 == 0:
            block = f"## Section {paragraph // 12}\n\n"
        elif paragraph % 12 == 6:
            rows = "".join(f"| {rng.choice(names)} | {rng.randint(1, 999)} | {rng.choice(words)} |\n" for _ in range(5))
            block = "| name | value | note |\n|---|---|---|\n" + rows + "\n"
        else:
            sentences = []
            for _ in range(rng.randint(3, 8)):
                body = " ".join(rng.choice(words) for _ in range(rng.randint(6, 20)))
                sentences.append(f"{rng.choice(names)} {body}.")
            block = " ".join(sentences) + "\n\n"
        parts.append(block)
        size += len(block)
        paragraph += 1
    return "".join(parts)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="10,50,100", help="MB of text per run (default 10,50,100)")
    ap.add_argument("--chunk-size", type=int, default=1200)
    ap.add_argument("--overlap", type=int, default=100)
    ap.add_argument("--extract-mb", type=float, default=0.0, help="also extract offline over this many MB")
    ap.add_argument("--index-mb", default="", help="also index files of these many MB end to end (e.g. 5,10,20)")
    ap.add_argument("--one-index", type=float, default=0.0, help=argparse.SUPPRESS)  # one size, in a child process
    args = ap.parse_args()
    if args.one_index:
        one_index(args.one_index, args.chunk_size, args.overlap)
        return
    config = IndexerConfig(chunk_size=args.chunk_size, chunk_overlap=args.overlap)
    from shared_context.tokens import get_encoding

    get_encoding(config.encoding)  # loading the vocabulary is a fixed start-up cost, not chunking
    base: float | None = None
    print(f"{'MB':>6} {'chunks':>8} {'seconds':>9} {'MB/s':>7} {'s/MB vs first':>14} {'peak RSS MB':>12}")
    for mb in (float(s) for s in args.sizes.split(",") if s):
        text = synthetic_text(int(mb * 1_000_000))
        doc = SourceDocument(f"synthetic-{mb:g}MB.md", text)
        started = time.perf_counter()
        chunks = chunk_documents([doc], chunk_size=config.chunk_size, overlap=config.chunk_overlap,
                                 encoding_name=config.encoding)
        seconds = time.perf_counter() - started
        per_mb = seconds / mb
        base = base or per_mb
        print(f"{mb:>6g} {len(chunks):>8} {seconds:>9.2f} {mb / seconds:>7.2f} {per_mb / base:>14.2f} {peak_rss_mb():>12.0f}",
              flush=True)
        del chunks, doc, text
    if args.extract_mb:
        from indexer.extract_offline import OfflineExtractor

        doc = SourceDocument("extract.md", synthetic_text(int(args.extract_mb * 1_000_000), seed=1))
        chunks = chunk_documents([doc], chunk_size=config.chunk_size, overlap=config.chunk_overlap,
                                 encoding_name=config.encoding)
        extractor = OfflineExtractor()
        started = time.perf_counter()
        for c in chunks:
            extractor.extract(c.text)
        seconds = time.perf_counter() - started
        print(f"offline extraction of {args.extract_mb:g} MB ({len(chunks)} chunks): {seconds:.1f} s")
    if args.index_mb:
        index_scale([float(x) for x in args.index_mb.split(",")], args.chunk_size, args.overlap)


def index_scale(sizes: list[float], chunk_size: int, overlap: int) -> None:
    import json
    import subprocess
    import sys

    base: float | None = None
    for mb in sizes:
        cmd = [sys.executable, "-m", "benchmarks.chunking_scale", "--one-index", f"{mb:g}",
               "--chunk-size", str(chunk_size), "--overlap", str(overlap), "--sizes", ""]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode != 0 or not lines:
            print(f"index of {mb:g} MB failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}", flush=True)
            continue
        r = json.loads(lines[-1])
        base = base or r["seconds"] / mb
        print(f"end-to-end index of {mb:g} MB: {r['seconds']:.1f} s ({r['seconds'] / mb / base:.2f} s/MB vs first), "
              f"peak RSS {r['peak_rss_mb']:.0f} MB; chunks {r['chunks']}, entities {r['entities']}, "
              f"relationships {r['relationships']}, communities {r['communities']}", flush=True)
        print("  seconds per stage: " + ", ".join(f"{k} {v:.1f}" for k, v in r["step_seconds"].items()))
        print("  peak RSS MB after: " + ", ".join(f"{k} {v:.0f}" for k, v in r["step_peak_rss_mb"].items()), flush=True)


def one_index(mb: float, chunk_size: int, overlap: int) -> None:
    """Index a synthetic file of `mb` MB offline and print one JSON line with the build's figures."""
    import json

    from indexer import build_index

    config = IndexerConfig(chunk_size=chunk_size, chunk_overlap=overlap)
    tmp = Path(tempfile.mkdtemp(prefix="chunking-scale-"))
    try:
        (tmp / "docs").mkdir()
        (tmp / "docs" / "big.md").write_text(synthetic_text(int(mb * 1_000_000), seed=2), encoding="utf-8")
        started = time.perf_counter()
        report = build_index(tmp / "docs", tmp / "index", config=config, progress=False)
        seconds = time.perf_counter() - started
        print(json.dumps({
            "mb": mb, "seconds": seconds, "peak_rss_mb": peak_rss_mb(), "chunks": report.chunks,
            "entities": report.entities, "relationships": report.relationships, "communities": report.communities,
            "step_seconds": report.step_seconds, "step_peak_rss_mb": report.step_peak_rss_mb,
        }))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
