"""Which context reaches the evidence? GraphRAG-Bench novel and medical development questions.

    .venv/bin/python -m benchmarks.evidence_recall --novel-index DIR --medical-index DIR \\
        [--budgets 4000 8000 12000] [--sample N] [--half all|tune|confirm] [--set key=value ...] [--csv FILE]
    .venv/bin/python -m benchmarks.evidence_recall --report FILE [FILE ...]   # tables of saved runs

Build the indexes first (`python -m benchmarks.index_build --out DIR`, and with
`--corpus .../corpus/medical.parquet` for medical). The medical text is copyrighted: internal benchmark only.
For each question and budget, every method builds one context of at most that many tokens:

- `local-<strategy>`: `LocalContextBuilder` with each text-unit strategy (GraphRAG's shares unless
  `--set` changes them; `hybrid` gets the question vector from the index's offline embedder);
- `drift-followups`: DRIFT-like follow-up contexts built with DRIFT's own local-context settings
  (`DriftSearchConfig().local_context()`), one per follow-up question made from each of the top 3
  linked entity names ("<name>: <question>"), each with a third of the budget;
- `basic`: basic search's Sources table as configured by default (`[basic] mode = "hybrid"`: BM25 and vector
  rankings fused, shown as question-relevant excerpts over the whole budget; no entity tables to pay for);
- `basic-vector`: GraphRAG's basic search (`mode = "vector"`): the nearest text units by vector, whole, best
  first, each added while it fits (50 candidates, so the budget decides);
- `bm25`: plain BM25 over the same text units (`bm25s`, English stopwords), the best units filled into one
  Sources table of the same budget, whole, best first: what a user would write instead of a graph;
- `basic-excerpts` (when `excerpt_tokens` > 0, the default): the same nearest units given the excerpt opportunity
  the hybrid Sources have (`shared_context.passages`, same window size and weight) - a fairness check:
  how much of the gain is excerpting rather than the hybrid candidates.

Metrics per subset and question type: evidence token recall (share of the evidence's content words
present in the context text) and silver-span hit rate (share of silver evidence spans with
token_recall >= 0.8 whose characters are >= 80 % covered by the text shown: whole units, and the
recorded `excerpts` offsets of a unit shown in part; a unit cut without offsets counts for nothing), and the
same hit rate over the silver spans outside the books' front and back matter (`shared_context.boilerplate`:
contents, indexes, licence and edition text, which the local context ranks below the story by design, while
the silver alignment places some evidence there). `--sample N` takes N questions per subset, stratified by question type
(proportional, seeded); `--half tune|confirm` keeps one half of the questions, split by a hash of the
question id, so parameters tuned on one half can be confirmed on the other. Each method's margin over `bm25` is
also given question by question (`margins`: overall and per half, with a 95 % bootstrap interval over the
questions), since a half holds only a few hundred questions with silver spans and its margin moves by about
two points either way with which questions it happens to hold.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from shared_context.basic_context import BasicContext
    from shared_context.local_context import LocalContext

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "graphrag_bench"
_WORD = re.compile(r"\w+", re.UNICODE)
# The method every other is compared with, question by question (`margins`): what a user would write instead.
BASELINE = "bm25"
_STOP_TEXT = (
    "a an the and or of to in on at by for with from as is are was were be been it its this that these those he she "
    "they his her their them who whom which what when where why how not no did does do has have had into over than "
    "then so such also after before during about"
)
_STOP = frozenset(_STOP_TEXT.split())


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1}


def unit_spans(index: Any, books: dict[str, str]) -> dict[int, tuple[str, int, int]]:
    """text unit position -> (book title, char start, char end); chunks are exact slices of the book."""
    doc_title = {d.id: d.title for d in index.documents}
    out: dict[int, tuple[str, int, int]] = {}
    cursor: dict[str, int] = defaultdict(int)
    for pos, u in enumerate(index.text_units):
        title = doc_title.get(u.document_id)
        if title is None or title not in books:
            continue
        book = books[title]
        start = book.find(u.text, max(cursor[title] - len(u.text), 0))
        if start < 0:
            start = book.find(u.text)
        if start >= 0:
            out[pos] = (title, start, start + len(u.text))
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
    return bool(covered.mean() >= 0.8)


def outside_matter(spans: list[tuple[str, int, int]], matter: dict[str, list[tuple[int, int]]]) -> list[tuple[str, int, int]]:
    """The (book, start, end) spans that overlap none of their book's front or back matter spans."""
    return [(t, s, e) for t, s, e in spans if not any(a < e and b > s for a, b in matter.get(t, []))]


def half_of(question_id: str) -> str:
    return "tune" if hashlib.sha256(question_id.encode()).digest()[0] % 2 == 0 else "confirm"


def stratified_sample(questions: pd.DataFrame, n: int, seed: int = 0) -> pd.DataFrame:
    """About `n` questions, each type in proportion to its share (at least one of each)."""
    if n <= 0 or n >= len(questions):
        return questions
    parts = []
    for _, group in questions.groupby("question_type", sort=True):
        k = max(1, round(n * len(group) / len(questions)))
        parts.append(group.sample(n=min(k, len(group)), random_state=seed))
    return pd.concat(parts)


def parse_sets(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise SystemExit(f"--set needs key=value, got {item!r}")
        value: Any = raw
        for cast in (int, float):
            try:
                value = cast(raw)
                break
            except ValueError:
                continue
        if raw in ("none", "None"):
            value = None
        out[key.strip()] = value
    return out


def context_ranges(ctx: LocalContext | BasicContext, units: dict[int, tuple[str, int, int]]) -> list[tuple[str, int, int]]:
    """Book character ranges of the text units shown: whole units, and the exact excerpt of a unit shown
    trimmed to its question-like part; a unit cut without recorded offsets counts for nothing."""
    sources = ctx.tables.sources
    out: list[tuple[str, int, int]] = []
    for r in [] if sources is None else sources.rows:
        span = units.get(r.position)
        if span is None:
            continue
        if not r.truncated:
            out.append(span)
        else:
            out.extend((span[0], span[1] + int(a), span[1] + int(b)) for a, b in r.excerpts)
    return out


def basic_excerpts(index: Any, hits: list[tuple[int, float]], question: str, budget: int,
                   units: dict[int, tuple[str, int, int]], excerpt_tokens: int, weight: float,
                   rrf_k: int) -> tuple[str, list[tuple[str, int, int]]]:
    """Basic search's nearest units given the same excerpt opportunity as the hybrid Sources (fairness
    check): `passages.select_excerpts` over the vector ranking, in one Sources table of `budget` tokens."""
    from shared_context.local_rows import join_spans
    from shared_context.local_sources import SOURCE_COLUMNS
    from shared_context.passages import select_excerpts
    from shared_context.tables import SectionBuilder, SourceRecord

    builder: SectionBuilder[SourceRecord] = SectionBuilder("Sources", SOURCE_COLUMNS, index.tokenizer, budget)
    room = builder.remaining - max(builder.remaining // 50, 4)
    ranges: list[tuple[str, int, int]] = []
    for ex in select_excerpts(index, [p for p, _ in hits], question, room, excerpt_tokens=excerpt_tokens,
                              weight=weight, rrf_k=rrf_k):
        t = index.text_units[ex.unit]
        shown = t.text if ex.whole else join_spans(t.text, ex.spans)
        if builder.add(SourceRecord(t.short_id, shown, position=ex.unit)) and ex.unit in units:
            title, start, _ = units[ex.unit]
            ranges.extend((title, start + a, start + b) for a, b in ex.spans)
    return builder.finish().text, ranges


class PlainBM25:
    """`bm25s` over the index's text units, English stopwords: the baseline a user would pick instead."""

    def __init__(self, texts: list[str]) -> None:
        import bm25s

        self._bm25s = bm25s
        self.retriever = bm25s.BM25()
        self.retriever.index(bm25s.tokenize(texts, stopwords="en", show_progress=False), show_progress=False)
        self.n = len(texts)

    def top(self, question: str, k: int) -> list[tuple[int, float]]:
        tokens = self._bm25s.tokenize([question], stopwords="en", show_progress=False)
        docs, scores = self.retriever.retrieve(tokens, k=min(k, self.n), show_progress=False)
        return [(int(d), float(s)) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


def run_subset(subset: str, index_dir: Path, args: argparse.Namespace, overrides: dict[str, Any]) -> list[dict[str, Any]]:
    from engines.config import BasicSearchConfig, DriftSearchConfig
    from engines.models.embedding_offline import OfflineEmbedder
    from shared_context import LocalContextBuilder, load_index
    from shared_context.basic_context import basic_context, question_basic_context, top_text_units
    from shared_context.boilerplate import boilerplate_spans
    from shared_context.text_unit_selection import STRATEGIES

    t0 = time.perf_counter()
    index = load_index(index_dir)
    embedder = OfflineEmbedder.load(index_dir / "graphroute" / "embedder.npz")
    books_df = pd.read_parquet(args.data / "corpus" / f"{subset}.parquet")
    books = dict(zip(books_df["corpus_name"].astype(str), books_df["context"].astype(str), strict=True))
    units = unit_spans(index, books)
    matter = {title: boilerplate_spans(text) for title, text in books.items()}
    questions = pd.read_parquet(args.data / "questions" / f"{subset}_questions_dev.parquet")
    if args.half != "all":
        questions = questions[[half_of(str(i)) == args.half for i in questions["id"]]]
    questions = stratified_sample(questions, args.sample)
    spans = pd.read_parquet(args.data / "evidence_alignment" / "silver_evidence_spans_dev.parquet")
    spans = spans[(spans["subset"] == subset) & (spans["token_recall"] >= 0.8)]
    spans_by_q: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for qid, src, s, e in zip(spans["question_id"], spans["source"], spans["char_start"], spans["char_end"], strict=True):
        if pd.notna(s) and pd.notna(e):
            spans_by_q[str(qid)].append((str(src), int(s), int(e)))
    strategies = [s for s in STRATEGIES if not args.strategies or s in args.strategies]
    print(f"{subset}: {len(index.text_units)} text units, {len(index.entities)} entities; {len(questions)} questions; "
          f"budgets {args.budgets}; setup {time.perf_counter() - t0:.1f} s", flush=True)

    plain_bm25 = PlainBM25([u.text for u in index.text_units])
    basic_cfg = BasicSearchConfig()
    builder = LocalContextBuilder(index, overrides)
    # DRIFT keeps its own shares, budget, entity counts and strategy; other --set keys reach it too
    drift_base = DriftSearchConfig().local_context()
    drift_params = drift_base.builder_fields() | {
        k: v for k, v in overrides.items() if k not in drift_base.model_fields_set
    }
    drift_builder = LocalContextBuilder(index, drift_params)
    tok = index.tokenizer
    rows: list[dict[str, Any]] = []
    t1 = time.perf_counter()
    for n, q in enumerate(questions.itertuples(), start=1):
        question = str(q.question)
        qvec = embedder.transform([question])[0]
        evidence = content_words(str(q.evidence))
        q_spans = spans_by_q.get(str(q.id), [])
        story = outside_matter(q_spans, matter)
        hits, _ = top_text_units(index, question, 50, qvec)
        for budget in args.budgets:
            contexts: dict[str, tuple[str, list[tuple[str, int, int]]]] = {}
            for strategy in strategies:
                ctx = builder.build(question, query_vector=qvec, text_unit_strategy=strategy, max_context_tokens=budget)
                contexts[f"local-{strategy}"] = (ctx.text, context_ranges(ctx, units))
            if not args.no_drift:
                first = drift_builder.build(question, query_vector=qvec, max_context_tokens=budget)
                texts, ranges = [], []
                for ent in first.entities[:3]:
                    follow = f"{ent.title}: {question}"
                    sub = drift_builder.build(follow, query_vector=embedder.transform([follow])[0],
                                              max_context_tokens=budget // 3)
                    texts.append(sub.text)
                    ranges.extend(context_ranges(sub, units))
                contexts["drift-followups"] = ("\n\n".join(texts), ranges)
            vector_only = basic_context(index, hits, budget)
            shown = [] if vector_only.tables.sources is None else [r.position for r in vector_only.tables.sources.rows]
            contexts["basic-vector"] = (vector_only.text, [units[p] for p in shown if p in units])
            basic = question_basic_context(index, question, budget, query_vector=qvec,
                                           excerpt_tokens=basic_cfg.excerpt_tokens, rrf_k=basic_cfg.rrf_k)
            contexts["basic"] = (basic.text, context_ranges(basic, units))
            bm25 = basic_context(index, plain_bm25.top(question, 100), budget)
            shown = [] if bm25.tables.sources is None else [r.position for r in bm25.tables.sources.rows]
            contexts["bm25"] = (bm25.text, [units[p] for p in shown if p in units])
            if builder.params.excerpt_tokens > 0:
                contexts["basic-excerpts"] = basic_excerpts(
                    index, hits, question, budget, units, builder.params.excerpt_tokens,
                    builder.params.excerpt_weight, builder.params.hybrid_rrf_k)
            for method, (text, ranges) in contexts.items():
                rows.append({
                    "subset": subset,
                    "question": str(q.id),
                    "half": half_of(str(q.id)),
                    "budget": budget,
                    "method": method,
                    "type": q.question_type,
                    "recall": len(evidence & content_words(text)) / len(evidence) if evidence else np.nan,
                    "span_hit": float(np.mean([span_hit(s, ranges) for s in q_spans])) if q_spans else np.nan,
                    "span_hit_story": float(np.mean([span_hit(s, ranges) for s in story])) if story else np.nan,
                    "tokens": tok.count(text) if args.count_tokens else np.nan,
                })
        if n % 100 == 0:
            print(f"  {subset}: {n}/{len(questions)} questions, {time.perf_counter() - t1:.0f} s", flush=True)
    print(f"{subset}: contexts built in {time.perf_counter() - t1:.1f} s", flush=True)
    return rows


def margins(df: pd.DataFrame, baseline: str = BASELINE, n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Each method's span-hit margin over `baseline`, paired by question (only questions with silver spans),
    per subset, budget and half ("all", "tune", "confirm"), with a 95 % percentile bootstrap interval over
    the questions (seeded): how far a half's margin can move by which questions happen to be in it."""
    cols = ["subset", "budget", "half", "method", "margin", "low", "high", "questions"]
    if "question" not in df or baseline not in set(df["method"]):
        return pd.DataFrame(columns=cols)
    rng = np.random.default_rng(seed)
    wide = df.pivot_table(index=["subset", "budget", "half", "question"], columns="method", values="span_hit",
                          aggfunc="first").reset_index()
    out: list[dict[str, Any]] = []
    for (subset, budget), part in wide.groupby(["subset", "budget"], sort=True):
        for half in ("all", "tune", "confirm"):
            rows = part if half == "all" else part[part["half"] == half]
            for method in sorted(m for m in df["method"].unique() if m != baseline and m in rows):
                diff = (rows[method] - rows[baseline]).dropna().to_numpy(dtype=np.float64)
                if not len(diff):
                    continue
                boot = diff[rng.integers(0, len(diff), size=(n_boot, len(diff)))].mean(axis=1)
                low, high = np.percentile(boot, [2.5, 97.5])
                out.append({"subset": subset, "budget": int(budget), "half": half, "method": method,
                            "margin": float(diff.mean()), "low": float(low), "high": float(high),
                            "questions": len(diff)})
    return pd.DataFrame(out, columns=cols)


def report(df: pd.DataFrame) -> None:
    pd.set_option("display.width", 220)
    for (subset, budget), part in df.groupby(["subset", "budget"], sort=True):
        print(f"\n=== {subset}, budget {budget} ({part['method'].value_counts().iloc[0]} questions) ===")
        for metric, label in (("recall", "evidence token recall"), ("span_hit", "silver-span hit rate"),
                              ("span_hit_story", "silver-span hit rate, spans outside front/back matter")):
            if metric not in part:
                continue
            table = part.pivot_table(index="method", columns="type", values=metric, aggfunc="mean")
            table["ALL"] = part.groupby("method")[metric].mean()
            print(f"{label}:\n{table.round(3).to_string()}\n")
        if part["tokens"].notna().any():
            print(f"mean context tokens:\n{part.groupby('method')['tokens'].mean().round(0).to_string()}\n")
    if df["half"].nunique() > 1:
        halves = df.pivot_table(index=["subset", "budget", "method"], columns="half",
                                values=[c for c in ("recall", "span_hit", "span_hit_story") if c in df],
                                aggfunc="mean")
        print(f"by half (tune = where parameters were chosen, confirm = check):\n{halves.round(3).to_string()}\n")
    gaps = margins(df)
    if len(gaps):
        shown = gaps.set_index(["subset", "budget", "method", "half"])[["margin", "low", "high", "questions"]]
        print(f"span-hit margin over {BASELINE}, paired by question, 95 % bootstrap interval:\n"
              f"{shown.round(3).to_string()}\n")
    local = df[df["method"].str.startswith("local-")].groupby("method")[["recall", "span_hit"]].mean()
    local["score"] = local["recall"] + local["span_hit"]
    best = str(local["score"].idxmax())
    print(f"best local strategy over all subsets and budgets (recall + span hit): {best.removeprefix('local-')} "
          f"(recall {float(local['recall'][best]):.3f}, span hit {float(local['span_hit'][best]):.3f})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--novel-index", type=Path, help="index built from the novel corpus")
    ap.add_argument("--medical-index", type=Path, help="index built from the medical corpus")
    ap.add_argument("--data", type=Path, default=DATA, help=f"GraphRAG-Bench folder (default {DATA})")
    ap.add_argument("--budgets", type=int, nargs="+", default=[4000, 8000, 12000])
    ap.add_argument("--sample", type=int, default=0, help="questions per subset, stratified by type (0 = all)")
    ap.add_argument("--half", choices=("all", "tune", "confirm"), default="all")
    ap.add_argument("--strategies", nargs="*", default=None, help="local strategies to run (default: all)")
    ap.add_argument("--no-drift", action="store_true", help="skip the DRIFT follow-up contexts")
    ap.add_argument("--count-tokens", action="store_true", help="also report mean context tokens")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="local-context parameter key=value")
    ap.add_argument("--csv", type=Path, help="write the per-question rows here")
    ap.add_argument("--json", type=Path, help="write the means per subset, method and budget here (with the "
                    "command, date and machine)")
    ap.add_argument("--report", type=Path, nargs="+", help="only print the tables of earlier --csv files")
    args = ap.parse_args(argv)
    if args.report:
        report(pd.concat([pd.read_csv(f) for f in args.report], ignore_index=True))
        return 0
    if not args.novel_index and not args.medical_index:
        ap.error("give --novel-index and/or --medical-index")
    if not (args.data / "questions").exists():
        ap.error(f"GraphRAG-Bench data not found in {args.data} (use --data)")
    overrides = parse_sets(args.sets)
    rows: list[dict[str, Any]] = []
    for subset, index_dir in (("novel", args.novel_index), ("medical", args.medical_index)):
        if index_dir is not None:
            rows.extend(run_subset(subset, index_dir, args, overrides))
    df = pd.DataFrame(rows)
    if args.csv:
        df.to_csv(args.csv, index=False)
    report(df)
    if args.json:
        write_json(df, args.json)
    return 0


# The rows the benchmarks page leads with: the default local context, basic search and plain BM25 at GraphRAG's
# default budget.
HEADLINE_METHODS = ("local-hybrid", "basic", "bm25")
HEADLINE_BUDGET = 12_000


def _rounded(x: float) -> float | None:
    return None if pd.isna(x) else round(float(x), 4)


def write_json(df: pd.DataFrame, path: Path) -> None:
    import json

    from benchmarks.common import run_facts

    out = []
    for (subset, method, budget), part in df.groupby(["subset", "method", "budget"], sort=True):
        out.append({"subset": subset, "method": method, "budget": int(budget), "questions": len(part),
                    "span_hit": round(float(part["span_hit"].mean()), 4),
                    "recall": round(float(part["recall"].mean()), 4),
                    **({"span_hit_story": _rounded(part["span_hit_story"].mean())} if "span_hit_story" in part else {}),
                    "headline": bool(method in HEADLINE_METHODS and budget == HEADLINE_BUDGET)})
    about = ("Share of the silver evidence spans of GraphRAG-Bench development questions that each context shows "
             "(a span counts when 80 % of its characters are shown), at equal token budgets, on offline indexes "
             "built by `graphroute index` from the novel and medical corpora; `span_hit_story` counts only the spans "
             "outside the books' front and back matter (contents, indexes, title pages), which the local context "
             "ranks below the story. Development questions: the retrieval parameters were chosen on them.")
    gaps = [{**{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}}
            for row in margins(df).to_dict("records")
            if row["method"] in HEADLINE_METHODS]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**run_facts(), "about": about, "rows": out, "margins_vs_bm25": gaps}, indent=1)
                    + "\n")


if __name__ == "__main__":
    sys.exit(main())
