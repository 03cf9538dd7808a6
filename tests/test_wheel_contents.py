"""The wheel ships the product and route-bench (with its simulated model), never the tests' loopback model server
nor the router's training code: the wheel is built from a copy of the source tree and its file list checked."""

from __future__ import annotations

import shutil
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
_SKIP = shutil.ignore_patterns(".venv", ".git", "__pycache__", "build", "dist", "*.egg-info", ".graphroute-cache",
                               ".mypy_cache", ".ruff_cache", ".pytest_cache", ".hypothesis", "results", "docs")


def _build_wheel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from setuptools import build_meta

    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=_SKIP)
    monkeypatch.chdir(src)  # setuptools builds the project in the working directory
    name = build_meta.build_wheel(str(tmp_path / "dist"))
    with zipfile.ZipFile(tmp_path / "dist" / name) as wheel:
        return wheel.namelist()


def test_the_wheel_holds_no_test_server_or_training_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = _build_wheel(tmp_path, monkeypatch)
    tops = {f.split("/")[0] for f in files}
    assert {"router", "engines", "shared_context", "indexer", "benchmarks"} <= tops
    assert not tops & {"testing", "tools", "tests"}, sorted(tops)
    names = {Path(f).name for f in files}
    # the loopback model server, the router's trainer and its question bank, under any package
    assert not names & {"model_server.py", "testserver.py", "train.py", "question_bank.py", "scope_fit.py"}
    assert "router/data/router_model.npz" in files  # what the trained classifier needs at run time is shipped
    assert "benchmarks/route_bench.py" in files and "benchmarks/grading.py" in files  # route-bench and --grade
    assert "benchmarks/simulated_model.py" in files  # route-bench's `--model mock:...`
    # the web page with its vendored libraries and their licences: `graphroute serve` fetches nothing at run time
    static = "router/service/static/"
    for name in ("index.html", "app.js", "markdown.js", "graph.js", "style.css", "vendor/README.md",
                 "vendor/marked/marked.min.js", "vendor/marked/LICENSE.md", "vendor/dompurify/purify.min.js",
                 "vendor/dompurify/LICENSE", "vendor/cytoscape/cytoscape.min.js", "vendor/cytoscape/LICENSE"):
        assert static + name in files, name
