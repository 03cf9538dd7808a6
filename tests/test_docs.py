"""The documentation: generated pages are current, the site builds strictly, every page is reachable, the
README fits its budget, and no tracked file narrates how the product was built instead of what it does."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tools.docs import benchmarks_page, config_reference

ROOT = Path(__file__).resolve().parents[1]


def test_configuration_reference_is_current() -> None:
    assert config_reference.main(["--check"]) == 0, "run python -m tools.docs.config_reference"


def test_configuration_reference_lists_every_section_and_key() -> None:
    text = config_reference.render()
    for section in ("models.chat", "local", "global_search", "drift", "basic", "router", "serve", "search"):
        assert f"`[{section}]`" in text
    assert "| `max_context_tokens` | int | `12000` |" in text
    assert "| `prerank` | bool | `false` |" in text


def test_benchmarks_page_and_readme_figures_are_current() -> None:
    assert benchmarks_page.main(["--check"]) == 0, "run python -m tools.docs.benchmarks_page"


def test_a_result_file_the_page_cannot_read_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "serve").mkdir()
    (tmp_path / "serve" / "serve_load.json").write_text('{"date": "2026-01-01", "runs": []}', encoding="utf-8")
    monkeypatch.setattr(benchmarks_page, "RESULTS", tmp_path)
    with pytest.raises(SystemExit, match=r"serve_load\.json: the 'Service load' section cannot read it \(KeyError"):
        benchmarks_page.render()
    (tmp_path / "serve" / "serve_load.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"serve_load\.json: not a readable result file"):
        benchmarks_page.render()


def test_a_missing_result_file_leaves_its_section_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(benchmarks_page, "RESULTS", tmp_path)
    page, table = benchmarks_page.render()
    assert "## " not in page
    assert table.splitlines()[2:] == []


def test_every_readme_figure_comes_from_the_benchmarks_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split(benchmarks_page.README_START)[1].split(benchmarks_page.README_END)[0]
    rows = [line for line in block.splitlines() if line.startswith("| [")]
    assert rows, "the README's figures table is empty"
    assert all("(docs/benchmarks.md#" in row for row in rows)
    outside = readme.replace(block, "")
    # no measured figure outside the generated table: seconds, milliseconds, percentages or F1 scores
    assert not re.findall(r"\b\d+(?:\.\d+)? ?(?:ms|s)\b|\b\d+(?:\.\d+)? ?%|\b0\.\d{2,}\b", outside), \
        "a measured figure in the README outside the generated table"


def test_readme_is_short_and_starts_with_the_two_set_up_commands() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    head = "\n".join(lines[:6])
    assert "make demo" in head and "make test" in head


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [p for item in nav for p in _nav_pages(item)]
    if isinstance(nav, dict):
        return [p for value in nav.values() for p in _nav_pages(value)]
    return []


def test_every_docs_page_is_in_the_navigation() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = set(_nav_pages(config["nav"]))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages - listed == set(), "add these pages to mkdocs.yml's nav"
    assert listed - pages == set(), "mkdocs.yml's nav names pages that do not exist"


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    mkdocs = Path(sys.executable).with_name("mkdocs")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "configuration" / "index.html").exists()
    assert (tmp_path / "site" / "benchmarks" / "index.html").exists()


# Phrases that narrate how the work was organised (numbered work sessions, who ran what, planning documents,
# tracker numbers) rather than what the product does. Ordinary words such as an HTTP client "session" or "the
# lead author" are not matched.
NARRATIVE = re.compile(
    r"\b(?:session|sessions)\s+\d+|\b(?:this|last|earlier|previous|next)\s+session\b|\bseed-0\d\d\b"
    r"|\bissue\s+#?\d+|\bwork period|\bthe lead(?:'s)?\b(?!\s+(?:author|investigator|line|sentence|item|word))"
    r"|\bhelpers?\s+(?:ran|took|run|measured)|\bworktrees?\b|\bquiet_session|\bmeasurement-history\b|\bVMs?\b",
    re.IGNORECASE,
)


def test_no_tracked_file_narrates_the_work() -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    hits = []
    for name in files.decode().split("\0"):
        path = ROOT / name
        if not name or name == "tests/test_docs.py" or not path.is_file() or path.suffix in (".png", ".npz", ".parquet", ".jpg", ".ico"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            if NARRATIVE.search(line) or NARRATIVE.search(name):
                hits.append(f"{name}:{lineno}: {line.strip()[:120]}")
    assert not hits, "\n".join(hits[:40])
