"""A second open of an index (everything from the derived store) and its first local question never import
pandas: pyarrow imports it on first `to_numpy`, `np.asarray`, `pa.array(list)` or a compute call given a
Python value, and the import is 0.5-4 s of CPU, most of a small index's second open. The numpy views and
Arrow arrays built from buffers that replace those calls give the same values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from shared_context.records import numeric_view, numpy_array, string_array

REPO = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys
from shared_context import LocalContextBuilder, load_index
index = load_index(sys.argv[1])
after_load = "pandas" in sys.modules
LocalContextBuilder(index).build("Who is Scrooge and what did Marley tell him?")
print(json.dumps({"load": after_load, "query": "pandas" in sys.modules}))
"""


def _probe(index: Path, cache: Path) -> dict[str, bool]:
    env = dict(os.environ, PYTHONPATH=str(REPO), GRAPHROUTE_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", _PROBE, str(index)], cwd=REPO, env=env, capture_output=True,
                         text=True, timeout=300, check=True)
    result: dict[str, bool] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def test_a_first_and_second_open_and_its_first_question_do_not_import_pandas(carol_path: Path, tmp_path: Path) -> None:
    assert _probe(carol_path, tmp_path)["load"] is False  # first open: parquet decoded, derived store filled
    assert _probe(carol_path, tmp_path) == {"load": False, "query": False}


@pytest.mark.parametrize(
    "values",
    [
        pa.array(np.arange(10, dtype=np.int64)).slice(3),
        pa.array(np.arange(5, dtype=np.int32)),
        pa.array(np.linspace(0, 1, 7)),
        pa.array([True, False, True] * 5).slice(2),
        pa.array([1, None, 3, None, 5]).slice(1),
        pa.array([1.5, None]),
        pa.array([None, None], type=pa.int64()),
        pa.array([True, None, False]),
        pa.chunked_array([pa.array([1, 2]), pa.array([3])]),
        pa.chunked_array([pa.array([7])]),
        pa.chunked_array([], type=pa.int64()),
        pa.array([], type=pa.float32()),
    ],
)
def test_numeric_view_gives_the_values_of_to_numpy(values: pa.Array | pa.ChunkedArray) -> None:
    expected = np.array([np.nan if v is None else v for v in values.to_pylist()], dtype=np.float64)
    assert np.array_equal(np.asarray(numeric_view(values), dtype=np.float64), expected, equal_nan=True)
    if pa.types.is_integer(values.type):
        filled = numeric_view(values, fill=-1)
        assert filled.dtype == np.dtype(values.type.to_pandas_dtype())
        assert filled.tolist() == [-1 if v is None else v for v in values.to_pylist()]


@pytest.mark.parametrize("values", [np.arange(5, dtype=np.int64), np.arange(10, dtype=np.int32)[::3],
                                    np.array([1.5, np.nan, -0.0]), np.zeros(0, dtype=np.int64)])
def test_numpy_array_equals_pa_array(values: np.ndarray) -> None:
    arr, expected = numpy_array(values), pa.array(values)
    assert arr.type == expected.type and arr.null_count == expected.null_count == 0
    assert np.array_equal(arr.to_numpy(), expected.to_numpy(), equal_nan=values.dtype.kind == "f")


def test_string_array_holds_the_strings() -> None:
    for values in (["a", "héllo", "", "日本語"], [], ["x", None], ["ascii", "", "only"], ["é"] * 3 + ["e"]):
        arr = string_array(values)
        assert arr.type == pa.string() and arr.to_pylist() == values


def test_integer_lists_read_from_the_buffers_equal_the_general_path() -> None:
    from shared_context.loaders.columns import TableData

    table = pa.table({"c": pa.array([[1, 2], [], [3], [4, 5, 6]], type=pa.list_(pa.int32()))})
    for variant in (table, table.slice(1), pa.Table.from_batches(table.to_batches(max_chunksize=1))):
        data = TableData("communities", "communities.parquet", variant)
        expected = [[int(x) for x in row] for row in variant.column("c").to_pylist()]
        assert data._arrow_int_lists("c") == expected and data.int_lists("c") == expected
    with_null = TableData("communities", "communities.parquet", pa.table({"c": pa.array([[1], None])}))
    assert with_null._arrow_int_lists("c") is None and with_null.int_lists("c") == [[1], []]


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        (["a", "héllo", ""], pa.string()), ([1, 2, -3], pa.int64()), ([0.5, -1.0], pa.float64()),
        ([["a", "b"], [], ["日本語"]], pa.list_(pa.string())), ([[1], [], [2, 3]], pa.list_(pa.int64())),
        ([], pa.list_(pa.string())), (["a", None], pa.string()), ([1, None], pa.int64()), ([[1], None], pa.list_(pa.int64())),
    ],
)  # fmt: skip
def test_record_list_columns_from_buffers_equal_pa_array(values: list, kind: pa.DataType) -> None:
    from shared_context.record_list import _array

    built, exact = _array(values, kind)
    assert built.type == kind and built.to_pylist() == pa.array(values, kind).to_pylist()
    assert exact == (None not in values and not any(v is None for v in values if isinstance(v, list)))
