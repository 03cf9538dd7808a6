"""Where the tests' data is.

The default suite reads only what the repository holds: the GraphRAG index fixtures under `tests/fixtures/` (each
with its licence and source note), the sample corpus (`indexer/sample_corpus/`), and indexes the tests build from
them. The large benchmark corpora (GraphRAG-Bench, the medical knowledge graph, Microsoft's podcast and
earnings-call transcripts) are not redistributable or too large to hold here: only the `bench_data` tier
(`make test-data`) reads them, from `GRAPHROUTE_BENCH_DATA` (default: `../shared/data` beside the clone).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
CAROL = FIXTURES / "christmas_carol_graphrag_index"
DULCE = FIXTURES / "operation_dulce"
SAMPLE_CORPUS = REPO / "indexer" / "sample_corpus"

# read when the module is imported: the suite's autouse fixture clears GRAPHROUTE_* only once the session starts
BENCH_DATA = Path(os.environ.get("GRAPHROUTE_BENCH_DATA") or REPO.parent / "shared" / "data")


def bench_data(relative: str) -> Path:
    """A benchmark data set for a `bench_data` test; a missing one fails the test, naming what to fetch."""
    path = BENCH_DATA / relative
    if not path.exists():
        pytest.fail(f"the bench_data tier needs {path} (set GRAPHROUTE_BENCH_DATA to the folder holding the "
                    "benchmark data sets; docs/contributing.md lists them and where they come from)", pytrace=False)
    return path
