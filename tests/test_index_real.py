"""load_index on the two real GraphRAG indexes and a LightRAG-shaped graph made from one: row counts, versions, adjacency, token counts, vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shared_context import IndexFormatError, load_index
from shared_context.index import Index
from shared_context.search_backend import VectorTable


@pytest.fixture(scope="module")
def dulce(dulce_path: Path) -> Index:
    return load_index(dulce_path)


@pytest.fixture(scope="module")
def carol(carol_path: Path) -> Index:
    return load_index(carol_path)


@pytest.fixture(scope="module")
def graph_only(graph_only_path: Path) -> Index:
    return load_index(graph_only_path)


@pytest.mark.parametrize(
    ("name", "counts", "version"),
    [
        ("dulce", (39, 107, 10, 5), "v3"),
        ("carol", (529, 978, 122, 42), "v3"),
        ("graph_only", (529, 978, 0, 42), "v3-partial"),
    ],
)
def test_row_counts_and_version(
    name: str, counts: tuple[int, int, int, int], version: str, request: pytest.FixtureRequest
) -> None:
    index: Index = request.getfixturevalue(name)
    got = (len(index.entities), len(index.relationships), len(index.community_reports), len(index.text_units))
    assert got == counts
    assert index.version == version
    stats = index.stats()
    assert (
        stats["entities"],
        stats["relationships"],
        stats["community_reports"],
        stats["text_units"],
    ) == counts
    assert stats["version"] == version


def test_every_entity_is_kept_even_without_a_community(carol: Index) -> None:
    members = {e for c in carol.communities for e in c.entity_ids}
    outside = [i for i, e in enumerate(carol.entities) if e.id not in members]
    assert len(outside) == 25  # GraphRAG would drop these whenever community_level is set
    assert all(carol.entity_communities[i] == [] for i in outside)
    assert carol.stats()["entities_without_community"] == 25


def test_id_maps_point_at_the_right_records(carol: Index) -> None:
    for pos in (0, 17, len(carol.entities) - 1):
        entity = carol.entities[pos]
        assert carol.entity_pos[entity.id] == pos
        assert carol.entity_by_title[entity.title] == pos
        assert carol.entity_title(pos) == entity.title
    for number, pos in carol.report_pos.items():
        assert carol.community_reports[pos].community == number
    for number, pos in carol.community_pos.items():
        assert carol.communities[pos].community == number
    assert all(carol.relationships[p].id == i for i, p in carol.relationship_pos.items())
    assert all(carol.claims[p].id == i for i, p in carol.claim_pos.items())


def test_relationship_adjacency_is_complete_and_sorted(carol: Index) -> None:
    endpoints = carol.relationship_endpoints
    assert endpoints.shape == (978, 2) and endpoints.dtype == np.int64
    listed: dict[int, int] = {}
    for ent, rels in enumerate(carol.entity_relationships):
        for r in rels:
            assert ent in endpoints[r].tolist()
            listed[r] = listed.get(r, 0) + 1
        keys = [(-carol.relationships[r].combined_degree, -carol.relationships[r].weight, r) for r in rels]
        assert keys == sorted(keys)
    for r, (s, t) in enumerate(endpoints.tolist()):
        rel = carol.relationships[r]
        assert s == carol.entity_by_title.get(rel.source, -1)
        assert t == carol.entity_by_title.get(rel.target, -1)
        expected = len({x for x in (s, t) if x >= 0})
        assert listed.get(r, 0) == expected


def test_dangling_relationship_endpoints_are_warnings_not_errors(carol: Index) -> None:
    dangling = int((carol.relationship_endpoints < 0).any(axis=1).sum())
    assert dangling == 84
    assert any("column 'source'" in w and "46 values name no entity" in w for w in carol.warnings)
    assert any("column 'target'" in w and "38 values" in w for w in carol.warnings)


def test_text_unit_links_both_ways(carol: Index) -> None:
    for ent, units in enumerate(carol.entity_text_units):
        assert {carol.text_units[u].id for u in units} == set(carol.entities[ent].text_unit_ids)
        for u in units:
            assert ent in carol.text_unit_entities[u]
    for u, rels in enumerate(carol.text_unit_relationships):
        assert {carol.relationships[r].id for r in rels} == set(carol.text_units[u].relationship_ids)
    assert carol.text_unit_document == [0] * 42
    doc = carol.document_for_text_unit(carol.text_units[3].id)
    assert doc is not None and doc.title == "a-christmas-carol.txt"
    assert carol.document_for_text_unit("no-such-unit") is None


def test_claims_by_subject(carol: Index) -> None:
    assert len(carol.claims) == 406
    seen = 0
    for ent, claims in enumerate(carol.entity_claims):
        for c in claims:
            assert carol.claims[c].subject == carol.entities[ent].title
        seen += len(claims)
    with_subject = sum(1 for c in carol.claims if c.subject in carol.entity_by_title)
    assert seen == with_subject > 0
    assert all(c.start_date != "NONE" for c in carol.claims)


def test_community_levels_membership_and_hierarchy(carol: Index) -> None:
    assert carol.levels == [0, 1, 2, 3]
    assert {lvl: len(c) for lvl, c in carol.communities_by_level.items()} == {0: 23, 1: 65, 2: 32, 3: 2}
    assert {lvl: len(p) for lvl, p in carol.reports_by_level.items()} == {0: 23, 1: 65, 2: 32, 3: 2}
    for ent, numbers in enumerate(carol.entity_communities):
        levels = [carol.communities[carol.community_pos[n]].level for n in numbers]
        assert levels == sorted(levels)
        for n in numbers:
            assert carol.entities[ent].id in carol.communities[carol.community_pos[n]].entity_ids
    for comm in carol.communities:
        for child in comm.children:
            assert carol.communities[carol.community_pos[child]].parent == comm.community
    report = carol.community_reports[0]
    assert report.parent == carol.communities[carol.community_pos[report.community]].parent
    assert report.findings and {"summary", "explanation"} <= set(report.findings[0])


def test_token_counts_match_the_index_tokenizer(carol: Index) -> None:
    tok = carol.tokenizer
    assert tok.encoding_name == "o200k_base"
    pairs = [
        (carol.entity_tokens, [e.description for e in carol.entities]),
        (carol.relationship_tokens, [r.description for r in carol.relationships]),
        (carol.text_unit_tokens, [t.text for t in carol.text_units]),
        (carol.report_tokens, [r.full_content for r in carol.community_reports]),
        (carol.report_summary_tokens, [r.summary for r in carol.community_reports]),
        (carol.claim_tokens, [c.description for c in carol.claims]),
    ]
    for counts, texts in pairs:
        assert counts.dtype == np.int32 and len(counts) == len(texts)
        assert counts.tolist() == [tok.count(t) for t in texts]
    assert int(carol.text_unit_tokens.min()) > 100


def test_index_is_read_only(carol: Index) -> None:
    with pytest.raises(AttributeError, match="read-only"):
        carol.version = "v9"


def test_dulce_lancedb_vectors(dulce: Index) -> None:
    assert set(dulce.vectors) == {"entity_description", "community_full_content", "text_unit_text"}
    sizes = {"entity_description": 39, "community_full_content": 10, "text_unit_text": 5}
    for name, table in dulce.vectors.items():
        assert table.dim == 3072
        assert len(table) == sizes[name]
        assert table.source == f"lancedb/{name}.lance"
        assert np.allclose(np.linalg.norm(table.matrix, axis=1), 1.0, atol=1e-5)
        assert sorted(table.positions.tolist()) == list(range(sizes[name]))
    ents = dulce.vectors["entity_description"]
    row = 7
    hits = ents.search(ents.matrix[row] * 3.0, k=3)
    assert hits[0][0] == int(ents.positions[row]) and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert len(hits) == 3 and hits[0][1] >= hits[1][1] >= hits[2][1]
    sims = ents.similarities(ents.matrix[row])
    assert sims.shape == (39,) and int(np.argmax(sims)) == row
    dulce.check_embedding_dim(3072)


def test_vector_rows_join_the_right_records(dulce_path: Path, dulce: Index) -> None:
    import lancedb

    data = lancedb.connect(str(dulce_path / "lancedb")).open_table("community_full_content").to_arrow()
    table = dulce.vectors["community_full_content"]
    report_by_id = {r.id: i for i, r in enumerate(dulce.community_reports)}
    for row, vid in enumerate(data.column("id").to_pylist()):
        pos = report_by_id[vid]
        raw = np.asarray(data.column("vector")[row].as_py(), dtype=np.float32)
        stored_row = int(np.flatnonzero(table.positions == pos)[0])
        assert np.allclose(table.matrix[stored_row], raw / np.linalg.norm(raw), atol=1e-6)


def test_dimension_mismatch_names_the_table(dulce_path: Path, dulce: Index) -> None:
    with pytest.raises(IndexFormatError) as err:
        load_index(dulce_path, embedding_dim=384)
    assert err.value.file == "lancedb/entity_description.lance"
    assert err.value.column == "vector"
    assert "lancedb/entity_description.lance: column 'vector'" in str(err.value)
    assert "3072" in str(err.value) and "384" in str(err.value)
    with pytest.raises(IndexFormatError, match=r"lancedb/\w+\.lance: column 'vector': has dimension 3072"):
        dulce.check_embedding_dim(384, model="offline-tfidf")


def test_a_graph_without_communities_loads(graph_only: Index, graph_only_path: Path) -> None:
    assert graph_only.community_reports == [] and graph_only.communities == []
    assert graph_only.levels == [] and graph_only.reports_by_level == {}
    assert any("no community reports" in w for w in graph_only.warnings)
    # LightRAG text units carry no entity_ids: they are derived by inverting entities.text_unit_ids
    assert sum(len(x) for x in graph_only.text_unit_entities) == sum(
        len(e.text_unit_ids) for e in graph_only.entities
    )
    unit = max(range(42), key=lambda j: len(graph_only.text_unit_entities[j]))
    assert graph_only.text_units[unit].entity_ids == [
        graph_only.entities[i].id for i in graph_only.text_unit_entities[unit]
    ]
    assert all(
        graph_only.entities[i].id in graph_only.text_units[unit].entity_ids
        for i in graph_only.text_unit_entities[unit]
    )
    vec = graph_only.vectors["text_unit_text"]
    assert (vec.dim, len(vec), vec.model) == (1024, 42, "bge-large-en-v1.5")
    assert load_index(graph_only_path, embedding_dim=1024).vectors["text_unit_text"].dim == 1024
    with pytest.raises(IndexFormatError) as err:
        load_index(graph_only_path, embedding_dim=384)
    assert "embeddings.text_unit_text.bge-large-en-v1.5.parquet: column 'embedding'" in str(err.value)
    assert "bge-large-en-v1.5" in str(err.value)


def test_add_vectors_validates_positions(carol: Index) -> None:
    matrix = np.eye(4, dtype=np.float32)
    with pytest.raises(IndexFormatError, match="points outside"):
        carol.add_vectors(VectorTable.build("text_unit_text", [0, 1, 2, 4200], matrix, source="offline"))
    with pytest.raises(IndexFormatError, match="unknown vector table name"):
        VectorTable.build("node_embedding", [0], matrix[:1], source="offline")
