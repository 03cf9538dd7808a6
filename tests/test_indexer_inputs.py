"""Input reading: encodings detected and reported, binary files refused, links outside the input skipped,
every supported format read from a real file, table inputs with GraphRAG's column options."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fixture_paths import CAROL

from indexer import IndexerError, build_index
from indexer.decode import NotText, decode_text
from indexer.reader import read_input
from indexer.tabular import ColumnOptions
from shared_context import load_index

LATIN = "Café au lait à Zürich: naïve façade, Müller und Søren trafen Ångström."
CHINESE = "张伟在宁波主持了海星合作项目的启动仪式，并与李娜讨论了电池研究。"


def test_latin1_with_an_even_byte_count_is_not_utf16() -> None:
    raw = LATIN.encode("latin-1")
    assert len(raw) % 2 == 0  # the case that used to decode as UTF-16 mojibake
    assert decode_text(raw) == (LATIN, "cp1252")


@pytest.mark.parametrize(
    ("raw", "encoding"),
    [
        (CHINESE.encode("utf-8"), "utf-8"),
        (b"\xef\xbb\xbf" + CHINESE.encode("utf-8"), "utf-8 (BOM)"),
        (CHINESE.encode("utf-16"), "utf-16 (BOM)"),
        (CHINESE.encode("gb18030"), "gb18030"),
        ("Plain text, no mark at all.".encode("utf-16-le"), "utf-16-le"),
        ("“Smart quotes” — and a dash".encode("cp1252"), "cp1252"),
    ],
)
def test_encodings_are_detected(raw: bytes, encoding: str) -> None:
    text, found = decode_text(raw)
    assert found == encoding
    assert "\ufffd" not in text and text.strip() in (CHINESE, "Plain text, no mark at all.", "“Smart quotes” — and a dash")


@pytest.mark.parametrize("raw", [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), b"abc\x01\x02\x03\x04" * 50])
def test_binary_content_is_refused(raw: bytes) -> None:
    with pytest.raises(NotText, match="binary"):
        decode_text(raw)


def test_folder_reading_reports_encodings_binaries_and_unsafe_links(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n", encoding="utf-8")
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "latin.txt").write_bytes(LATIN.encode("latin-1"))
    (docs / "zh.md").write_bytes(CHINESE.encode("gb18030"))
    (docs / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (docs / "sub" / "inner.txt").write_text("Inner text about the Analytical Engine.", encoding="utf-8")
    (docs / "passwd.txt").symlink_to(outside / "passwd")
    (docs / "elsewhere").symlink_to(outside, target_is_directory=True)
    (docs / "inner-link.txt").symlink_to(docs / "sub" / "inner.txt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = read_input(docs)
    titles = sorted(d.title for d in result.documents)
    assert titles == ["inner-link.txt", "latin.txt", "zh.md"]  # a link inside the input is read (once)
    assert "sub/inner.txt: same text as inner-link.txt" in result.skipped
    texts = {d.title: d.text for d in result.documents}
    assert texts["latin.txt"] == LATIN and texts["zh.md"] == CHINESE
    assert result.encodings["latin.txt"] == "cp1252" and result.encodings["zh.md"] == "gb18030"
    skipped = "\n".join(result.skipped)
    assert "image.txt: refused, binary content" in skipped
    assert "passwd.txt: symbolic link to a file outside the input folder" in skipped
    assert "elsewhere/: symbolic link to a folder outside" in skipped
    assert "root:x" not in " ".join(texts.values())


def test_no_readable_documents_says_why_per_file(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "blob.txt").write_bytes(b"\x00\x01\x02\x03" * 10)
    (docs / "empty.md").write_text("   \n", encoding="utf-8")
    (docs / "scan.xyz").write_bytes(b"data")
    with pytest.raises(IndexerError) as err:
        read_input(docs)
    message = str(err.value)
    assert "blob.txt: refused, binary" in message and "empty.md: no text" in message
    assert "scan.xyz: unsupported file type .xyz" in message


def test_rich_formats_from_real_files(tmp_path: Path) -> None:
    import docx
    from fpdf import FPDF

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "page.html").write_text(
        "<html><head><title>T</title><style>p{color:red}</style><script>var leak = 1;</script></head>"
        "<body><h1>Engines</h1><p>Babbage designed the <b>Analytical Engine</b>.</p>"
        "<table><tr><th>Year</th><th>Event</th></tr><tr><td>1843</td><td>Notes published</td></tr></table></body></html>",
        encoding="utf-8",
    )
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.cell(text="Ada Lovelace wrote the first published program.")
    pdf.output(str(docs / "notes.pdf"))
    document = docx.Document()
    document.add_heading("Difference Engine", level=1)
    document.add_paragraph("Charles Babbage built a prototype in London.")
    table = document.add_table(rows=2, cols=2)
    for r, (a, b) in enumerate((("Part", "Count"), ("Gears", "2000"))):
        table.cell(r, 0).text, table.cell(r, 1).text = a, b
    document.save(str(docs / "report.docx"))
    result = read_input(docs)
    texts = {d.title: d.text for d in result.documents}
    assert texts["page.html"] == "Engines\n\nBabbage designed the Analytical Engine.\n\nYear | Event\n1843 | Notes published"
    assert "Ada Lovelace wrote the first published program." in texts["notes.pdf"]
    assert texts["report.docx"].splitlines() == [
        "Difference Engine", "", "Charles Babbage built a prototype in London.", "", "Part | Count", "Gears | 2000"
    ]
    assert result.encodings == {"page.html": "utf-8", "notes.pdf": "pdf", "report.docx": "docx"}


def test_table_inputs_use_the_column_options_and_keep_other_columns(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    rows = [
        {"doc": "d1", "name": "First", "body": "Ada Lovelace met Charles Babbage in London.", "year": 1833},
        {"doc": "d2", "name": "Second", "body": "Babbage designed the Analytical Engine in London.", "year": 1837},
        {"doc": "d3", "name": "Empty", "body": "", "year": 1840},
    ]
    pq.write_table(pa.Table.from_pylist(rows), docs / "a.parquet")
    (docs / "b.jsonl").write_text("\n".join(json.dumps({**r, "doc": r["doc"] + "j"}) for r in rows[:2]), encoding="utf-8")
    pd.DataFrame(rows[:1]).assign(doc="d1c", body="Lovelace wrote notes in Latin-1: café").to_csv(
        docs / "c.csv", index=False, encoding="latin-1"
    )
    options = ColumnOptions(text="body", title="name", id="doc")
    result = read_input(docs, options)
    by_id = {d.id: d for d in result.documents}
    assert set(by_id) == {"d1", "d2", "d1j", "d2j", "d1c"}
    assert by_id["d1"].title == "First" and by_id["d1"].metadata == {"doc": "d1", "year": 1833}
    assert by_id["d1c"].text.endswith("café") and result.encodings["c.csv"] == "cp1252"
    assert any("a.parquet: 1 rows with an empty 'body' skipped" in n for n in result.notes)
    with pytest.raises(IndexerError, match=r"no column 'content' for --text-column \(columns: doc, name, body, year\)"):
        read_input(docs, ColumnOptions(text="content"))
    report = build_index(docs, tmp_path / "index", progress=False, columns=options)
    assert report.documents == 5
    index = load_index(tmp_path / "index")
    assert {d.title: d.metadata.get("year") for d in index.documents}["Second"] == 1837


def test_real_parquet_corpus_reads_with_title_column(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    units = CAROL / "text_units.parquet"  # a GraphRAG writer's parquet: 42 rows, list columns beside the text
    shutil.copy(units, docs / units.name)  # a link would lead outside the input folder
    result = read_input(docs, ColumnOptions(text="text", title="id"))
    assert len(result.documents) == 42
    assert all(d.title and d.text for d in result.documents)
    assert result.encodings == {units.name: "parquet"}


def test_a_single_parquet_file_is_indexed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from router.cli import main

    rows = [
        {"question": "q1", "context": "Ada Lovelace met Charles Babbage in London in 1833."},
        {"question": "q2", "context": "Babbage designed the Analytical Engine; Lovelace wrote its first program."},
    ]
    table = tmp_path / "medical.parquet"
    pq.write_table(pa.Table.from_pylist(rows), table)
    assert main(["index", str(table), "--out", str(tmp_path / "index"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "medical.parquet: no column 'text' for --text-column (columns: question, context)" in err
    assert main(["index", str(table), "--out", str(tmp_path / "index"), "--no-progress",
                 "--text-column", "context"]) == 0
    index = load_index(tmp_path / "index")
    assert sorted(d.title for d in index.documents) == ["medical.parquet#0", "medical.parquet#1"]
    assert {d.metadata["question"] for d in index.documents} == {"q1", "q2"}


def test_a_single_text_file_and_a_glob(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "a" / "b").mkdir(parents=True)
    (docs / "one.md").write_text("Ada Lovelace wrote notes on the engine.", encoding="utf-8")
    (docs / "a" / "two.md").write_text("Babbage built the Difference Engine.", encoding="utf-8")
    (docs / "a" / "b" / "three.md").write_text("Menabrea described the engine in French.", encoding="utf-8")
    (docs / "a" / "skip.txt").write_text("Not matched by the pattern.", encoding="utf-8")
    single = read_input(docs / "a" / "two.md")
    assert [(d.title, d.text) for d in single.documents] == [("two.md", "Babbage built the Difference Engine.")]
    matched = read_input(str(docs / "**" / "*.md"))
    assert [d.title for d in matched.documents] == ["a/b/three.md", "a/two.md", "one.md"]
    several = read_input([docs / "one.md", str(docs / "a" / "*.txt")])
    assert [d.title for d in several.documents] == ["one.md", "skip.txt"]
    with pytest.raises(IndexerError, match=r"the pattern .*\*\.pdf matches no file"):
        read_input(str(docs / "*.pdf"))
    with pytest.raises(IndexerError, match="does not exist"):
        read_input(docs / "missing.md")


def test_a_glob_skips_links_that_lead_outside_its_folder(tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("root:x:0:0", encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ok.txt").write_text("Lovelace and Babbage corresponded.", encoding="utf-8")
    (docs / "leak.txt").symlink_to(outside)
    result = read_input(str(docs / "*.txt"))
    assert [d.title for d in result.documents] == ["ok.txt"]
    assert any(s.startswith("leak.txt: symbolic link to a file outside") for s in result.skipped)
