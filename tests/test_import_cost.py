"""`import router` loads the whole public API (plain imports in every package `__init__`) without the
heavy libraries: openai, scikit-learn, LanceDB and pandas load only when a function needs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("openai", "httpx", "sklearn", "scipy", "pandas", "lancedb", "starlette", "uvicorn", "matplotlib",
         "pypdf", "docx", "jieba", "graspologic_native")

_PROBE = """
import json, sys, time
start = time.process_time()  # CPU time: wall time on a shared machine says more about the load
import router, indexer
seconds = time.process_time() - start
names = [router.Router, router.Answer, indexer.build_index]
import engines, engines.models, shared_context
names += [engines.LocalSearch, engines.load_config, engines.models.Models, shared_context.load_index]
print(json.dumps({"seconds": seconds, "modules": sorted(m.split(".")[0] for m in sys.modules)}))
"""


def _probe() -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120, check=True)
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_import_router_loads_no_heavy_library() -> None:
    result = _probe()
    loaded = set(result["modules"])  # type: ignore[arg-type]
    assert not loaded & set(HEAVY), f"importing the packages loaded {sorted(loaded & set(HEAVY))}"
    # Generous: about 0.4 s of CPU; the bound only catches a heavy import creeping back.
    assert float(result["seconds"]) < 5.0  # type: ignore[arg-type]


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
