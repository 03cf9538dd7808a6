"""Index folders: builds never delete or overwrite what they did not write, failed and interrupted builds
leave the previous index untouched, and nothing in an index folder is ever unpickled."""

from __future__ import annotations

import hashlib
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engines.models.base import EmbeddingResult
from indexer import IndexerError, build_index
from indexer.extract_offline import ChunkExtraction, OfflineExtractor
from indexer.jsoncodec import CodecError, decode, encode
from indexer.state import read_extractions, write_extractions

ROOT = Path(__file__).resolve().parents[1]
DOCS = {
    "a.txt": "Ada Lovelace worked with Charles Babbage in London. Babbage designed the Analytical Engine.\n",
    "b.txt": "The Analytical Engine was never built. Lovelace wrote the first program for it in London.\n",
    "c.md": "# Notes\n\nCharles Babbage lived in London. Ada Lovelace admired the Difference Engine.\n",
}


def _docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _leftovers(out: Path) -> list[str]:
    return [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.graphroute-")]


class _Pickled:
    """Unpickling this touches `marker`: proof that a file was unpickled."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (self.marker,))


class _FailingEmbedder:
    name, dim, offline = "failing", 8, True

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def embed(self, texts: list[str]) -> EmbeddingResult:
        raise self.exc


def test_foreign_folder_is_refused_and_force_keeps_its_files(tmp_path: Path) -> None:
    docs = _docs(tmp_path)
    out = tmp_path / "mine"
    (out / "notes").mkdir(parents=True)
    (out / "notes" / "plan.txt").write_text("my plan", encoding="utf-8")
    (out / "README.txt").write_text("mine", encoding="utf-8")
    before = _snapshot(out)
    with pytest.raises(IndexerError, match=r"not a graphroute index.*--force"):
        build_index(docs, out, progress=False)
    assert _snapshot(out) == before
    build_index(docs, out, progress=False, force=True)
    after = _snapshot(out)
    assert {k: after[k] for k in before} == before  # the user's files are kept byte for byte
    assert (out / "entities.parquet").is_file() and (out / "graphroute" / "manifest.json").is_file()
    assert not _leftovers(out)


def test_foreign_index_files_are_never_replaced_even_with_force(tmp_path: Path) -> None:
    docs = _docs(tmp_path)
    out = tmp_path / "theirs"
    (out / "lancedb").mkdir(parents=True)
    (out / "lancedb" / "keep.bin").write_bytes(b"\x01\x02")
    (out / "covariates.parquet").write_bytes(b"their claims")
    (out / "entities.parquet").write_bytes(b"their entities")
    before = _snapshot(out)
    for force in (False, True):
        with pytest.raises(IndexerError, match="did not build"):
            build_index(docs, out, progress=False, force=force)
        assert _snapshot(out) == before
    assert not _leftovers(out)


def test_rebuild_keeps_user_files_inside_an_index(tmp_path: Path) -> None:
    docs = _docs(tmp_path)
    out = tmp_path / "index"
    build_index(docs, out, progress=False)
    (out / "my-notes.md").write_text("keep me", encoding="utf-8")
    (out / "graphroute" / "embedder").mkdir()
    (out / "graphroute" / "embedder" / "cache.npz").write_bytes(b"query-side cache")
    (docs / "d.txt").write_text("Charles Babbage met Ada Lovelace again in London.\n", encoding="utf-8")
    report = build_index(docs, out, progress=False)
    assert report.message.startswith("Updated")
    assert (out / "my-notes.md").read_text(encoding="utf-8") == "keep me"
    assert (out / "graphroute" / "embedder" / "cache.npz").read_bytes() == b"query-side cache"
    assert not _leftovers(out)


@pytest.mark.parametrize("exc", [RuntimeError("embedding service down"), KeyboardInterrupt()])
def test_failed_or_interrupted_build_leaves_previous_index_untouched(tmp_path: Path, exc: BaseException) -> None:
    docs = _docs(tmp_path)
    out = tmp_path / "index"
    build_index(docs, out, progress=False)
    before = _snapshot(out)
    (docs / "d.txt").write_text("A new document about Babbage.\n", encoding="utf-8")
    with pytest.raises(type(exc)):
        build_index(docs, out, progress=False, embedder=_FailingEmbedder(exc))  # type: ignore[arg-type]
    assert _snapshot(out) == before
    assert not _leftovers(out)
    fresh = tmp_path / "fresh"
    with pytest.raises(type(exc)):
        build_index(docs, fresh, progress=False, embedder=_FailingEmbedder(exc))  # type: ignore[arg-type]
    assert not fresh.exists() and not _leftovers(fresh)


def test_leftovers_of_a_killed_build_are_cleaned_and_a_swapped_out_index_restored(tmp_path: Path) -> None:
    docs = _docs(tmp_path)
    out = tmp_path / "index"
    build_index(docs, out, progress=False)
    before = _snapshot(out)
    dead = 2**22 + 12345  # above the default pid_max: no such process
    # killed between the two renames of the portable swap: the index sits under the "old" name
    out.rename(tmp_path / f".index.graphroute-old-{dead}-x")
    stale = tmp_path / f".index.graphroute-build-{dead}-y"
    (stale / "graphroute").mkdir(parents=True)
    (stale / "entities.parquet").write_bytes(b"half")
    report = build_index(docs, out, progress=False)
    assert report.noop and _snapshot(out) == before
    assert not _leftovers(out)


_CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    import indexer.cli as cli
    import indexer.pipeline as pipeline

    class SlowEmbedder:
        name, dim, offline = "slow", 8, True
        async def embed(self, texts):
            with open(sys.argv[4], "w") as fh:
                fh.write(repr(time.time()))
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
            time.sleep(60)  # synchronous work: the signal must not wait for it
            raise AssertionError("not interrupted")

    orig = pipeline.build_index
    pipeline.build_index = lambda *a, **k: orig(*a, **{**k, "embedder": SlowEmbedder()})
    sys.exit(cli.cli_main([sys.argv[2], "--out", sys.argv[3], "--no-progress"]))
    """
)


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_signals_stop_a_build_promptly_and_keep_the_previous_index(tmp_path: Path, signame: str) -> None:
    docs = _docs(tmp_path)
    out = tmp_path / "index"
    build_index(docs, out, progress=False)
    before = _snapshot(out)
    (docs / "d.txt").write_text("A new document about Babbage.\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    sent = tmp_path / "signal-sent"
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, signame, str(docs), str(out), str(sent)],
        env=env, capture_output=True, text=True, timeout=180,
    )
    assert time.time() - float(sent.read_text()) < 30, "the signal waited for the 60 s of synchronous work"
    signum = getattr(signal, signame)
    assert proc.returncode == 128 + signum, proc.stderr
    assert "interrupted" in proc.stderr and "Traceback" not in proc.stderr
    assert _snapshot(out) == before and not _leftovers(out)


def test_planted_pickles_in_an_index_are_never_loaded(tmp_path: Path) -> None:
    docs = _docs(tmp_path)
    out = tmp_path / "index"
    build_index(docs, out, progress=False)
    state = out / "graphroute"
    assert not [p.name for p in out.rglob("*") if p.suffix in (".pkl", ".joblib", ".pickle")]
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_Pickled(marker))
    for name in ("extractions.pkl", "embedder.joblib"):
        (state / name).write_bytes(payload)
    (docs / "d.txt").write_text("Charles Babbage met Ada Lovelace again in London.\n", encoding="utf-8")
    report = build_index(docs, out, progress=False)
    assert not marker.exists()
    assert any("extractions.pkl" in w and "never loaded" in w for w in report.warnings)
    # a pickle under the data file's own names is refused as data, not run
    (state / "extractions.json.gz").write_bytes(payload)
    with pytest.raises(IndexerError, match="unreadable stored extractions"):
        read_extractions(out, report.extraction, ChunkExtraction)
    from engines.models.embedding_offline import OfflineEmbedder, embedder_for_index
    from shared_context import IndexFormatError, load_index

    index = load_index(out)
    (state / "embedder.npz").write_bytes(payload)
    with pytest.raises(IndexFormatError, match=r"embedder\.npz"):
        load_index(out)  # not the embedder the build recorded
    with pytest.raises(Exception, match="not an offline embedder"):
        OfflineEmbedder.load(state / "embedder.npz")
    embedder_for_index(index, cache_dir=tmp_path / "cache")  # refits instead
    assert not marker.exists()


def test_extractions_round_trip_as_typed_json(tmp_path: Path) -> None:
    text = " ".join(DOCS.values())
    extraction = OfflineExtractor().extract(text)
    assert extraction.pairs, "the fixture should yield co-occurrence pairs (tuple keys)"
    write_extractions(tmp_path, "offline:x", {"c1": extraction})
    assert read_extractions(tmp_path, "offline:x", ChunkExtraction) == {"c1": extraction}
    assert read_extractions(tmp_path, "offline:other", ChunkExtraction) == {}
    with pytest.raises(CodecError):
        decode(ChunkExtraction, {"mentions": [["X", {"kind": 3}]], "pairs": []})
    with pytest.raises(CodecError):
        encode({"x": np.float32(1)})  # only plain values are stored


def test_an_index_reached_through_a_link_is_updated_in_place(tmp_path: Path) -> None:
    docs = _docs(tmp_path)
    real = tmp_path / "real-index"
    build_index(docs, real, progress=False)
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    (docs / "d.txt").write_text("Charles Babbage met Ada Lovelace again in London.\n", encoding="utf-8")
    report = build_index(docs, link, progress=False)
    assert report.message.startswith("Updated")
    assert link.is_symlink() and (real / "graphroute" / "manifest.json").is_file()
    assert not _leftovers(real)


def test_stored_offline_lines_are_type_checked_and_nan_scores_still_read() -> None:
    import json
    import math

    from indexer.state import decode_extraction_line

    def line(mentions: list[Any], pairs: list[Any] | None = None, lowercase: list[Any] | None = None) -> str:
        payload = {"s": ["Ada met Charles."], "m": mentions, "p": pairs or [], "l": lowercase or []}
        return json.dumps(["c1", "offline", payload])  # allow_nan: how `json` writes a NaN score

    good = ["ADA", "name", 2, True, [["PERSON", 1.0]], [[0.5, 0]], False]
    ext = decode_extraction_line(line([good], [["ADA", "CHARLES", 1.0, math.nan, 0]], [["met", 1]]),
                                 ChunkExtraction)
    assert ext.mentions["ADA"].sentences == [(0.5, "Ada met Charles.")] and ext.lowercase == {"met": 1}
    assert math.isnan(ext.pairs[("ADA", "CHARLES")].score)  # orjson refuses NaN; the line still reads
    # the merge's later passes ask for their keys only: other mentions, pairs and lowercase counts are left out
    other = ["CHARLES", "name", 1, True, [], [[0.1, 0]], False]
    pairs = [["ADA", "CHARLES", 1.0, 0.5, 0], ["ADA", "ADA II", 1.0, 0.5, 0]]
    some = decode_extraction_line(line([good, other], pairs, [["met", 1]]), ChunkExtraction, {"ADA", "ADA II"})
    assert list(some.mentions) == ["ADA"] and list(some.pairs) == [("ADA", "ADA II")] and some.lowercase == {}
    for bad in ([[1, *good[1:]]],  # a key that is not a string
                [[*good[:2], True, *good[3:]]],  # a count that is a boolean
                [[*good[:5], [[0.5, "0"]], False]]):  # a sentence reference that is not an integer
        with pytest.raises(CodecError):
            decode_extraction_line(line(bad), ChunkExtraction)
    with pytest.raises(CodecError):
        decode_extraction_line(line([good], lowercase=[["met", 1.5]]), ChunkExtraction)


def test_the_offline_merge_pauses_the_cyclic_collector_and_restores_it() -> None:
    import gc

    from indexer.graph import merge_offline

    seen: list[bool] = []

    def passes(keys: object = None) -> Iterator[ChunkExtraction]:
        seen.append(gc.isenabled())
        return iter([OfflineExtractor().extract(" ".join(DOCS.values()))])

    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            merge_offline(["c1"], passes, min_phrase_chunks=1)
            assert gc.isenabled() is enabled  # left as the caller had it
        finally:
            gc.enable()
    assert seen == [False] * 6  # three passes per merge, none with the collector running
