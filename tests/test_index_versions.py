"""Older GraphRAG layouts (v0, v1, v2), CSV tables, synthetic indexes and the token-count cache.

The v0/v1/v2 folders are rebuilt from Operation Dulce by renaming files and columns the way those
GraphRAG versions wrote them, so every version must load to the same records.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.synthetic_index import write_synthetic_index
from shared_context import load_index
from shared_context.derived_store import cache_root
from shared_context.index import Index
from shared_context.loaders.columns import split_list_value

DULCE_COUNTS = (39, 107, 10, 5)


def _counts(index: Index) -> tuple[int, int, int, int]:
    return len(index.entities), len(index.relationships), len(index.community_reports), len(index.text_units)


@pytest.fixture(scope="module")
def dulce_frames(dulce_path: Path) -> dict[str, pd.DataFrame]:
    names = [
        "entities",
        "relationships",
        "communities",
        "community_reports",
        "text_units",
        "covariates",
        "documents",
    ]
    return {n: pd.read_parquet(dulce_path / f"{n}.parquet") for n in names}


@pytest.fixture(scope="module")
def dulce_v3(dulce_path: Path) -> Index:
    return load_index(dulce_path)


def _nodes(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """v0/v1 create_final_nodes: one row per (entity, level) with its community (NaN when none)."""
    ents, comms = frames["entities"], frames["communities"]
    title_of = dict(zip(ents["id"], ents["title"], strict=True))
    rows = []
    for level in sorted(comms["level"].unique()):
        member = {e: int(c) for c, es in zip(comms["community"], comms["entity_ids"], strict=True)
                  for e in es if int(comms.loc[comms["community"] == c, "level"].iloc[0]) == level}  # fmt: skip
        for eid, deg in zip(ents["id"], ents["degree"], strict=True):
            rows.append({"id": eid, "title": title_of[eid], "community": member.get(eid, np.nan),
                         "level": int(level), "degree": int(deg)})  # fmt: skip
    return pd.DataFrame(rows)


def _write_v0(frames: dict[str, pd.DataFrame], out: Path) -> None:
    ents = frames["entities"].rename(columns={"title": "name"}).drop(columns=["frequency", "degree"])
    rng = np.random.default_rng(0)
    ents["description_embedding"] = [rng.normal(size=8).tolist() for _ in range(len(ents))]
    ents.to_parquet(out / "create_final_entities.parquet")
    _nodes(frames).to_parquet(out / "create_final_nodes.parquet")
    rels = frames["relationships"].rename(columns={"combined_degree": "rank"})
    rels.to_parquet(out / "create_final_relationships.parquet")
    reports = frames["community_reports"].drop(columns=["id", "human_readable_id", "parent", "children"])
    reports = reports.rename(columns={"rating_explanation": "rank_explanation"})
    reports["community"] = reports["community"].astype(str)
    reports.to_parquet(out / "create_final_community_reports.parquet")
    comms = frames["communities"][["community", "level", "title", "relationship_ids", "text_unit_ids"]]
    comms.assign(id=comms["community"].astype(str)).drop(columns=["community"]).to_parquet(
        out / "create_final_communities.parquet"
    )
    units = frames["text_units"].drop(columns=["human_readable_id"])
    units["document_ids"] = [[d] for d in units.pop("document_id")]
    units.to_parquet(out / "create_final_text_units.parquet")
    frames["covariates"].to_parquet(out / "create_final_covariates.parquet")
    frames["documents"].rename(columns={"text": "raw_content"}).to_parquet(
        out / "create_final_documents.parquet"
    )


def _write_v1(frames: dict[str, pd.DataFrame], out: Path) -> None:
    frames["entities"].drop(columns=["frequency", "degree"]).to_parquet(out / "create_final_entities.parquet")
    _nodes(frames).to_parquet(out / "create_final_nodes.parquet")
    frames["relationships"].to_parquet(out / "create_final_relationships.parquet")
    frames["communities"].drop(columns=["parent", "children"]).to_parquet(
        out / "create_final_communities.parquet"
    )
    reports = frames["community_reports"].drop(columns=["parent", "children"])
    reports.rename(columns={"rating_explanation": "rank_explanation"}).to_parquet(
        out / "create_final_community_reports.parquet"
    )
    units = frames["text_units"].copy()
    units["document_ids"] = [[d] for d in units.pop("document_id")]
    units.to_parquet(out / "create_final_text_units.parquet")
    frames["covariates"].to_parquet(out / "create_final_covariates.parquet")
    frames["documents"].to_parquet(out / "create_final_documents.parquet")


def _write_v2(frames: dict[str, pd.DataFrame], out: Path) -> None:
    for name, df in frames.items():
        if name == "text_units":
            df = df.copy()
            df["document_ids"] = [[d] for d in df.pop("document_id")]
        if name == "communities":
            df = df.drop(columns=["children"])
        df.to_parquet(out / f"{name}.parquet")


def _same_graph(index: Index, reference: Index) -> None:
    assert _counts(index) == _counts(reference)
    assert [e.title for e in index.entities] == [e.title for e in reference.entities]
    assert index.entity_relationships == reference.entity_relationships
    assert index.entity_text_units == reference.entity_text_units
    assert index.text_unit_entities == reference.text_unit_entities
    assert index.entity_communities == reference.entity_communities
    assert index.text_unit_document == reference.text_unit_document
    assert [r.combined_degree for r in index.relationships] == [
        r.combined_degree for r in reference.relationships
    ]
    assert [e.degree for e in index.entities] == [e.degree for e in reference.entities]
    assert [(c.community, c.level, c.parent, c.children) for c in index.communities] == [
        (c.community, c.level, c.parent, c.children) for c in reference.communities
    ]
    assert [(r.community, r.level, r.parent, r.rating_explanation) for r in index.community_reports] == [
        (r.community, r.level, r.parent, r.rating_explanation) for r in reference.community_reports
    ]
    assert len(index.claims) == len(reference.claims) == 41
    assert [d.title for d in index.documents] == [d.title for d in reference.documents]
    assert [d.text_unit_ids for d in index.documents] == [d.text_unit_ids for d in reference.documents]
    assert index.report_tokens.tolist() == reference.report_tokens.tolist()


def test_v0_create_final_layout(
    dulce_frames: dict[str, pd.DataFrame], dulce_v3: Index, tmp_path: Path
) -> None:
    _write_v0(dulce_frames, tmp_path)
    index = load_index(tmp_path)
    assert index.version == "v0"
    _same_graph(index, dulce_v3)
    # v0 report ids were community numbers; the hierarchy is rebuilt from entity membership
    assert index.community_reports[0].id == str(index.community_reports[0].community)
    assert any("hierarchy derived from entity membership" in w for w in index.warnings)
    vec = index.vectors["entity_description"]
    assert (vec.dim, len(vec), vec.column) == (8, 39, "description_embedding")
    assert vec.source == "create_final_entities.parquet"


def test_v1_create_final_layout(
    dulce_frames: dict[str, pd.DataFrame], dulce_v3: Index, tmp_path: Path
) -> None:
    _write_v1(dulce_frames, tmp_path)
    index = load_index(tmp_path)
    assert index.version == "v1"
    _same_graph(index, dulce_v3)
    assert index.source_files["entities"] == "create_final_entities.parquet"
    assert index.source_files["nodes"] == "create_final_nodes.parquet"


def test_v2_layout_without_children(
    dulce_frames: dict[str, pd.DataFrame], dulce_v3: Index, tmp_path: Path
) -> None:
    _write_v2(dulce_frames, tmp_path)
    index = load_index(tmp_path)
    assert index.version == "v2"
    _same_graph(index, dulce_v3)
    assert any("children derived from 'parent'" in w for w in index.warnings)


def test_csv_layout(dulce_frames: dict[str, pd.DataFrame], dulce_v3: Index, tmp_path: Path) -> None:
    for name, df in dulce_frames.items():
        df = df.copy()
        if name == "community_reports":
            df["findings"] = [json.dumps([dict(f) for f in fs]) for fs in df["findings"]]
        if name == "relationships":  # python-literal lists, as str(list) writes them
            df["text_unit_ids"] = [str(list(x)) for x in df["text_unit_ids"]]
        # other list columns are written as numpy's repr: ['a' 'b'] (pandas' default)
        df.to_csv(tmp_path / f"{name}.csv", index=False)
    index = load_index(tmp_path)
    assert index.version == "v3"
    assert index.stats()["format"] == "csv"
    _same_graph(index, dulce_v3)
    assert index.community_reports[0].findings == dulce_v3.community_reports[0].findings


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("['a' 'b'\n 'c']", ["a", "b", "c"]),
        ('["a", "b"]', ["a", "b"]),
        ("['a', 'b']", ["a", "b"]),
        ("a,b\nc", ["a", "b", "c"]),
        ("[1 2 3]", ["1", "2", "3"]),
        ("[]", []),
        ("", []),
        (None, []),
    ],
)
def test_split_list_value(text: str | None, expected: list[str]) -> None:
    assert [str(x) for x in split_list_value(text)] == expected


def test_synthetic_index_is_deterministic_and_loads(tmp_path: Path) -> None:
    counts = write_synthetic_index(tmp_path / "a", 400, seed=3)
    write_synthetic_index(tmp_path / "b", 400, seed=3)
    write_synthetic_index(tmp_path / "c", 400, seed=4)
    for name in ("entities", "relationships", "text_units", "community_reports"):
        a = pd.read_parquet(tmp_path / "a" / f"{name}.parquet")
        assert a.equals(pd.read_parquet(tmp_path / "b" / f"{name}.parquet"))
        assert not a.equals(pd.read_parquet(tmp_path / "c" / f"{name}.parquet"))
    index = load_index(tmp_path / "a")
    assert index.version == "v3" and index.warnings == []
    assert len(index.entities) == counts["entities"] == 400
    assert len(index.relationships) == counts["relationships"]
    assert 4 * 400 <= counts["relationships"] <= 5 * 400
    assert len(index.text_units) == 120
    assert index.levels == [0, 1, 2]
    assert len(index.community_reports) == len(index.communities) == counts["communities"]
    degrees = np.array([e.degree for e in index.entities])
    assert degrees.max() > 5 * np.median(degrees)  # power law: a few hubs
    per_unit = np.array([len(x) for x in index.text_unit_entities])
    assert 7 <= per_unit.mean() <= 12
    assert 250 <= np.median(index.text_unit_tokens) <= 420
    for comm in index.communities:
        for child in comm.children:
            assert index.communities[index.community_pos[child]].parent == comm.community
    assert all(index.communities[index.community_pos[c]].level == 0 for c in index.communities_by_level[0])


def test_token_counts_are_cached_on_disk(tmp_path: Path) -> None:
    write_synthetic_index(tmp_path / "idx", 120, seed=1)
    derived = cache_root() / "derived"
    before = set(derived.glob("*/relationship_tokens-*")) if derived.exists() else set()
    # the counts as a list: the index maps the file it wrote, which is damaged below
    want = load_index(tmp_path / "idx").relationship_tokens.tolist()
    created = set(derived.glob("*/relationship_tokens-*")) - before
    assert len(created) == 1
    entry = created.pop()
    cache_file = entry / "counts.npy"
    stamp = cache_file.stat().st_mtime_ns
    second = load_index(tmp_path / "idx")
    assert cache_file.stat().st_mtime_ns == stamp  # read, not rewritten
    assert second.relationship_tokens.tolist() == want
    # a corrupt cache is ignored and recounted, never an error
    cache_file.write_bytes(b"not an npy file")
    third = load_index(tmp_path / "idx")
    assert third.relationship_tokens.tolist() == want
    # a changed table changes the key of what is counted from it, and only of that
    table = tmp_path / "idx" / "relationships.parquet"
    assert not list(entry.parent.glob("entity_tokens-*"))  # read by no query: counted on first use only
    assert third.entity_tokens.tolist() == [third.tokenizer.count(e.description) for e in third.entities]
    assert len(list(entry.parent.glob("entity_tokens-*"))) == 1
    os.utime(table, ns=(stamp + 10**9, stamp + 10**9))
    fourth = load_index(tmp_path / "idx")
    assert len(set(derived.glob("*/relationship_tokens-*")) - before) == 2
    assert np.array_equal(fourth.entity_tokens, third.entity_tokens)  # its entry kept: entities unchanged
    assert len(list(entry.parent.glob("entity_tokens-*"))) == 1
