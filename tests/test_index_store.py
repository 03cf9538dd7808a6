"""Derived structures stored by `load_index`: a second load maps them and equals a fresh computation;
a changed table rebuilds only what depends on it; a damaged entry is rebuilt, never trusted."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.synthetic_index import write_synthetic_index
from shared_context import load_index
from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.record_list import RecordList, to_arrow
from shared_context.records import CommunityReport

_ADJACENCY = (
    "entity_relationships",
    "entity_text_units",
    "text_unit_entities",
    "text_unit_relationships",
    "entity_claims",
    "entity_communities",
)
_TOKENS = ("entity_tokens", "relationship_tokens", "text_unit_tokens", "report_tokens", "claim_tokens")


@pytest.fixture()
def synthetic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(tmp_path / "cache"))
    write_synthetic_index(tmp_path / "idx", 150, seed=3)
    return tmp_path / "idx"


def _entries(cache: Path) -> dict[str, float]:
    return {p.name: p.stat().st_mtime_ns for p in (cache / "derived").glob("*/*") if not p.name.startswith(".")}


def _same(a: Index, b: Index) -> None:
    assert a.stats() == b.stats()
    assert a.warnings == b.warnings
    for name in _ADJACENCY:
        assert getattr(a, name) == getattr(b, name), name
    for name in _TOKENS:
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert np.array_equal(a.relationship_endpoints, b.relationship_endpoints)
    assert a.communities_by_level == b.communities_by_level and a.text_unit_document == b.text_unit_document
    assert [e.degree for e in a.entities] == [e.degree for e in b.entities]


def test_second_load_maps_stored_structures_equal_to_fresh(synthetic: Path, tmp_path: Path) -> None:
    first = load_index(synthetic)
    # write-then-map: the first load already reads what it stored, not the arrays and tables it decoded
    assert isinstance(first.entity_relationships.indices.base, np.memmap)
    stored_text = first.text_units.table.column("text").chunk(0).buffers()[2]  # type: ignore[attr-defined]
    assert isinstance(stored_text, pa.Buffer) and not stored_text.is_mutable
    stored = _entries(tmp_path / "cache")
    assert {n.split("-")[0] for n in stored} >= {"graph", "text_unit_links", "claims", "entity_communities"}
    second = load_index(synthetic)
    assert _entries(tmp_path / "cache") == stored  # read, none rewritten
    assert isinstance(second.entity_relationships.indices.base, np.memmap)  # a plain view of the map
    _same(first, second)
    fresh = index_from_records(  # no store: everything computed in memory
        entities=second.entities, relationships=second.relationships, text_units=second.text_units,
        communities=second.communities, community_reports=second.community_reports, claims=second.claims,
        documents=second.documents, version=second.version, path=second.path,
        source_files=second.source_files, warnings=[w for w in first.warnings if w.startswith("no ")],
    )  # fmt: skip
    for name in _ADJACENCY:
        assert getattr(fresh, name) == getattr(second, name), name


def test_changed_claims_rebuild_only_what_reads_claims(synthetic: Path, tmp_path: Path) -> None:
    load_index(synthetic)
    before = _entries(tmp_path / "cache")
    claims = pq.read_table(synthetic / "covariates.parquet")
    descriptions = [f"changed {d}" for d in claims.column("description").to_pylist()]
    claims = claims.set_column(claims.schema.get_field_index("description"), "description", pa.array(descriptions))
    pq.write_table(claims.slice(1), synthetic / "covariates.parquet")  # one claim fewer, others reworded
    changed = load_index(synthetic)
    after = _entries(tmp_path / "cache")
    new = {n.split("-")[0] for n in set(after) - set(before)}
    assert new == {"claims", "claim_tokens", "table", "records"}
    for kind in ("table-", "records-"):  # the claims' raw table and their records, nothing else
        assert [n.split("-")[1] for n in set(after) - set(before) if n.startswith(kind)] == ["covariates"]
    for name, stamp in before.items():
        assert after[name] == stamp  # graph, links, communities, other token counts untouched
    assert len(changed.claims) == claims.num_rows - 1
    assert sum(len(c) for c in changed.entity_claims) == len(changed.claims)


def test_small_tables_are_mapped_from_the_store_and_follow_a_rewritten_file(synthetic: Path, tmp_path: Path) -> None:
    first = load_index(synthetic)
    stored = {n.split("-")[1] for n in _entries(tmp_path / "cache") if n.startswith("table-")}
    assert stored == {"communities", "community_reports", "covariates", "documents"}
    second = load_index(synthetic)
    assert [c.entity_ids for c in second.communities] == [c.entity_ids for c in first.communities]
    assert [r.full_content for r in second.community_reports] == [r.full_content for r in first.community_reports]
    assert [d.text_unit_ids for d in second.documents] == [d.text_unit_ids for d in first.documents]
    # the same number of bytes in every value (titles reversed), rewritten: the stored copy is not reused
    reports = pq.read_table(synthetic / "community_reports.parquet")
    titles = [t[::-1] for t in reports.column("title").to_pylist()]
    reports = reports.set_column(reports.schema.get_field_index("title"), "title", pa.array(titles))
    pq.write_table(reports, synthetic / "community_reports.parquet")
    changed = load_index(synthetic)
    assert [r.title for r in changed.community_reports] == titles
    assert [c.entity_ids for c in changed.communities] == [c.entity_ids for c in first.communities]


def test_small_tables_reopen_as_record_lists_equal_to_the_built_lists(synthetic: Path) -> None:
    first = load_index(synthetic)
    second = load_index(synthetic)
    for name in ("communities", "community_reports", "claims"):
        built, mapped = getattr(first, name), getattr(second, name)
        assert isinstance(built, list) and isinstance(mapped, RecordList), name
        assert repr(list(mapped)) == repr(built), name  # field types too (findings, child lists)
    third = load_index(synthetic)
    report = third.community_reports[3]
    assert third.community_reports[3] is report  # a row read twice is one record
    report.title = "changed"
    assert [r.title for r in third.community_reports][3] == "changed"  # iteration keeps that record
    assert third.community_reports.column("title")[3] == "changed"
    assert third.community_reports.arrow_column("title")[3].as_py() == "changed"
    assert third.claims[2] is not None and third.claims.arrow_column("id") == second.claims.arrow_column("id")


def test_record_list_refuses_values_it_cannot_give_back() -> None:
    reports = [CommunityReport(id="a", community=1, level=0, title="t", rank=float("nan"))]
    assert to_arrow(CommunityReport, reports) is None  # NaN != NaN: not stored, the list is kept
    reports = [CommunityReport(id="a", community=1, level=0, title="t", findings=[{"k": (1, 2)}])]
    assert to_arrow(CommunityReport, reports) is None  # JSON would give a list back
    reports[0].findings = [{"summary": "s", "explanation": "e", "n": 2.5}]
    table = to_arrow(CommunityReport, reports)
    assert table is not None and list(RecordList(CommunityReport, table)) == reports


def test_damaged_entries_are_rebuilt(synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    load_index(synthetic)  # fills the cache; it maps what it wrote, so the damage below would reach it
    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(tmp_path / "reference"))
    first = load_index(synthetic)  # the same index from a store of its own
    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(tmp_path / "cache"))
    graph = next((tmp_path / "cache" / "derived").glob("*/graph-*"))
    indices = graph / "er_indices.npy"
    indices.write_bytes(indices.read_bytes()[:-16])  # truncated
    (next((tmp_path / "cache" / "derived").glob("*/text_unit_links-*")) / "meta.json").write_text("{")
    tokens = next((tmp_path / "cache" / "derived").glob("*/text_unit_tokens-*")) / "counts.npy"
    tokens.write_bytes(b"\x93NUMPY garbage" + b"\0" * (tokens.stat().st_size - 14))  # same size, bad header
    second = load_index(synthetic)
    _same(first, second)
    assert indices.stat().st_size > 0 and load_index(synthetic).entity_relationships == first.entity_relationships


def test_unwritable_cache_still_loads(synthetic: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(blocker))
    index = load_index(synthetic)
    assert len(index.entities) == 150 and sum(len(r) for r in index.entity_relationships) > 0
    assert not os.path.isdir(blocker)


def test_file_uri_index_opens_and_answers(synthetic: Path) -> None:
    from router.router import Router

    with Router.from_index(synthetic.resolve().as_uri()) as router:
        assert router.index.path == synthetic.resolve()
        title = router.index.entities[0].title
        answer = router.ask(f"Tell me about {title.title()}", mode="local")
    assert answer.engine == "local" and title.title() in answer.text


def test_remote_folder_is_mirrored_and_kept_in_step(synthetic: Path, tmp_path: Path) -> None:
    import pyarrow.fs as pafs

    from shared_context.loaders.uri import mirror

    remote = pafs.SubTreeFileSystem(str(synthetic.parent), pafs.LocalFileSystem())  # stands in for s3/gs
    dest = mirror(remote, "idx", tmp_path / "mirror", "test://idx")
    assert len(load_index(dest).entities) == 150
    copied = (dest / "entities.parquet").stat().st_mtime_ns
    (synthetic / "covariates.parquet").unlink()
    mirror(remote, "idx", dest, "test://idx")
    assert not (dest / "covariates.parquet").exists()  # gone remotely, gone here
    assert (dest / "entities.parquet").stat().st_mtime_ns == copied  # unchanged files are not copied again
    assert load_index(dest).claims == []


def test_unreachable_uri_is_a_clear_error(tmp_path: Path) -> None:
    from shared_context import IndexFormatError

    with pytest.raises(IndexFormatError, match=r"does not exist|cannot"):
        load_index((tmp_path / "missing").as_uri())
    with pytest.raises(IndexFormatError, match="cannot open the index location"):
        load_index("nosuchscheme://bucket/index")
