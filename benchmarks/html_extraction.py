"""Reading text out of HTML: graphroute's reader (`indexer.html_text`) against trafilatura and readability-lxml.

    .venv/bin/python -m benchmarks.html_extraction [--repeats 20] [--out benchmarks/results/html_extraction]

Pages: `benchmarks/data/html_pages/*.html`, eight pages written for this benchmark in the shapes web pages
come in (a blog with header, sidebar, share links and comments; a news article with a cookie banner and
"most read" links; a documentation page with a side menu, code and a table; a bare page of paragraphs; a page
of anonymous `<div>`s; a recipe with lists; a forum thread; a museum page). Each has a hand-written gold text
(`NAME.txt`): what a reader reads as the page's content, one block per line (the forum's gold keeps the
posters' names, comments are left out of the blog's).

Figures per extractor, over the pages: word precision (extracted words that are gold words, counted as
multisets), word recall (gold words extracted), their F1, and the milliseconds per page (median of
`--repeats` runs of each page); each reported as median and range over the pages. trafilatura and
readability-lxml are measured when installed (`pip install trafilatura readability-lxml`; neither is a
dependency of graphroute), with their plain-text output: `trafilatura.extract(html, include_tables=True)` and
readability's `Document(html).summary()` reduced to text by the same reader.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from indexer.html_text import html_to_text

PAGES = Path(__file__).with_name("data") / "html_pages"
OUT = Path(__file__).with_name("results") / "html_extraction"
_WORD = re.compile(r"\w+")

Extractor = Callable[[str], str]


def _trafilatura() -> Extractor | None:
    try:
        import trafilatura
    except ImportError:
        return None
    return lambda html: trafilatura.extract(html, include_tables=True, include_comments=False) or ""


def _readability() -> Extractor | None:
    try:
        from readability import Document
    except ImportError:
        return None
    return lambda html: html_to_text(Document(html).summary())


def extractors() -> dict[str, Extractor | None]:
    return {"graphroute": html_to_text, "trafilatura": _trafilatura(), "readability-lxml": _readability()}


def words(text: str) -> Counter[str]:
    return Counter(w.lower() for w in _WORD.findall(text))


def score(extracted: str, gold: str) -> dict[str, float]:
    got, want = words(extracted), words(gold)
    hit = sum((got & want).values())
    precision = hit / max(sum(got.values()), 1)
    recall = hit / max(sum(want.values()), 1)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 4), "min": round(min(values), 4), "max": round(max(values), 4)}


def run(repeats: int) -> dict[str, object]:
    pages = sorted(PAGES.glob("*.html"))
    results: dict[str, object] = {}
    for name, extract in extractors().items():
        if extract is None:
            results[name] = "not installed"
            continue
        per_page: dict[str, dict[str, float]] = {}
        for page in pages:
            html = page.read_text(encoding="utf-8")
            gold = page.with_suffix(".txt").read_text(encoding="utf-8")
            times = []
            for _ in range(repeats):
                started = time.perf_counter()
                text = extract(html)
                times.append(1000 * (time.perf_counter() - started))
            per_page[page.stem] = {**score(text, gold), "ms": statistics.median(times)}
        results[name] = {
            "pages": {k: {m: round(v, 4) for m, v in fig.items()} for k, fig in per_page.items()},
            **{m: _summary([fig[m] for fig in per_page.values()]) for m in ("precision", "recall", "f1", "ms")},
        }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    results = run(args.repeats)
    versions = {}
    for module in ("trafilatura", "readability"):
        try:
            from importlib.metadata import version

            versions[module] = version("readability-lxml" if module == "readability" else module)
        except Exception:
            versions[module] = "not installed"
    record = {"command": "python -m benchmarks.html_extraction " + " ".join(argv or []),
              "date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": platform.platform(),
              "python": platform.python_version(), "versions": versions, "repeats": args.repeats,
              "pages": len(list(PAGES.glob("*.html"))), "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "html_extraction.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    for name, figures in results.items():
        if not isinstance(figures, dict):
            print(f"{name}: {figures}")
            continue
        line = ", ".join(f"{m} {figures[m]['median']:.3f} ({figures[m]['min']:.3f}-{figures[m]['max']:.3f})"
                         for m in ("precision", "recall", "f1", "ms"))
        print(f"{name}: {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
