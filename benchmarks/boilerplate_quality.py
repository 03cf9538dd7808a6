"""Boilerplate detection (`shared_context.boilerplate`) measured against hand-labelled spans.

    .venv/bin/python -m benchmarks.boilerplate_quality [--out benchmarks/results/boilerplate_quality.json]

Gold: `benchmarks/data/boilerplate_gold.json`, written by reading each document's beginning and end (what
counts as boilerplate is stated there). Figures:
- GraphRAG-Bench novels (20 books): character precision and recall of the detected spans, and unit
  precision and recall of the marked text units (units cut as `graphroute index` cuts them, 1,200 tokens;
  a unit is marked when at least half of it is boilerplate, by detection or by gold). Reported for the
  development books (1-10), the held-out books (11-20) and all.
- Christmas Carol GraphRAG index: the same on its document text, and on GraphRAG's own 42 text units
  (scanned as `part_shares` does at query time; gold shares from the units' places in the document).
- Documents without boilerplate (podcast parts, earnings calls, the medical text, Operation Dulce): units
  and characters marked (should be 0).
The result file records the command, date, machine and the seconds detection took.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.common import SHARED_DATA
from indexer.chunking import chunk_documents
from indexer.reader import SourceDocument
from shared_context.boilerplate import MARKED_SHARE, boilerplate_spans, part_shares, span_shares

GOLD = Path(__file__).with_name("data") / "boilerplate_gold.json"
NOVELS = SHARED_DATA / "graphrag_bench" / "corpus" / "novel.parquet"
MEDICAL = SHARED_DATA / "graphrag_bench" / "corpus" / "medical.parquet"
CALLS = SHARED_DATA / "msft_graphrag_benchmarks" / "corpus" / "msft_earnings_call_transcripts.parquet"
PODCAST = SHARED_DATA / "msft_graphrag_benchmarks" / "corpus" / "kevin_scott_podcast_parts.parquet"
CAROL = SHARED_DATA / "christmas_carol_graphrag_index"
DULCE = SHARED_DATA / "operation_dulce"
DEVELOPMENT_BOOKS = 10


def gold_spans(text: str, anchors: list[list[str]]) -> list[tuple[int, int]]:
    """Character spans of the anchors (see the gold file's "about")."""
    spans: list[tuple[int, int]] = []
    at = 0
    for start, end in anchors:
        a = 0 if start == "" else text.find(start, at)
        if a < 0:
            raise SystemExit(f"gold anchor not found after {at}: {start!r}")
        if end == "":
            b = len(text)
        else:
            found = text.find(end, a)
            if found < 0:
                raise SystemExit(f"gold anchor not found after {a}: {end!r}")
            b = found + len(end)
        spans.append((a, b))
        at = b
    return spans


def overlap(xs: list[tuple[int, int]], ys: list[tuple[int, int]]) -> int:
    return sum(max(0, min(b, d) - max(a, c)) for a, b in xs for c, d in ys)


class Tally:
    """Character and unit counts over documents: precision and recall of what was marked."""

    def __init__(self) -> None:
        self.chars = {"hit": 0, "found": 0, "gold": 0}
        self.units = {"hit": 0, "found": 0, "gold": 0, "total": 0}

    def add_chars(self, found: list[tuple[int, int]], gold: list[tuple[int, int]]) -> None:
        self.chars["hit"] += overlap(found, gold)
        self.chars["found"] += sum(b - a for a, b in found)
        self.chars["gold"] += sum(b - a for a, b in gold)

    def add_units(self, found: list[float], gold: list[float]) -> None:
        for f, g in zip(found, gold, strict=True):
            fm, gm = f >= MARKED_SHARE, g >= MARKED_SHARE
            self.units["hit"] += fm and gm
            self.units["found"] += fm
            self.units["gold"] += gm
            self.units["total"] += 1

    @staticmethod
    def _pr(d: dict[str, int]) -> dict[str, Any]:
        p = d["hit"] / d["found"] if d["found"] else (1.0 if not d["gold"] else 0.0)
        r = d["hit"] / d["gold"] if d["gold"] else 1.0
        return {**d, "precision": round(p, 3), "recall": round(r, 3)}

    def result(self) -> dict[str, Any]:
        return {"characters": self._pr(self.chars), "units": self._pr(self.units)}


def _chunks(docs: list[SourceDocument]) -> dict[str, list[tuple[int, int]]]:
    by_doc: dict[str, list[tuple[int, int]]] = {}
    for c in chunk_documents(docs, chunk_size=1200, overlap=100, encoding_name="o200k_base"):
        by_doc.setdefault(c.document_id, []).append((c.char_start, c.char_end))
    return by_doc


def novels(gold: dict[str, Any], timing: dict[str, float]) -> dict[str, Any]:
    books = pd.read_parquet(NOVELS, columns=["corpus_name", "context"])
    docs = [SourceDocument(str(n), str(t)) for n, t in zip(books["corpus_name"], books["context"], strict=True)]
    units = _chunks(docs)
    tallies = {"development (books 1-10)": Tally(), "held out (books 11-20)": Tally(), "all": Tally()}
    per_book = {}
    for i, doc in enumerate(docs):
        t0 = time.perf_counter()
        found = boilerplate_spans(doc.text)
        timing["novels"] = timing.get("novels", 0.0) + time.perf_counter() - t0
        want = gold_spans(doc.text, gold["novel"][doc.title])
        parts = units[doc.id]
        split = "development (books 1-10)" if i < DEVELOPMENT_BOOKS else "held out (books 11-20)"
        for name in (split, "all"):
            tallies[name].add_chars(found, want)
            tallies[name].add_units(span_shares(found, parts), span_shares(want, parts))
        per_book[doc.title] = {"found": found, "gold": want, "units": len(parts)}
    return {**{k: v.result() for k, v in tallies.items()}, "books": per_book}


def carol(gold: dict[str, Any], timing: dict[str, float]) -> dict[str, Any]:
    text = str(pd.read_parquet(CAROL / "documents.parquet", columns=["text"])["text"][0])
    want = gold_spans(text, gold["christmas_carol"])
    t0 = time.perf_counter()
    found = boilerplate_spans(text)
    doc = Tally()
    doc.add_chars(found, want)
    doc.add_units(span_shares(found, _chunks([SourceDocument("carol", text)])[SourceDocument("carol", text).id]),
                  span_shares(want, _chunks([SourceDocument("carol", text)])[SourceDocument("carol", text).id]))
    units = pd.read_parquet(CAROL / "text_units.parquet", columns=["human_readable_id", "text"]).sort_values("human_readable_id")
    texts = [str(t) for t in units["text"]]
    shares = part_shares(texts)
    timing["christmas_carol"] = time.perf_counter() - t0
    places, at = [], 0
    for t in texts:  # GraphRAG prefixes each unit with a metadata line: find the rest in the document
        body = t.split("\n", 1)[1] if t.startswith("title:") else t
        a = text.find(body[:200], max(0, at - 2000))
        places.append((a, a + len(body)) if a >= 0 else (0, 0))
        at = a if a >= 0 else at
    graphrag = Tally()
    graphrag.add_units(shares, span_shares(want, places))
    return {
        "document": doc.result(),
        "graphrag_text_units": graphrag.result(),
        "unit_shares": [round(s, 2) for s in shares],
    }


def negatives(timing: dict[str, float]) -> dict[str, Any]:
    corpora: dict[str, list[SourceDocument]] = {}
    calls = pd.read_parquet(CALLS, columns=["file", "text"])
    corpora["earnings calls"] = [SourceDocument(str(f), str(t)) for f, t in zip(calls["file"], calls["text"], strict=True)]
    parts = pd.read_parquet(PODCAST, columns=["file", "text"])
    corpora["podcast parts"] = [SourceDocument(str(f), str(t)) for f, t in zip(parts["file"], parts["text"], strict=True)]
    corpora["medical"] = [SourceDocument("medical", str(t)) for t in pd.read_parquet(MEDICAL, columns=["context"])["context"]]
    corpora["operation dulce"] = [SourceDocument(str(n), str(t)) for n, t in pd.read_parquet(DULCE / "documents.parquet", columns=["title", "text"]).itertuples(index=False)]
    out: dict[str, Any] = {}
    for name, docs in corpora.items():
        t0 = time.perf_counter()
        spans = {d.id: boilerplate_spans(d.text) for d in docs}
        timing[name] = time.perf_counter() - t0
        units = _chunks(docs)
        marked = sum(s >= MARKED_SHARE for d in docs for s in span_shares(spans[d.id], units.get(d.id, [])))
        out[name] = {
            "documents": len(docs),
            "units": sum(len(u) for u in units.values()),
            "units_marked": int(marked),
            "characters_marked": sum(b - a for s in spans.values() for a, b in s),
            "documents_with_spans": [d.title for d in docs if spans[d.id]][:10],
        }
    dulce_units = pd.read_parquet(DULCE / "text_units.parquet", columns=["human_readable_id", "text"]).sort_values("human_readable_id")
    shares = part_shares([str(t) for t in dulce_units["text"]])
    out["operation dulce"]["graphrag_units_marked"] = sum(s >= MARKED_SHARE for s in shares)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=None, help="write the result JSON here")
    ap.add_argument("--books", action="store_true", help="print each book's found and gold spans")
    args = ap.parse_args(argv)
    gold = json.loads(GOLD.read_text(encoding="utf-8"))
    timing: dict[str, float] = {}
    result: dict[str, Any] = {
        "command": "python -m benchmarks.boilerplate_quality " + " ".join(argv if argv is not None else sys.argv[1:]),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}",
        "novels": novels(gold, timing),
        "christmas_carol": carol(gold, timing),
        "without_boilerplate": negatives(timing),
    }
    result["detection_seconds"] = {k: round(v, 3) for k, v in timing.items()}
    books = result["novels"].pop("books")
    if args.books:
        for title, b in books.items():
            print(f"{title} ({b['units']} units): found {b['found']} gold {b['gold']}")
    print(json.dumps(result, indent=2))
    if args.out:
        result["novels"]["books"] = books
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
