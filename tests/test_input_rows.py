"""A malformed row of a table input is skipped and named with its file and line; the file's good rows are
indexed (CSV, JSONL, Parquet)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from indexer.config import IndexerError
from indexer.reader import read_input
from indexer.tabular import ColumnOptions

GOOD = [{"title": "Ada", "text": "Ada Lovelace wrote the first published program."},
        {"title": "Babbage", "text": "Charles Babbage designed the Analytical Engine in London."}]


def test_a_jsonl_file_with_one_bad_line_keeps_its_good_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from router.cli import main

    docs = tmp_path / "docs"
    docs.mkdir()
    lines = [json.dumps(GOOD[0]), '{"title": "Broken", "text": "no closing quote}', json.dumps(GOOD[1]),
             '["not", "an", "object"]', json.dumps({"title": "Number", "text": 42})]
    (docs / "rows.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = read_input(docs)
    assert [d.title for d in result.documents] == ["Ada", "Babbage"]
    assert any(n.startswith("rows.jsonl: line 2 skipped: not JSON") for n in result.notes), result.notes
    assert "rows.jsonl: line 4 skipped: not a JSON object" in result.notes
    assert "rows.jsonl: line 5 skipped: 'text' holds int, not text" in result.notes
    assert not result.skipped  # the file itself was read
    assert main(["index", str(docs), "--out", str(tmp_path / "index"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "documents 2," in out, out
    assert "rows.jsonl: line 2 skipped: not JSON" in out  # the build summary names file and line


def test_csv_rows_with_the_wrong_number_of_fields_are_skipped(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rows.csv").write_text(
        'title,text\nAda,"Ada Lovelace wrote notes,\nspread over two lines."\nBroken,one,too many\n'
        "Babbage,Charles Babbage designed the Analytical Engine.\n", encoding="utf-8")
    result = read_input(docs)
    assert [d.title for d in result.documents] == ["Ada", "Babbage"]
    assert result.documents[0].text == "Ada Lovelace wrote notes,\nspread over two lines."
    assert "rows.csv: line 4 skipped: 3 fields, the header has 2" in result.notes


def test_a_table_with_no_good_row_names_why(tmp_path: Path) -> None:
    lone = tmp_path / "bad.jsonl"
    lone.write_text("{broken\n", encoding="utf-8")
    with pytest.raises(IndexerError, match=r"bad.jsonl: no readable row \(line 1: not JSON"):
        read_input(lone)


def test_parquet_rows_are_named_by_row(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    broken = {"title": "Broken", "text": "This row group is damaged on disk. " * 5}
    rows = [GOOD[0], broken, GOOD[1], {"title": "Empty", "text": None}]
    pq.write_table(pa.Table.from_pylist(rows), docs / "rows.parquet", row_group_size=1)
    # damage the second row group's text pages (the footer, and so the other row groups, stay readable)
    column = pq.ParquetFile(docs / "rows.parquet").metadata.row_group(1).column(1)
    start = column.dictionary_page_offset or column.data_page_offset
    data = bytearray((docs / "rows.parquet").read_bytes())
    data[column.data_page_offset + 4: start + column.total_compressed_size] = b"\xff" * (
        start + column.total_compressed_size - column.data_page_offset - 4)
    (docs / "rows.parquet").write_bytes(bytes(data))
    result = read_input(docs, ColumnOptions())
    assert [d.title for d in result.documents] == ["Ada", "Babbage"]
    assert any(n.startswith("rows.parquet: row 1 skipped: unreadable") for n in result.notes), result.notes
    assert "rows.parquet: 1 rows with an empty 'text' skipped" in result.notes
