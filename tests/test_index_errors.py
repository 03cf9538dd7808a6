"""Every bad-index case raises IndexFormatError naming the file and the column (never a KeyError)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from shared_context import IndexFormatError, load_index
from shared_context.index_build import index_from_records
from shared_context.records import Entity, Relationship, TextUnit

TABLES = [
    "entities",
    "relationships",
    "communities",
    "community_reports",
    "text_units",
    "covariates",
    "documents",
]
Frames = dict[str, pd.DataFrame]


@pytest.fixture(scope="module")
def frames(dulce_path: Path) -> Frames:
    return {n: pd.read_parquet(dulce_path / f"{n}.parquet") for n in TABLES}


def _write(frames: Frames, out: Path, change: Callable[[Frames], None]) -> Path:
    copy = {name: df.copy() for name, df in frames.items()}
    change(copy)
    for name, df in copy.items():
        df.to_parquet(out / f"{name}.parquet")
    return out


def _load_error(path: Path, **kwargs: int) -> IndexFormatError:
    with pytest.raises(IndexFormatError) as err:
        load_index(path, **kwargs)
    return err.value


def test_missing_folder(tmp_path: Path) -> None:
    err = _load_error(tmp_path / "nope")
    assert err.file == str(tmp_path / "nope")
    assert "does not exist" in str(err) and str(tmp_path / "nope") in str(err)


def test_missing_table(frames: Frames, tmp_path: Path) -> None:
    _write(frames, tmp_path, lambda f: None)
    (tmp_path / "relationships.parquet").unlink()
    err = _load_error(tmp_path)
    assert err.file == f"{tmp_path.name}/relationships.parquet"
    assert "missing required table 'relationships'" in str(err)
    assert "create_final_relationships.parquet" in str(err)  # says what it looked for


def test_optional_tables_may_be_missing(frames: Frames, tmp_path: Path) -> None:
    _write(frames, tmp_path, lambda f: None)
    for name in ("covariates", "documents", "communities"):
        (tmp_path / f"{name}.parquet").unlink()
    index = load_index(tmp_path)
    assert (
        len(index.claims),
        len(index.documents),
        len(index.communities),
        len(index.community_reports),
    ) == (
        0,
        0,
        0,
        10,
    )
    assert any("no communities table" in w for w in index.warnings)


@pytest.mark.parametrize(
    ("table", "column"),
    [
        ("relationships", "source"),
        ("relationships", "target"),
        ("entities", "id"),
        ("entities", "title"),
        ("text_units", "text"),
        ("community_reports", "full_content"),
        ("community_reports", "level"),
        ("covariates", "subject_id"),
    ],
)
def test_missing_column(frames: Frames, tmp_path: Path, table: str, column: str) -> None:
    _write(frames, tmp_path, lambda f: f.__setitem__(table, f[table].drop(columns=[column])))
    err = _load_error(tmp_path)
    assert (err.file, err.column) == (f"{table}.parquet", column)
    assert f"{table}.parquet: column '{column}': missing required column" in str(err)


def test_optional_columns_get_defaults(frames: Frames, tmp_path: Path) -> None:
    def drop(f: Frames) -> None:
        f["entities"] = f["entities"].drop(
            columns=["type", "description", "frequency", "degree", "human_readable_id"]
        )
        f["relationships"] = f["relationships"].drop(columns=["weight", "combined_degree", "description"])

    index = load_index(_write(frames, tmp_path, drop))
    assert [e.short_id for e in index.entities[:3]] == ["0", "1", "2"]
    assert all(r.weight == 1.0 for r in index.relationships)
    assert max(e.degree for e in index.entities) > 0  # derived from the relationships
    rel = index.relationships[0]
    s, t = index.relationship_endpoints[0].tolist()
    assert rel.combined_degree == index.entities[s].degree + (index.entities[t].degree if t >= 0 else 0)
    assert any("'combined_degree' missing" in w for w in index.warnings)


def test_wrong_type_numeric(frames: Frames, tmp_path: Path) -> None:
    def bad_weight(f: Frames) -> None:
        f["relationships"]["weight"] = ["heavy"] + [str(w) for w in f["relationships"]["weight"][1:]]

    err = _load_error(_write(frames, tmp_path, bad_weight))
    assert (err.file, err.column) == ("relationships.parquet", "weight")
    assert "relationships.parquet: column 'weight': 1 values are not numbers (e.g. 'heavy')" in str(err)


def test_numbers_stored_as_text_are_accepted(frames: Frames, tmp_path: Path) -> None:
    def as_text(f: Frames) -> None:
        f["relationships"]["weight"] = [str(w) for w in f["relationships"]["weight"]]

    index = load_index(_write(frames, tmp_path, as_text))
    assert index.relationships[0].weight == float(frames["relationships"]["weight"][0])


def test_wrong_type_list(frames: Frames, tmp_path: Path) -> None:
    def ints(f: Frames) -> None:
        f["entities"]["text_unit_ids"] = np.arange(len(f["entities"]))

    err = _load_error(_write(frames, tmp_path, ints))
    assert (err.file, err.column) == ("entities.parquet", "text_unit_ids")
    assert "entities.parquet: column 'text_unit_ids': expected a list column but found int64" in str(err)


def test_wrong_type_text(frames: Frames, tmp_path: Path) -> None:
    def listy(f: Frames) -> None:
        f["text_units"]["text"] = [[t] for t in f["text_units"]["text"]]

    err = _load_error(_write(frames, tmp_path, listy))
    assert "text_units.parquet: column 'text': expected text" in str(err)


@pytest.mark.parametrize("table", ["entities", "relationships", "text_units"])
def test_empty_required_table(frames: Frames, tmp_path: Path, table: str) -> None:
    err = _load_error(_write(frames, tmp_path, lambda f: f.__setitem__(table, f[table].iloc[0:0])))
    assert (err.file, err.column) == (f"{table}.parquet", "id")
    assert f"{table}.parquet: column 'id': table is empty (0 rows)" in str(err)


@pytest.mark.parametrize(
    ("table", "column"),
    [
        ("entities", "id"),
        ("entities", "title"),
        ("relationships", "id"),
        ("text_units", "id"),
        ("communities", "community"),
        ("community_reports", "community"),
        ("covariates", "id"),
    ],
)
def test_duplicate_ids(frames: Frames, tmp_path: Path, table: str, column: str) -> None:
    def dup(f: Frames) -> None:
        df = f[table]
        values = df[column].tolist()
        values[1] = values[0]
        df[column] = values

    err = _load_error(_write(frames, tmp_path, dup))
    assert (err.file, err.column) == (f"{table}.parquet", column)
    assert f"{table}.parquet: column '{column}': 1 duplicate values" in str(err)


def test_empty_id_values(frames: Frames, tmp_path: Path) -> None:
    def blank(f: Frames) -> None:
        f["entities"]["id"] = ["", *f["entities"]["id"].tolist()[1:]]

    err = _load_error(_write(frames, tmp_path, blank))
    assert "entities.parquet: column 'id': 1 rows have no value" in str(err)


def test_dangling_relationship_is_fatal_when_no_endpoint_is_an_entity(frames: Frames, tmp_path: Path) -> None:
    def dangle(f: Frames) -> None:
        rels = f["relationships"]
        rels["source"] = ["FOO", *rels["source"].tolist()[1:]]
        rels["target"] = ["BAR", *rels["target"].tolist()[1:]]

    err = _load_error(_write(frames, tmp_path, dangle))
    assert (err.file, err.column) == ("relationships.parquet", "source")
    assert (
        "relationships.parquet: column 'source': 1 relationships name no entity at either end (e.g. 'FOO')"
        in str(err)
    )


def test_dangling_link_ids_are_recorded_warnings(frames: Frames, tmp_path: Path) -> None:
    def dangle(f: Frames) -> None:
        ents = f["entities"]
        ents["text_unit_ids"] = [
            [*list(ents["text_unit_ids"][0]), "missing-unit"],
            *ents["text_unit_ids"].tolist()[1:],
        ]
        comms = f["communities"]
        comms["entity_ids"] = [[*list(comms["entity_ids"][0]), "ghost"], *comms["entity_ids"].tolist()[1:]]

    index = load_index(_write(frames, tmp_path, dangle))
    assert len(index.entities) == 39
    assert "entities.parquet: column 'text_unit_ids': 1 ids name no text unit; ignored" in index.warnings
    assert "communities.parquet: column 'entity_ids': 1 ids name no entity; ignored" in index.warnings


def test_vector_table_errors(frames: Frames, tmp_path: Path) -> None:
    _write(frames, tmp_path, lambda f: None)
    ids = frames["text_units"]["id"].tolist()
    ragged = pa.table({"id": ids, "embedding": [[0.1] * (4 if i else 3) for i in range(len(ids))]})
    pq.write_table(ragged, tmp_path / "embeddings.text_unit_text.parquet")
    err = _load_error(tmp_path)
    assert "embeddings.text_unit_text.parquet: column 'embedding': vectors have different lengths" in str(err)
    pq.write_table(
        pa.table({"id": ids, "values": [[0.1] * 4] * len(ids)}),
        tmp_path / "embeddings.text_unit_text.parquet",
    )
    err = _load_error(tmp_path)
    assert (err.file, err.column) == ("embeddings.text_unit_text.parquet", "embedding")
    extra = pa.table({"id": [*ids, "stale-id"], "embedding": [[1.0, 0.0, 0.0, 0.0]] * (len(ids) + 1)})
    pq.write_table(extra, tmp_path / "embeddings.text_unit_text.parquet")
    index = load_index(tmp_path)
    assert len(index.vectors["text_unit_text"]) == len(ids)
    assert any("1 of 6 vectors name no text unit; dropped" in w for w in index.warnings)
    err = _load_error(tmp_path, embedding_dim=8)
    assert "embeddings.text_unit_text.parquet: column 'embedding': has dimension 4" in str(err)


def test_unreadable_file(frames: Frames, tmp_path: Path) -> None:
    _write(frames, tmp_path, lambda f: None)
    (tmp_path / "entities.parquet").write_bytes(b"this is not parquet")
    err = _load_error(tmp_path)
    assert err.file == "entities.parquet" and "cannot read table" in str(err)


def test_from_records_validation() -> None:
    ents = [Entity(id="e1", short_id="0", title="A"), Entity(id="e2", short_id="1", title="B")]
    units = [TextUnit(id="t1", short_id="0", text="A met B.", entity_ids=["e1", "e2"])]
    ok = index_from_records(
        entities=ents,
        relationships=[Relationship(id="r1", short_id="0", source="A", target="B", text_unit_ids=["t1"])],
        text_units=units,
    )
    assert ok.entity_relationships == [[0], [0]] and ok.text_unit_relationships == [[0]]
    assert ok.version == "graphroute" and ok.relationships[0].combined_degree == 2
    with pytest.raises(
        IndexFormatError, match="relationships: column 'source': 1 relationships name no entity"
    ):
        index_from_records(
            entities=ents,
            relationships=[Relationship(id="r1", short_id="0", source="X", target="Y")],
            text_units=units,
        )
    with pytest.raises(IndexFormatError, match=r"entities\.csv: column 'id': 1 duplicate values"):
        index_from_records(
            entities=[*ents, Entity(id="e1", short_id="2", title="C")],
            relationships=[],
            text_units=units,
            source_files={"entities": "entities.csv"},
        )
