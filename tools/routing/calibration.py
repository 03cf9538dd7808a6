"""Per-engine calibration maps: what a confidence means for a DRIFT, global or local decision on unfamiliar wording.

The confidence stage (`tools.routing.train.fit_confidence`) is one logistic model for every engine, fitted on
held-out decisions (cross-validated, and about whole sources the model was trained without). One model for all
engines can be right on average and still too sure of one engine: held out, its 0.8-0.9 meant 0.78 accuracy for
DRIFT and global decisions about the project's own questions. So each engine gets a monotone map from that raw
confidence to the share of its held-out decisions that were right, fitted by isotonic regression on the same
held-out decisions with the same weights (each source weighing the same in the leave-one-source-out half). A map
per held-out source and their pointwise minimum was tried: a source with no global questions, where every global
decision is wrong, then sets every global confidence to 0; fitted on the leave-one-source-out decisions alone, the
global map fell near 0 for the same reason.

Isotonic regression follows the sample closely where it is thin, so each block of the fit is shrunk towards the
engine's overall accuracy by `PRIOR_WEIGHT` pseudo-decisions, and a map is non-decreasing and within [0, 1] by
construction (the classifier refuses a model file whose map is not). Stored as knots: (2, K) arrays of floats.
"""

from __future__ import annotations

import numpy as np

from router.classifier import ENGINES, familiarity_ceiling

# pseudo-decisions at the engine's overall held-out accuracy added to each isotonic block: a block of a few dozen
# decisions is pulled noticeably towards it, one of several hundred barely
PRIOR_WEIGHT = 30.0
MIN_DECISIONS = 30  # an engine with fewer held-out decisions keeps its raw confidence (the identity map)
IDENTITY = np.array([[0.0, 1.0], [0.0, 1.0]])


def raw_confidence(x: np.ndarray, conf_w: np.ndarray, conf_b: float, has_cue: np.ndarray, familiarity: np.ndarray,
                   nearest: np.ndarray, edges: np.ndarray, ceiling: np.ndarray) -> np.ndarray:
    """What `Classifier.confidence` computes before its calibration map, for rows of confidence inputs `x`."""
    sure = 1.0 / (1.0 + np.exp(-(x @ conf_w + conf_b)))
    fam = np.array([1.0 if cue else familiarity_ceiling(float(f)) for cue, f in zip(has_cue, familiarity,
                                                                                    strict=True)])
    distance = ceiling[np.searchsorted(edges, nearest, side="right")]
    out: np.ndarray = np.minimum(np.minimum(sure, fam), distance)
    return out


def fit_map(raw: np.ndarray, correct: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """(2, K) knots of a non-decreasing map from raw confidence to held-out accuracy, each isotonic block shrunk
    towards the overall accuracy."""
    from sklearn.isotonic import IsotonicRegression

    if len(raw) < MIN_DECISIONS or weight.sum() <= 0:
        return IDENTITY.copy()
    w = weight / weight.mean()  # in units of one average decision, so `PRIOR_WEIGHT` counts decisions
    overall = float((w * correct).sum() / w.sum())
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
    fitted = iso.fit(raw, correct.astype(float), sample_weight=w).predict(raw)
    # shrink each block (the decisions sharing one fitted value) by its own weight
    shrunk = np.empty_like(fitted)
    for value in np.unique(fitted):
        block = fitted == value
        mass = float(w[block].sum())
        shrunk[block] = (value * mass + overall * PRIOR_WEIGHT) / (mass + PRIOR_WEIGHT)
    # a thin block shrinks more than a thick one, which can undo the order: pool those again (weighted means, as
    # isotonic regression does), rather than raising every later block to the highest value before it
    shrunk = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True).fit(raw, shrunk, sample_weight=w).predict(raw)
    order = np.argsort(raw, kind="stable")
    xs, ys = raw[order], shrunk[order]
    keep = np.concatenate([[True], np.diff(xs) > 1e-9])  # one knot per distinct raw value
    xs, ys = xs[keep], np.maximum.accumulate(ys[keep])  # already non-decreasing; guards rounding
    # a block's inner knots lie on a flat line: keep each block's first and last
    edge = np.ones(len(ys), dtype=bool)
    edge[1:-1] = (ys[1:-1] != ys[:-2]) | (ys[1:-1] != ys[2:])
    xs, ys = xs[edge], ys[edge]
    # anchor the ends so any raw confidence maps inside the fitted range
    xs = np.concatenate([[0.0], xs, [1.0]])
    ys = np.concatenate([[ys[0]], ys, [ys[-1]]])
    return np.vstack([np.clip(xs, 0.0, 1.0), np.clip(ys, 0.0, 1.0)])


def engine_maps(chosen: np.ndarray, raw: np.ndarray, correct: np.ndarray, weight: np.ndarray,
                classes: tuple[str, ...]) -> dict[str, np.ndarray]:
    """One map per engine, from the held-out decisions that chose it (`chosen`: class index per decision)."""
    return {engine: fit_map(raw[chosen == classes.index(engine)], correct[chosen == classes.index(engine)],
                            weight[chosen == classes.index(engine)]) for engine in ENGINES}
