"""Evaluate the router's question classifier: `python -m benchmarks.router_eval [--data-dir ../shared/data]`.

Prints, for the classifier trained as `python -m router.train` trains it:

1. development figures by 5-fold cross-validation over all labelled questions (the project's set,
   GraphRAG-Bench novel + medical, MultiHop-RAG), overall and per data set: every figure here is on
   questions the fold's model did not see (held out by fold);
2. leave-one-source-out: train without one source, test on all of it (fully held-out source). The
   project's set is the only one with a ``global`` class, so when it is held out the model has never seen
   that class; that case is also reported leaving out one *domain* of the project's set at a time;
3. a keyword-rules baseline (the kind of router tutorials use) on the same sets;
4. the packaged model's latency per question without entity linking (p50/p95), first pass and warm.

GraphRAG-Bench and MultiHop-RAG have no ``global`` questions: macro-F1 is taken over the labels present in
each test set.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.metrics import confusion_matrix, f1_score
from sklearn.model_selection import StratifiedKFold

from router import train
from router.classifier import Classifier
from router.train import Example

LABELS = ("local", "global", "drift")


def metrics(truth: Sequence[str], predicted: Sequence[str]) -> dict[str, Any]:
    present = [label for label in LABELS if label in set(truth)]
    cm = confusion_matrix(truth, predicted, labels=list(LABELS))
    recall = {label: float(cm[i, i] / cm[i].sum()) for i, label in enumerate(LABELS) if cm[i].sum()}
    return {
        "n": len(truth),
        "accuracy": float(np.mean([t == p for t, p in zip(truth, predicted, strict=True)])),
        "macro_f1": float(f1_score(truth, predicted, labels=present, average="macro", zero_division=0)),
        "recall": recall,
        "confusion": cm.tolist(),
    }


def expected_calibration_error(truth: Sequence[str], decisions: Sequence[tuple[str, float]], bins: int = 10) -> float:
    conf = np.array([c for _, c in decisions])
    correct = np.array([p == t for (p, _), t in zip(decisions, truth, strict=True)], dtype=float)
    edges = np.linspace(0.0, 1.0, bins + 1)
    total = 0.0
    for lo, hi in itertools.pairwise(edges):
        mask = (conf > lo) & (conf <= hi)
        if mask.any():
            total += mask.mean() * abs(correct[mask].mean() - conf[mask].mean())
    return float(total)


def print_block(title: str, m: dict[str, Any], note: str = "") -> None:
    recall = "  ".join(f"{k}={v:.3f}" for k, v in m["recall"].items())
    print(f"\n{title}{'  (' + note + ')' if note else ''}")
    print(f"  n={m['n']}  accuracy={m['accuracy']:.3f}  macro-F1={m['macro_f1']:.3f}  recall: {recall}")
    print("  confusion (rows = true, columns = predicted):  " + "  ".join(f"{lab:>6}" for lab in LABELS))
    for label, row in zip(LABELS, m["confusion"], strict=True):
        if sum(row):
            print(f"  {label:>46}:  " + "  ".join(f"{v:>6}" for v in row))


def predict_all(payload: dict[str, Any], examples: Sequence[Example]) -> list[tuple[str, float]]:
    model = Classifier(payload)
    out: list[tuple[str, float]] = []
    for e in examples:
        decision = model.predict(e.question)
        out.append((decision.engine, decision.confidence))
    return out


def cross_validate(examples: Sequence[Example], folds: int = 5) -> list[tuple[str, float]]:
    strata = [f"{e.subset}:{e.label}" for e in examples]
    predictions: list[tuple[str, float]] = [("", 0.0)] * len(examples)
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=0)
    for k, (train_idx, test_idx) in enumerate(splitter.split(np.zeros(len(examples)), strata), 1):
        started = time.perf_counter()
        payload = train.fit([examples[i] for i in train_idx])
        for i, pred in zip(test_idx, predict_all(payload, [examples[i] for i in test_idx]), strict=True):
            predictions[i] = pred
        print(f"  fold {k}/{folds} done in {time.perf_counter() - started:.0f}s", flush=True)
    return predictions


# ------------------------------------------------------------------------------ keyword baseline

_GLOBAL_WORDS = re.compile(r"\b(?:themes?|overall|summari[sz]e|summary|trends?|main|across|in general|whole|"
                           r"all the|most common)\b|主题|总体|整体|概括|总结|趋势|所有", re.IGNORECASE)
_DRIFT_WORDS = re.compile(r"\b(?:compare|comparison|differ\w*|relationship|why|how did|how does|affect\w*|"
                          r"impact|influence\w*|between|before|after)\b|比较|区别|关系|为什么|影响|之间", re.IGNORECASE)


def keyword_rule(question: str) -> str:
    """The usual tutorial router: theme words -> global, relation/why/compare words -> DRIFT, else local."""
    if _GLOBAL_WORDS.search(question):
        return "global"
    if _DRIFT_WORDS.search(question):
        return "drift"
    return "local"


# ---------------------------------------------------------------------------------------- latency


def latency(questions: Sequence[str]) -> dict[str, float]:
    started = time.perf_counter()
    model = Classifier.load()
    load_ms = (time.perf_counter() - started) * 1e3
    result: dict[str, float] = {"load_ms": load_ms}
    for name in ("first_pass", "warm"):
        timings = []
        for q in questions:
            t0 = time.perf_counter()
            model.predict(q)
            timings.append(time.perf_counter() - t0)
        result[f"{name}_p50_ms"] = statistics.median(timings) * 1e3
        result[f"{name}_p95_ms"] = float(np.percentile(timings, 95)) * 1e3
    return result


def _handwritten_questions() -> list[str]:
    from router.question_bank import load_handwritten

    return [str(row["question"]) for row in load_handwritten()]


def subset_report(examples: Sequence[Example], preds: Sequence[str], key: Callable[[Example], str]) -> dict[str, Any]:
    out = {}
    for group in sorted({key(e) for e in examples}):
        idx = [i for i, e in enumerate(examples) if key(e) == group]
        out[group] = metrics([examples[i].label for i in idx], [preds[i] for i in idx])
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=train.DEFAULT_DATA_DIR)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--skip-domains", action="store_true", help="skip the leave-one-domain-out runs")
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    args = parser.parse_args(argv)
    if not (args.data_dir / "graphrag_bench").is_dir():
        parser.error(f"{args.data_dir} has no graphrag_bench/ folder; pass --data-dir")
    examples = train.load_all(args.data_dir)
    counts = Counter((e.subset, e.label) for e in examples)
    print(f"labelled questions: {len(examples)}  " + ", ".join(f"{s}/{lab}={n}" for (s, lab), n in sorted(counts.items())))
    report: dict[str, Any] = {}

    print(f"\n=== 1. development: {args.folds}-fold cross-validation (every prediction is on a held-out fold) ===")
    cv = cross_validate(examples, args.folds)
    cv_labels = [p for p, _ in cv]
    truth = [e.label for e in examples]
    report["cv_all"] = metrics(truth, cv_labels)
    report["cv_all"]["ece"] = expected_calibration_error(truth, cv)
    print_block("all sources", report["cv_all"], f"expected calibration error {report['cv_all']['ece']:.3f}")
    report["cv_by_subset"] = subset_report(examples, cv_labels, lambda e: e.subset)
    for subset, m in report["cv_by_subset"].items():
        print_block(subset, m, "macro-F1 over the labels present" if subset != "graphroute" else "")
    report["cv_by_lang"] = subset_report([e for e in examples if e.source == "graphroute"],
                                         [p for p, e in zip(cv_labels, examples, strict=True) if e.source == "graphroute"],
                                         lambda e: e.lang)
    for lang, m in report["cv_by_lang"].items():
        print_block(f"graphroute set, language {lang}", m)

    print("\n=== 2. leave-one-source-out (the test source is entirely held out) ===")
    report["loso"] = {}
    for source in ("graphroute", "graphrag_bench", "multihop"):
        train_set = [e for e in examples if e.source != source]
        test_set = [e for e in examples if e.source == source]
        payload = train.fit(train_set)
        preds = [p for p, _ in predict_all(payload, test_set)]
        m = metrics([e.label for e in test_set], preds)
        report["loso"][source] = m
        note = "macro-F1 over the labels present"
        if source == "graphroute":
            note = "no global question is left in training, so global cannot be predicted"
            seen = [i for i, e in enumerate(test_set) if e.label != "global"]
            m_seen = metrics([test_set[i].label for i in seen], [preds[i] for i in seen])
            report["loso"]["graphroute_local_drift_only"] = m_seen
            print_block("held out: graphroute", m, note)
            print_block("held out: graphroute, scored on its local + drift questions only", m_seen)
            continue
        print_block(f"held out: {source}", m, note)

    if not args.skip_domains:
        print("\n=== 2b. leave-one-domain-out within the project's set (other sources stay in training) ===")
        domains = sorted({e.domain for e in examples if e.source == "graphroute"})
        groups = [set(domains[i::3]) for i in range(3)]  # three fits, each holding out a third of the domains
        truth_d: list[str] = []
        preds_d: list[str] = []
        for group in groups:
            held = [e for e in examples if e.source == "graphroute" and e.domain in group]
            payload = train.fit([e for e in examples if not (e.source == "graphroute" and e.domain in group)])
            truth_d += [e.label for e in held]
            preds_d += [p for p, _ in predict_all(payload, held)]
        report["lodo_graphroute"] = metrics(truth_d, preds_d)
        print_block(f"graphroute set, its {len(domains)} domains held out a third at a time", report["lodo_graphroute"],
                    "; ".join(", ".join(sorted(g)) for g in groups))

    print("\n=== 2c. the project's hand-written questions, trained without them (templates + other sources) ===")
    handwritten = {q for q in _handwritten_questions()}
    held = [e for e in examples if e.source == "graphroute" and e.question in handwritten]
    payload = train.fit([e for e in examples if not (e.source == "graphroute" and e.question in handwritten)])
    report["handwritten_held_out"] = metrics([e.label for e in held], [p for p, _ in predict_all(payload, held)])
    print_block("hand-written questions held out", report["handwritten_held_out"],
                "no template-generated sibling can leak into these")

    print("\n=== 3. keyword-rules baseline (no training; every set is unseen) ===")
    rule_preds = [keyword_rule(e.question) for e in examples]
    report["keywords_all"] = metrics(truth, rule_preds)
    print_block("keyword rules, all sources", report["keywords_all"])
    report["keywords_by_subset"] = subset_report(examples, rule_preds, lambda e: e.subset)
    for subset, m in report["keywords_by_subset"].items():
        print_block(f"keyword rules, {subset}", m)

    print("\n=== 4. latency of the packaged model, no entity linking ===")
    sample = [e.question for e in examples[::4]]
    report["latency"] = latency(sample)
    lat = report["latency"]
    print(f"  {len(sample)} questions; model load {lat['load_ms']:.0f} ms; first pass p50 {lat['first_pass_p50_ms']:.3f} ms"
          f" p95 {lat['first_pass_p95_ms']:.3f} ms; warm p50 {lat['warm_p50_ms']:.3f} ms p95 {lat['warm_p95_ms']:.3f} ms")

    loso_values = [report["loso"][s]["macro_f1"] for s in ("graphrag_bench", "multihop")]
    print("\n=== summary against the targets ===")
    print(f"  development macro-F1 (CV, all sources): {report['cv_all']['macro_f1']:.3f}  (target >= 0.85)")
    print(f"  leave-one-source-out macro-F1: graphrag_bench {loso_values[0]:.3f}, multihop {loso_values[1]:.3f}, "
          f"graphroute {report['loso']['graphroute']['macro_f1']:.3f} "
          f"(local+drift only {report['loso']['graphroute_local_drift_only']['macro_f1']:.3f})  (target >= 0.75)")
    print(f"  p50 latency: {lat['warm_p50_ms']:.3f} ms warm, {lat['first_pass_p50_ms']:.3f} ms first pass  (target <= 1 ms)")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
        print(f"  wrote {args.json}")


if __name__ == "__main__":
    main()
