"""CPU time of the indexer's offline graph merge, streamed from the extractions file and in memory.

    python -m benchmarks.graph_merge [--mb 5] [--repeat 2] [--text-file FILE]

Generates the same synthetic Markdown text as `benchmarks.chunking_scale` (or reads `--text-file`), chunks it
with the indexer's defaults, extracts every chunk offline into an extractions file in a temporary folder (not
timed), then times `merge_offline` the two ways the pipeline runs it: reading the file afresh on each of its
three passes (builds above `IN_MEMORY_EXTRACTIONS` chunks) and from decoded extractions in memory. Prints the
best CPU seconds of `--repeat` runs and seconds per MB of text, and checks both ways give the same entities and
relationships. CPU time, not wall time: the machine is shared; its load average is printed beside.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from pathlib import Path

from benchmarks.chunking_scale import synthetic_text
from indexer import IndexerConfig
from indexer.chunking import document_spans
from indexer.extract_offline import ChunkExtraction, OfflineExtractor
from indexer.graph import EntityRow, RelationshipRow, merge_offline
from indexer.state import ExtractionWriter, iter_extractions

Merged = tuple[list[EntityRow], list[RelationshipRow]]


def _best_cpu(run: Callable[[], Merged], repeat: int) -> tuple[float, Merged]:
    """Best CPU seconds of `repeat` runs, and the last run's result."""
    seconds = []
    for _ in range(max(1, repeat)):
        started = time.process_time()
        result = run()
        seconds.append(time.process_time() - started)
    return min(seconds), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=5.0, help="MB of synthetic text (ignored with --text-file)")
    parser.add_argument("--text-file", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)
    text = (args.text_file.read_text(encoding="utf-8") if args.text_file
            else synthetic_text(int(args.mb * 1_000_000), seed=2))
    mb = len(text.encode("utf-8")) / 1_000_000
    config = IndexerConfig()
    spans = document_spans(text, chunk_size=config.chunk_size, overlap=config.chunk_overlap,
                           encoding_name=config.encoding)
    ids = [f"c{i:07d}" for i in range(len(spans))]
    tmp = Path(tempfile.mkdtemp(prefix="graph-merge-"))
    try:
        extractor = OfflineExtractor(max_entities_per_sentence=config.max_entities_per_sentence)
        started = time.process_time()
        with ExtractionWriter(tmp, "offline") as writer:
            for cid, (start, end, _tokens) in zip(ids, spans, strict=True):
                writer.write(cid, extractor.extract(text[start:end]))
        extract_s = time.process_time() - started
        path = writer.path

        def passes(keys: AbstractSet[str] | None = None) -> Iterable[ChunkExtraction]:
            return (v for _, v in iter_extractions(path, "offline", ChunkExtraction, keys))

        def streamed() -> Merged:
            return merge_offline(ids, passes)

        decoded = dict(iter_extractions(path, "offline", ChunkExtraction))

        def in_memory() -> Merged:
            return merge_offline(ids, decoded)

        load = os.getloadavg()[0]
        streamed_s, streamed_out = _best_cpu(streamed, args.repeat)
        memory_s, memory_out = _best_cpu(in_memory, args.repeat)
        entities, relationships = memory_out
        print(f"{mb:.1f} MB of text, {len(ids)} chunks, extractions file {path.stat().st_size / 1e6:.1f} MB "
              f"(extraction {extract_s:.1f} s CPU, not part of the figures); "
              f"{len(entities)} entities, {len(relationships)} relationships")
        print(f"merge streamed (3 passes over the file): {streamed_s:.2f} s CPU = {streamed_s / mb:.2f} s/MB")
        print(f"merge in memory:                         {memory_s:.2f} s CPU = {memory_s / mb:.2f} s/MB")
        print(f"same output: {streamed_out == memory_out}; best of {args.repeat}; "
              f"load average {load:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        return 0 if streamed_out == memory_out else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
