"""Load-time integrity: a folder mixing tables of different builds is refused; duplicate citation ids are
repaired deterministically with a warning; incremental updates keep surviving rows' human_readable_id."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from indexer import build_index
from shared_context import IndexFormatError, load_index

DOCS = {
    "a.txt": "Ada Lovelace worked with Charles Babbage in London. Babbage designed the Analytical Engine.\n",
    "b.txt": "Mary Somerville introduced Ada Lovelace to Charles Babbage. Somerville lived in Chelsea.\n",
    "c.txt": "Charles Babbage lived in London. Ada Lovelace admired the Difference Engine in London.\n",
}


def _write(folder: Path, docs: dict[str, str]) -> Path:
    folder.mkdir(exist_ok=True)
    for name, text in docs.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _hrids(out: Path, table: str, key: str) -> dict[str, int]:
    t = pq.read_table(out / f"{table}.parquet", columns=[key, "human_readable_id"]).to_pylist()
    return {r[key]: r["human_readable_id"] for r in t}


def test_tables_from_two_builds_are_refused_at_load(tmp_path: Path) -> None:
    old = tmp_path / "old"
    build_index(_write(tmp_path / "d1", DOCS), old, progress=False)
    new = tmp_path / "new"
    build_index(_write(tmp_path / "d2", {**DOCS, "d.txt": "Charles Darwin met Babbage in London.\n"}), new, progress=False)
    load_index(old)  # intact: loads
    shutil.copy(new / "entities.parquet", old / "entities.parquet")  # new entities beside old text units
    with pytest.raises(IndexFormatError, match=r"entities\.parquet.*different builds"):
        load_index(old)


def test_a_table_not_listed_in_the_manifest_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "index"
    build_index(_write(tmp_path / "d", DOCS), out, progress=False)
    pq.write_table(pq.read_table(out / "text_units.parquet").slice(0, 0), out / "covariates.parquet")
    with pytest.raises(IndexFormatError, match=r"covariates\.parquet.*not written by the build"):
        load_index(out)


def test_duplicate_human_readable_ids_are_repaired_with_a_warning(tmp_path: Path) -> None:
    built = tmp_path / "built"
    build_index(_write(tmp_path / "d", DOCS), built, progress=False)
    foreign = tmp_path / "foreign"  # e.g. a GraphRAG folder edited by hand: no graphroute manifest
    foreign.mkdir()
    for p in built.glob("*.parquet"):
        shutil.copy(p, foreign / p.name)
    table = pq.read_table(foreign / "entities.parquet")
    hrids = table.column("human_readable_id").to_pylist()
    assert len(hrids) >= 4
    dup = [hrids[0], hrids[1], hrids[0], hrids[1], *hrids[4:]]  # rows 2 and 3 collide with rows 0 and 1
    table = table.set_column(table.schema.get_field_index("human_readable_id"), "human_readable_id", pa.array(dup, pa.int64()))
    pq.write_table(table, foreign / "entities.parquet")
    index = load_index(foreign)
    short = [e.short_id for e in index.entities]
    assert len(set(short)) == len(short)
    top = max(hrids)
    assert short[:4] == [str(hrids[0]), str(hrids[1]), str(top + 1), str(top + 2)]  # first row keeps its id
    assert any("entities.parquet" in w and "2 duplicate" in w for w in index.warnings)
    assert [e.short_id for e in load_index(foreign).entities] == short  # deterministic


def test_incremental_update_keeps_surviving_human_readable_ids(tmp_path: Path) -> None:
    docs = _write(tmp_path / "d", DOCS)
    out = tmp_path / "index"
    build_index(docs, out, progress=False)
    before = {t: _hrids(out, t, k) for t, k in
              (("entities", "title"), ("text_units", "id"), ("documents", "id"), ("relationships", "id"))}
    (docs / "b.txt").unlink()  # Somerville and Chelsea go away; rows after them must not shift
    (docs / "e.txt").write_text("Charles Darwin corresponded with Charles Babbage about London.\n", encoding="utf-8")
    build_index(docs, out, progress=False)
    for (table, key), old in zip((("entities", "title"), ("text_units", "id"), ("documents", "id"),
                                  ("relationships", "id")), before.values(), strict=True):
        now = _hrids(out, table, key)
        surviving = set(old) & set(now)
        assert surviving, table
        assert {k: now[k] for k in surviving} == {k: old[k] for k in surviving}, table
        new_ids = [now[k] for k in set(now) - set(old)]
        assert all(i > max(old.values()) for i in new_ids), table  # never a removed row's number
        assert len(set(now.values())) == len(now), table
    assert set(before["entities"]) - set(_hrids(out, "entities", "title")), "the fixture should remove an entity"
    load_index(out)
