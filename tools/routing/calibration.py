"""Per-engine calibration maps: what a confidence means for a DRIFT, global or local decision on unfamiliar wording.

The confidence stage (`tools.routing.train.fit_confidence`) is one logistic model for every engine, fitted on
held-out decisions (cross-validated, and about whole sources the model was trained without). One model for all
engines can be right on average and still too sure of one engine, so each engine gets a monotone map from that
raw confidence to the share of its held-out decisions that chose the cheapest right route.

A shrunk mean of all held-out decisions was not enough: leave-one-source-out, global decisions mapped to 0.8-0.9
were right 0.80 of the time with the project's own questions held out, and every one of GraphRAG-Bench's 32 global
decisions at 0.8 or more was wrong. Cross-validated decisions are about wording of the sources the model was
trained on and are right more often than decisions about a source it never saw. So each block of an isotonic
fit (the decisions sharing one fitted value) is mapped to the lowest of:

* the **lower bound** (one-sided, `LOWER_QUANTILE`, Jeffreys' Beta interval at the block's effective number of
  decisions) of the share right among all its held-out decisions: a thin block claims less than a thick one;
* the share right among the block's decisions about each **unfamiliar source** that *tests* the engine: a source
  the wording model was trained without (or an index the index stage was fitted without) holding at least
  `MIN_GOLD` questions the engine is the cheapest right route for, with at least `MIN_IN_BLOCK` decisions in the
  block. Confidence then says how the engine does on the hardest unfamiliar wording seen, not on the average. A
  source with no question of the engine's kind does not test it: every such decision there is wrong, which said
  the pointwise minimum of per-source maps once set every global confidence to 0. Those decisions still count in
  the pooled lower bound, at their source's weight;
* `UNTESTED_CEILING` when no unfamiliar source tests the engine in the block: a claim about wording the model
  never saw needs decisions about wording it never saw. (Inside a leave-one-source-out fold with one of the two
  sources that hold global questions out, the other's held-out decisions have no global one: its model was
  trained without any global question.)

One map serves decisions with and without an index. With an index (`Router.aroute`, offline), three of the 28
global questions of the with-index set written last now start with local search, below the commitment threshold
(global recall 0.821; 0.929 with the maps before). Separate maps for decisions with an index, fitted on the index
stage's leave-one-index-out decisions, were tried and not kept: global recall 0.857 on that set, but 0.837 and 0.963
on the two earlier ones (0.907 and 1.0 with one map).

Blocks whose values break the order are merged and valued again until the map is non-decreasing, so a map is
monotone and within [0, 1] by construction (the classifier refuses a model file whose map is not). Stored as
knots: (2, K) arrays of floats.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from router.classifier import ENGINES, familiarity_ceiling

LOWER_QUANTILE = 0.05  # one-sided: a block claims the accuracy its held-out decisions reach with 95 % confidence
MIN_GOLD = 30  # questions an unfamiliar source needs whose cheapest right route is the engine, to test it
MIN_IN_BLOCK = 20  # decisions a testing source needs in a block for its share right to bound the block
# set by design below the 0.8 from which a DRIFT or global decision claims to be right at least 0.9 of the time, and
# above the 0.55 pre-ranked global search needs to be committed to (`router.commitment`)
UNTESTED_CEILING = 0.75
MIN_DECISIONS = 30  # an engine with fewer held-out decisions keeps its raw confidence (the identity map)
IDENTITY = np.array([[0.0, 1.0], [0.0, 1.0]])
FAMILIAR_GROUP = "cv"  # the group of cross-validated decisions (a fold of a source the model was trained on)


def raw_confidence(x: np.ndarray, conf_w: np.ndarray, conf_b: float, has_cue: np.ndarray, familiarity: np.ndarray,
                   nearest: np.ndarray, edges: np.ndarray, ceiling: np.ndarray) -> np.ndarray:
    """What `Classifier.confidence` computes before its calibration map, for rows of confidence inputs `x`."""
    sure = 1.0 / (1.0 + np.exp(-(x @ conf_w + conf_b)))
    fam = np.array([1.0 if cue else familiarity_ceiling(float(f)) for cue, f in zip(has_cue, familiarity,
                                                                                    strict=True)])
    distance = ceiling[np.searchsorted(edges, nearest, side="right")]
    out: np.ndarray = np.minimum(np.minimum(sure, fam), distance)
    return out


def lower_bound(correct: np.ndarray, weight: np.ndarray, quantile: float = LOWER_QUANTILE) -> float:
    """Jeffreys lower bound of the weighted share right, at the effective number of decisions (Kish: unequal
    weights count as fewer decisions)."""
    from scipy.stats import beta

    total = float(weight.sum())
    if total <= 0:
        return 0.0
    n = total**2 / float((weight**2).sum())
    hits = n * float((weight * correct).sum()) / total
    return float(beta.ppf(quantile, hits + 0.5, n - hits + 0.5))


def _isotonic_blocks(raw: np.ndarray, correct: np.ndarray, weight: np.ndarray) -> list[np.ndarray]:
    """Decision indices per block of the weighted isotonic fit, in order of raw confidence."""
    from sklearn.isotonic import IsotonicRegression

    fitted = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True).fit(
        raw, correct.astype(float), sample_weight=weight).predict(raw)
    order = np.argsort(raw, kind="stable")
    cuts = np.flatnonzero(np.diff(fitted[order]) != 0) + 1
    return list(np.split(order, cuts))


def _merged_until_monotone(blocks: list[np.ndarray], value: Callable[[np.ndarray], float]
                           ) -> tuple[list[np.ndarray], list[float]]:
    """Merge the first pair of neighbouring blocks whose values break the order, value the merged block again, and
    repeat: the pool-adjacent-violators step, for a value that is not a weighted mean."""
    values = [value(b) for b in blocks]
    k = 0
    while k < len(blocks) - 1:
        if values[k] > values[k + 1] + 1e-12:
            blocks[k:k + 2] = [np.concatenate(blocks[k:k + 2])]
            values[k:k + 2] = [value(blocks[k])]
            k = max(k - 1, 0)  # the merged block may now break the order with the one before it
        else:
            k += 1
    return blocks, values


def fit_map(raw: np.ndarray, correct: np.ndarray, weight: np.ndarray, groups: np.ndarray,
            testing: frozenset[str]) -> np.ndarray:
    """(2, K) knots of a non-decreasing map from raw confidence to the share right one can vouch for on unfamiliar
    wording (see the module docstring). `groups`: what each decision was held out of; `testing`: the groups that
    are unfamiliar sources testing this engine."""
    if len(raw) < MIN_DECISIONS or weight.sum() <= 0:
        return IDENTITY.copy()
    w = weight / weight.mean()

    def value(block: np.ndarray) -> float:
        out, tested = lower_bound(correct[block], w[block]), False
        for group in testing & set(groups[block].tolist()):
            mine = block[groups[block] == group]
            if len(mine) >= MIN_IN_BLOCK:
                tested = True
                out = min(out, float((w[mine] * correct[mine]).sum() / w[mine].sum()))
        return out if tested else min(out, UNTESTED_CEILING)

    blocks, values = _merged_until_monotone(_isotonic_blocks(raw, correct, w), value)
    xs = np.array([x for b in blocks for x in (raw[b].min(), raw[b].max())])
    ys = np.array([v for v in values for _ in range(2)])
    # anchor the ends so any raw confidence maps inside the fitted range
    xs = np.concatenate([[0.0], xs, [1.0]])
    ys = np.maximum.accumulate(np.concatenate([[ys[0]], ys, [ys[-1]]]))  # already non-decreasing; guards rounding
    return np.vstack([np.clip(xs, 0.0, 1.0), np.clip(ys, 0.0, 1.0)])


def testing_groups(groups: np.ndarray, cheapest: np.ndarray, engine: int) -> frozenset[str]:
    """The unfamiliar groups (not cross-validated) holding at least `MIN_GOLD` questions whose cheapest right route
    is `engine`."""
    return frozenset(g for g in set(groups.tolist())
                     if g != FAMILIAR_GROUP and int(((groups == g) & (cheapest == engine)).sum()) >= MIN_GOLD)


def engine_maps(chosen: np.ndarray, raw: np.ndarray, correct: np.ndarray, weight: np.ndarray, groups: np.ndarray,
                cheapest: np.ndarray, classes: Sequence[str]) -> dict[str, np.ndarray]:
    """One map per engine, from the held-out decisions that chose it (`chosen`: class index per decision;
    `cheapest`: class index of each decision's cheapest right route)."""
    maps: dict[str, np.ndarray] = {}
    for engine in ENGINES:
        k = list(classes).index(engine)
        mine = chosen == k
        maps[engine] = fit_map(raw[mine], correct[mine], weight[mine], groups[mine],
                               testing_groups(groups, cheapest, k))
    return maps
