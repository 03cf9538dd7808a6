"""Grouped Arrow hashing (`shared_context/arrow_keys.py`) gives exactly the one-table results."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from shared_context import arrow_keys


def _strings(rng: np.random.Generator, n: int) -> list[str | None]:
    pool = ["", "a", "é", "長い", "id-7", "x" * 40] + [f"k{i}" for i in range(300)]
    out: list[str | None] = [pool[int(i)] for i in rng.integers(0, len(pool), n)]
    for i in rng.integers(0, n, n // 20):
        out[int(i)] = None
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grouped_results_equal_arrow_one_table_results(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arrow_keys, "_SPLIT_ABOVE", 10)  # force the grouped path on small inputs
    rng = np.random.default_rng(seed)
    values = pa.chunked_array([pa.array(_strings(rng, 500)), pa.array(_strings(rng, 300))])
    keys = pa.array([s for s in _strings(rng, 400) if s is not None])
    assert arrow_keys.count_distinct(values) == pc.count_distinct(values).as_py()
    expected = np.asarray(pc.index_in(values, value_set=keys).fill_null(-1).to_numpy(zero_copy_only=False))
    assert np.array_equal(arrow_keys.index_in(values, keys), expected)  # first equal key, -1 for absent/null


def test_small_inputs_take_the_one_table_path() -> None:
    keys = pa.array(["b", "a", "b"])
    assert arrow_keys.count_distinct(keys) == 2
    assert arrow_keys.index_in(pa.array(["b", "z", None]), keys).tolist() == [0, -1, -1]
