"""Incremental updates: a new document only adds what depends on it; settings changes force a rebuild."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from indexer import IndexerConfig, build_index

SAMPLE = Path(__file__).resolve().parents[1] / "indexer" / "sample_corpus"
NEW_DOC = "28-community-benefit-fund.md"


def _read(out: Path, name: str) -> pd.DataFrame:
    return pd.read_parquet(out / f"{name}.parquet")


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("incr")
    docs = root / "docs"
    shutil.copytree(SAMPLE, docs)
    held_back = (docs / NEW_DOC).read_text(encoding="utf-8")
    (docs / NEW_DOC).unlink()
    out = root / "index"
    first = build_index(docs, out, progress=False)
    before = {t: _read(out, t) for t in ("entities", "relationships", "text_units", "documents")}
    # the new file sorts *before* others alphabetically, to prove order does not depend on file names
    (docs / "00-new-fund-note.md").write_text(held_back, encoding="utf-8")
    second = build_index(docs, out, progress=False)
    after = {t: _read(out, t) for t in ("entities", "relationships", "text_units", "documents", "communities")}
    return {"docs": docs, "out": out, "first": first, "second": second, "before": before, "after": after}


def test_only_the_new_chunk_is_extracted(two_builds: dict) -> None:
    first, second = two_builds["first"], two_builds["second"]
    assert not second.noop and second.message.startswith("Updated index")
    assert second.documents == first.documents + 1
    assert second.new_chunks == 1 and second.chunks == first.chunks + 1
    assert second.removed_chunks == 0 and not second.full_rebuild_reason


def test_old_text_units_and_documents_unchanged(two_builds: dict) -> None:
    before, after = two_builds["before"], two_builds["after"]
    old_tu, new_tu = before["text_units"], after["text_units"]
    n = len(old_tu)
    pd.testing.assert_frame_equal(
        old_tu[["id", "human_readable_id", "text", "n_tokens", "document_id"]],
        new_tu.iloc[:n][["id", "human_readable_id", "text", "n_tokens", "document_id"]],
    )
    added = new_tu.iloc[n:]
    assert len(added) == 1 and int(added.iloc[0]["human_readable_id"]) == n
    assert "community benefit fund" in added.iloc[0]["text"]
    old_docs, new_docs = before["documents"], after["documents"]
    assert list(new_docs["id"][: len(old_docs)]) == list(old_docs["id"])
    assert new_docs.iloc[-1]["title"] == "00-new-fund-note.md"


def test_unchanged_entities_keep_ids_and_citation_numbers(two_builds: dict) -> None:
    old, new = two_builds["before"]["entities"], two_builds["after"]["entities"].set_index("title")
    kept = old[old["title"].isin(new.index)]
    assert len(kept) >= 0.95 * len(old)
    assert (new.loc[kept["title"], "id"].values == kept["id"].values).all()
    # rows of the previous build keep their relative order, so surviving ones keep their human_readable_id
    # unless an earlier row disappeared; with nothing dropped they are identical
    if len(kept) == len(old):
        assert (new.loc[kept["title"], "human_readable_id"].values == kept["human_readable_id"].values).all()
    new_chunk = two_builds["after"]["text_units"].iloc[-1]["id"]
    changed = new[new["text_unit_ids"].map(lambda ids: new_chunk in set(ids))]
    assert len(changed) > 3  # the new document mentions known and new entities
    brand_new = set(new.index) - set(old["title"])
    assert brand_new and all(new_chunk in set(new.loc[t, "text_unit_ids"]) for t in brand_new)
    # an entity the new document does not mention keeps its text units exactly
    untouched = old[~old["title"].isin(changed.index)]
    merged = untouched.merge(new.reset_index(), on="title", suffixes=("_old", "_new"))
    assert all(list(a) == list(b) for a, b in zip(merged["text_unit_ids_old"], merged["text_unit_ids_new"], strict=True))


def test_relationships_keep_ids(two_builds: dict) -> None:
    old, new = two_builds["before"]["relationships"], two_builds["after"]["relationships"]
    new_ids = set(new["id"])
    assert set(old["id"]) <= new_ids
    assert len(new) > len(old)


def test_rerun_after_update_is_noop_and_settings_change_rebuilds(two_builds: dict) -> None:
    docs, out = two_builds["docs"], two_builds["out"]
    again = build_index(docs, out, progress=False)
    assert again.noop
    rebuilt = build_index(docs, out, config=IndexerConfig(chunk_size=300, chunk_overlap=30), progress=False)
    assert "chunking settings changed" in rebuilt.full_rebuild_reason
    assert rebuilt.new_chunks == rebuilt.chunks > two_builds["second"].chunks


def test_removed_document_drops_its_chunks(two_builds: dict, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE, docs)
    out = tmp_path / "index"
    build_index(docs, out, progress=False)
    before = dict(zip(_read(out, "text_units")["id"], _read(out, "text_units")["human_readable_id"], strict=True))
    (docs / "09-haixing-press-release-zh.md").unlink()
    report = build_index(docs, out, progress=False)
    assert report.removed_chunks == 1 and report.new_chunks == 0
    tus = _read(out, "text_units")
    assert not tus["text"].str.contains("新闻稿").any()
    # surviving text units keep their citation ids (the removed one leaves a gap)
    assert dict(zip(tus["id"], tus["human_readable_id"], strict=True)) == {i: before[i] for i in tus["id"]}
