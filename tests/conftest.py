"""Shared fixtures: the read-only real data folders, and a per-session token-count cache directory."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from shared_context.index import Index

DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared data not present: {path}")
    return path


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
def data_dir() -> Path:
    return _require(DATA_DIR)


@pytest.fixture(scope="session")
def dulce_path() -> Path:
    return _require(DATA_DIR / "operation_dulce")


@pytest.fixture(scope="session")
def carol_path() -> Path:
    return _require(DATA_DIR / "christmas_carol_graphrag_index")


@pytest.fixture(scope="module")
def carol(carol_path: Path) -> Index:
    """The Christmas Carol index, loaded once per test module (a module may fill its per-index caches)."""
    from shared_context import load_index

    return load_index(carol_path)


@pytest.fixture(scope="session")
def medical_kg_path() -> Path:
    return _require(DATA_DIR / "graphrag_bench_medical_lightrag_kg")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Print the matrices' seed even under `-q`, so a failing sample can be repeated."""
    from matrix_sample import LONG, SEED

    whole = "whole (long profile)" if LONG else f"a sample, seed {SEED} (GRAPHROUTE_MATRIX_SEED={SEED} repeats it)"
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"fault and corruption matrices: {whole}")
