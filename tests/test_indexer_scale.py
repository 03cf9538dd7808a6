"""Indexing at scale: extractions are streamed, per-entity state is bounded, tables are written in batches.

These assert the properties that keep a 100 MB build's memory flat (see `benchmarks.chunking_scale
--index-mb`), not timings.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from indexer import SourceDocument, pipeline
from indexer.extract_offline import ChunkExtraction, Mention, PairStat
from indexer.graph import MAX_DESCRIPTION_CANDIDATES, merge_offline
from indexer.output import BATCH_ROWS, write_table
from indexer.pipeline import build_index_from_documents
from indexer.state import EXTRACTIONS, STATE_DIR, iter_extraction_lines

NAMES = [f"KEEPER {chr(65 + i)}" for i in range(12)]


def _chunk(ci: int) -> ChunkExtraction:
    """One chunk naming every keeper, with a fresh sentence for each (as a long file would)."""
    ext = ChunkExtraction()
    for k, name in enumerate(NAMES):
        detail = " ".join(f"w{ci}x{j}" for j in range(30))  # a long sentence, none like another
        sentence = f"{name.title()} crossed bridge {ci} carrying cargo {k} past {detail}."
        ext.mentions[name] = Mention(kind="name", count=1, non_initial=True, type_votes={"PERSON": 1.0},
                                     sentences=[(float(ci % 7), sentence)])
        other = NAMES[(k + 1) % len(NAMES)]
        key = (name, other) if name < other else (other, name)
        ext.pairs[key] = PairStat(1.0, float(ci % 5), sentence)
    return ext


def _merge_peak(n_chunks: int) -> tuple[int, int]:
    """Peak traced bytes of merging `n_chunks` streamed extractions, and how many passes read them."""
    passes = 0

    def stream(keys: object = None) -> Iterator[ChunkExtraction]:  # keys: what later passes need (all here)
        nonlocal passes
        passes += 1
        return (_chunk(ci) for ci in range(n_chunks))

    ids = [f"c{ci:06d}" for ci in range(n_chunks)]
    tracemalloc.start()
    try:
        ents, rels = merge_offline(ids, stream, min_phrase_chunks=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert {e.title for e in ents} == set(NAMES) and all(e.frequency == n_chunks for e in ents)
    assert all(len(r.text_unit_ids) == n_chunks for r in rels)
    return peak, passes


def test_merge_memory_does_not_grow_with_the_number_of_chunks() -> None:
    small, passes = _merge_peak(300)
    large, _ = _merge_peak(1200)
    assert passes == 3  # streamed afresh for each pass, never collected into a list
    # 4x the chunks: per-entity state (candidate sentences) is capped, so only the chunk-id lists grow
    assert large < 1.6 * small, (small, large)


def test_descriptions_come_from_a_capped_candidate_list() -> None:
    ids = [f"c{ci}" for ci in range(3 * MAX_DESCRIPTION_CANDIDATES)]
    chunks = {cid: _chunk(ci) for ci, cid in enumerate(ids)}
    ents, _rels = merge_offline(ids, chunks, min_phrase_chunks=1, description_sentences=3)
    for e in ents:
        assert e.description.count(e.title.title()) == 3  # three sentences, each about the entity
        assert "bridge 6 " in e.description  # a best-scored (score 6) sentence, the earliest first


def test_tables_are_written_in_row_groups_from_a_generator(tmp_path: Path) -> None:
    n = 2 * BATCH_ROWS + 5
    consumed = 0

    def rows() -> Iterator[dict[str, object]]:
        nonlocal consumed
        for i in range(n):
            consumed += 1
            yield {"id": f"e{i}", "human_readable_id": i, "title": f"T{i}", "type": "CONCEPT", "description": "",
                   "text_unit_ids": ["u"], "frequency": 1, "degree": 0}

    path = write_table(tmp_path, "entities", rows())
    meta = pq.ParquetFile(path).metadata
    assert consumed == n and meta.num_rows == n and meta.num_row_groups == 3
    empty = write_table(tmp_path, "relationships", iter(()))
    assert pq.read_table(empty).num_rows == 0 and "text_unit_ids" in pq.read_table(empty).column_names


def _docs(n: int) -> list[SourceDocument]:
    return [
        SourceDocument(title=f"d{i}.txt", text=(
            f"Captain Ilse Varga{i} sailed from Port Amrell to Serin Isle. The Harbour Guild of Port Amrell paid "
            f"Captain Ilse Varga{i} in silver. Serin Isle traded salt with the Harbour Guild."))
        for i in range(n)
    ]


@pytest.mark.parametrize("update", [False, True])
def test_streamed_merge_builds_the_same_index_as_the_in_memory_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, update: bool
) -> None:
    docs = _docs(8)
    tables = {}
    for mode, limit in (("memory", 10_000), ("streamed", 0)):
        monkeypatch.setattr(pipeline, "IN_MEMORY_EXTRACTIONS", limit)
        out = tmp_path / mode
        report = build_index_from_documents(docs[:6] if update else docs, out, progress=False)
        if update:
            report = build_index_from_documents(docs, out, progress=False)
            assert report.new_chunks == 2
        tables[mode] = {t: pd.read_parquet(out / f"{t}.parquet") for t in ("entities", "relationships", "text_units")}
        stored = [cid for cid, _line in iter_extraction_lines(out / STATE_DIR / EXTRACTIONS, report.extraction)]
        assert stored == tables[mode]["text_units"]["id"].tolist()  # one line per chunk, in chunk order
    for t in ("entities", "relationships", "text_units"):
        pd.testing.assert_frame_equal(tables["memory"][t], tables["streamed"][t])
