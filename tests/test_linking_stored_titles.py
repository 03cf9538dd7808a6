"""Entity linking over stored (memory-mapped) title tables links exactly as over the in-memory dicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.synthetic_index import write_synthetic_index
from shared_context import load_index
from shared_context.key_map import KeyMap, load_key_maps
from shared_context.linking import link_entities
from shared_context.search_backend import SearchParams, configure_search


def test_key_map_lookups_match_a_dict() -> None:
    mapping = {"b": [2], "a": [1, 5], "ä": [7], "": [0], "ab": [3]}
    key_map = KeyMap.build(mapping)
    for key, positions in mapping.items():
        assert key_map.get(key) == positions and key in key_map
    assert key_map.get("c") is None and "c" not in key_map and key_map.get("aa", []) == []


def test_stored_title_tables_link_like_the_dicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(tmp_path / "cache"))
    write_synthetic_index(tmp_path / "idx", 150, seed=5)
    in_memory = load_index(tmp_path / "idx")  # 150 < persist_min_rows: dicts
    titles = [e.title for e in in_memory.entities]
    questions = [
        f"What is the relationship between {titles[3].title()} and {titles[40]}?",
        f"Tell me about {titles[7].lower()}",
        "Who funds the harbour council?",
        f"{titles[0]}, {titles[1]} and {titles[2]}",
    ]
    expected = [[(e.position, round(e.score, 9)) for e in link_entities(in_memory, q).entities] for q in questions]
    for _ in range(2):  # first builds and stores the tables, second maps them
        stored = load_index(tmp_path / "idx")
        configure_search(stored, SearchParams(persist_min_rows=0))
        got = [[(e.position, round(e.score, 9)) for e in link_entities(stored, q).entities] for q in questions]
        assert got == expected
    folders = list((tmp_path / "cache" / "search").glob("linking.title_keys-*"))
    assert len(folders) == 1
    maps = load_key_maps(folders[0])
    assert maps is not None and set(maps[0]) == {"exact", "alias", "upper"}
    (folders[0] / "exact.key_bytes.npy").write_bytes(b"broken")  # a damaged store is rebuilt, not trusted
    damaged = load_index(tmp_path / "idx")
    configure_search(damaged, SearchParams(persist_min_rows=0))
    assert [[(e.position, round(e.score, 9)) for e in link_entities(damaged, q).entities] for q in questions] == expected
