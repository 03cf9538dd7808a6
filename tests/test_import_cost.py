"""`import router` loads the whole public API (plain imports in every package `__init__`) without the
heavy libraries: openai, scikit-learn, LanceDB and pandas load only when a function needs them; nor does it
load what only some paths need (pyarrow's compute/parquet/fs modules, json-repair), the loopback test server,
or build any pydantic validator (models are `defer_build`). The import-time figure itself is measured by
`python -m benchmarks.import_time`, not asserted here (a timed unit test would measure the machine's load)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("openai", "httpx", "sklearn", "scipy", "pandas", "lancedb", "starlette", "uvicorn", "matplotlib",
         "pypdf", "docx", "jieba", "graspologic_native")
# Loaded on first use, not at import: each costs 10-50 ms of CPU on the product's import path.
ON_FIRST_USE = ("pyarrow.compute", "pyarrow.parquet", "pyarrow.fs", "json_repair", "tiktoken", "http.server",
                "importlib.metadata",  # pydantic loads its plugins when the first validator is built
                "testing.model_server")  # a test and benchmark tool, never the product's

_PROBE = """
import json, sys, time
start = time.process_time()  # CPU time: wall time on a shared machine says more about the load
import {modules}
seconds = time.process_time() - start
import router, engines, engines.models, shared_context
names = [router.Router, router.Answer]
names += [engines.LocalSearch, engines.load_config, engines.models.Models, shared_context.load_index]
import pydantic

def subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from subclasses(sub)

built = sorted({f"{c.__module__}.{c.__qualname__}" for c in subclasses(pydantic.BaseModel)
                if c.__module__.split(".")[0] in ("router", "engines", "shared_context", "indexer")
                and c.__pydantic_complete__})
print(json.dumps({"seconds": seconds, "modules": sorted(sys.modules), "built_models": built}))
"""


def _probe(modules: str) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", _PROBE.replace("{modules}", modules)], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_import_router_loads_no_heavy_library() -> None:
    result = _probe("router, indexer")
    loaded = {m.split(".")[0] for m in result["modules"]}  # type: ignore[attr-defined]
    assert not loaded & set(HEAVY), f"importing the packages loaded {sorted(loaded & set(HEAVY))}"
    # Generous: about 0.4 s of CPU; the bound only catches a heavy import creeping back.
    assert float(result["seconds"]) < 5.0  # type: ignore[arg-type]


def test_import_router_defers_what_only_some_paths_need() -> None:
    result = _probe("router")
    early = sorted(set(ON_FIRST_USE) & set(result["modules"]))  # type: ignore[arg-type]
    assert not early, f"importing the packages loaded {early}"
    assert result["built_models"] == [], f"pydantic validators built at import: {result['built_models']}"


def test_deferred_models_still_validate_on_first_use() -> None:
    # defer_build only moves the work: the first validation builds the model and checks as before
    code = ("import router, pydantic\n"
            "from engines.config import config_from_mapping\n"
            "from engines.models.config import PriceTable\n"
            "try:\n    config_from_mapping({'drift': {'n_depth': -1}}, env={})\nexcept Exception as e:\n"
            "    print(type(e).__name__, getattr(e, 'key', ''))\n"
            "print(PriceTable().cost('gpt-4.1-mini', 1_000_000, 1_000_000))")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    assert out.stdout.split("\n")[:2] == ["ConfigError drift.n_depth", "2.0"]


def test_public_names_are_the_real_objects() -> None:
    import engines
    import engines.models
    import router
    import shared_context
    from engines.local import LocalSearch
    from router.router import Router

    assert router.Router is Router and engines.LocalSearch is LocalSearch
    for package in (router, engines, engines.models, shared_context):
        missing = [name for name in package.__all__ if not hasattr(package, name)]
        assert not missing, f"{package.__name__} lists {missing} in __all__ but does not define them"
