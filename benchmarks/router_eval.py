"""Evaluate the router's question classifier: `python -m benchmarks.router_eval [--parts ...] [--json OUT]`.

Every figure is on questions the model scoring them did not see, and every part also reports the calibration
(expected calibration error) and the **confident-error rate**: the share of all questions routed wrongly with
confidence >= 0.9 (such errors reach neither the model second opinion nor the cost-aware default).

Parts (`--parts`, comma-separated; default all):

* `cv` - grouped cross-validation (the headline): 5 folds over all labelled questions (the project's own
  ``graphroute`` and ``collections`` sets, GraphRAG-Bench novel + medical, MultiHop-RAG), every question expanded
  from one template - and each hand-written or external question on its own - in exactly one fold. Each fold
  trains the whole model (`tools.routing.train`, wording and confidence stages) on the other folds; no index;
* `loso` - leave-one-source-out: trained without one source, tested on all of it; once as trained and once
  with the cue lexicons switched off (cue features and their interactions zeroed in training, and no cue counted
  in the confidence stage). The lexicons were written with every source in view, so the second is the figure
  that holds nothing of the held-out source;
* `new` - the three new-styles sets, packaged model, no index. Set 1 was looked at during development, set 2
  written before further tuning and only its totals looked at (its per-question results are in `--json`), set 3
  written last: only its totals are reported;
* `index` - the with-index evaluation: questions written for the podcast and earnings-call offline indexes
  (`tools/routing/data/index_eval.jsonl`, whose per-question results were looked at, and `index_eval_2.jsonl`,
  of which only totals are reported, though the one question routing with the index got wrong was looked at to
  find why) and for the podcast, earnings-call and novel indexes (`index_eval_3.jsonl`, written last, totals
  only; the index stage saw none of them) routed the way `Router.aroute` routes them (index probe, confidence,
  cost-aware default below the threshold), next to the same questions without an index; plus the index stage's
  leave-one-index-out figures from training;
* `carol` - the 30 labelled Christmas Carol route-bench questions through `Router.aroute`, with and without the
  index's probe;
* `baselines` - two keyword routers (no training): the keyword rules of the enterprise GraphRAG guide and the usual tutorial
  rule set;
* `latency` - per question, p50/p95: without an index, and with linking and the index probe on a synthetic
  10,000-entity index (built once in a temp folder).

GraphRAG-Bench and MultiHop-RAG have no ``global`` questions: macro-F1 is taken over the labels present.
The JSON report records the command, the date, the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import itertools
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from sklearn.metrics import confusion_matrix, f1_score

from benchmarks.common import CAROL_INDEX
from router.classifier import Classifier
from router.keyword_router import keyword_route
from tools.routing import calibration, index_fit, train
from tools.routing import examples as data
from tools.routing.examples import Example

if TYPE_CHECKING:
    from shared_context.index import Index

LABELS = ("local", "global", "drift")
CONFIDENT = 0.9
CAROL_QUERIES = Path(__file__).resolve().parent / "queries" / "christmas_carol.jsonl"
NEW_STYLE_SETS = {  # report key -> (file, how it was used)
    "new_styles": (data.NEW_STYLES, "set 1, looked at during development"),
    "new_styles_2": (data.NEW_STYLES_2, "set 2, written before further tuning; only its totals looked at"),
    "new_styles_3": (data.NEW_STYLES_3, "set 3, written last; only its totals looked at"),
}
PER_QUESTION_SHOWN = ("new_styles", "new_styles_2")  # the sets whose misrouted questions the report lists


@dataclass(frozen=True)
class Routed:
    truth: str
    engine: str
    confidence: float
    alt: str = ""  # a second route that is also right (the label map's `alt` reading)

    @property
    def right(self) -> bool:
        return self.engine == self.truth or (bool(self.alt) and self.engine == self.alt)

    @property
    def scored_truth(self) -> str:
        """The label a confusion matrix compares with: the also-right reading when the router chose it."""
        return self.engine if self.right else self.truth


def metrics(rows: Sequence[Routed], threshold: float = 0.55) -> dict[str, Any]:
    """Accuracy, macro-F1 over the labels present, recall per label, confusion, calibration, confident errors,
    the accuracy of DRIFT and global decisions per confidence bin, and the expected model calls per question.
    A route the label map's `alt` reading also accepts counts as right (never the cheaper right route as an
    error)."""
    truth = [r.scored_truth for r in rows]
    predicted = [r.engine for r in rows]
    present = [label for label in LABELS if label in set(truth)]
    cm = confusion_matrix(truth, predicted, labels=list(LABELS))
    wrong = [r for r in rows if not r.right]
    return {
        "n": len(rows),
        "accuracy": float(np.mean([r.right for r in rows])) if rows else 0.0,
        "macro_f1": float(f1_score(truth, predicted, labels=present, average="macro", zero_division=0)),
        "recall": {label: float(cm[i, i] / cm[i].sum()) for i, label in enumerate(LABELS) if cm[i].sum()},
        "confusion": cm.tolist(),
        "ece": expected_calibration_error(rows),
        "confident_errors": sum(r.confidence >= CONFIDENT for r in wrong) / max(1, len(rows)),
        "confident_errors_at_0.8": sum(r.confidence >= COMMITTED for r in wrong) / max(1, len(rows)),
        "errors_below_threshold": float(np.mean([r.confidence < threshold for r in wrong])) if wrong else 0.0,
        "reliability": reliability(rows),
        "expensive_reliability": reliability([r for r in rows if r.engine in EXPENSIVE], EXPENSIVE_BANDS),
        "reliability_by_engine": {e: reliability([r for r in rows if r.engine == e], EXPENSIVE_BANDS) for e in LABELS},
        "expected_calls": expected_calls(rows),
    }


EXPENSIVE = ("drift", "global")
COMMITTED = 0.8  # the confidence from which a DRIFT or global decision must be right at least 0.9 of the time
EXPENSIVE_BANDS = ((0.0, 0.55), (0.55, 0.7), (0.7, 0.8), (0.8, 0.9), (0.9, 1.01))
# Model calls per engine for expected-cost figures: `Router`'s estimates on the Christmas Carol offline index (local
# search and basic 1, global search pre-ranked as the router runs it, DRIFT with its default follow-ups), measured
# by `engine_calls` when that index is present.
NOMINAL_CALLS = {"local": 1.0, "global": 2.0, "drift": 21.0}
CALLS = dict(NOMINAL_CALLS)  # `main` replaces them by the measured estimates


def engine_calls() -> dict[str, float]:
    """Mean estimated calls per routed engine over the Christmas Carol route-bench questions (no model call)."""
    if not CAROL_INDEX.exists():
        return dict(NOMINAL_CALLS)
    from engines.config import GraphrouteConfig
    from router.router import Router
    from shared_context import load_index

    questions = [json.loads(line)["question"] for line in CAROL_QUERIES.read_text(encoding="utf-8").splitlines()
                 if line.strip()]
    router = Router(load_index(CAROL_INDEX), config=GraphrouteConfig())
    try:
        return {e: float(np.mean([router.lifecycle.routed_engine(e, None).estimate(q).llm_calls for q in questions]))
                for e in LABELS}
    finally:
        router.close()


def expected_calls(rows: Sequence[Routed], calls: dict[str, float] | None = None) -> dict[str, dict[str, float]]:
    """Mean model calls per question and accuracy under each policy, from the decisions alone (offline router):

    * `first_decision`: run the classifier's engine;
    * `after_commitment`: the commitment rule (`router.commitment`, defaults): an expensive route below its
      threshold starts with local search and escalates to it when local is not right (assumes escalation fires
      exactly when local's answer is insufficient, i.e. when local is not a right route);
    * `after_confirmation`: online, the chat model is asked once below the threshold; assumes its vote is the
      label (an upper bound on what the second opinion can do);
    * `always_local`, `always_drift`, and `oracle` (the cheapest right engine, knowing the label)."""
    from engines.config import RouterConfig
    from router.commitment import threshold

    cost = calls or CALLS
    config = RouterConfig()
    out: dict[str, list[tuple[float, bool]]] = {k: [] for k in (
        "first_decision", "after_commitment", "after_confirmation", "always_local", "always_drift", "oracle")}
    for r in rows:
        local_right = r.truth == "local" or r.alt == "local"
        out["first_decision"].append((cost[r.engine], r.right))
        out["always_local"].append((cost["local"], local_right))
        out["always_drift"].append((cost["drift"], r.truth == "drift" or r.alt == "drift"))
        right_engines = [e for e in LABELS if e in (r.truth, r.alt)]
        out["oracle"].append((min(cost[e] for e in right_engines), True))
        needed = threshold(cost[r.engine] / cost["local"], config)
        if r.engine == "local" or r.confidence >= needed:
            out["after_commitment"].append((cost[r.engine], r.right))
            out["after_confirmation"].append((cost[r.engine], r.right))
            continue
        escalated = cost["local"] + (0.0 if local_right else cost[r.engine])
        out["after_commitment"].append((escalated, local_right or r.right))
        voted = min(right_engines, key=lambda e: cost[e])
        out["after_confirmation"].append((1.0 + cost[voted], True))
    return {k: {"calls": round(float(np.mean([c for c, _ in v])), 3) if v else 0.0,
                "accuracy": round(float(np.mean([ok for _, ok in v])), 3) if v else 0.0} for k, v in out.items()}


def expected_calibration_error(rows: Sequence[Routed], bins: int = 10) -> float:
    conf = np.array([r.confidence for r in rows])
    correct = np.array([r.right for r in rows], dtype=float)
    total = 0.0
    for lo, hi in itertools.pairwise(np.linspace(0.0, 1.0, bins + 1)):
        mask = (conf > lo) & (conf <= hi)
        if mask.any():
            total += mask.mean() * abs(correct[mask].mean() - conf[mask].mean())
    return float(total)


def reliability(rows: Sequence[Routed], bands: Sequence[tuple[float, float]] = ((0.0, 0.55), (0.55, 0.7),
                                                                                  (0.7, 0.9), (0.9, 1.01))
                ) -> list[dict[str, float]]:
    """Per confidence band: how many questions, their mean confidence and how many were routed right."""
    out = []
    for lo, hi in bands:
        band = [r for r in rows if lo <= r.confidence < hi]
        if band:
            out.append({"band": f"{lo:.2f}-{min(hi, 1.0):.2f}", "n": len(band),
                        "mean_confidence": round(float(np.mean([r.confidence for r in band])), 3),
                        "accuracy": round(float(np.mean([r.right for r in band])), 3)})
    return out


def print_block(title: str, m: dict[str, Any]) -> None:
    recall = "  ".join(f"{k}={v:.3f}" for k, v in m["recall"].items())
    print(f"\n{title}")
    print(f"  n={m['n']}  accuracy={m['accuracy']:.3f}  macro-F1={m['macro_f1']:.3f}  recall: {recall}")
    print(f"  calibration error {m['ece']:.3f}; confident errors (wrong at >= {CONFIDENT}) "
          f"{m['confident_errors']:.1%} of all; errors below the threshold {m['errors_below_threshold']:.0%}")
    print("  reliability: " + "; ".join(f"{b['band']}: n={b['n']} conf {b['mean_confidence']:.2f} acc "
                                         f"{b['accuracy']:.2f}" for b in m["reliability"]))
    print("  DRIFT/global decisions: " + ("; ".join(
        f"{b['band']}: n={b['n']} acc {b['accuracy']:.2f}" for b in m["expensive_reliability"]) or "none"))
    for engine in EXPENSIVE:
        print(f"  {engine} decisions: " + ("; ".join(f"{b['band']}: n={b['n']} acc {b['accuracy']:.2f}"
                                                     for b in m["reliability_by_engine"][engine]) or "none"))
    print("  expected calls per question (accuracy): " + "; ".join(
        f"{k.replace('_', ' ')} {v['calls']:.2f} ({v['accuracy']:.2f})" for k, v in m["expected_calls"].items()))


def route_all(model: Classifier, rows: Sequence[Example]) -> list[Routed]:
    out = []
    for e in rows:
        d = model.predict(e.question)
        out.append(Routed(e.label, d.engine, d.confidence, e.alt))
    return out


def subsets(rows: Sequence[Routed], keys: Sequence[str]) -> dict[str, dict[str, Any]]:
    return {k: metrics([r for r, kk in zip(rows, keys, strict=True) if kk == k]) for k in sorted(set(keys))}


# ------------------------------------------------------------------------------------------ cv / loso


TRAINING: dict[str, Any] = {"alt_share": train.ALT_SHARE, "per_engine": train.PER_ENGINE_CALIBRATION}  # `main` sets


def _fit(train_rows: Sequence[Example], *, cues: bool, inner_folds: int,
         maps: dict[str, Any] | None = None) -> Classifier:
    """The whole model trained on `train_rows` (its calibration maps on their held-out decisions only); `maps`,
    when given, receives per engine the held-out sources that may test its map (those holding enough questions the
    engine is the cheapest right route for, `calibration.testing_groups`) and the highest confidence it can give."""
    wf = train.fit_wording_stage(train_rows, cues=cues, folds=inner_folds, alt_share=TRAINING["alt_share"])
    payload = train.assemble(wf, None, per_engine=TRAINING["per_engine"])
    if maps is not None:
        held = wf.held_out()
        groups, cheapest = np.asarray(held.group), held.cheapest_route()
        maps.update({engine: {"tested_by": sorted(calibration.testing_groups(groups, cheapest,
                                                                            data.CLASSES.index(engine))),
                              "highest": round(float(payload[f"confidence_map_{engine}"][1].max()), 3)}
                     for engine in LABELS})
    return Classifier(payload)


def grouped_cv(examples: Sequence[Example], folds: int, inner_folds: int, report: dict[str, Any]) -> None:
    from sklearn.model_selection import StratifiedGroupKFold

    print(f"\n=== grouped {folds}-fold cross-validation by template (no template in train and test) ===")
    routed: list[Routed | None] = [None] * len(examples)
    strata = [f"{e.subset}:{e.label}" for e in examples]
    splits = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=1).split(
        np.zeros(len(examples)), strata, [e.cv_group for e in examples])
    for k, (tr, te) in enumerate(splits, 1):
        started = time.perf_counter()
        assert not {examples[i].cv_group for i in tr} & {examples[i].cv_group for i in te}
        model = _fit([examples[i] for i in tr], cues=True, inner_folds=inner_folds)
        for i, r in zip(te, route_all(model, [examples[i] for i in te]), strict=True):
            routed[i] = r
        print(f"  fold {k}/{folds} done in {time.perf_counter() - started:.0f}s", flush=True)
    done = [r for r in routed if r is not None]
    report["grouped_cv"] = {"all": metrics(done), "by_subset": subsets(done, [e.subset for e in examples])}
    own = [i for i, e in enumerate(examples) if e.source in ("graphroute", "collections")]
    report["grouped_cv"]["own_by_lang"] = subsets([done[i] for i in own], [examples[i].lang for i in own])
    print_block("all sources", report["grouped_cv"]["all"])
    for name, m in report["grouped_cv"]["by_subset"].items():
        print_block(name, m)


CUE_VARIANTS = {"with_cues": True, "without_cues": False}


def leave_one_source_out(examples: Sequence[Example], inner_folds: int, report: dict[str, Any],
                         sources: Sequence[str], variants: Sequence[str] = tuple(CUE_VARIANTS),
                         checkpoint: Callable[[], None] = lambda: None) -> None:
    """Each source held out of the whole fit (wording, confidence and its per-engine calibration maps, which are
    fitted inside the fold on the remaining sources only); `pooled` is every held-out source's decisions together."""
    print("\n=== leave-one-source-out (the test source is entirely held out), with and without cue lexicons ===")
    report["loso"] = {key: {} for key in variants}
    for key in variants:
        pooled: list[Routed] = []
        for source in sources:
            test_set = [e for e in examples if e.source == source]
            rest = [e for e in examples if e.source != source]
            maps: dict[str, Any] = {}
            routed = route_all(_fit(rest, cues=CUE_VARIANTS[key], inner_folds=inner_folds, maps=maps), test_set)
            pooled += routed
            m = metrics(routed)
            m["calibration_maps"] = maps
            report["loso"][key][source] = m
            print_block(f"held out: {source} ({key.replace('_', ' ')})", m)
            print("  calibration maps (held-out sources with enough of each engine's questions; highest confidence): " + "; ".join(
                f"{e} {', '.join(v['tested_by']) or 'none'} ({v['highest']:.2f})" for e, v in maps.items()))
            checkpoint()  # each source takes minutes: what is done is kept
        report.setdefault("loso_pooled", {})[key] = metrics(pooled)
        print_block(f"every held-out source together ({key.replace('_', ' ')})", report["loso_pooled"][key])


# ------------------------------------------------------------------------------------------ new styles


def load_new_styles(path: Path) -> list[Example]:
    """A held-out set, read here only (the trainer's loaders refuse these files)."""
    rows = data.read_jsonl(path)
    return [Example(r["question"], r["label"], path.stem, str(r.get("collection", "")), r.get("lang", "en"))
            for r in rows]


def new_styles(model: Classifier, report: dict[str, Any]) -> None:
    print("\n=== new-styles sets (hand-written, never trained on), packaged model, no index ===")
    for key, (path, usage) in NEW_STYLE_SETS.items():
        if not path.is_file():
            print(f"\n{path.name}: not written yet")
            continue
        rows = load_new_styles(path)
        routed = route_all(model, rows)
        report[key] = {"usage": usage, "all": metrics(routed), "by_lang": subsets(routed, [e.lang for e in rows]),
                       "baselines": {name: metrics([Routed(e.label, rule(e.question), 1.0) for e in rows])
                                     for name, rule in BASELINES.items()},
                       "errors": [{"question": e.question, "label": e.label, "predicted": r.engine,
                                   "confidence": round(r.confidence, 3)}
                                  for e, r in zip(rows, routed, strict=True) if r.engine != e.label]
                       if key in PER_QUESTION_SHOWN else "not reported: only this set's totals are looked at"}
        print_block(f"{path.name} ({usage})", report[key]["all"])
        for lang, m in report[key]["by_lang"].items():
            print_block(f"{path.name}, language {lang}", m)


# ------------------------------------------------------------------------------------------ with an index


def _router(index: Index) -> Any:
    from engines.config import GraphrouteConfig
    from router.router import Router

    return Router(index, config=GraphrouteConfig())


def aroute_all(index: Index | None, questions: Sequence[str]) -> list[tuple[str, float, str]]:
    """(engine, confidence, method) per question, as `Router.aroute` decides it with this index; without an
    index, the packaged classifier's decision with no probe (the same cost-aware default needs an index)."""
    if index is None:
        from router.classifier import classify

        return [(d.engine, d.confidence, d.method) for d in (classify(q) for q in questions)]
    router = _router(index)

    async def run() -> list[tuple[str, float, str]]:
        out = []
        for q in questions:
            decision, _ = await router.aroute(q)
            out.append((decision.engine, decision.confidence, decision.method))
        return out

    try:
        return asyncio.run(run())
    finally:
        router.close()


INDEX_SETS = {  # set -> (how it was used, the indexes its questions are about)
    "index_eval": ("written before the index probe was built; its per-question results were looked at",
                   ("podcast", "earnings")),
    "index_eval_2": ("only its totals are reported; the one question routing with the index got wrong was looked "
                     "at to find why", ("podcast", "earnings")),
    "index_eval_3": ("written last, before any of its results was seen: only its totals are reported",
                     ("podcast", "earnings", "novel")),
}
INDEXED = ("podcast", "earnings", "novel")


def with_index(indexes: Path, report: dict[str, Any]) -> None:
    print("\n=== with an index: questions written for the podcast, earnings-call and novel indexes, as "
          "Router.aroute routes them ===")
    paths = index_fit.index_paths(indexes, train.DEFAULT_DATA_DIR)
    report["with_index"] = {"indexes": {name: str(paths[name]) for name in INDEXED if name in paths}}
    from shared_context import load_index

    loaded = {name: load_index(paths[name]) for name in INDEXED if name in paths}
    for name in INDEXED:
        if name not in loaded:
            print(f"  {name}: no index at {indexes / name}")
    for set_name, (usage, about) in INDEX_SETS.items():
        if not index_fit.EVALUATION_SETS[set_name].is_file():
            continue
        rows = index_fit.load_eval(set_name)
        out: dict[str, Any] = {"usage": usage, "indexes": [name for name in about if name in loaded]}
        report["with_index"][set_name] = out
        pooled: dict[str, list[Routed]] = {"with_index": [], "without_index": []}
        kinds: dict[str, list[str]] = {"with_index": [], "without_index": []}
        for name in about:
            if name not in loaded:
                continue
            index = loaded[name]
            subset = [r for r in rows if r.index == name]
            for key, ix in (("with_index", index), ("without_index", None)):
                decided = aroute_all(ix, [r.question for r in subset])
                routed = [Routed(r.label, e, c) for r, (e, c, _) in zip(subset, decided, strict=True)]
                pooled[key] += routed
                kinds[key] += [r.kind for r in subset]
                m = metrics(routed)
                m["by_kind"] = subsets(routed, [r.kind for r in subset])
                out[f"{name}_{key}"] = m
                if key == "with_index" and set_name == "index_eval":
                    out[f"{name}_errors"] = [
                        {"question": r.question, "label": r.label, "predicted": e, "confidence": round(c, 3),
                         "method": how}
                        for r, (e, c, how) in zip(subset, decided, strict=True) if e != r.label]
                print_block(f"{set_name}, {name} index, {key.replace('_', ' ')}", m)
                one_doc = m["by_kind"].get("one_document")
                if one_doc:
                    print(f"  single-document local accuracy {one_doc['accuracy']:.3f} (n={one_doc['n']})")
        for key, routed in pooled.items():
            m = metrics(routed)
            m["by_kind"] = subsets(routed, kinds[key])
            out[f"both_{key}"] = m  # pooled over the set's indexes
            print_block(f"{set_name}, {' + '.join(out['indexes'])}, {key.replace('_', ' ')}", m)
    stage = Classifier.load().trained_on.get("index_stage", {})
    report["with_index"]["index_stage_leave_one_index_out"] = stage
    if isinstance(stage, dict) and stage:
        print(f"\n  index stage at training, leave-one-index-out accuracy {stage['leave_one_index_out']['all']:.3f} "
              f"vs the wording alone {stage['wording_only']['all']:.3f} on {stage['questions']} measured questions")


def carol(report: dict[str, Any]) -> None:
    print("\n=== the 30 labelled Christmas Carol route-bench questions through Router.aroute ===")
    from shared_context import load_index

    rows = [json.loads(line) for line in CAROL_QUERIES.read_text(encoding="utf-8").splitlines() if line.strip()]
    index = load_index(CAROL_INDEX)
    report["carol"] = {}
    for key, ix in (("with_index", index), ("without_index", None)):
        decided = aroute_all(ix, [r["question"] for r in rows])
        # the file's `alt`: local is also right for a DRIFT label (the same evidence for a fraction of the cost);
        # DRIFT or global search for a local label is not
        routed = [Routed(r["label"], e, c, r.get("alt", ""))
                  for r, (e, c, _) in zip(rows, decided, strict=True)]
        right = sum(x.right for x in routed)
        report["carol"][key] = {"right": right, "n": len(rows), "metrics": metrics(routed), "errors": [
            {"id": r["id"], "label": r["label"], "predicted": x.engine, "confidence": round(x.confidence, 3)}
            for r, x in zip(rows, routed, strict=True) if not x.right]}
        print(f"  {key.replace('_', ' ')}: {right}/{len(rows)}")


# ------------------------------------------------------------------------------------------ baselines


_GLOBAL_WORDS = re.compile(r"\b(?:themes?|overall|summari[sz]e|summary|trends?|main|across|in general|whole|"
                           r"all the|most common)\b|主题|总体|整体|概括|总结|趋势|所有", re.IGNORECASE)
_DRIFT_WORDS = re.compile(r"\b(?:compare|comparison|differ\w*|relationship|why|how did|how does|affect\w*|"
                          r"impact|influence\w*|between|before|after)\b|比较|区别|关系|为什么|影响|之间", re.IGNORECASE)


def tutorial_keyword_rule(question: str) -> str:
    """The usual tutorial router: theme words -> global, relation/why/compare words -> DRIFT, else local."""
    if _GLOBAL_WORDS.search(question):
        return "global"
    if _DRIFT_WORDS.search(question):
        return "drift"
    return "local"


BASELINES: dict[str, Callable[[str], str]] = {
    "keyword-router": keyword_route,
    "tutorial keyword rules": tutorial_keyword_rule,
}


def baselines(examples: Sequence[Example], report: dict[str, Any]) -> None:
    print("\n=== keyword baselines (no training; every set is unseen) ===")
    report["baselines"] = {}
    for name, rule in BASELINES.items():
        routed = [Routed(e.label, rule(e.question), 1.0) for e in examples]
        report["baselines"][name] = {"all": metrics(routed), "by_subset": subsets(routed, [e.subset for e in examples])}
        print_block(f"{name}, all sources", report["baselines"][name]["all"])


# ------------------------------------------------------------------------------------------ latency


def _timed(fn: Callable[[str], object], questions: Sequence[str]) -> dict[str, float]:
    timings = []
    for q in questions:
        t0 = time.perf_counter()
        fn(q)
        timings.append(time.perf_counter() - t0)
    return {"p50_ms": statistics.median(timings) * 1e3, "p95_ms": float(np.percentile(timings, 95)) * 1e3}


def latency(questions: Sequence[str], index_entities: int, runs: int, report: dict[str, Any]) -> None:
    print("\n=== latency of the packaged model ===")
    started = time.perf_counter()
    model = Classifier.load()
    result: dict[str, Any] = {"load_ms": (time.perf_counter() - started) * 1e3, "questions": len(questions)}
    _timed(model.predict, questions)  # first pass: memoised n-grams, lazily compiled patterns
    result["no_index_p50_ms"] = [_timed(model.predict, questions)["p50_ms"] for _ in range(runs)]
    if index_entities:
        from benchmarks.synthetic_index import write_synthetic_index
        from shared_context import load_index

        with tempfile.TemporaryDirectory() as tmp:
            os.environ.setdefault("GRAPHROUTE_CACHE_DIR", str(Path(tmp) / "cache"))
            write_synthetic_index(Path(tmp) / "index", index_entities)
            index = load_index(Path(tmp) / "index")
            model.predict("warm-up question about the index", index)  # per-index tables, built once
            _timed(lambda q: model.predict(q, index), questions)
            result["index_entities"] = len(index.entities)
            result["with_index_p50_ms"] = [_timed(lambda q: model.predict(q, index), questions)["p50_ms"]
                                           for _ in range(runs)]
    report["latency"] = result
    print(f"  {len(questions)} questions, {runs} runs; no index p50 {_summary(result['no_index_p50_ms'])}")
    if "with_index_p50_ms" in result:
        print(f"  with linking and the index probe ({result['index_entities']}-entity synthetic index) p50 "
              f"{_summary(result['with_index_p50_ms'])}")


def _at_least(bands: Sequence[dict[str, Any]], low: float = COMMITTED) -> str:
    """n and accuracy of the decisions in the bands from `low` up."""
    kept = [b for b in bands if float(b["band"][:4]) >= low]
    n = sum(int(b["n"]) for b in kept)
    return f"n={n}, accuracy {sum(b['n'] * b['accuracy'] for b in kept) / n:.3f}" if n else "n=0"


def _summary(values: Sequence[float]) -> str:
    return f"median {statistics.median(values):.3f} ms (range {min(values):.3f}-{max(values):.3f})"


# ------------------------------------------------------------------------------------------ main


def summary(report: dict[str, Any]) -> None:
    print("\n=== summary ===")
    if "grouped_cv" in report:
        g = report["grouped_cv"]["all"]
        print(f"  grouped CV: macro-F1 {g['macro_f1']:.3f}, global recall {g['recall'].get('global', 0):.3f}, "
              f"confident errors {g['confident_errors']:.1%}, calibration error {g['ece']:.3f}")
    if "loso" in report:
        for key, per in report["loso"].items():
            print(f"  leave-one-source-out macro-F1 ({key.replace('_', ' ')}): " + ", ".join(
                f"{s} {m['macro_f1']:.3f}" for s, m in per.items()))
            for source, m in per.items():
                print(f"    held out {source}: " + "; ".join(
                    f"{engine} at confidence >= {COMMITTED}: {_at_least(m['reliability_by_engine'][engine])}"
                    for engine in EXPENSIVE) + f"; confident errors (>= {COMMITTED}) "
                    f"{m['confident_errors_at_0.8']:.1%}")
    for key, m in report.get("loso_pooled", {}).items():
        print(f"  every held-out source together ({key.replace('_', ' ')}): macro-F1 {m['macro_f1']:.3f}, global "
              f"recall {m['recall'].get('global', 0):.3f}, confident errors (>= {COMMITTED}) "
              f"{m['confident_errors_at_0.8']:.1%}; " + "; ".join(
                  f"{e} at >= {COMMITTED}: {_at_least(m['reliability_by_engine'][e])}" for e in EXPENSIVE))
    for key, (path, _) in NEW_STYLE_SETS.items():
        if key in report:
            m = report[key]["all"]
            print(f"  {path.name}: macro-F1 {m['macro_f1']:.3f}, global recall {m['recall'].get('global', 0):.3f}, "
                  f"confident errors {m['confident_errors']:.1%}")
    for set_name in INDEX_SETS:
        found = report.get("with_index", {}).get(set_name, {})
        for key in ("with_index", "without_index"):
            if f"both_{key}" not in found:
                continue
            m = found[f"both_{key}"]
            one = m["by_kind"].get("one_document", {}).get("accuracy", 0.0)
            print(f"  {set_name} ({' + '.join(found.get('indexes', []))}) {key.replace('_', ' ')}: macro-F1 "
                  f"{m['macro_f1']:.3f}, global recall {m['recall'].get('global', 0):.3f}, single-document local "
                  f"accuracy {one:.3f}, local recall {m['recall'].get('local', 0):.3f}, confident errors "
                  f"{m['confident_errors']:.1%}")
    if "carol" in report:
        c = report["carol"]
        print(f"  Christmas Carol: {c['with_index']['right']}/30 with the index, {c['without_index']['right']}/30 "
              "without")
    if "latency" in report:
        lat = report["latency"]
        print(f"  latency p50: no index {statistics.median(lat['no_index_p50_ms']):.3f} ms" + (
            f", with a {lat['index_entities']}-entity index {statistics.median(lat['with_index_p50_ms']):.3f} ms"
            if "with_index_p50_ms" in lat else ""))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=data.DEFAULT_DATA_DIR)
    parser.add_argument("--indexes", type=Path, default=index_fit.DEFAULT_INDEXES,
                        help="folder holding the podcast/, earnings/ and novel/ offline indexes")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--inner-folds", type=int, default=3, help="cross-validation folds inside each training")
    parser.add_argument("--index-entities", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3, help="latency runs")
    parser.add_argument("--parts", default="cv,loso,new,index,carol,baselines,latency")
    parser.add_argument("--sources", default=",".join(data.SOURCES), help="sources to hold out in leave-one-source-out")
    parser.add_argument("--cue-variants", default=",".join(CUE_VARIANTS),
                        help="leave-one-source-out with the cue lexicons (with_cues), without them, or both")
    parser.add_argument("--alt-share", type=float, default=train.ALT_SHARE,
                        help="cv/loso training: share of a two-route question's weight on its alt route")
    parser.add_argument("--no-per-engine-calibration", dest="per_engine_calibration", action="store_false",
                        help="cv/loso training: identity confidence maps instead of one fitted per engine")
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    TRAINING.update(alt_share=args.alt_share, per_engine=args.per_engine_calibration)
    if not (args.data_dir / "graphrag_bench").is_dir():
        parser.error(f"{args.data_dir} has no graphrag_bench/ folder; pass --data-dir")
    examples = data.load_all(args.data_dir)
    counts = Counter((e.subset, e.label) for e in examples)
    print(f"labelled questions: {len(examples)}  " + ", ".join(f"{s}/{lab}={n}" for (s, lab), n in sorted(counts.items())))
    report: dict[str, Any] = {"command": " ".join([Path(sys.executable).name, "-m", "benchmarks.router_eval",
                                                   *(argv if argv is not None else sys.argv[1:])]),
                              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                              "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average "
                                         f"{os.getloadavg()[0]:.1f} at start"}
    CALLS.update(engine_calls())
    report["engine_calls"] = {"calls": dict(CALLS), "how": "Router estimates on the Christmas Carol offline index, "
                              "mean over its 30 route-bench questions (global search pre-ranked, as the router runs it)"}
    print("calls per engine for the expected-cost figures: " + ", ".join(f"{e} {c:.1f}" for e, c in CALLS.items()))
    if "cv" in parts:
        grouped_cv(examples, args.folds, args.inner_folds, report)
    if "loso" in parts:
        leave_one_source_out(examples, args.inner_folds, report, args.sources.split(","),
                             args.cue_variants.split(","), checkpoint=lambda: _write(report, args.json))
    if "new" in parts:
        new_styles(Classifier.load(), report)
    if "index" in parts:
        with_index(args.indexes, report)
    if "carol" in parts:
        carol(report)
    if "baselines" in parts:
        baselines(examples, report)
    if "latency" in parts:
        latency([e.question for e in examples[::8]], args.index_entities, args.runs, report)
    summary(report)
    _write(report, args.json)
    if args.json:
        print(f"  wrote {args.json}")


def _write(report: dict[str, Any], path: Path | None) -> None:
    if path is not None:
        path.write_text(json.dumps(report, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
