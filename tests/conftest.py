"""Shared fixtures: the GraphRAG index fixtures the repository holds (`fixture_paths`), and a per-session
token-count cache directory."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixture_paths import CAROL, DULCE
from matrix_sample import load_hypothesis_profile

from shared_context.index import Index

load_hypothesis_profile()  # before any test module is imported, so every property test runs under it

# Model settings a developer's shell may carry; the suite runs offline unless a test sets them itself.
_MODEL_ENV_PREFIXES = ("OPENAI_", "AZURE_OPENAI_", "GRAPHROUTE_")


@pytest.fixture(scope="session", autouse=True)
def _offline_model_environment() -> Iterator[None]:
    saved = {k: v for k, v in os.environ.items() if k.startswith(_MODEL_ENV_PREFIXES)}
    for key in saved:
        del os.environ[key]
    yield
    os.environ.update(saved)


@pytest.fixture(scope="session", autouse=True)
def _isolated_token_cache(
    _offline_model_environment: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Token counts, derived structures and search tables are cached on disk; tests use a fresh cache so they never
    touch ~/.cache. Requests the environment fixture so it runs after it: autouse fixtures of one scope run in name
    order, and that fixture clears every GRAPHROUTE_* variable, this one's included."""
    old = os.environ.get("GRAPHROUTE_CACHE_DIR")
    os.environ["GRAPHROUTE_CACHE_DIR"] = str(tmp_path_factory.mktemp("graphroute-cache"))
    yield
    if old is None:
        os.environ.pop("GRAPHROUTE_CACHE_DIR", None)
    else:
        os.environ["GRAPHROUTE_CACHE_DIR"] = old


@pytest.fixture(scope="module", autouse=True)
def _collect_leaks() -> Iterator[None]:
    """Collect garbage after each module, so an unclosed socket/client warns (an error) in the module that leaked it."""
    yield
    gc.collect()


@pytest.fixture(scope="session")
def dulce_path() -> Path:
    """Microsoft's Operation Dulce example index (small, with a LanceDB vector store)."""
    return DULCE


@pytest.fixture(scope="session")
def carol_path() -> Path:
    """Microsoft's Christmas Carol GraphRAG index (529 entities, 122 community reports, 42 text units)."""
    return CAROL


@pytest.fixture(scope="module")
def carol(carol_path: Path) -> Index:
    """The Christmas Carol index, loaded once per test module (a module may fill its per-index caches)."""
    from shared_context import load_index

    return load_index(carol_path)


@pytest.fixture(scope="session")
def graph_only_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Christmas Carol graph in the shape of a knowledge graph exported by LightRAG: entities, relationships
    and text units (without entity ids), no communities or reports, and 1024-dimensional text-unit vectors in a
    file that names their model (`embeddings.text_unit_text.bge-large-en-v1.5.parquet`; seeded random vectors)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path_factory.mktemp("graph-only")
    for table in ("entities", "relationships"):
        pq.write_table(pq.read_table(CAROL / f"{table}.parquet"), folder / f"{table}.parquet")
    units = pq.read_table(CAROL / "text_units.parquet").drop_columns(["entity_ids", "relationship_ids", "covariate_ids"])
    pq.write_table(units, folder / "text_units.parquet")
    vectors = np.random.default_rng(46).standard_normal((units.num_rows, 1024))
    embeddings = pa.table({"id": units.column("id"), "embedding": pa.array(vectors.tolist(), pa.list_(pa.float64()))})
    pq.write_table(embeddings, folder / "embeddings.text_unit_text.bge-large-en-v1.5.parquet")
    return folder


def pytest_sessionstart(session: pytest.Session) -> None:
    """Print the matrices' seed and the Hypothesis profile even under `-q`, so a failing run can be repeated."""
    from matrix_sample import LONG, PROFILE, SEED

    whole = "whole (long profile)" if LONG else f"a sample, seed {SEED} (GRAPHROUTE_MATRIX_SEED={SEED} repeats it)"
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"fault and corruption matrices: {whole}; Hypothesis profile {PROFILE!r}, derandomised")
