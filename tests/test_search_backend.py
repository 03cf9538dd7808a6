"""The search seam: exact in-memory and LanceDB on-disk backends agree; thresholds pick the backend;
stored BM25 postings are reused on a second open and rebuilt when the index changes."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from fixture_paths import FIXTURES

from shared_context.bm25 import BM25
from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.lexical_store import SortedVocab, StoredPhrases
from shared_context.linking import _entity_index, _table_index, lexical_search, lexical_top, link_entities
from shared_context.records import Entity, TextUnit
from shared_context.search_backend import (
    LanceLexical,
    LanceVector,
    SearchParams,
    VectorTable,
    configure_search,
    search_params,
    vector_search,
)
from shared_context.search_store import field_folder
from shared_context.text_unit_selection import question_units

WORDS = ["river", "harbour", "archive", "mission", "treaty", "signal", "winter", "market", "bridge", "valley", "council", "ledger", "lantern", "merchant", "orchard", "quarry", "beacon", "garrison", "tunnel"]
CHINESE = ["林黛玉葬花", "贾宝玉读书", "薛宝钗进京", "王熙凤理家"]
N_ENT, N_UNITS, DIM = 400, 300, 16
# IVF_PQ builds in well under a second at this size; the HNSW default gets its own test below
ON_DISK = SearchParams(persist_min_rows=0, lexical_on_disk_min_rows=1, vector_ann_min_rows=1, ann_index="IVF_PQ")
IN_MEMORY = SearchParams(persist_min_rows=10**9)
QUERIES = ["river treaty", "harbour signal market", "lantern", "ledger orchard quarry beacon", "林黛玉", "nothing"]


def _records() -> tuple[list[Entity], list[TextUnit], list[VectorTable]]:
    rng = np.random.default_rng(7)

    def text(n: int) -> str:
        return " ".join(rng.choice(WORDS, size=n).tolist())

    entities = [
        Entity(id=f"e{i}", short_id=str(i), title=f"{WORDS[i % len(WORDS)].upper()} {i}", description=text(int(rng.integers(3, 15))))
        for i in range(N_ENT)
    ]
    units = [TextUnit(id=f"t{j}", short_id=str(j), text=text(int(rng.integers(5, 40)))) for j in range(N_UNITS)]
    for j, phrase in enumerate(CHINESE):
        units[10 * j + 3] = TextUnit(id=f"t{10 * j + 3}", short_id=str(10 * j + 3), text=f"{phrase}。{units[j].text}")
    centres = rng.standard_normal((8, DIM)).astype(np.float32)

    def clustered(n: int) -> np.ndarray:
        return centres[rng.integers(0, 8, size=n)] + 0.4 * rng.standard_normal((n, DIM)).astype(np.float32)

    vectors = [
        VectorTable.build("entity_description", np.arange(N_ENT), clustered(N_ENT), "test"),
        VectorTable.build("text_unit_text", np.arange(N_UNITS), clustered(N_UNITS), "test"),
    ]
    return entities, units, vectors


def _index(params: SearchParams) -> Index:
    entities, units, vectors = _records()
    index = index_from_records(entities=entities, relationships=[], text_units=units, vectors=vectors)
    configure_search(index, params)
    return index


@pytest.fixture(scope="module")
def pair() -> tuple[Index, Index]:
    return _index(IN_MEMORY), _index(ON_DISK)


def test_thresholds_select_the_backend(pair: tuple[Index, Index]) -> None:
    exact, disk = pair
    assert isinstance(lexical_search(exact, "text_units"), BM25)
    assert isinstance(vector_search(exact, "text_unit_text"), VectorTable)
    assert isinstance(lexical_search(disk, "text_units"), LanceLexical)
    assert isinstance(lexical_search(disk, "entities"), LanceLexical)
    assert isinstance(vector_search(disk, "text_unit_text"), LanceVector)
    # exactly at the threshold the on-disk backend serves; one row below, memory does
    at = _index(SearchParams(lexical_on_disk_min_rows=N_UNITS, vector_ann_min_rows=N_UNITS + 1))
    assert isinstance(lexical_search(at, "text_units"), LanceLexical)
    assert isinstance(vector_search(at, "text_unit_text"), VectorTable)


@pytest.mark.parametrize("table", ["text_units", "entities"])
def test_lance_fts_gives_the_in_memory_bm25_top_results_and_scores(pair: tuple[Index, Index], table: str) -> None:
    exact, disk = pair
    seen = 0
    for query in QUERIES:
        want_pos, want_scores = lexical_top(exact, table, query, 10)  # type: ignore[arg-type]
        got_pos, got_scores = lexical_top(disk, table, query, 10)  # type: ignore[arg-type]
        assert got_pos.tolist() == want_pos.tolist(), query
        np.testing.assert_allclose(got_scores, want_scores, rtol=1e-4)
        seen += len(want_pos)
    assert seen > 30  # the queries do match: the comparison is not between empty lists


def test_chinese_text_is_found_by_the_fts_path(pair: tuple[Index, Index]) -> None:
    _, disk = pair
    positions, _ = lexical_top(disk, "text_units", "林黛玉", 5)
    assert positions.tolist()[:1] == [3]
    assert lexical_top(disk, "text_units", "宝钗", 5)[0].tolist()[:1] == [23]


@pytest.mark.parametrize("ann_index", ["IVF_PQ", "IVF_HNSW_SQ"])
def test_ann_gives_the_exact_vector_top_results(pair: tuple[Index, Index], ann_index: str) -> None:
    exact, disk = pair
    if ann_index != ON_DISK.ann_index:
        disk = _index(ON_DISK.model_copy(update={"ann_index": ann_index}))
    rng = np.random.default_rng(1)
    names = ("text_unit_text", "entity_description") if disk is pair[1] else ("text_unit_text",)
    for name in names:
        table = vector_search(exact, name)
        ann = vector_search(disk, name)
        assert isinstance(table, VectorTable) and isinstance(ann, LanceVector)
        for _ in range(5):
            q = table.matrix[int(rng.integers(0, len(table)))] + 0.1 * rng.standard_normal(DIM).astype(np.float32)
            want = table.search(q, 10)
            got = ann.search(q, 10)
            assert [p for p, _ in got] == [p for p, _ in want]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-4)


def test_linking_and_unit_search_agree_across_backends(pair: tuple[Index, Index]) -> None:
    exact, disk = pair
    table = vector_search(exact, "entity_description")
    assert isinstance(table, VectorTable)
    units = vector_search(exact, "text_unit_text")
    assert isinstance(units, VectorTable)
    for i, query in enumerate(["What about RIVER 0 and the treaty?", "harbour signal", "lantern orchard"]):
        for vector in (None, table.matrix[i * 37]):
            want = link_entities(exact, query, query_vector=vector, k=10)
            got = link_entities(disk, query, query_vector=vector, k=10)
            assert got.positions == want.positions, (query, vector is None)
            np.testing.assert_allclose([e.score for e in got.entities], [e.score for e in want.entities], atol=1e-5)
        want_units = question_units(exact, query, units.matrix[i], depth=20)
        got_units = question_units(disk, query, units.matrix[i], depth=20)
        assert got_units.lexical == want_units.lexical and got_units.vector == want_units.vector


# ---------------------------------------------------------------------------- stored postings


def _carol_copy(tmp_path: Path) -> Path:
    source = FIXTURES / "christmas_carol_graphrag_index"
    target = tmp_path / "carol"
    shutil.copytree(source, target)
    return target


def _load(path: Path) -> Index:
    from shared_context import load_index

    index = load_index(path)
    configure_search(index, SearchParams(persist_min_rows=0))
    return index


def test_stored_postings_are_reused_on_second_open_and_rebuilt_when_the_index_changes(tmp_path: Path) -> None:
    path = _carol_copy(tmp_path)
    first = _load(path)
    folder = field_folder(first, "bm25.text_units", lambda: [])
    assert not folder.exists()
    built = _table_index(first, "text_units")  # built from the texts on first open, stored, mapped back
    assert (folder / "meta.json").exists() and isinstance(built.vocab, SortedVocab)
    query = "Scrooge counting-house Marley"
    want = lexical_top(first, "text_units", query, 10)

    second = _load(path)
    stored = _table_index(second, "text_units")
    assert isinstance(stored.vocab, SortedVocab)  # read back, not rebuilt
    assert isinstance(stored.matrix.data.base, np.memmap)  # a plain view of the map
    got = lexical_top(second, "text_units", query, 10)
    assert got[0].tolist() == want[0].tolist()
    np.testing.assert_allclose(got[1], want[1])
    assert isinstance(_entity_index(first).exact, dict)
    assert isinstance(_entity_index(second).exact, StoredPhrases)  # title phrases read back too
    for text in (query, "What did Bob Cratchit and the Ghost of Christmas Past say?"):
        want_link = link_entities(first, text, k=8)
        got_link = link_entities(second, text, k=8)
        assert got_link.positions == want_link.positions and got_link.unknown_names == want_link.unknown_names
        assert [e.exact for e in got_link.entities] == [e.exact for e in want_link.entities]
    assert any(e.exact for e in link_entities(second, "Bob Cratchit", k=3).entities)

    # a changed table file is a new index content: new postings, which see the new text
    stale = _load(path)  # loaded before the change, first searched after it
    units = pq.read_table(path / "text_units.parquet")
    texts = units.column("text").to_pylist()
    texts[0] = texts[0] + " zyxquokka"
    pq.write_table(units.set_column(units.column_names.index("text"), "text", [texts]), path / "text_units.parquet")
    # its tables are keyed by the new files but checked against its own texts: never the new content
    assert lexical_top(stale, "text_units", "zyxquokka", 3)[0].tolist() == []
    assert lexical_top(stale, "text_units", query, 10)[0].tolist() == want[0].tolist()
    changed = _load(path)
    new_folder = field_folder(changed, "bm25.text_units", lambda: [])
    assert new_folder != folder
    stale_meta = (new_folder / "meta.json").read_text()  # what `stale` stored there for its own texts
    _table_index(changed, "text_units")
    assert (new_folder / "meta.json").read_text() != stale_meta  # rebuilt for the new content
    assert lexical_top(changed, "text_units", "zyxquokka", 3)[0].tolist() == [0]
    assert lexical_top(second, "text_units", "zyxquokka", 3)[0].tolist() == []


def test_search_section_of_graphroute_toml_is_validated_and_applied(pair: tuple[Index, Index]) -> None:
    from engines.basic import BasicSearch
    from engines.config import ConfigError, config_from_mapping
    from engines.models.offline import OfflineChatModel

    with pytest.raises(ConfigError, match=r"search.vector_ann_min_rows: must be >= 1"):
        config_from_mapping({"search": {"vector_ann_min_rows": 0}}, env={})
    with pytest.raises(ConfigError, match=r"search.ann_index"):
        config_from_mapping({"search": {"ann_index": "LSH"}}, env={})
    config = config_from_mapping({"search": {"lexical_on_disk_min_rows": 5, "nprobes": 4}}, env={})
    index = _index(SearchParams())
    BasicSearch(index, OfflineChatModel(), config=config)
    assert search_params(index).lexical_on_disk_min_rows == 5 and search_params(index).nprobes == 4
    assert isinstance(lexical_search(index, "text_units"), LanceLexical)


def test_on_disk_tables_are_built_once_per_content_and_reopened(pair: tuple[Index, Index]) -> None:
    _, disk = pair
    lexical_top(disk, "text_units", "river", 5)
    vector_search(disk, "text_unit_text")
    texts = [u.text for u in disk.text_units]
    folder = field_folder(disk, "fts.text_units", lambda: texts)
    ann_folders = sorted(p for p in folder.parent.iterdir() if p.name.startswith("ann.text_unit_text"))
    markers = [folder / "COMPLETE", *(f / "COMPLETE" for f in ann_folders)]
    assert len(markers) >= 2 and all(m.exists() for m in markers)
    before = [m.stat().st_mtime_ns for m in markers]
    again = _index(ON_DISK)  # a second open of the same content
    assert lexical_top(again, "text_units", "river", 5)[0].tolist() == lexical_top(disk, "text_units", "river", 5)[0].tolist()
    units = vector_search(again, "text_unit_text")
    assert isinstance(units, LanceVector)
    assert [m.stat().st_mtime_ns for m in markers] == before  # opened, not rebuilt
