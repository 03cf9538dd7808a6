"""Rebuild the router's question classifier: `python -m tools.routing.train [--data-dir ../shared/data]
[--indexes ../indexes] [--out PATH]`.

The three stages of `router.classifier`, fitted in order on the questions of `tools.routing.examples` and, for
the index stage, on labelled questions measured on real offline indexes (`tools.routing.index_fit`):

1. **wording**: `LinearSVC` (one-vs-rest) over cue/form features and hashed n-grams, plus two views for the
   confidence stage (logistic regression on the cue/form features alone; `LinearSVC` on the n-grams alone).
   Cross-validated decision values (folds grouped by template, stratified by subset and label) fit the
   multinomial calibrator that turns decision values into probabilities;
2. **index**: multinomial logistic regression over [log wording probabilities, probe features]. A question that
   is also wording training data enters with its cross-validated wording probabilities, so the index stage
   learns how much to trust the wording on questions the wording model did not see;
3. **confidence**: logistic regression of "the decision is right" on `router.classifier.CONFIDENCE_NAMES`,
   fitted on held-out decisions only: the cross-validated and leave-one-source-out wording decisions (no index)
   and, with an index, the index stage's leave-one-index-out decisions. Each held-out question's similarity to
   its nearest question in the fold it was held out of (`router.neighbours`) is one input, and the same held-out
   decisions give the distance ceiling: per band of similarity, the share of them that were right
   (`distance_ceiling`). Last, one monotone calibration map per engine (`tools.routing.calibration`), fitted on
   the decisions about sources (and indexes) the model was trained without, so confidence means the same on
   unfamiliar wording.

**Two right routes.** The label maps of GraphRAG-Bench and MultiHop-RAG give some question types an `alt`
reading that is also right (local for questions scoped to one book or a few named articles: the same evidence at
a fraction of DRIFT's cost). A decision counts as right for the confidence stage (and its calibration maps) when it
is either reading. With `--alt-share S` such a question also enters the wording and index fits twice, a share S of
its weight labelled with its `alt` route and the rest with its label. The default is 0 (the label only): these
questions are local because of where their evidence is (one book, a few articles), which the index stage sees,
not because of how they are worded, and moving weight to the `alt` route cost DRIFT recall on the project's own
questions held out (0.80 with S = 0; 0.65 with S = 0.25; 0.27 with 0.75 on the cheaper route). The cost of a
DRIFT decision is weighed after the classifier, by the commitment rule.

**Per-engine calibration** (on by default; `--no-per-engine-calibration` writes identity maps): one monotone map
per engine from the confidence stage's output to how often the engine's held-out decisions chose the cheapest
right route, conservative on unfamiliar wording (`tools.routing.calibration`, `confidence_maps`: per block the
lowest of a lower bound of the pooled share right, the share right on each source held out of the wording fit that
holds the engine's questions, and a ceiling below 0.8 where no such source has decisions). Leave-one-source-out
(`benchmarks/router_eval.py --parts loso --inner-folds 2`, every source held out in turn, the maps fitted inside
each fold on the other sources only) the share of all questions routed wrongly at >= 0.8 fell from 2.0 % to
0.03 % (the maps before: a shrunk mean of every held-out decision), and the calls per question after the
commitment rule are 6.82, 4.44, 1.01 and 1.01 (own set, collections, GraphRAG-Bench, MultiHop-RAG; 6.80, 4.37,
1.06 and 1.01 before) at higher accuracy (0.942 pooled, 0.921 before). No DRIFT decision is 0.8 sure (DRIFT is
rarely the only right route in these sets); global decisions at >= 0.8: none with the own set or collections held
out (each fold's only other source with global questions was decided by a model trained without any, so nothing
tested the global map and it stops at 0.75), one wrong with GraphRAG-Bench and one with MultiHop-RAG held out.
Rebuild with the offline indexes (`--indexes`): rebuilt without them (`--index-stage-from`), the confidence stage
has no with-index decisions to learn from, and with an index a local wording decision came out sure enough that
the index no longer moved "what does <the podcast's host> usually ask the guests?" to global.

Every solver is deterministic and the folds are seeded, so rebuilding gives the same model file. Nothing here
is imported by the product; the model file holds plain arrays and JSON (no pickle).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import sklearn

from router.classifier import CONFIDENCE_NAMES, MODEL_FORMAT, MODEL_PATH, confidence_inputs
from router.features import FEATURE_NAMES, N_DENSE, N_HASH_FEATURES, N_WORD_BUCKETS, extract, wording_buckets
from router.index_probe import PROBE_NAMES
from router.neighbours import Neighbours
from tools.routing import calibration
from tools.routing.examples import CLASSES, DEFAULT_DATA_DIR, Example, load_all
from tools.routing.index_fit import DEFAULT_INDEXES, Measured, stage_inputs
from tools.routing.matrix import dense_block, hashed_ngrams

if TYPE_CHECKING:
    import scipy.sparse as sp

C_WORDING = 0.3
# The cue/form block enters the wording model scaled up (its weights are scaled back on export, so the runtime
# computes the same decision): the same L2 penalty then costs the few named, general features less than the
# quarter-million hashed n-grams, which carry more of one source's surface style. Measured leave-one-source-out.
DENSE_SCALE = 2.0
MAX_ITER = 5000
C_VIEW = 1.0
C_CALIBRATION = 10.0
PENALTY_INDEX = 0.003  # L2 on the probe weights of the index stage
C_CONFIDENCE = 1.0
FOLDS = 5
# Of a question with two right routes, the share of its weight on its `alt` route (see the module docstring)
ALT_SHARE = 0.0
COST_ORDER = ("local", "global", "drift")  # cheapest first: model calls per question (1, about 2, about 21)
PER_ENGINE_CALIBRATION = True  # see the module docstring
Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True)
class Wording:
    """The wording model and its two views, fitted on one set of questions (class order `CLASSES`)."""

    coef: np.ndarray  # (3, N_DENSE + N_HASH_FEATURES)
    intercept: np.ndarray
    view_dense: np.ndarray
    view_dense_b: np.ndarray
    view_hash: np.ndarray  # (3, N_HASH_FEATURES)
    view_hash_b: np.ndarray

    def decide(self, dense: np.ndarray, hashed: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(decision values, dense-view argmax, n-gram-view argmax) per row."""
        decision = dense @ self.coef[:, :N_DENSE].T + hashed @ self.coef[:, N_DENSE:].T + self.intercept
        dense_view = np.argmax(dense @ self.view_dense.T + self.view_dense_b, axis=1)
        ngram_view = np.argmax(hashed @ self.view_hash.T + self.view_hash_b, axis=1)
        return np.asarray(decision), dense_view, ngram_view


def _three(coef: np.ndarray, intercept: np.ndarray, classes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients for all of `CLASSES` (a class absent from training gets a hopeless decision value)."""
    full = np.zeros((len(CLASSES), coef.shape[1]))
    bias = np.full(len(CLASSES), -20.0)
    if len(classes) == 2 and coef.shape[0] == 1:  # binary: one row for the second class
        coef, intercept = np.vstack([-coef[0], coef[0]]), np.array([-intercept[0], intercept[0]])
    for row, c in enumerate(classes):
        full[c], bias[c] = coef[row], intercept[row]
    return full, bias


def alt_index(examples: Sequence[Example]) -> np.ndarray:
    """Per question, the class index of its also-right `alt` route, -1 when it has none."""
    return np.array([CLASSES.index(e.alt) if e.alt in CLASSES and e.alt != e.label else -1 for e in examples])


def with_alt_rows(y: np.ndarray, w: np.ndarray, alt: np.ndarray | None, share: float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row of the original data per training row, label, weight): a question with two right routes becomes two
    rows, `share` of its weight on its `alt` route and the rest on its label."""
    rows = np.arange(len(y))
    if alt is None or share <= 0.0 or not (alt >= 0).any():
        return rows, y, w
    two = np.flatnonzero(alt >= 0)
    share_alt = np.full(len(two), share)
    w_main = w.astype(np.float64).copy()
    w_main[two] *= 1.0 - share_alt
    return (np.concatenate([rows, two]), np.concatenate([y, alt[two]]),
            np.concatenate([w_main, w[two] * share_alt]))


def fit_wording(dense: np.ndarray, hashed: sp.csr_matrix, y: np.ndarray, w: np.ndarray,
                alt: np.ndarray | None = None, alt_share: float = ALT_SHARE) -> Wording:
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import LinearSVC

    rows, y, w = with_alt_rows(y, w, alt, alt_share)
    dense, hashed = dense[rows], hashed[rows]
    classes = sorted(set(y.tolist()))
    full = sp.hstack([sp.csr_matrix(dense * DENSE_SCALE), hashed], format="csr")
    svc = LinearSVC(C=C_WORDING, random_state=0, max_iter=MAX_ITER).fit(full, y, sample_weight=w)
    coef, intercept = _three(svc.coef_, svc.intercept_, classes)
    coef[:, :N_DENSE] *= DENSE_SCALE
    view = LogisticRegression(C=C_VIEW, max_iter=2000).fit(dense, y, sample_weight=w)
    view_dense, view_dense_b = _three(view.coef_, view.intercept_, classes)
    ngrams = LinearSVC(C=C_WORDING, random_state=0, max_iter=MAX_ITER).fit(hashed, y, sample_weight=w)
    view_hash, view_hash_b = _three(ngrams.coef_, ngrams.intercept_, classes)
    return Wording(coef, intercept, view_dense, view_dense_b, view_hash, view_hash_b)


def sample_weights(examples: Sequence[Example]) -> np.ndarray:
    """Each source contributes the same total weight, classes are balanced within a source, then the
    classes are rebalanced overall (the global class only exists in the project's own set)."""
    by_source = Counter(e.source for e in examples)
    by_source_label = Counter((e.source, e.label) for e in examples)
    labels_in_source = Counter(s for s, _ in by_source_label)
    w = np.array([1.0 / (len(by_source) * labels_in_source[e.source] * by_source_label[(e.source, e.label)])
                  for e in examples])
    class_totals = {c: w[[e.label == c for e in examples]].sum() for c in {e.label for e in examples}}
    w *= np.array([1.0 / (len(class_totals) * class_totals[e.label]) for e in examples])
    return w * len(examples)


def _softmax_rows(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    out: np.ndarray = e / e.sum(axis=1, keepdims=True)
    return out


def _multinomial(x: np.ndarray, y: np.ndarray, w: np.ndarray, c: float) -> tuple[np.ndarray, np.ndarray]:
    """Multinomial logistic regression (W, b) in `CLASSES` order."""
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=c, max_iter=5000).fit(x, y, sample_weight=w)
    return _three(model.coef_, model.intercept_, sorted(set(y.tolist())))


def _seen(buckets: Sequence[Sequence[int]]) -> np.ndarray:
    seen = np.zeros(N_WORD_BUCKETS, dtype=bool)
    for b in buckets:
        seen[list(b)] = True
    return seen


def _familiarity(buckets: Sequence[int], seen: np.ndarray) -> float:
    return float(seen[list(buckets)].mean()) if len(buckets) else 0.0


@dataclass
class Held:
    """Held-out decisions the confidence stage is fitted on (one row per question)."""

    proba: list[np.ndarray]
    dense_view: list[int]
    ngram_view: list[int]
    familiarity: list[float]
    has_cue: list[bool]
    with_index: list[bool]
    label: list[int]
    weight: list[float]
    nearest: list[float]
    alt: list[int]  # the also-right route's class index, -1 when none
    # what the decision was held out of: "cv" (a fold of its own source), the source name (a model trained without
    # that source) or "index:<name>" (an index stage fitted without that index)
    group: list[str]

    @classmethod
    def empty(cls) -> Held:
        return cls([], [], [], [], [], [], [], [], [], [], [])

    def add(self, proba: np.ndarray, dense_view: int, ngram_view: int, familiarity: float, has_cue: bool,
            with_index: bool, label: int, weight: float, nearest: float, alt: int = -1, group: str = "cv") -> None:
        self.proba.append(proba)
        self.dense_view.append(dense_view)
        self.ngram_view.append(ngram_view)
        self.familiarity.append(familiarity)
        self.has_cue.append(has_cue)
        self.with_index.append(with_index)
        self.label.append(label)
        self.weight.append(weight)
        self.nearest.append(nearest)
        self.alt.append(alt)
        self.group.append(group)

    def correct(self) -> np.ndarray:
        """Per decision, whether it chose the label or the also-right `alt` route."""
        chosen = np.array([int(np.argmax(p)) for p in self.proba], dtype=int)
        return (chosen == np.asarray(self.label)) | (chosen == np.asarray(self.alt))

    def cheapest_right(self) -> np.ndarray:
        """Per decision, whether it chose the cheapest right route (`COST_ORDER`): a DRIFT decision where local
        search was also right is right, but not worth its cost, which is what an expensive route's confidence
        decides (the commitment rule)."""
        chosen = np.array([int(np.argmax(p)) for p in self.proba], dtype=int)
        return chosen == self.cheapest_route()

    def cheapest_route(self) -> np.ndarray:
        """Per decision, the class index of its question's cheapest right route (`COST_ORDER`)."""
        rank = {CLASSES.index(c): k for k, c in enumerate(COST_ORDER)}
        return np.array([min((r for r in (y, a) if r >= 0), key=rank.__getitem__)
                         for y, a in zip(self.label, self.alt, strict=True)], dtype=int)

    def extend(self, other: Held) -> None:
        for mine, theirs in zip(vars(self).values(), vars(other).values(), strict=True):
            mine.extend(theirs)

    def inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        x = np.vstack([confidence_inputs(p, d, n, f, c, i, s) for p, d, n, f, c, i, s in zip(
            self.proba, self.dense_view, self.ngram_view, self.familiarity, self.has_cue, self.with_index,
            self.nearest, strict=True)])
        return x, self.correct().astype(int), np.asarray(self.weight)


@dataclass
class WordingFit:
    """The wording stage fitted on a set of questions, with its cross-validated view of each of them."""

    examples: Sequence[Example]
    cues: bool
    wording: Wording
    calib_w: np.ndarray
    calib_b: np.ndarray
    seen: np.ndarray
    y: np.ndarray
    alt: np.ndarray
    weights: np.ndarray
    has_cue: list[bool]
    oof_proba: np.ndarray
    oof_dense_view: np.ndarray
    oof_ngram_view: np.ndarray
    oof_familiarity: np.ndarray
    oof_nearest: np.ndarray
    neighbours: Neighbours
    source_out: Held | None = None
    alt_share: float = ALT_SHARE  # decisions on each source by a model trained without it

    def held_out(self) -> Held:
        """Cross-validated decisions (half the weight) and, when fitted, leave-one-source-out ones (the other
        half): the confidence stage learns how often the model is right on wording it was not trained on."""
        held = Held.empty()
        share = self.weights / self.weights.sum() * (0.5 if self.source_out is not None else 1.0)
        for i in range(len(self.examples)):
            held.add(self.oof_proba[i], int(self.oof_dense_view[i]), int(self.oof_ngram_view[i]),
                     float(self.oof_familiarity[i]), self.has_cue[i], False, int(self.y[i]), float(share[i]),
                     float(self.oof_nearest[i]), int(self.alt[i]))
        if self.source_out is not None:
            held.extend(self.source_out)
        return held

    def unseen(self, question: str) -> tuple[np.ndarray, int, int, float, bool, float]:
        """(probabilities, dense view, n-gram view, familiarity, cue fired, nearest) of a question from outside
        the set."""
        f = extract(question)
        dec, dv, nv = self.wording.decide(dense_block([f], cues=self.cues), hashed_ngrams([f.text]))
        proba = _softmax_rows(dec @ self.calib_w.T + self.calib_b)[0]
        buckets = wording_buckets(f.text, f.names)
        return proba, int(dv[0]), int(nv[0]), _familiarity(buckets, self.seen), bool(f.cues) and self.cues, \
            self.neighbours.nearest(buckets)

    def view_of(self, question: str, position: dict[str, int]) -> tuple[np.ndarray, int, int, float, bool, float]:
        """Cross-validated for a question of the set, else as the full model sees it."""
        i = position.get(question)
        if i is None:
            return self.unseen(question)
        return (self.oof_proba[i], int(self.oof_dense_view[i]), int(self.oof_ngram_view[i]),
                float(self.oof_familiarity[i]), self.has_cue[i], float(self.oof_nearest[i]))


def fit_wording_stage(examples: Sequence[Example], *, cues: bool = True, folds: int = FOLDS,
                      alt_share: float = ALT_SHARE,
                      by_source: bool = True, progress: Progress = _quiet) -> WordingFit:
    """Cross-validated decisions (folds grouped by template) for the calibrator and the later stages, then the
    full fit; with `by_source`, also each source's decisions by a model trained on the others."""
    from sklearn.model_selection import StratifiedGroupKFold

    feats = [extract(e.question) for e in examples]
    dense = dense_block(feats, cues=cues)
    hashed = hashed_ngrams([f.text for f in feats])
    y = np.array([CLASSES.index(e.label) for e in examples])
    alt = alt_index(examples)
    w = sample_weights(examples)
    buckets = [wording_buckets(f.text, f.names) for f in feats]
    n = len(examples)
    oof_decision = np.zeros((n, 3))
    oof_dense_view = np.zeros(n, dtype=int)
    oof_ngram_view = np.zeros(n, dtype=int)
    oof_familiarity = np.zeros(n)
    oof_nearest = np.zeros(n)
    strata = [f"{e.subset}:{e.label}" for e in examples]
    splitter = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=0)
    for k, (tr, te) in enumerate(splitter.split(np.zeros(n), strata, [e.cv_group for e in examples]), 1):
        model = fit_wording(dense[tr], hashed[tr], y[tr], w[tr], alt[tr], alt_share)
        oof_decision[te], oof_dense_view[te], oof_ngram_view[te] = model.decide(dense[te], hashed[te])
        seen = _seen([buckets[i] for i in tr])
        oof_familiarity[te] = [_familiarity(buckets[i], seen) for i in te]
        table = Neighbours.build([buckets[i] for i in tr])
        oof_nearest[te] = [table.nearest(buckets[i]) for i in te]
        progress(f"  wording fold {k}/{folds}")
    rows, y_rows, w_rows = with_alt_rows(y, w, alt, alt_share)
    calib_w, calib_b = _multinomial(oof_decision[rows], y_rows, w_rows, C_CALIBRATION)
    oof_proba = _softmax_rows(oof_decision @ calib_w.T + calib_b)
    wording = fit_wording(dense, hashed, y, w, alt, alt_share)
    has_cue = [bool(f.cues) and cues for f in feats]
    source_out: Held | None = None
    sources = sorted({e.source for e in examples})
    if by_source and len(sources) >= 2:
        source_out = Held.empty()
        for source in sources:
            out = np.array([e.source == source for e in examples])
            tr, te = np.flatnonzero(~out), np.flatnonzero(out)
            model = fit_wording(dense[tr], hashed[tr], y[tr], w[tr], alt[tr], alt_share)
            decision, dense_view, ngram_view = model.decide(dense[te], hashed[te])
            proba = _softmax_rows(decision @ calib_w.T + calib_b)
            seen = _seen([buckets[i] for i in tr])
            table = Neighbours.build([buckets[i] for i in tr])
            share = 0.5 / len(sources) / len(te)  # each held-out source weighs the same
            for j, i in enumerate(te):
                source_out.add(proba[j], int(dense_view[j]), int(ngram_view[j]), _familiarity(buckets[i], seen),
                               has_cue[i], False, int(y[i]), share, table.nearest(buckets[i]), int(alt[i]), source)
            progress(f"  wording without {source}")
    return WordingFit(examples, cues, wording, calib_w, calib_b, _seen(buckets), y, alt, w, has_cue, oof_proba,
                      oof_dense_view, oof_ngram_view, oof_familiarity, oof_nearest, Neighbours.build(buckets),
                      source_out, alt_share)


@dataclass
class IndexFit:
    probe_w: np.ndarray
    probe_b: np.ndarray
    held: Held  # the index stage's leave-one-index-out decisions
    report: dict[str, Any]


def identity_index_stage() -> tuple[np.ndarray, np.ndarray]:
    """The index stage that keeps the wording's probabilities (softmax of their logs)."""
    return np.hstack([np.eye(3), np.zeros((3, len(PROBE_NAMES)))]), np.zeros(3)


# The direction each probe feature may move each route (+1 only up, -1 only down, 0 either way), columns in
# `CLASSES` order (drift, global, local): what the measurement means by design; the data decides how much.
# Naming a specific entity or a document is never evidence for the whole collection, passages spread over many
# documents never evidence for one place. An index-wide constant (`groups_measured`) moves nothing.
PROBE_SIGNS: dict[str, tuple[int, int, int]] = {
    "linked_none": (-1, 0, 0), "specific_1": (0, -1, 1), "specific_2plus": (1, -1, 0), "collection_wide": (0, 0, 0),
    "common_nouns": (0, 0, 0), "unknown_names": (0, -1, 0), "documents_1": (-1, -1, 1), "documents_2plus": (1, -1, -1),
    "groups_measured": (2, 2, 2), "unit_hits_none": (0, 0, 0), "unit_group_spread": (-1, 1, -1),
    "unit_best_group_share": (0, -1, 0), "unit_community_spread": (0, 1, 0), "unit_peak": (0, 0, 0),
    "report_spread": (0, 1, 0), "unspecific_spread": (-1, 1, -1),
}
MAX_NUDGE = 3.0  # no probe weight may exceed this (log-odds per unit of the feature)


def _stage_bounds() -> list[tuple[float | None, float | None]]:
    bounds: list[tuple[float | None, float | None]] = [(0.0, None)]  # the wording's scale
    for k in range(len(CLASSES)):
        for name in PROBE_NAMES:
            sign = PROBE_SIGNS[name][k]
            bounds.append((0.0, 0.0) if sign == 2 else (0.0 if sign > 0 else -MAX_NUDGE, 0.0 if sign < 0 else MAX_NUDGE))
    return bounds


def _stage_loss(theta: np.ndarray, logp: np.ndarray, probe: np.ndarray, y: np.ndarray, w: np.ndarray,
                penalty: float) -> tuple[float, np.ndarray]:
    """Weighted multinomial log-loss of z = a * log p + probe @ W.T, L2 on W only."""
    k, m = logp.shape[1], probe.shape[1]
    a, weights = theta[0], theta[1:].reshape(k, m)
    z = a * logp + probe @ weights.T
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    total = w.sum()
    loss = -float((w * np.log(p[np.arange(len(y)), y] + 1e-12)).sum()) / total + penalty * float((weights**2).sum())
    g = p.copy()
    g[np.arange(len(y)), y] -= 1.0
    g *= (w / total)[:, None]
    grad_w = g.T @ probe + 2.0 * penalty * weights
    return loss, np.concatenate([[float((g * logp).sum())], grad_w.ravel()])


def fit_offset_stage(x: np.ndarray, y: np.ndarray, w: np.ndarray, penalty: float) -> tuple[np.ndarray, np.ndarray]:
    """The index stage as (W, b) over [log p | probe]: the log-probabilities keep one shared scale (the wording
    is trusted as a whole, and its calibration already holds the class priors), the probe features get
    L2-penalised weights in the directions `PROBE_SIGNS` allows, each within `MAX_NUDGE`."""
    from scipy.optimize import minimize

    logp, probe = x[:, :3], x[:, 3:]
    m = probe.shape[1]
    theta0 = np.concatenate([[1.0], np.zeros(3 * m)])
    result = minimize(_stage_loss, theta0, args=(logp, probe, y, w, penalty), jac=True, method="L-BFGS-B",
                      bounds=_stage_bounds())
    theta = result.x
    return np.hstack([theta[0] * np.eye(3), theta[1:].reshape(3, m)]), np.zeros(3)


def fit_index_stage(wf: WordingFit, measured: Sequence[Measured], *, c: float = PENALTY_INDEX,
                    progress: Progress = _quiet) -> IndexFit:
    """Multinomial logistic regression over [log wording probabilities, probe features]; leave-one-index-out
    decisions for the confidence stage."""
    position = {e.question: i for i, e in enumerate(wf.examples)}
    views = [wf.view_of(m.item.question, position) for m in measured]
    proba = np.vstack([v[0] for v in views])
    x = stage_inputs(proba, measured)
    y = np.array([CLASSES.index(m.item.label) for m in measured])
    alt = np.array([CLASSES.index(m.item.alt) if m.item.alt in CLASSES and m.item.alt != m.item.label else -1
                    for m in measured])
    w = index_weights(measured)
    rows, y_rows, w_rows = with_alt_rows(y, w, alt, wf.alt_share)
    probe_w, probe_b = fit_offset_stage(x[rows], y_rows, w_rows, c)
    loio = np.zeros((len(measured), 3))
    for name in sorted({m.item.index for m in measured}):
        out = np.array([m.item.index == name for m in measured])
        if len(set(y[~out].tolist())) < 2:
            loio[out] = proba[out]
            continue
        keep = ~out[rows]
        wo, bo = fit_offset_stage(x[rows][keep], y_rows[keep], w_rows[keep], c)
        loio[out] = _softmax_rows(x[out] @ wo.T + bo)
    held = Held.empty()
    share = 0.5 / w.sum()
    for j, (_, dv, nv, fam, cue, near) in enumerate(views):
        held.add(loio[j], dv, nv, fam, cue, True, int(y[j]), float(w[j] * share), near, int(alt[j]),
                 f"index:{measured[j].item.index}")
    report = {"questions": len(measured), "by_index": dict(Counter(m.item.index for m in measured)),
              "leave_one_index_out": _accuracy_by(measured, y, loio), "wording_only": _accuracy_by(measured, y, proba)}
    progress(f"  index stage: {report}")
    return IndexFit(probe_w, probe_b, held, report)


# bands of similarity to the nearest training question (`router.neighbours`) over which the distance ceiling is
# measured: below 0.3 is a question in a style none of the training questions has (the median held-out question
# of a source the model never saw sits near 0.2-0.25; cross-validated ones near 0.4)
NEAREST_EDGES = (0.15, 0.2, 0.25, 0.3, 0.35, 0.45)
MIN_BAND_WEIGHT = 0.01  # a band with less of the held-out weight borrows the ceiling of the next closer band


def distance_ceiling(held: Held) -> np.ndarray:
    """Per band of `NEAREST_EDGES`: the weighted share of held-out decisions (cross-validated and leave-one-source-
    out, without an index) that were right, made non-decreasing with similarity (a closer band is never capped
    lower) and 1.0 from the closest band that reaches it."""
    near = np.asarray(held.nearest)
    correct = held.correct().astype(float)
    w = np.asarray(held.weight) * ~np.asarray(held.with_index, dtype=bool)
    band = np.searchsorted(np.asarray(NEAREST_EDGES), near, side="right")
    total = w.sum() or 1.0
    out = np.ones(len(NEAREST_EDGES) + 1)
    for b in range(len(out)):
        mass = w[band == b].sum()
        out[b] = float((w[band == b] * correct[band == b]).sum() / mass) if mass / total >= MIN_BAND_WEIGHT else np.nan
    for b in range(len(out) - 1, -1, -1):  # empty bands borrow from the closer side; the closest defaults to 1
        if np.isnan(out[b]):
            out[b] = out[b + 1] if b + 1 < len(out) else 1.0
    out = np.maximum.accumulate(out)  # never lower for a closer band
    out[-1] = 1.0
    return out


def confidence_maps(held: Held, conf_w: np.ndarray, conf_b: float, ceiling: np.ndarray) -> dict[str, np.ndarray]:
    """Per-engine calibration maps (`tools.routing.calibration`) fitted on the held-out decisions the confidence
    model is fitted on (cross-validated, leave-one-source-out and leave-one-index-out, with their weights), a
    decision counting as right when it chose the cheapest right route: counted right whenever the `alt` reading
    allowed it, DRIFT decisions on questions local search also answers raised DRIFT's confidence, and the router
    committed to DRIFT's calls where one local call would do (leave-one-source-out, MultiHop-RAG held out: 1.35 calls
    per question after the commitment rule without the maps, 7.18 with them). Each decision's group (what it was
    held out of) lets a map follow the hardest unfamiliar source that tests its engine."""
    x, _, w = held.inputs()
    correct = held.cheapest_right()
    raw = calibration.raw_confidence(x, conf_w, conf_b, np.asarray(held.has_cue), np.asarray(held.familiarity),
                                     np.asarray(held.nearest), np.asarray(NEAREST_EDGES), ceiling)
    chosen = np.array([int(np.argmax(p)) for p in held.proba])
    return calibration.engine_maps(chosen, raw, correct, w, np.asarray(held.group), held.cheapest_route(), CLASSES)


def fit_confidence(held: Held) -> tuple[np.ndarray, float]:
    from sklearn.linear_model import LogisticRegression

    x, correct, w = held.inputs()
    model = LogisticRegression(C=C_CONFIDENCE, max_iter=5000).fit(x, correct, sample_weight=w / w.mean())
    return np.asarray(model.coef_[0], dtype=np.float64), float(model.intercept_[0])


def fit(examples: Sequence[Example], measured: Sequence[Measured] = (), *, cues: bool = True, folds: int = FOLDS,
        alt_share: float = ALT_SHARE, per_engine: bool = PER_ENGINE_CALIBRATION,
        progress: Progress = _quiet) -> dict[str, Any]:
    """Fit all three stages; return the payload `router.classifier.Classifier` loads."""
    wf = fit_wording_stage(examples, cues=cues, folds=folds, alt_share=alt_share, progress=progress)
    return assemble(wf, fit_index_stage(wf, measured, progress=progress) if measured else None, per_engine=per_engine)


def assemble(wf: WordingFit, index: IndexFit | None, *, per_engine: bool = PER_ENGINE_CALIBRATION
             ) -> dict[str, Any]:
    held = wf.held_out()
    probe_w, probe_b = identity_index_stage()
    if index is not None:
        probe_w, probe_b = index.probe_w, index.probe_b
        held.extend(index.held)
    conf_w, conf_b = fit_confidence(held)
    payload = export(wf.wording, wf.calib_w, wf.calib_b, probe_w, probe_b, conf_w, conf_b, wf.seen, cues=wf.cues)
    payload.update(wf.neighbours.arrays())
    payload["nearest_edges"] = np.asarray(NEAREST_EDGES, dtype=np.float64)
    payload["nearest_ceiling"] = distance_ceiling(held)
    maps = confidence_maps(held, conf_w, conf_b, payload["nearest_ceiling"]) if per_engine else {}
    for engine in CLASSES:
        payload[f"confidence_map_{engine}"] = maps.get(engine, calibration.IDENTITY)
    payload["trained_on"] = {"subsets": dict(sorted(Counter(e.subset for e in wf.examples).items())),
                             "labels": dict(sorted(Counter(e.label for e in wf.examples).items())),
                             "index_stage": index.report if index is not None else {}}
    return payload


def _accuracy_by(measured: Sequence[Measured], y: np.ndarray, proba: np.ndarray) -> dict[str, float]:
    """Accuracy per (index, source, label) cell and overall."""
    hit = proba.argmax(1) == y
    cells: defaultdict[str, list[bool]] = defaultdict(list)
    for m, h in zip(measured, hit, strict=True):
        cells[f"{m.item.index}/{m.item.source}/{m.item.label}"].append(bool(h))
    out = {k: round(float(np.mean(v)), 3) for k, v in sorted(cells.items())}
    out["all"] = round(float(hit.mean()), 4)
    return out


def index_weights(measured: Sequence[Measured]) -> np.ndarray:
    """Each source of measured rows (own index questions, GraphRAG-Bench, collection questions) weighs the same in
    total, classes balanced within it."""
    cells = Counter((m.item.source, m.item.label) for m in measured)
    labels: defaultdict[str, int] = defaultdict(int)
    for source, _ in cells:
        labels[source] += 1
    sources = len(labels)
    w = np.array([1.0 / (sources * labels[m.item.source] * cells[(m.item.source, m.item.label)]) for m in measured])
    return w * len(measured)


def _hash_rows(block: np.ndarray, prefix: str) -> dict[str, np.ndarray]:
    hashed = block.astype(np.float32)
    used = np.flatnonzero(np.abs(hashed).max(axis=0) > 1e-6).astype(np.int32)
    return {f"{prefix}_index": used, f"{prefix}_value": hashed[:, used]}


def export(wording: Wording, calib_w: np.ndarray, calib_b: np.ndarray, probe_w: np.ndarray, probe_b: np.ndarray,
           conf_w: np.ndarray, conf_b: float, seen: np.ndarray, *, cues: bool = True) -> dict[str, Any]:
    """Plain arrays and JSON only (no pickled estimators), so the file is small and loads under any sklearn."""
    payload: dict[str, Any] = {
        "format": MODEL_FORMAT, "classes": list(CLASSES), "feature_names": list(FEATURE_NAMES),
        "n_hash_features": N_HASH_FEATURES, "probe_names": list(PROBE_NAMES),
        "confidence_names": list(CONFIDENCE_NAMES), "uses_cues": cues, "sklearn_version": sklearn.__version__,
        "coef_dense": wording.coef[:, :N_DENSE].astype(np.float32), "intercept": wording.intercept.astype(np.float32),
        "calib_w": calib_w, "calib_b": calib_b,
        "view_dense": wording.view_dense.astype(np.float32), "view_dense_b": wording.view_dense_b,
        "view_hash_b": wording.view_hash_b, "probe_w": probe_w, "probe_b": probe_b,
        "confidence_w": np.asarray(conf_w, dtype=np.float64), "confidence_b": np.array([conf_b]),
        "seen_words": np.packbits(seen),
    }
    payload.update(_hash_rows(wording.coef[:, N_DENSE:], "coef_hash"))
    payload.update(_hash_rows(wording.view_hash, "view_hash"))
    return payload


def save(payload: dict[str, Any], path: Path = MODEL_PATH) -> None:
    """Compressed numpy arrays plus one JSON string for the scalars: no pickle, so loading runs no code."""
    arrays = {k: v for k, v in payload.items() if isinstance(v, np.ndarray)}
    meta = {k: v for k, v in payload.items() if not isinstance(v, np.ndarray)}
    with path.open("wb") as fh:
        np.savez_compressed(fh, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)  # type: ignore[arg-type]


INDEXES_NEEDED = ("podcast", "earnings", "novel", "medical")  # the offline indexes the index stage is fitted on


def kept_index_stage(path: Path) -> IndexFit:
    """The index stage of an existing model file, for a rebuild without the offline indexes. Its weights were
    fitted on another wording model's probabilities, which the report records; the confidence stage then has
    no with-index decisions to learn from and treats a decision with an index like one without."""
    with np.load(path, allow_pickle=False) as stored:  # any model format: only these entries are read
        probe_w, probe_b = np.asarray(stored["probe_w"]), np.asarray(stored["probe_b"])
        meta = json.loads(str(stored["meta"]))
    if probe_w.shape != (3, 3 + len(PROBE_NAMES)) or list(meta.get("probe_names", [])) != list(PROBE_NAMES):
        raise SystemExit(f"{path}: its index stage was fitted on other probe features; refit it with --indexes")
    report = dict(cast(dict[str, Any], meta.get("trained_on", {}).get("index_stage", {})))
    report["kept_from"] = f"{path.name} (offline indexes not at hand; not refitted)"
    return IndexFit(probe_w, probe_b, Held.empty(), report)


def measured_rows(examples: Sequence[Example], data_dir: Path, indexes: Path, progress: Progress = _quiet
                  ) -> list[Measured]:
    """Every labelled question with an index to measure it on (see `tools.routing.index_fit`)."""
    from tools.routing import index_fit

    paths = index_fit.index_paths(indexes, data_dir)
    if not paths:
        return []
    loaded = index_fit.load_indexes(paths)
    rows = index_fit.load_questions()
    rows += [index_fit.IndexQuestion(e.question, e.label, e.subset, "graphrag_bench", alt=e.alt)
             for e in examples if e.source == "graphrag_bench"]
    rows += [index_fit.IndexQuestion(e.question, e.label, index_fit.COLLECTION_INDEX[e.domain], "collections")
             for e in examples if e.source == "collections" and e.domain in index_fit.COLLECTION_INDEX]
    return index_fit.measure(rows, loaded, progress)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Rebuild the router question classifier.")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                        help="shared data folder with graphrag_bench/ and multihop_rag_sample500/")
    parser.add_argument("--indexes", type=Path, default=DEFAULT_INDEXES,
                        help="folder with the offline indexes podcast/, earnings/, novel/, medical/")
    parser.add_argument("--own-only", action="store_true", help="train on the project's question set only")
    parser.add_argument("--no-index-stage", action="store_true", help="do not fit the index stage")
    parser.add_argument("--index-stage-from", type=Path, metavar="MODEL",
                        help="where the offline indexes are not at hand: keep the index stage (probe weights and "
                             "its training report) of this model file instead of refitting it")
    parser.add_argument("--folds", type=int, default=FOLDS, help="cross-validation folds of the wording stage")
    parser.add_argument("--alt-share", type=float, default=ALT_SHARE,
                        help="share of a two-route question's weight on its alt route (default %(default)s)")
    parser.add_argument("--no-per-engine-calibration", dest="per_engine_calibration", action="store_false",
                        help="write identity confidence maps instead of fitting one per engine")
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    args = parser.parse_args(argv)
    data_dir = None if args.own_only else args.data_dir
    if data_dir is not None and not (data_dir / "graphrag_bench").is_dir():
        parser.error(f"{data_dir} has no graphrag_bench/ folder; pass --data-dir or --own-only")
    examples = load_all(data_dir)
    index: IndexFit | None = None
    if args.index_stage_from is not None:
        index = kept_index_stage(args.index_stage_from)
    elif not args.no_index_stage and data_dir is not None:
        missing = [name for name in INDEXES_NEEDED if not (args.indexes / name / "entities.parquet").is_file()]
        if missing:
            parser.error(f"no offline index for {', '.join(missing)} under {args.indexes}: pass --indexes, or "
                         "--index-stage-from MODEL to keep a model file's index stage, or --no-index-stage")
        wf = fit_wording_stage(examples, folds=args.folds, alt_share=args.alt_share, progress=print)
        index = fit_index_stage(wf, measured_rows(examples, data_dir, args.indexes, print), progress=print)
        payload = assemble(wf, index, per_engine=args.per_engine_calibration)
    if index is None or args.index_stage_from is not None:
        wf = fit_wording_stage(examples, folds=args.folds, alt_share=args.alt_share, progress=print)
        payload = assemble(wf, index, per_engine=args.per_engine_calibration)
    save(payload, args.out)
    size = args.out.stat().st_size / 1e6
    print(f"trained on {len(examples)} questions {payload['trained_on']}; wrote {args.out} ({size:.2f} MB)")


if __name__ == "__main__":
    main()
