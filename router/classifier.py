"""The question classifier: which engine (local, global, DRIFT) should answer a question.

Model
-----
Three stages, all plain arrays in `router/data/router_model.npz` (rebuilt by `python -m tools.routing.train`;
numpy only at prediction, no pickle, independent of the scikit-learn version):

1. **wording**: a linear support-vector classifier (one-vs-rest) over the question's cue/form features and
   hashed character n-grams (`router.features`); its three decision values are turned into probabilities by a
   multinomial calibrator fitted on cross-validated decision values (grouped by template, so no wording the
   calibrator sees was in the fold that produced it);
2. **index** (only with an index): `router.index_probe` measures where this index's evidence for the question
   lies (specific vs collection-wide vs common-noun names, named documents, how the best passages spread over
   documents and top-level communities). A multinomial logistic layer over [log of the wording probabilities,
   the probe's features] gives the final probabilities; it is fitted on labelled questions measured on real
   offline indexes, with the wording probabilities of questions the wording model was trained on taken from
   cross-validation. The index overrides the wording's engine only when the wording alone is unsure or the probe's
   evidence is strong (`Classifier._gate`): weak index evidence never flips a confident wording decision, it only
   caps that decision's confidence. One piece of index evidence is categorical: a question that names exactly one
   document of the collection is never routed global (`Classifier._one_document`: "the main themes of episode
   30" is about episode 30, however confident the wording);
3. **confidence**: the probability that the chosen engine is right, from how sure the model is, whether two
   independently trained views of the question (cue/form features alone, n-grams alone) agree with it, how
   familiar the wording is (share of its words seen in training, names aside, and the idf-weighted similarity
   of the whole question to its nearest training question, `router.neighbours`) and whether a cue fired; a
   logistic model fitted on held-out predictions, capped by how often held-out decisions about questions as far
   from their training questions were right (`Classifier.distance_ceiling`: questions in a style no training
   source has are never routed at 0.99 on the strength of the cues alone), then mapped per engine by a monotone
   calibration map (`Classifier.calibrated`) to the probability that the engine is the cheapest right one, fitted
   on held-out decisions: a DRIFT decision on a question local search also answers is right but not worth its
   cost, which is what the commitment rule weighs (the identity for a model file without maps, such as one trained
   before them).
   Unfamiliar or contested questions come out unsure, so they
   fall to the router's model second opinion or its cost-aware default instead of being routed at 0.99.
   `confidence` is that calibrated number; `probabilities` stay the model's own distribution over the engines
   (after the index stage and the index rules below), whose top class is always the routed engine. The two differ:
   a DRIFT decision can be the clear top class and still be under 0.5 likely to be the cheapest right route.

With an index, a question that names nothing in it (no entity title, no document; `evidence_spread.names_nothing`)
is never sent to DRIFT, which would have only its primer to start from. When the index has something on it
anyway (its words reach a full set of best passages and the top-level reports, `Probe.found_across_collection`)
and the probe's evidence is for global rather than local, it goes global: passages spread over the collection
while nothing is named is what a corpus-wide question looks like. Otherwise local search, the cheapest engine that can say the
index does not cover it. Either move overrides the model, so its confidence is capped at `NOT_COVERED_CEILING`.
A question written only in a script the index's text does not use (`Probe.readable`) can be neither linked nor
searched by its words: finding nothing is then no evidence that the index does not cover it, so these moves are
skipped.

Reasons are built from the wording features that pushed the chosen class up the most and from what the index
probe found, in words a user understands (`router.features.wording_reasons`, `Probe.reasons`).

This module imports only numpy and the router's own feature code, so `import router.classifier` stays fast;
`shared_context` and `engines` are imported lazily when needed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

import numpy as np

from router.evidence_spread import ONE_SOURCE_CEILING, names_nothing, one_source, one_source_reason
from router.features import (
    DENSE_NAMES,
    FEATURE_NAMES,
    MAX_CHARS,
    N_HASH_FEATURES,
    N_WORD_BUCKETS,
    QuestionFeatures,
    extract,
    has_content_words,
    ngram_vector,
    wording_buckets,
    wording_reasons,
)
from router.index_probe import PROBE_NAMES, Probe, probe, summarise_links
from router.neighbours import FIELDS as NEIGHBOUR_FIELDS
from router.neighbours import Neighbours

if TYPE_CHECKING:
    from engines.models.base import ChatModel, Completion, Message
    from shared_context.index import Index
    from shared_context.linking import LinkResult

Engine = Literal["local", "global", "drift"]
ENGINES: tuple[Engine, ...] = ("local", "global", "drift")
MODEL_PATH = Path(__file__).resolve().parent / "data" / "router_model.npz"
MODEL_FORMAT = 4
CONFIDENCE_NAMES: tuple[str, ...] = ("logit_best", "margin", "dense_view_agrees", "ngram_view_agrees", "unfamiliar",
                                     "no_cue", "with_index", "with_index_x_logit", "far_from_training")
# cue groups that ask about the collection as a whole: a question with one of them may go global even when it
# links to nothing in the index
CORPUS_WIDE_CUES = frozenset(("scope", "theme", "summary", "trend", "population", "aggregation", "overview"))
NOT_COVERED = "model+not-covered"  # the method of a decision `_covers_nothing` moved from DRIFT to local
NAMES_NOTHING = "model+names-nothing"  # ... moved from DRIFT to global: found across the collection, names nothing
ONE_DOCUMENT = "model+one-document"  # a global decision about a question naming one document, moved off global
ONE_SOURCE = "model+one-source"  # a DRIFT decision whose evidence sits in one document, moved to local
# how sure such a move may claim to be: it overrides the model, whose own view was DRIFT, by a rule (set by design
# like `UNFAMILIAR_CEILING`; just above the default second-opinion threshold, so a close call stays visible)
NOT_COVERED_CEILING = 0.6
UNSURE = 0.6  # below this confidence the reasons say why the model is unsure
# the index overrides the wording's engine only when the wording alone is less sure than TEXT_SURE or the probe
# moves the log-odds between the two engines by at least STRONG_INDEX_EVIDENCE (`Classifier._gate`); a wording
# decision kept against the index is at most CONTESTED_CEILING sure (set by design: contested is not certain)
TEXT_SURE, STRONG_INDEX_EVIDENCE, CONTESTED_CEILING = 0.8, 2.0, 0.85
FAMILIAR, UNFAMILIAR, UNFAMILIAR_CEILING = 0.85, 0.4, 0.45  # see `familiarity_ceiling`

Linker = Callable[[str], "LinkResult"]


@dataclass(frozen=True)
class RouteDecision:
    """Which engine to use and why. `confidence` is the estimated probability that `engine` is the cheapest right
    route (calibrated on held-out decisions; what the commitment rule weighs); `probabilities` is the classifier's
    distribution over the engines, whose top class is `engine`."""

    engine: Engine
    confidence: float
    probabilities: dict[str, float]
    reasons: list[str]
    signals: dict[str, float] = field(default_factory=dict)
    method: str = "model"
    fallbacks: tuple[str, ...] = ()  # engines to escalate to first if the chosen one finds nothing
    index: str | list[str] | None = None  # the index routed to (several: the list), set by `router.fanout`


class ModelFileError(RuntimeError):
    """The classifier's model file is missing or is not a router model."""


ModelArrays = dict[str, "np.ndarray | str | int | float | bool | list[str] | dict[str, object]"]


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max()
    e = np.exp(z)
    out: np.ndarray = e / e.sum()
    return out


@dataclass(frozen=True)
class Scored:
    """One question through the stages: what `predict` decides from and what the trainer fits on."""

    feats: QuestionFeatures
    decision: np.ndarray  # wording model's decision values (class order of the model)
    text_proba: np.ndarray
    proba: np.ndarray  # after the index stage (== text_proba without an index)
    dense_view: int  # argmax of the cue/form view
    ngram_view: int  # argmax of the n-gram view
    familiarity: float
    probe: Probe | None
    notes: tuple[str, ...] = ()
    nearest: float = 1.0  # idf-weighted cosine to the closest training question (`router.neighbours`)


class Classifier:
    """A loaded router model. Thread-safe: prediction only reads the arrays."""

    def __init__(self, payload: ModelArrays, *, source: str = "<memory>") -> None:
        try:
            if payload.get("format") != MODEL_FORMAT:
                raise ModelFileError(f"{source}: model format {payload.get('format')!r}, expected {MODEL_FORMAT}; "
                                     "rebuild it with `python -m tools.routing.train`")
            if list(cast(list[str], payload["feature_names"])) != list(FEATURE_NAMES) or \
                    payload["n_hash_features"] != N_HASH_FEATURES:
                raise ModelFileError(f"{source}: model was trained with other features; rebuild it with "
                                     "`python -m tools.routing.train`")
            if list(cast(list[str], payload["probe_names"])) != list(PROBE_NAMES) or \
                    list(cast(list[str], payload["confidence_names"])) != list(CONFIDENCE_NAMES):
                raise ModelFileError(f"{source}: model was trained with other index or confidence features; "
                                     "rebuild it with `python -m tools.routing.train`")
            self.classes: list[str] = [str(c) for c in cast(list[str], payload["classes"])]
            if sorted(self.classes) != sorted(ENGINES):
                raise ModelFileError(f"{source}: model classes {self.classes}, expected {list(ENGINES)}")
            arr = {k: np.asarray(v, dtype=np.float64) for k, v in payload.items() if isinstance(v, np.ndarray)}
            self._coef_dense = arr["coef_dense"]
            self._intercept = arr["intercept"]
            self._coef_hash = self._hash_block(payload, "coef_hash")
            self._calib_w, self._calib_b = arr["calib_w"], arr["calib_b"]
            self._view_dense, self._view_dense_b = arr["view_dense"], arr["view_dense_b"]
            self._view_hash, self._view_hash_b = self._hash_block(payload, "view_hash"), arr["view_hash_b"]
            self._probe_w, self._probe_b = arr["probe_w"], arr["probe_b"]
            self._conf_w, self._conf_b = arr["confidence_w"], float(arr["confidence_b"].reshape(-1)[0])
            seen = np.unpackbits(np.asarray(payload["seen_words"], dtype=np.uint8))
            if len(seen) < N_WORD_BUCKETS:
                raise ModelFileError(f"{source}: model was trained with a smaller familiarity table; rebuild it "
                                     "with `python -m tools.routing.train`")
            self._seen_words = seen[:N_WORD_BUCKETS] > 0
            self._neighbours = Neighbours.from_arrays(
                {f"nn_{k}": np.asarray(payload[f"nn_{k}"]) for k in NEIGHBOUR_FIELDS})
            self._near_edges = np.asarray(payload["nearest_edges"], dtype=np.float64)
            self._near_ceiling = np.asarray(payload["nearest_ceiling"], dtype=np.float64)
            if len(self._near_ceiling) != len(self._near_edges) + 1:
                raise ModelFileError(f"{source}: nearest_ceiling needs one value more than nearest_edges")
            self.uses_cues = bool(payload.get("uses_cues", True))
            self._confidence_maps: dict[str, np.ndarray] = {e: _confidence_map(payload, e, source) for e in ENGINES}
            shapes = {"coef_dense": (3, len(DENSE_NAMES)), "calib_w": (3, 3), "view_dense": (3, len(DENSE_NAMES)),
                      "probe_w": (3, 3 + len(PROBE_NAMES)), "confidence_w": (len(CONFIDENCE_NAMES),)}
            for name, shape in shapes.items():
                if arr[name].shape != shape:
                    raise ModelFileError(f"{source}: {name} has shape {arr[name].shape}, expected {shape}")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ModelFileError(f"{source}: not a router model file ({exc})") from exc
        trained_on = payload.get("trained_on", {})
        self.trained_on: dict[str, object] = dict(trained_on) if isinstance(trained_on, dict) else {}
        self.source = source

    @staticmethod
    def _hash_block(payload: ModelArrays, name: str) -> np.ndarray:
        """A (N_HASH_FEATURES, 3) block stored as its non-zero rows, so one question gathers a few rows."""
        block = np.zeros((N_HASH_FEATURES, 3), dtype=np.float64)
        block[np.asarray(payload[f"{name}_index"])] = np.asarray(payload[f"{name}_value"]).T
        return block

    @classmethod
    def load(cls, path: str | Path = MODEL_PATH) -> Classifier:
        path = Path(path)
        if not path.is_file():
            raise ModelFileError(f"router model file not found: {path} (rebuild it with "
                                 "`python -m tools.routing.train`)")
        try:
            with np.load(path, allow_pickle=False) as stored:
                payload: ModelArrays = {k: stored[k] for k in stored.files if k != "meta"}
                payload.update(json.loads(str(stored["meta"])))
        except (OSError, ValueError, KeyError, EOFError) as exc:  # zip/npz/json errors for a corrupt file
            raise ModelFileError(f"{path}: cannot read router model file ({type(exc).__name__}: {exc})") from exc
        return cls(payload, source=str(path))

    # ------------------------------------------------------------------------------------ stages

    def text_stage(self, feats: QuestionFeatures) -> tuple[np.ndarray, np.ndarray, int, int, float, float]:
        """(decision values, calibrated probabilities, dense-view argmax, n-gram-view argmax, familiarity,
        similarity to the nearest training question)."""
        dense = feats.dense.astype(np.float64)
        columns, values = ngram_vector(feats.text)
        hashed = values @ self._coef_hash[columns] if len(columns) else np.zeros(3)
        decision = self._coef_dense @ dense + self._intercept + hashed
        proba = _softmax(self._calib_w @ decision + self._calib_b)
        dense_view = int(np.argmax(self._view_dense @ dense + self._view_dense_b))
        ngram = values @ self._view_hash[columns] if len(columns) else np.zeros(3)
        ngram_view = int(np.argmax(ngram + self._view_hash_b))
        buckets = wording_buckets(feats.text, feats.names)
        familiarity = float(self._seen_words[buckets].mean()) if buckets else 0.0
        return decision, proba, dense_view, ngram_view, familiarity, self._neighbours.nearest(buckets)

    def index_stage(self, text_proba: np.ndarray, found: Probe) -> np.ndarray:
        inputs = np.concatenate([np.log(np.clip(text_proba, 1e-6, 1.0)), found.vector()])
        return _softmax(self._probe_w @ inputs + self._probe_b)

    def confidence_inputs(self, scored: Scored) -> np.ndarray:
        return confidence_inputs(scored.proba, scored.dense_view, scored.ngram_view, scored.familiarity,
                                 bool(scored.feats.cues) and self.uses_cues, scored.probe is not None, scored.nearest)

    def confidence(self, scored: Scored, *, calibrate: bool = True) -> float:
        """The confidence model's probability of being right, never above the ceiling of unfamiliar wording nor
        above how often held-out decisions this far from their training questions were right, mapped by the chosen
        engine's calibration map (and still never above the ceiling of unfamiliar wording, set by design)."""
        z = float(self._conf_w @ self.confidence_inputs(scored)) + self._conf_b
        ceiling = 1.0 if scored.feats.cues and self.uses_cues else familiarity_ceiling(scored.familiarity)
        raw = min(float(1.0 / (1.0 + np.exp(-z))), ceiling, self.distance_ceiling(scored.nearest))
        if not calibrate:
            return raw
        engine = self.classes[int(np.argmax(scored.proba))]
        return min(self.calibrated(engine, raw), ceiling)

    def calibrated(self, engine: str, raw: float) -> float:
        """`raw` confidence in an `engine` decision through that engine's calibration map: a non-decreasing
        piecewise-linear map fitted on held-out decisions about sources the model was trained without."""
        knots = self._confidence_maps[engine]
        return float(np.interp(raw, knots[0], knots[1]))

    def distance_ceiling(self, nearest: float) -> float:
        """The held-out accuracy of decisions about questions whose nearest training question is this similar
        (fitted by the trainer per band of similarity, never lower for a closer band)."""
        return float(self._near_ceiling[int(np.searchsorted(self._near_edges, nearest, side="right"))])

    def score(self, question: str, index: Index | None = None, *, history: Sequence[str] = (),
              linker: Linker | None = None) -> Scored:
        """Everything `predict` decides from, for one question."""
        if isinstance(history, str):  # a single earlier turn passed bare
            history = [history]
        feats = extract(question)
        if not history and not has_content_words(feats.text):
            raise ValueError(f"question has no content words ({feats.text[:40]!r}): ask about someone or something")
        notes: list[str] = []
        if history and not feats.names and len(feats.text.split()) <= 8 and len(feats.text) <= 40:
            # the earlier question's closing mark goes (two question marks read as two things asked at once);
            # a capital "And" would read as part of a name
            follow_up = feats.text[:1].lower() + feats.text[1:]
            feats = extract(f"{history[0].rstrip().rstrip('?？')} {follow_up}")
            notes.append("short follow-up: read together with the previous question")
        decision, text_proba, dense_view, ngram_view, familiarity, nearest = self.text_stage(feats)
        found: Probe | None = None
        if index is not None:
            _check_index(index)
            found, note = _probe(index, feats.text, linker)
            if note:
                notes.append(note)
        proba = self.index_stage(text_proba, found) if found is not None else text_proba
        return Scored(feats, decision, text_proba, proba, dense_view, ngram_view, familiarity, found, tuple(notes),
                      nearest)

    # ------------------------------------------------------------------------------------ decision

    def predict(self, question: str, index: Index | None = None, *, history: Sequence[str] = (),
                linker: Linker | None = None) -> RouteDecision:
        """Classify one question; `index` (a `shared_context.Index`) adds what the index says about it.

        `history` holds the earlier user turns, newest first (the order `link_entities` uses). It only
        matters for a short follow-up that names nothing ("and why?"), which is read together with the
        newest earlier turn; the router normally rewrites follow-ups into standalone questions first.
        """
        scored = self.score(question, index, history=history, linker=linker)
        feats = scored.feats
        best = int(np.argmax(scored.proba))
        confidence = self.confidence(scored)
        gate: list[str] = []
        if scored.probe is not None:
            # the gate weighs the wording's confidence before the per-engine maps: `TEXT_SURE` was set on that
            # scale, and the local map (local decisions are right more often than the shared model says) would
            # otherwise stop the index from moving unsure local wording to global
            text_confidence = self.confidence(replace(scored, proba=scored.text_proba, probe=None), calibrate=False)
            scored, best, confidence, gate = self._gate(scored, best, confidence, text_confidence)
        engine = cast(Engine, self.classes[best])
        reasons = scored.probe.reasons() if scored.probe is not None else []
        reasons += gate
        reasons += wording_reasons(self._coef_dense, best, feats, engine)
        reasons += list(scored.notes)
        if confidence < UNSURE:
            reasons.append(self._unsure_because(scored, best))
        if feats.truncated:
            reasons.append(f"the question is very long; only its first {MAX_CHARS} characters were used")
        # two views of one decision, moved alike by the index rules below: `sure` holds the calibrated confidence
        # for the chosen engine (the others keep their ratio), which the moves cap; `proba` stays the model's own
        # distribution, whose top class is the routed engine (a calibrated DRIFT confidence can be below 0.5)
        proba, sure = scored.proba, _rescaled(scored.proba, best, confidence)
        method = "model"
        if scored.probe is not None and engine == "global" and len(scored.probe.documents) == 1:
            engine, moved, why = self._one_document(scored, scored.probe.documents[0])
            method = ONE_DOCUMENT
            reasons.insert(0, why)
            proba, sure = _both_moved(proba, sure, self.classes.index("global"), moved, CONTESTED_CEILING)
        if scored.probe is not None and engine == "drift" and names_nothing(scored.probe):
            engine, method, why = self._no_start(scored.probe)
            reasons.insert(0, why)
            # DRIFT's share goes to the engine chosen; overriding the model is no evidence of being right
            capped = _share_moved(sure, self.classes.index("drift"), self.classes.index(engine),
                                  NOT_COVERED_CEILING)[1]
            proba, sure = _both_moved(proba, sure, self.classes.index("drift"), self.classes.index(engine),
                                      NOT_COVERED_CEILING)
            if capped:
                reasons.append(f"unsure: the model pointed to DRIFT; {engine} search is the cautious choice here, "
                               f"so its confidence is at most {NOT_COVERED_CEILING:.2f}")
        wide = bool(CORPUS_WIDE_CUES & set(feats.cues))
        if scored.probe is not None and engine == "drift" and one_source(scored.probe, corpus_wide=wide):
            engine, method = "local", ONE_SOURCE
            reasons.insert(0, one_source_reason(scored.probe))
            proba, sure = _both_moved(proba, sure, self.classes.index("drift"), self.classes.index("local"),
                                      ONE_SOURCE_CEILING)
        probabilities: dict[str, float] = {c: float(proba[self.classes.index(c)]) for c in ENGINES}
        signals: dict[str, float] = {"familiarity": round(scored.familiarity, 3),
                                     "nearest_training_question": round(scored.nearest, 3),
                                     "wording_confidence": round(float(scored.text_proba.max()), 3)}
        if scored.probe is not None:
            signals.update(scored.probe.as_dict())
        return RouteDecision(engine=engine, confidence=float(sure[self.classes.index(engine)]),
                             probabilities=probabilities,
                             reasons=reasons, signals=signals, method=method,
                             fallbacks=("basic",) if method == NOT_COVERED else ())

    def _one_document(self, scored: Scored, document: str) -> tuple[Engine, int, str]:
        """A question that names exactly one document of the collection is about that document, not about the whole
        collection, however corpus-wide its wording ("the main themes of episode 30"): global's share goes to the
        likelier of local and DRIFT (index stage), at most `CONTESTED_CEILING` sure since the wording said
        otherwise. However confident the wording, a named document is the index's strongest evidence."""
        local, drift = self.classes.index("local"), self.classes.index("drift")
        moved = local if scored.proba[local] >= scored.proba[drift] else drift
        engine = cast(Engine, self.classes[moved])
        return engine, moved, (f"asks about one document ({document}), not the whole collection: {engine} rather than "
                             f"global, at most {CONTESTED_CEILING:.2f} sure since the wording read it as corpus-wide")

    def _no_start(self, found: Probe) -> tuple[Engine, str, str]:
        """Where a DRIFT decision goes when the question names nothing in the index: global when the index has
        something on it across the collection and the probe's evidence is for global rather than local (the wording
        chose neither, so where the index has it decides), else local. (engine, method, reason)"""
        local, glob = self.classes.index("local"), self.classes.index("global")
        evidence = self.index_evidence(found)
        if found.found_across_collection and evidence[glob] > evidence[local]:
            return "global", NAMES_NOTHING, (
                "links to nothing in this index by name, so DRIFT would have nothing to start from; its best passages "
                f"spread over the collection ({found.unit_groups} of {found.groups} documents): global search")
        return "local", NOT_COVERED, ("links to nothing in this index by name, and its passages do not spread over "
                                      "the collection: local search, the cheapest engine that can say the index does not cover it")

    def index_evidence(self, found: Probe) -> np.ndarray:
        """What the probe alone adds to each class's log-odds in the index stage (class order of the model)."""
        out: np.ndarray = self._probe_w[:, 3:] @ found.vector() + self._probe_b
        return out

    def _gate(self, scored: Scored, best: int, confidence: float, text_confidence: float
              ) -> tuple[Scored, int, float, list[str]]:
        """The index overrides the wording only on strong evidence or when the wording is unsure.

        When the index stage picks another engine than the wording alone, the switch stands if the wording's own
        confidence (`text_confidence`, as without an index) is below `TEXT_SURE`, or if the probe moves the
        log-odds between the two engines by at least `STRONG_INDEX_EVIDENCE`. Otherwise the wording's engine is kept, and since the index
        disagreed, its confidence is at most `CONTESTED_CEILING`. A probe that agrees with the wording is never
        weighed here.
        """
        wording = int(np.argmax(scored.text_proba))
        if wording == best or scored.probe is None:
            return scored, best, confidence, []
        shift = self.index_evidence(scored.probe)
        strength = float(shift[best] - shift[wording])
        moved, kept = self.classes[best], self.classes[wording]
        if text_confidence < TEXT_SURE or strength >= STRONG_INDEX_EVIDENCE:
            why = "the wording was unsure" if text_confidence < TEXT_SURE else "the index evidence is strong"
            return scored, best, confidence, [
                f"the index moved the decision from {kept} (the wording, {text_confidence:.2f}) to {moved}: {why} "
                f"(index evidence {strength:+.1f} log-odds)"]
        # the kept decision's confidence is on the calibrated scale like every other (`text_confidence` is not)
        wording_only = replace(scored, proba=scored.text_proba, probe=None)
        kept_conf = min(self.confidence(wording_only), CONTESTED_CEILING)
        return replace(scored, proba=scored.text_proba), wording, kept_conf, [
            f"the index leaned to {moved} (evidence {strength:+.1f} log-odds), too weakly to override the wording's "
            f"{kept} ({text_confidence:.2f}); kept {kept}, at most {CONTESTED_CEILING:.2f} sure"]

    def _unsure_because(self, scored: Scored, best: int) -> str:
        why = []
        if scored.dense_view != best or scored.ngram_view != best:
            why.append("the cue/form view and the phrase view of the question disagree")
        if scored.familiarity < FAMILIAR:
            why.append(f"unfamiliar wording: only {scored.familiarity:.0%} of it resembles the training questions")
        if not why:
            why.append("two engines are close")
        return "unsure: " + "; ".join(why)


def _confidence_map(payload: ModelArrays, engine: str, source: str) -> np.ndarray:
    """The (2, K) knots (raw confidence, calibrated confidence) of one engine's calibration map, checked monotone;
    the identity for a model file without one (trained before the maps existed)."""
    stored = payload.get(f"confidence_map_{engine}")
    knots = np.asarray(stored if stored is not None else [[0.0, 1.0], [0.0, 1.0]], dtype=np.float64)
    if knots.ndim != 2 or knots.shape[0] != 2 or knots.shape[1] < 1:
        raise ModelFileError(f"{source}: confidence_map_{engine} has shape {knots.shape}, expected (2, K)")
    if (np.diff(knots[0]) < 0).any() or (np.diff(knots[1]) < 0).any() or knots.min() < 0 or knots.max() > 1:
        raise ModelFileError(f"{source}: confidence_map_{engine} is not a non-decreasing map of [0, 1]")
    return knots


def familiarity_ceiling(familiarity: float) -> float:
    """How sure any decision may be about wording with no cue and this share of words seen in training: no limit
    from `FAMILIAR` up, `UNFAMILIAR_CEILING` at `UNFAMILIAR` and below. The held-out questions the confidence
    model is fitted on are all real questions; gibberish and wording far from all of them is not among them, so
    this floor of doubt is set by design rather than learned."""
    trust = min(1.0, max(0.0, (familiarity - UNFAMILIAR) / (FAMILIAR - UNFAMILIAR)))
    return UNFAMILIAR_CEILING + (1.0 - UNFAMILIAR_CEILING) * trust


def confidence_inputs(proba: np.ndarray, dense_view: int, ngram_view: int, familiarity: float, has_cue: bool,
                      with_index: bool, nearest: float) -> np.ndarray:
    """`CONFIDENCE_NAMES` for one decision (also what the trainer fits the confidence model on)."""
    best = int(np.argmax(proba))
    p = float(np.clip(proba[best], 1e-6, 1 - 1e-6))
    second = float(np.sort(proba)[-2])
    logit = float(np.log(p / (1 - p)))
    indexed = float(with_index)
    return np.array([logit, p - second, float(dense_view == best), float(ngram_view == best), 1.0 - familiarity,
                     float(not has_cue), indexed, indexed * logit, 1.0 - nearest])


def _rescaled(proba: np.ndarray, best: int, confidence: float) -> np.ndarray:
    """`proba` with `proba[best] == confidence` and the other classes in their old ratio."""
    rest = float(1.0 - proba[best])
    out = proba * ((1.0 - confidence) / rest) if rest > 1e-12 else np.full_like(proba, (1.0 - confidence) / 2)
    out[best] = confidence
    return out


def _share_moved(proba: np.ndarray, source: int, target: int, ceiling: float) -> tuple[np.ndarray, bool]:
    """`source`'s probability given to `target`, which is then at most `ceiling` sure; and whether it was capped."""
    out = proba.copy()
    out[target], out[source] = out[target] + out[source], 0.0
    if out[target] <= ceiling:
        return out, False
    return _rescaled(out, target, ceiling), True


def _both_moved(proba: np.ndarray, sure: np.ndarray, source: int, target: int, ceiling: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """`_share_moved` on the distribution and on the confidence view alike (see `Classifier.predict`)."""
    return _share_moved(proba, source, target, ceiling)[0], _share_moved(sure, source, target, ceiling)[0]


def _check_index(index: object) -> None:
    from shared_context.index import Index  # imported only when an index is given: classify() stays light

    if not isinstance(index, Index):
        raise TypeError(f"index must be a shared_context Index, not {type(index).__name__}")


def _probe(index: Index, text: str, linker: Linker | None) -> tuple[Probe | None, str]:
    """Link and probe; index data linking cannot use degrades to wording-only classification and says so
    (any other exception is a bug and surfaces)."""
    from shared_context.errors import IndexFormatError
    from shared_context.linking import link_entities

    try:
        link = linker(text) if linker is not None else link_entities(index, text)
        entities = index.entities
        links = summarise_links(link, lambda pos: str(entities[pos].title))
        return probe(index, text, links), ""
    except IndexFormatError as exc:
        return None, f"the index could not be probed ({exc}); decided from the wording only"


# ---------------------------------------------------------------------------------- module level

_default: Classifier | None = None
_default_lock = threading.Lock()


def default_classifier() -> Classifier:
    """The packaged model, loaded once per process (thread-safe)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Classifier.load(MODEL_PATH)
    return _default


def classify(question: str, index: Index | None = None, *, history: Sequence[str] = (),
             linker: Linker | None = None) -> RouteDecision:
    """Route one question to "local", "global" or "drift" with the packaged model.

    Works without an index; with a `shared_context.Index`, what the index says about the question is added.
    `history`: earlier user turns, newest first. Raises `ValueError` for an empty question or one with no
    content words.
    """
    return default_classifier().predict(question, index, history=history, linker=linker)


ROUTE_SYSTEM_PROMPT = (
    "You choose the search engine that should answer a question over a knowledge-graph index.\n"
    "Engines: local, global, drift\n"
    "local: a fact about one or a few named entities, answerable from their neighbourhood in the graph.\n"
    "global: about the whole collection: themes, trends, summaries, what is most or least common.\n"
    "drift: needs reasoning across several entities or passages (comparison, cause and effect, how X led to Y,"
    " timelines, multi-hop links) but is about specific entities, not the whole collection.\n"
    'Answer with JSON: {"engine": "local" | "global" | "drift", "reason": "<one sentence>"}'
)


async def classify_with_llm(question: str, model: ChatModel, decision: RouteDecision, threshold: float = 0.55,
                            *, weight: float = 0.5) -> tuple[RouteDecision, list[Completion]]:
    """Ask the chat model for a second opinion when the local classifier is unsure.

    Only called into action when `decision.confidence < threshold`; otherwise returns `(decision, [])`.
    The model's vote is blended with the classifier's probabilities (`weight` on the vote). Returns the new
    decision (`method="model+llm"`) and every completion made, for usage accounting. If the model fails, the
    original decision is returned with a reason saying so (and whatever completions were made).
    """
    if decision.confidence >= threshold:
        return decision, []
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be in [0, 1], got {weight}")
    from engines.models.errors import ModelError
    from engines.models.structured import complete_json
    from engines.schemas import RouteResponse

    messages: list[Message] = [{"role": "system", "content": ROUTE_SYSTEM_PROMPT},
                               {"role": "user", "content": question}]
    try:
        parsed, completions = await complete_json(model, messages, RouteResponse, task="route")
    except ModelError as exc:
        used = list(getattr(exc, "completions", []) or [])
        note = f"model second opinion failed ({type(exc).__name__}); kept the classifier's decision"
        return replace(decision, reasons=[*decision.reasons, note]), used
    vote = str(parsed.engine)
    blended = {e: (1.0 - weight) * p + (weight if e == vote else 0.0) for e, p in decision.probabilities.items()}
    engine: Engine = max(ENGINES, key=lambda e: blended[e])
    why = f"the chat model chose {vote}" + (f": {parsed.reason}" if parsed.reason else "")
    return RouteDecision(engine=engine, confidence=blended[engine], probabilities=blended,
                         reasons=[*decision.reasons, why], signals=decision.signals,
                         method="model+llm"), list(completions)


__all__ = ["CONFIDENCE_NAMES", "DENSE_NAMES", "ENGINES", "Classifier", "ModelFileError", "RouteDecision", "Scored",
           "classify", "classify_with_llm", "default_classifier"]
