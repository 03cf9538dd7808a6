"""Chunking: cuts on paragraph, line and sentence boundaries, table rows and headings kept whole, overlap
starting at a boundary, and the document hashed once (it used to be hashed per chunk: quadratic)."""

from __future__ import annotations

import itertools

import pytest

import indexer.reader
from indexer.chunking import chunk_documents
from indexer.reader import SourceDocument

TABLE = "| year | event | place |\n|---|---|---|\n" + "".join(
    f"| {1800 + i} | event number {i} happened | city {i} |\n" for i in range(40)
)
PROSE = " ".join(f"Sentence {i} tells what the engine did in year {1800 + i}." for i in range(80))
TEXT = f"# Report\n\nAn opening paragraph. It has two sentences.\n\n{TABLE}\n## Narrative\n\n{PROSE}\n"


def _chunks(text: str, size: int = 120, overlap: int = 30) -> list:
    return chunk_documents([SourceDocument("t.md", text)], chunk_size=size, overlap=overlap, encoding_name="o200k_base")


def test_chunks_end_and_start_on_boundaries() -> None:
    chunks = _chunks(TEXT)
    assert len(chunks) > 6
    for c in chunks[:-1]:
        tail = c.text.rstrip(" ")
        assert tail.endswith(("\n", ".")), repr(tail[-40:])
    for c in chunks[1:]:
        head = c.text.lstrip()
        assert head[:1] in ("|", "#", "S", "A"), repr(head[:40])  # a row, a heading or a sentence start


def test_table_rows_and_headings_stay_whole() -> None:
    chunks = _chunks(TEXT)
    for c in chunks:
        for line in c.text.strip("\n").splitlines():
            if line.startswith("|"):
                assert line.endswith("|"), repr(line)
        lines = [line for line in c.text.splitlines() if line.strip()]
        if c is not chunks[-1]:
            assert not lines[-1].startswith("#"), "a chunk ends on a heading"


def test_overlap_repeats_whole_units_and_everything_is_covered() -> None:
    chunks = _chunks(TEXT)
    for a, b in itertools.pairwise(chunks):
        assert a.char_start < b.char_start <= a.char_end  # progress, and no gap
    assert chunks[0].char_start == 0 and chunks[-1].char_end == len(TEXT)


def test_a_unit_longer_than_the_window_is_cut() -> None:
    text = "word " * 2000  # no boundary at all
    chunks = _chunks(text, size=100, overlap=10)
    assert all(c.n_tokens <= 100 for c in chunks) and chunks[-1].char_end == len(text)


def test_the_document_is_hashed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = indexer.reader.sha512_hex

    def counting(text: str) -> str:
        calls.append(len(text))
        return real(text)

    monkeypatch.setattr(indexer.reader, "sha512_hex", counting)
    doc = SourceDocument("big.txt", PROSE * 20)
    chunks = chunk_documents([doc], chunk_size=100, overlap=10, encoding_name="o200k_base")
    assert len(chunks) > 20
    assert calls.count(len(doc.text)) == 1


def test_tokenising_in_segments_gives_the_same_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    import indexer.chunking as chunking

    text = TEXT + "北风能源合作社在宁波签署了协议。" * 50 + "\n" + TEXT
    whole = chunking.token_char_offsets(text, "o200k_base")
    monkeypatch.setattr(chunking, "SEGMENT_CHARS", 400)
    pieces = chunking.token_char_offsets(text, "o200k_base")
    assert len(chunking._segment_starts(text)) > 5
    assert pieces[0] == 0 and bool((pieces[1:] > pieces[:-1]).all())
    assert abs(len(pieces) - len(whole)) <= len(chunking._segment_starts(text))  # cuts fall where tiktoken splits


def test_stored_spans_are_reused_and_damaged_ones_recomputed() -> None:
    text = "".join(f"Sentence number {i} of the reused document. " for i in range(200))
    doc = SourceDocument("t.md", text)
    spans: dict = {}
    first = chunk_documents([doc], chunk_size=60, overlap=10, encoding_name="o200k_base", spans=spans)
    assert list(spans) == [doc.id] and len(spans[doc.id]) == len(first)
    again = chunk_documents([doc], chunk_size=60, overlap=10, encoding_name="o200k_base", spans=dict(spans))
    assert again == first
    # a stored cut is taken as it is (no tokenising): proof the cache is what cut the text
    (chunk,) = chunk_documents([doc], chunk_size=60, overlap=10, encoding_name="o200k_base", spans={doc.id: [(0, 15, 4)]})
    assert (chunk.text, chunk.n_tokens) == (text[:15], 4)
    for damaged in ([(0, len(text) + 5, 3)], [(10, 5, 3)], [(20, 40, 5), (0, 10, 2)]):
        assert chunk_documents([doc], chunk_size=60, overlap=10, encoding_name="o200k_base", spans={doc.id: damaged}) == first
