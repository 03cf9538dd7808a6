"""Which context reaches the evidence? GraphRAG-Bench novel dev questions on the offline novel index.

    .venv/bin/python -m benchmarks.evidence_recall --index DIR [--budget 8000] [--per-type 60]

Build the index first (`python -m benchmarks.index_build --out DIR`). For each question, every method
builds one context at the same token budget:

- `local-<strategy>`: `LocalContextBuilder` with each text-unit strategy (graphrag, per_entity_cap,
  round_robin, weighted, min_guarantee), GraphRAG's default shares (text_unit_prop 0.5, community_prop 0.15);
- `drift-followups`: DRIFT-like follow-up contexts — one local context (text_unit_prop 0.9, community_prop
  0.1) per follow-up question made from each of the top 3 linked entity names, each with a third of the budget;
- `basic`: top text units by offline-embedder cosine similarity, added while they fit the budget.

Metrics per question type: evidence token recall (share of the evidence's content words present in the
context text) and silver-span hit rate (share of silver evidence spans with token_recall >= 0.8 whose
characters are >= 80 % covered by the text units in the context). Prints a table and the best local strategy.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "graphrag_bench"
STRATEGIES = ("graphrag", "per_entity_cap", "round_robin", "weighted", "min_guarantee")
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP_TEXT = (
    "a an the and or of to in on at by for with from as is are was were be been it its this that these those he she "
    "they his her their them who whom which what when where why how not no did does do has have had into over than "
    "then so such also after before during about"
)
_STOP = frozenset(_STOP_TEXT.split())


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1}


def unit_spans(index: Any, books: dict[str, str]) -> dict[str, tuple[str, int, int]]:
    """text unit id -> (book title, char start, char end); chunks are exact slices of the book."""
    doc_title = {d.id: d.title for d in index.documents}
    out: dict[str, tuple[str, int, int]] = {}
    cursor: dict[str, int] = defaultdict(int)
    for u in index.text_units:
        title = doc_title.get(u.document_id)
        if title is None or title not in books:
            continue
        book = books[title]
        start = book.find(u.text, max(cursor[title] - len(u.text), 0))
        if start < 0:
            start = book.find(u.text)
        if start >= 0:
            out[u.id] = (title, start, start + len(u.text))
            cursor[title] = start + len(u.text)
    return out


def span_hit(span: tuple[str, int, int], ranges: list[tuple[str, int, int]]) -> bool:
    title, s, e = span
    if e <= s:
        return False
    covered = np.zeros(e - s, dtype=bool)
    for t, a, b in ranges:
        if t == title and a < e and b > s:
            covered[max(a, s) - s : min(b, e) - s] = True
    return covered.mean() >= 0.8


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, required=True, help="index built from the novel corpus")
    ap.add_argument("--budget", type=int, default=8000, help="context tokens per method (default 8000)")
    ap.add_argument("--per-type", type=int, default=60, help="questions per question type (0 = all)")
    args = ap.parse_args(argv)

    from engines.models.embedding_offline import OfflineEmbedder
    from shared_context import LocalContextBuilder, load_index

    t0 = time.perf_counter()
    index = load_index(args.index)
    embedder = OfflineEmbedder.load(args.index / "graphroute" / "embedder.npz")
    books_df = pd.read_parquet(DATA / "corpus" / "novel.parquet")
    books = dict(zip(books_df["corpus_name"].astype(str), books_df["context"].astype(str), strict=True))
    units = unit_spans(index, books)
    unit_pos = {u.id: i for i, u in enumerate(index.text_units)}
    # LocalContext.text_unit_ids are citation ids (short_id), the basic search below keeps real ids
    unit_id_of = {u.short_id: u.id for u in index.text_units} | {u.id: u.id for u in index.text_units}
    unit_vectors = index.vectors["text_unit_text"]
    questions = pd.read_parquet(DATA / "questions" / "novel_questions_dev.parquet")
    if args.per_type:
        questions = questions.groupby("question_type", group_keys=False).head(args.per_type)
    spans = pd.read_parquet(DATA / "evidence_alignment" / "silver_evidence_spans_dev.parquet")
    spans = spans[(spans["subset"] == "novel") & (spans["token_recall"] >= 0.8)]
    spans_by_q: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for qid, src, s, e in zip(spans["question_id"], spans["source"], spans["char_start"], spans["char_end"], strict=True):
        if pd.notna(s) and pd.notna(e):
            spans_by_q[str(qid)].append((str(src), int(s), int(e)))
    print(f"index {args.index}: {len(index.text_units)} text units, {len(index.entities)} entities; "
          f"{len(questions)} questions; budget {args.budget} tokens; setup {time.perf_counter() - t0:.1f} s")

    builder = LocalContextBuilder(index, {"max_context_tokens": args.budget})
    tok = index.tokenizer
    rows: list[dict[str, Any]] = []
    t1 = time.perf_counter()
    for q in questions.itertuples():
        question, evidence_text = str(q.question), str(q.evidence)
        qvec = embedder.transform([question])[0]
        contexts: dict[str, tuple[str, list[str]]] = {}
        for strategy in STRATEGIES:
            ctx = builder.build(question, query_vector=qvec, text_unit_strategy=strategy)
            contexts[f"local-{strategy}"] = (ctx.text, list(ctx.text_unit_ids))
        # DRIFT-like: follow-ups from the top linked entity names, each with a third of the budget
        first = builder.build(question, query_vector=qvec)
        texts, ids = [], []
        for ent in first.entities[:3]:
            follow = f"{ent.title}: {question}"
            sub = builder.build(follow, query_vector=embedder.transform([follow])[0], max_context_tokens=args.budget // 3,
                                text_unit_prop=0.9, community_prop=0.1)
            texts.append(sub.text)
            ids.extend(sub.text_unit_ids)
        contexts["drift-followups"] = ("\n\n".join(texts), ids)
        # basic search: nearest text units while they fit
        chosen, used, parts = [], 0, []
        for pos, _score in unit_vectors.search(qvec, 50):
            unit = index.text_units[pos]
            cost = tok.count(unit.text)
            if used + cost > args.budget:
                continue
            chosen.append(unit.id)
            parts.append(unit.text)
            used += cost
        contexts["basic"] = ("\n\n".join(parts), chosen)

        evidence = content_words(evidence_text)
        q_spans = spans_by_q.get(str(q.id), [])
        for method, (text, unit_ids) in contexts.items():
            words = content_words(text)
            real_ids = [unit_id_of[u] for u in dict.fromkeys(unit_ids) if u in unit_id_of]
            ranges = [units[u] for u in real_ids if u in units and u in unit_pos]
            rows.append({
                "method": method,
                "type": q.question_type,
                "recall": len(evidence & words) / len(evidence) if evidence else np.nan,
                "span_hit": float(np.mean([span_hit(s, ranges) for s in q_spans])) if q_spans else np.nan,
                "tokens": tok.count(text),
            })
    df = pd.DataFrame(rows)
    elapsed = time.perf_counter() - t1
    pd.set_option("display.width", 200)
    print(f"\ncontexts built in {elapsed:.1f} s ({len(df)} contexts)\n")
    for metric, label in (("recall", "evidence token recall"), ("span_hit", "silver-span hit rate (token_recall >= 0.8)")):
        table = df.pivot_table(index="method", columns="type", values=metric, aggfunc="mean")
        table["ALL"] = df.groupby("method")[metric].mean()
        print(f"{label}:\n{table.round(3).to_string()}\n")
    print(f"mean context tokens:\n{df.groupby('method')['tokens'].mean().round(0).to_string()}\n")
    local = df[df["method"].str.startswith("local-")].groupby("method")[["recall", "span_hit"]].mean()
    local["score"] = local["recall"] + local["span_hit"]
    best = str(local["score"].idxmax())
    print(f"best local strategy (recall + span hit): {best.removeprefix('local-')} "
          f"(recall {float(local['recall'][best]):.3f}, span hit {float(local['span_hit'][best]):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
