"""A GraphRAG `lancedb/` folder is read once: later opens map its vectors from the derived store and import
neither lancedb nor lance (seconds of import time), with the vectors lancedb itself reads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from shared_context import load_index
from shared_context.loaders.vector_files import lance_version
from shared_context.search_backend import normalise_rows

REPO = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys
from shared_context import LocalContextBuilder, load_index
index = load_index(sys.argv[1])
LocalContextBuilder(index).build("Who leads the Dulce mission and what did they find?")
print(json.dumps({"lance": "lance" in sys.modules, "lancedb": "lancedb" in sys.modules,
                  "vectors": {k: len(v) for k, v in sorted(index.vectors.items())}}))
"""


def _probe(index: Path, cache: Path) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(REPO), GRAPHROUTE_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", _PROBE, str(index)], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300, check=True)
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_second_open_and_its_first_question_import_no_lance(dulce_path: Path, tmp_path: Path) -> None:
    first = _probe(dulce_path, tmp_path)
    assert first["lance"] is True and first["lancedb"] is False  # read through pylance, once
    second = _probe(dulce_path, tmp_path)
    assert second == {"lance": False, "lancedb": False, "vectors": first["vectors"]}
    assert second["vectors"] == {"community_full_content": 10, "entity_description": 39, "text_unit_text": 5}


def test_stored_vectors_are_lancedbs_rows_normalised(dulce_path: Path, tmp_path: Path) -> None:
    import lancedb

    index = load_index(dulce_path)
    db = lancedb.connect(str(dulce_path / "lancedb"))
    for name, table in index.vectors.items():
        data = db.open_table(name).to_arrow()
        ids = data.column("id").to_pylist()
        want = normalise_rows(np.stack(data.column("vector").to_numpy(zero_copy_only=False)).astype(np.float32))
        records = {"entity_description": index.entities, "text_unit_text": index.text_units,
                   "community_full_content": index.community_reports}[name]
        got = {records[int(p)].id: table.matrix[i] for i, p in enumerate(table.positions)}
        assert sorted(got) == sorted(ids)
        for row, rid in enumerate(ids):
            assert np.array_equal(got[rid], want[row])


def test_a_new_version_of_the_lance_table_is_read_again(dulce_path: Path, tmp_path: Path, monkeypatch) -> None:
    copy = tmp_path / "dulce"
    shutil.copytree(dulce_path, copy)
    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(tmp_path / "cache"))
    before = load_index(copy).vectors["entity_description"]
    dataset = copy / "lancedb" / "entity_description.lance"
    version = lance_version(dataset)
    import lance

    ds = lance.dataset(str(dataset))
    keep = ds.to_table().slice(0, 20)
    lance.write_dataset(keep, str(dataset), mode="overwrite")  # a re-run writes a new version
    assert lance_version(dataset) != version
    after = load_index(copy).vectors["entity_description"]
    assert len(before) == 39 and len(after) == 20
