"""The indexer keeps a text file's front matter and file attributes as document metadata, which the loader reads
back and a scope selects on."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from fixture_paths import DULCE

from indexer import build_index
from indexer.front_matter import split_front_matter
from indexer.output import metadata_type
from shared_context import load_index
from shared_context.loaders.integrity import sha256_file
from shared_context.scope import Scope, in_scope_documents


def test_front_matter_is_metadata_not_text() -> None:
    meta, text, note = split_front_matter("---\nyear: 2024\ncustomer: acme\ntags: [a, b]\nnested: {x: 1}\n---\nBody.\n")
    assert meta == {"year": 2024, "customer": "acme", "tags": ["a", "b"]} and text == "Body.\n" and note is None
    assert split_front_matter("No front matter.\n---\nx: 1\n---\n") == ({}, "No front matter.\n---\nx: 1\n---\n", None)
    kept, same, why = split_front_matter("---\n- a list\n---\nBody")
    assert kept == {} and same.startswith("---") and why is not None and "not a mapping" in why


def test_metadata_reaches_the_index_and_the_scope(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "acme.md").write_text("---\nyear: 2024\ncustomer: acme\n---\nAcme Rockets ordered nine valves from "
                                  "Pellow Foundry in March.\n", encoding="utf-8")
    (docs / "zenith.md").write_text("---\nyear: 2023\ncustomer: zenith\n---\nZenith Mills returned four pumps to "
                                    "Pellow Foundry in June.\n", encoding="utf-8")
    (docs / "notes.txt").write_text("Pellow Foundry moved its kiln in April.\n", encoding="utf-8")
    build_index(docs, tmp_path / "index", progress=False)
    ix = load_index(tmp_path / "index")
    by_title = {d.title: d for d in ix.documents}
    assert by_title["acme.md"].metadata["customer"] == "acme" and by_title["acme.md"].metadata["year"] == 2024
    assert by_title["notes.txt"].metadata["path"] == "notes.txt" and by_title["notes.txt"].metadata["suffix"] == ".txt"
    assert "customer:" not in by_title["acme.md"].text
    titles = [ix.documents[d].title for d in in_scope_documents(ix, Scope(where={"customer": "acme", "year": 2024}))]
    assert titles == ["acme.md"]
    assert [ix.documents[d].title for d in in_scope_documents(ix, Scope(where={"suffix": ".md"}))] == \
        sorted(["acme.md", "zenith.md"], key=lambda t: [d.title for d in ix.documents].index(t))


def _documents_table(index: Path) -> pa.Table:
    return pq.read_table(index / "documents.parquet")


def test_metadata_is_graphrag_v3s_metadata_column(tmp_path: Path) -> None:
    """Front matter, table columns and file attributes are written to `metadata`, in GraphRAG v3's column order
    (that of the Operation Dulce index, a GraphRAG 3 build), and `where=` selects on them in the fresh index."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "memo.md").write_text("---\nyear: 2024\ncustomer: acme\n---\nAcme Rockets ordered nine valves from Pellow "
                                  "Foundry in March.\n", encoding="utf-8")
    (docs / "orders.csv").write_text("title,text,region\nnorth-order,Pellow Foundry cast two bells for Zenith Mills.,north\n"
                                     "south-order,Zenith Mills bought a kiln from Pellow Foundry.,south\n", encoding="utf-8")
    (docs / "calls.jsonl").write_text(json.dumps({"title": "call-1", "text": "Ida Brenn of Zenith Mills phoned Pellow Foundry.",
                                                  "customer": "zenith"}) + "\n", encoding="utf-8")
    build_index(docs, tmp_path / "index", progress=False)
    table = _documents_table(tmp_path / "index")
    assert table.schema.names == pq.read_schema(DULCE / "documents.parquet").names
    assert "raw_data" not in table.schema.names and pa.types.is_struct(table.schema.field("metadata").type)
    written = {r["title"]: {k: v for k, v in (r["metadata"] or {}).items() if v is not None}
               for r in table.select(["title", "metadata"]).to_pylist()}
    assert written["memo.md"]["customer"] == "acme" and written["memo.md"]["suffix"] == ".md"  # front matter, file
    assert written["north-order"]["region"] == "north"  # a CSV column
    assert written["call-1"]["customer"] == "zenith"  # a JSONL field
    ix = load_index(tmp_path / "index")
    titled = lambda s: sorted(ix.documents[d].title for d in in_scope_documents(ix, s))  # noqa: E731
    assert titled(Scope(where={"customer": "zenith"})) == ["call-1"]
    assert titled(Scope(where={"region": "north"})) == ["north-order"]
    assert titled(Scope(where={"year": 2024})) == ["memo.md"]


def test_where_still_works_on_an_index_with_raw_data(tmp_path: Path) -> None:
    """An index our earlier builds wrote keeps its metadata as JSON text in `raw_data`: the loader still reads it."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "acme.md").write_text("---\ncustomer: acme\n---\nAcme Rockets ordered nine valves from Pellow Foundry.\n", encoding="utf-8")
    (docs / "zenith.md").write_text("---\ncustomer: zenith\n---\nZenith Mills returned four pumps to Pellow Foundry.\n", encoding="utf-8")
    out = tmp_path / "index"
    build_index(docs, out, progress=False)
    table = _documents_table(out)
    old_form = [json.dumps({k: v for k, v in m.items() if v is not None}) for m in table.column("metadata").to_pylist()]
    table = table.drop_columns(["metadata"]).append_column("raw_data", pa.array(old_form, pa.string()))
    pq.write_table(table, out / "documents.parquet")
    manifest = out / "graphroute" / "manifest.json"  # as that build recorded its own documents table
    recorded = json.loads(manifest.read_text(encoding="utf-8"))
    recorded["tables"]["documents.parquet"] = sha256_file(out / "documents.parquet")
    manifest.write_text(json.dumps(recorded), encoding="utf-8")
    ix = load_index(out)
    assert [ix.documents[d].title for d in in_scope_documents(ix, Scope(where={"customer": "zenith"}))] == ["zenith.md"]


def test_metadata_a_struct_cannot_hold_is_json_text_keeping_each_value() -> None:
    rows = [{"metadata": {"year": 2024, "tags": ["a"]}}, {"metadata": {"year": "2024-25"}}, {"metadata": None},
            {"metadata": {}}]
    assert metadata_type(rows) == pa.string()
    assert [r["metadata"] and json.loads(r["metadata"]) for r in rows] == [
        {"year": 2024, "tags": ["a"]}, {"year": "2024-25"}, None, None]
    same = [{"metadata": {"year": 2024, "tags": ["a"]}}, {"metadata": {"year": 2023, "region": "north"}}]
    kind = metadata_type(same)
    assert pa.types.is_struct(kind) and kind.field("year").type == pa.int64()
    assert metadata_type([{"metadata": None}]) == pa.null()
