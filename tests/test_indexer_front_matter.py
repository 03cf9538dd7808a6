"""The indexer keeps a text file's front matter and file attributes as document metadata, which the loader reads
back and a scope selects on."""

from __future__ import annotations

from pathlib import Path

from indexer import build_index
from indexer.front_matter import split_front_matter
from shared_context import load_index
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
