"""Offline index builds: GraphRAG-v3 schema, referential integrity, communities, reports, vectors, load_index."""

from __future__ import annotations

import hashlib
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fixture_paths import CAROL, DULCE
from fixture_paths import SAMPLE_CORPUS as SAMPLE

from indexer import IndexBuildReport, IndexerConfig, IndexerError, SourceDocument, build_index, cli_main
from indexer.output import EXTRA_COLUMNS
from indexer.pipeline import build_index_from_documents
from shared_context import load_index

TABLES = ("entities", "relationships", "communities", "community_reports", "text_units", "documents")


@pytest.fixture(scope="module")
def sample_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, IndexBuildReport]:
    out = tmp_path_factory.mktemp("sample") / "index"
    report = build_index(SAMPLE, out, progress=False)
    return out, report


def _read(out: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(out / f"{name}.parquet")


def test_report_counts_match_tables(sample_index: tuple[Path, IndexBuildReport]) -> None:
    out, report = sample_index
    assert report.documents == len(list(SAMPLE.glob("*.md"))) >= 24
    assert report.chunks == report.new_chunks == len(_read(out, "text_units"))
    assert report.entities == len(_read(out, "entities")) > 50
    assert report.relationships == len(_read(out, "relationships")) > 100
    assert report.communities == len(_read(out, "communities")) == report.reports == len(_read(out, "community_reports"))
    assert set(report.step_seconds) >= {"chunk", "extract", "graph", "communities", "reports", "embed", "write"}
    assert not report.noop and report.message.startswith("Built index")


@pytest.mark.parametrize("table", TABLES)
def test_schema_matches_microsoft_graphrag_index(sample_index: tuple[Path, IndexBuildReport], table: str) -> None:
    out, _ = sample_index
    ours = pq.read_schema(out / f"{table}.parquet")
    # documents: Operation Dulce's (a GraphRAG 3 build naming the column `metadata`; the Carol fixture's older
    # pipeline called it `raw_data`)
    theirs = pq.read_schema((DULCE if table == "documents" else CAROL) / f"{table}.parquet")
    # GraphRAG's columns, in its order; then ours that its readers ignore (the text units' boilerplate share)
    assert ours.names == theirs.names + list(EXTRA_COLUMNS.get(table, ()))
    for field in theirs:
        # list element names differ between writers ("element" vs "item"); compare value types
        o, t = ours.field(field.name).type, field.type
        if hasattr(t, "value_type"):
            assert str(o.value_type) == str(t.value_type), field.name
        elif field.name == "metadata":  # null-typed where no document has any; ours hold file attributes (a dict)
            assert pa.types.is_null(o) or pa.types.is_struct(o) or pa.types.is_string(o), field.name
        else:
            assert o == t, field.name


def test_ids_unique_and_references_consistent(sample_index: tuple[Path, IndexBuildReport]) -> None:
    out, _ = sample_index
    ents, rels, tus = _read(out, "entities"), _read(out, "relationships"), _read(out, "text_units")
    comms, reps, docs = _read(out, "communities"), _read(out, "community_reports"), _read(out, "documents")
    for df in (ents, rels, tus, comms, reps, docs):
        assert df["id"].is_unique
        assert list(df["human_readable_id"]) == sorted(df["human_readable_id"])
    assert list(ents["human_readable_id"]) == list(range(len(ents)))
    assert ents["title"].is_unique
    tu_ids, ent_ids, rel_ids = set(tus["id"]), set(ents["id"]), set(rels["id"])
    assert all(set(x) <= tu_ids for x in ents["text_unit_ids"])
    assert all(set(x) <= tu_ids for x in rels["text_unit_ids"])
    assert set(rels["source"]) | set(rels["target"]) <= set(ents["title"])
    # text unit reverse lookups agree with the forward lists
    for _, tu in tus.iterrows():
        assert set(tu["entity_ids"]) == set(ents.loc[ents["text_unit_ids"].map(lambda x, i=tu["id"]: i in set(x)), "id"])
        assert set(tu["relationship_ids"]) <= rel_ids
    assert all(hashlib.sha512(t.encode()).hexdigest() == i for t, i in zip(tus["text"], tus["id"], strict=True))
    assert all(hashlib.sha512(t.encode()).hexdigest() == i for t, i in zip(docs["text"], docs["id"], strict=True))
    assert set(tus["document_id"]) <= set(docs["id"])
    # degrees as GraphRAG computes them
    deg = pd.concat([rels["source"], rels["target"]]).value_counts()
    assert all(int(deg.get(t, 0)) == d for t, d in zip(ents["title"], ents["degree"], strict=True))
    d = dict(zip(ents["title"], ents["degree"], strict=True))
    assert all(d[s] + d[t] == c for s, t, c in zip(rels["source"], rels["target"], rels["combined_degree"], strict=True))
    assert all(set(x) <= ent_ids for x in comms["entity_ids"])
    assert all(set(x) <= rel_ids for x in comms["relationship_ids"])


def test_communities_hierarchy_and_coverage(sample_index: tuple[Path, IndexBuildReport]) -> None:
    out, _ = sample_index
    ents, rels, comms = _read(out, "entities"), _read(out, "relationships"), _read(out, "communities")
    by_num = {int(c["community"]): c for _, c in comms.iterrows()}
    assert (comms["human_readable_id"] == comms["community"]).all()
    assert (comms["title"] == "Community " + comms["community"].astype(str)).all()
    assert (comms["size"] == comms["entity_ids"].map(len)).all()
    assert comms["size"].max() <= 10 or (comms["level"].max() > 0)
    for _, c in comms.iterrows():
        if c["parent"] == -1:
            assert c["level"] == 0
        else:
            parent = by_num[int(c["parent"])]
            assert parent["level"] == c["level"] - 1
            assert int(c["community"]) in list(parent["children"])
            assert set(c["entity_ids"]) <= set(parent["entity_ids"])
        for child in c["children"]:
            assert int(by_num[int(child)]["parent"]) == int(c["community"])
    # every entity, even one outside the largest component, has a level-0 community, exactly one
    level0 = comms[comms["level"] == 0]
    members = [e for x in level0["entity_ids"] for e in x]
    assert sorted(members) == sorted(ents["id"])
    # relationship_ids are exactly the intra-community edges
    title_of = dict(zip(ents["id"], ents["title"], strict=True))
    rel_by_id = rels.set_index("id")
    for _, c in comms.iterrows():
        titles = {title_of[i] for i in c["entity_ids"]}
        expected = set(rels.loc[rels["source"].isin(titles) & rels["target"].isin(titles), "id"])
        assert set(c["relationship_ids"]) == expected
        assert set(c["text_unit_ids"]) >= {tu for r in c["relationship_ids"] for tu in rel_by_id.loc[r, "text_unit_ids"]}


def test_reports_follow_graphrag_format(sample_index: tuple[Path, IndexBuildReport]) -> None:
    out, _ = sample_index
    reps, comms = _read(out, "community_reports"), _read(out, "communities")
    assert sorted(reps["community"]) == sorted(comms["community"])
    for _, r in reps.iterrows():
        findings = list(r["findings"])
        assert findings, r["community"]
        sections = "\n\n".join(f"## {f['summary']}\n\n{f['explanation']}" for f in findings)
        assert r["full_content"] == f"# {r['title']}\n\n{r['summary']}\n\n{sections}"
        assert r["id"] == hashlib.sha512(r["full_content"].encode()).hexdigest()
        assert 0.0 <= r["rank"] <= 10.0 and r["rating_explanation"]
        assert "[Data: Entities (" in r["full_content"]
    assert reps["rank"].max() == 10.0  # the largest, best-connected community gets the top rank


def test_entities_types_and_chinese(sample_index: tuple[Path, IndexBuildReport]) -> None:
    out, _ = sample_index
    ents, rels = _read(out, "entities"), _read(out, "relationships")
    types = dict(zip(ents["title"], ents["type"], strict=True))
    assert types["AMARA OSEI"] == "PERSON"  # "Dr. Amara Osei", "Osei" and "Amara Osei" merged
    assert "OSEI" not in types
    assert types["HAIXING MARINE ENGINEERING"] == "ORGANIZATION"
    assert types["RIVER TANE"] == "GEO"
    assert types["2021 FLOOD"] == "EVENT"
    assert types["李文"] == "PERSON" and types["宁波"] == "GEO"
    assert types["海星海洋工程公司"] == "ORGANIZATION"
    osei = ents.set_index("title").loc["AMARA OSEI"]
    # description: up to three source sentences about her, from different documents
    assert str(osei["description"]).count("Osei") >= 3 and len(osei["description"]) > 200
    assert osei["frequency"] >= 10 and len(osei["text_unit_ids"]) == osei["frequency"]
    pairs = set(zip(rels["source"], rels["target"], strict=True))
    assert ("AMARA OSEI", "TIDEWATER TURBINE PROGRAMME") in pairs or ("TIDEWATER TURBINE PROGRAMME", "AMARA OSEI") in pairs
    zh = rels[rels["source"].str.contains("李文") | rels["target"].str.contains("李文")]
    assert len(zh) > 0 and any("李文" in d for d in zh["description"])


def test_vectors_and_load_index(sample_index: tuple[Path, IndexBuildReport]) -> None:
    import json

    import lancedb

    out, _ = sample_index
    manifest = json.loads((out / "graphroute" / "manifest.json").read_text())
    dim = manifest["embedder"]["dim"]
    assert (out / manifest["embedder"]["path"]).is_file()
    db = lancedb.connect(str(out / "lancedb"))
    expected = {"entity_description": "entities", "community_full_content": "community_reports", "text_unit_text": "text_units"}
    for name, table in expected.items():
        t = db.open_table(name).to_arrow()
        assert t.schema.names == ["id", "vector"]
        assert str(t.schema.field("vector").type) == f"fixed_size_list<item: float>[{dim}]"
        assert sorted(t.column("id").to_pylist()) == sorted(_read(out, table)["id"])
    index = load_index(out)
    assert len(index.entities) == len(_read(out, "entities"))
    assert len(index.community_reports) == len(_read(out, "community_reports"))
    for name in expected:
        vt = index.vectors[name]
        assert vt.dim == dim and len(vt) > 0
        assert np.allclose(np.linalg.norm(vt.matrix, axis=1), 1.0, atol=1e-4)


def test_unchanged_rerun_is_a_noop(sample_index: tuple[Path, IndexBuildReport]) -> None:
    out, _ = sample_index
    before = {p.name: p.stat().st_mtime_ns for p in out.glob("*.parquet")}
    again = build_index(SAMPLE, out, progress=False)
    assert again.noop and again.new_chunks == 0
    assert "up to date" in again.summary()
    assert {p.name: p.stat().st_mtime_ns for p in out.glob("*.parquet")} == before


def test_bad_input_gives_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(IndexerError, match="does not exist"):
        build_index(tmp_path / "missing", tmp_path / "out", progress=False)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "scan.xyz").write_bytes(b"\x00\x01")
    with pytest.raises(IndexerError, match="no readable"):
        build_index(tmp_path / "docs", tmp_path / "out", progress=False)
    with pytest.raises(IndexerError, match="chunk_overlap"):
        IndexerConfig(chunk_size=100, chunk_overlap=100)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "entities.parquet").write_bytes(b"not ours")
    with pytest.raises(IndexerError, match="did not build"):
        build_index(SAMPLE, foreign, progress=False)
    assert (foreign / "entities.parquet").read_bytes() == b"not ours"
    assert cli_main([str(tmp_path / "missing"), "--out", str(tmp_path / "o"), "--no-progress"]) == 2
    assert cli_main([str(SAMPLE), "--out", str(tmp_path / "o"), "--encoding", "nope", "--no-progress"]) == 2


def test_novel_slice_builds_and_loads(tmp_path: Path) -> None:
    book = pd.read_parquet(CAROL / "documents.parquet").iloc[0]  # the book of the Christmas Carol index
    text = str(book["text"])[40_000:70_000]
    doc = SourceDocument(title=str(book["title"]), text=text)
    out = tmp_path / "novel"
    report = build_index_from_documents([doc], out, config=IndexerConfig(chunk_size=600, chunk_overlap=50), progress=False)
    assert report.chunks >= 10 and report.entities > 20 and report.communities > 0
    tus = _read(out, "text_units")
    # chunks are exact, overlapping slices of the source text
    assert all(t in text for t in tus["text"])
    assert tus["n_tokens"].max() <= 600
    index = load_index(out)
    assert len(index.text_units) == report.chunks
    assert {"entity_description", "community_full_content", "text_unit_text"} <= set(index.vectors)


def test_skips_unsupported_files_with_a_named_warning(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Marta Lindqvist leads the Saltbridge Battery Project in Saltbridge.", encoding="utf-8")
    (docs / "b.pdf").write_bytes(b"%PDF-1.4")
    (docs / "c.csv").write_text("x,y\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reasons go to the build summary, never as raw warnings
        report = build_index(docs, tmp_path / "out", progress=False)
    skipped = " ".join(report.skipped_files)
    assert "c.csv: no column 'text'" in skipped and "b.pdf: could not be parsed" in skipped
    assert report.documents == 1


def test_a_corpus_without_relationships_builds(tmp_path: Path) -> None:
    """Names but no relationship between them: communities have no relationship inside (once a ValueError)."""
    docs = [SourceDocument(title="memo", text="Acme Rockets ordered nine valves."),
            SourceDocument(title="note", text="Zenith Mills bought a kiln.")]
    report = build_index_from_documents(docs, tmp_path / "index", progress=False)
    assert report.relationships == 0 and (tmp_path / "index" / "communities.parquet").is_file()
