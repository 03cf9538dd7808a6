"""The question classifier: which engine (local, global, DRIFT) should answer a question.

Model
-----
A linear support-vector classifier (scikit-learn `LinearSVC`, one-vs-rest) over three feature blocks
(`router.features`): cue-lexicon and question-form features in English and Chinese (`router.cues`, lexicons in
`router/data/cues.json`), index-linking signals, and hashed character n-grams. Its one-vs-rest decision values
are calibrated with per-class sigmoids fitted on cross-validated predictions
(`CalibratedClassifierCV(method="sigmoid", ensemble=False)`), so `confidence` is a probability. The fitted
weights are stored as plain arrays in `router/data/router_model.npz` (rebuilt by `python -m tools.routing.train`)
and applied here with numpy, which keeps a prediction well under a millisecond and the file independent of
the scikit-learn version.

Knowing when it does not know
-----------------------------
A question unlike anything in training (few of its words, names aside, were ever seen, and no cue group fires)
gets its probabilities pulled towards uniform (`familiarity` in `signals`), so odd questions come out below
the router's confidence threshold instead of at 0.99; the router then applies its cost-aware default.

Index signals
-------------
The model is trained on every question twice: once with the index block empty (its missing-indicator
`idx_present` = 0) and once with simulated linking signals (`tools.routing.train.simulate_signals`). With an index,
the real `shared_context.linking.link_entities` output fills the block. On top of that, `router.index_scope`
measures how specific the question is *in this index* (specific entities versus speakers found across the
collection, named documents, how thinly its words spread over the top-level communities) and nudges the
probabilities with documented weights; those signals are listed in `signals` and `reasons`. If linking fails,
the decision falls back to the wording and says so in `reasons`.

Reasons are built from the features that pushed the chosen class up the most (cue phrases found, question
form, names, linking), in words a user understands.

This module imports only numpy, scikit-learn's hashing vectoriser and the router's own feature code, so
`import router.classifier` stays fast; `shared_context` and `engines` are imported lazily when needed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from router.cues import REASON_TEMPLATES
from router.features import (
    DENSE_NAMES,
    FEATURE_NAMES,
    MAX_CHARS,
    N_HASH_FEATURES,
    N_WORD_BUCKETS,
    IndexSignals,
    QuestionFeatures,
    extract,
    index_vector,
    ngram_vector,
    signals_from_link,
    wording_buckets,
)
from router.index_scope import CLASSES as SCOPE_CLASSES
from router.index_scope import SITUATIONS as SCOPE_SITUATIONS
from router.index_scope import IndexScope
from router.index_scope import adjust as adjust_for_scope
from router.index_scope import measure as measure_scope

if TYPE_CHECKING:
    from engines.models.base import ChatModel, Completion

Engine = Literal["local", "global", "drift"]
ENGINES: tuple[Engine, ...] = ("local", "global", "drift")
MODEL_PATH = Path(__file__).resolve().parent / "data" / "router_model.npz"
MODEL_FORMAT = 2
_REASON_MIN_CONTRIBUTION = 0.15  # log-odds; weaker features are not worth telling the user about
# familiarity: share of a question's words (names aside) seen in training. At or above FAMILIAR the
# calibrated probabilities stand; below it they are mixed with uniform, fully at UNFAMILIAR. A cue group
# firing counts as familiar wording whatever the n-grams say.
FAMILIAR = 0.85
UNFAMILIAR = 0.45
_ENGINE_WORDS = {"local": "questions about specific entities", "global": "questions about the whole collection",
                 "drift": "questions that connect several entities"}


@dataclass(frozen=True)
class RouteDecision:
    """Which engine to use and why. `confidence` is the calibrated probability of `engine`."""

    engine: Engine
    confidence: float
    probabilities: dict[str, float]
    reasons: list[str]
    signals: dict[str, float] = field(default_factory=dict)
    method: str = "model"
    fallbacks: tuple[str, ...] = ()  # engines to escalate to first if the chosen one finds nothing


class ModelFileError(RuntimeError):
    """The classifier's model file is missing or is not a router model."""


class Classifier:
    """A loaded router model. Thread-safe: prediction only reads the arrays."""

    def __init__(self, payload: dict[str, Any], *, source: str = "<memory>") -> None:
        try:
            if payload.get("format") != MODEL_FORMAT:
                raise ModelFileError(f"{source}: model format {payload.get('format')!r}, expected {MODEL_FORMAT}")
            if list(payload["feature_names"]) != list(FEATURE_NAMES) or payload["n_hash_features"] != N_HASH_FEATURES:
                raise ModelFileError(f"{source}: model was trained with other features; rebuild it with "
                                     "`python -m tools.routing.train`")
            self.classes: list[str] = [str(c) for c in payload["classes"]]
            if sorted(self.classes) != sorted(ENGINES):
                raise ModelFileError(f"{source}: model classes {self.classes}, expected {list(ENGINES)}")
            self._coef_dense = np.asarray(payload["coef_dense"], dtype=np.float64)
            # stored column-major as (n_hash, n_classes) so one question gathers a few contiguous rows
            self._coef_hash = np.zeros((N_HASH_FEATURES, len(self.classes)), dtype=np.float64)
            self._coef_hash[np.asarray(payload["coef_hash_index"])] = np.asarray(payload["coef_hash_value"]).T
            self._intercept = np.asarray(payload["intercept"], dtype=np.float64)
            self._calib_a = np.asarray(payload["calib_a"], dtype=np.float64)
            self._calib_b = np.asarray(payload["calib_b"], dtype=np.float64)
            seen = np.unpackbits(np.asarray(payload["seen_words"], dtype=np.uint8))
            if len(seen) < N_WORD_BUCKETS:
                raise ModelFileError(f"{source}: model was trained with a smaller familiarity table; rebuild it "
                                     "with `python -m tools.routing.train`")
            self._seen_words = seen[:N_WORD_BUCKETS] > 0
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ModelFileError(f"{source}: not a router model file ({exc})") from exc
        self.trained_on: dict[str, Any] = dict(payload.get("trained_on", {}))
        # fitted index-scope nudges (rows `router.index_scope.SITUATIONS`, columns its CLASSES); None = defaults
        weights = payload.get("scope_weights")
        self.scope_weights: np.ndarray | None = None
        if weights is not None:
            self.scope_weights = np.asarray(weights, dtype=np.float64)
            if self.scope_weights.shape != (len(SCOPE_SITUATIONS), len(SCOPE_CLASSES)):
                raise ModelFileError(f"{source}: scope weights of shape {self.scope_weights.shape}, expected "
                                     f"{(len(SCOPE_SITUATIONS), len(SCOPE_CLASSES))}")
        self.source = source

    @classmethod
    def load(cls, path: str | Path = MODEL_PATH) -> Classifier:
        path = Path(path)
        if not path.is_file():
            raise ModelFileError(f"router model file not found: {path} (rebuild it with `python -m tools.routing.train`)")
        try:
            with np.load(path, allow_pickle=False) as stored:
                payload: dict[str, Any] = {k: stored[k] for k in stored.files if k != "meta"}
                payload.update(json.loads(str(stored["meta"])))
        except (OSError, ValueError, KeyError, EOFError) as exc:  # zip/npz/json errors for a corrupt file
            raise ModelFileError(f"{path}: cannot read router model file ({type(exc).__name__}: {exc})") from exc
        return cls(payload, source=str(path))

    # ------------------------------------------------------------------------------------ scoring

    def _scores(self, feats: QuestionFeatures, signals: IndexSignals | None) -> tuple[np.ndarray, np.ndarray, float]:
        """Return (dense feature vector, raw decision values, familiarity) for one question."""
        dense = np.concatenate([feats.dense, index_vector(signals)]).astype(np.float64)
        columns, values = ngram_vector(feats.text)
        decision = self._coef_dense @ dense + self._intercept
        if len(columns):
            decision = decision + values @ self._coef_hash[columns]
        buckets = wording_buckets(feats.text, feats.names)
        familiarity = float(self._seen_words[buckets].mean()) if buckets else 0.0
        return dense, decision, familiarity

    @staticmethod
    def _temper(proba: np.ndarray, familiarity: float, has_cues: bool) -> np.ndarray:
        """Pull the probabilities of unfamiliar wording towards uniform (see FAMILIAR / UNFAMILIAR)."""
        if has_cues or familiarity >= FAMILIAR:
            return proba
        trust = max(0.0, (familiarity - UNFAMILIAR) / (FAMILIAR - UNFAMILIAR))
        return trust * proba + (1.0 - trust) / len(proba)

    def _calibrate(self, decision: np.ndarray) -> np.ndarray:
        proba = 1.0 / (1.0 + np.exp(self._calib_a * decision + self._calib_b))
        total = float(proba.sum())
        return proba / total if total > 0 else np.full_like(proba, 1.0 / len(proba))

    def predict(self, question: str, index: Any = None, *, history: Sequence[str] = (),
                linker: Callable[[str], Any] | None = None) -> RouteDecision:
        """Classify one question; `index` (a `shared_context.Index`) adds entity-linking signals.

        `history` holds the earlier user turns, newest first (the order `link_entities` uses). It only
        matters for a short follow-up that names nothing ("and why?"), which is read together with the
        newest earlier turn; the router normally rewrites follow-ups into standalone questions first.
        """
        feats, signals, scope, notes, dense, proba, familiarity = self._before_scope(question, index, history, linker)
        scope_reasons: list[str] = []
        if scope is not None:
            bonus, scope_reasons = adjust_for_scope(scope, self.scope_weights)
            order = [SCOPE_CLASSES.index(c) for c in self.classes]
            proba = proba * np.exp(bonus[order])
            proba = proba / proba.sum()
        best = int(np.argmax(proba))
        engine = cast(Engine, self.classes[best])
        reasons = scope_reasons + self._reasons(best, dense, feats, signals) + notes
        if familiarity < FAMILIAR and not feats.cues:
            reasons.append(f"unfamiliar wording (only {familiarity:.0%} of it resembles the training questions); "
                           "confidence lowered")
        if feats.truncated:
            reasons.append(f"the question is very long; only its first {MAX_CHARS} characters were used")
        probabilities: dict[str, float] = {str(c): float(proba[self.classes.index(c)]) for c in ENGINES}
        found: dict[str, float] = {"familiarity": round(familiarity, 3)}
        if signals is not None:
            found.update(signals.as_dict())
        if scope is not None:
            found.update(scope.as_dict())
        return RouteDecision(engine=engine, confidence=probabilities[engine], probabilities=probabilities,
                             reasons=reasons, signals=found, method="model")

    def _before_scope(self, question: str, index: Any, history: Sequence[str],
                      linker: Callable[[str], Any] | None) -> tuple[QuestionFeatures, IndexSignals | None,
                                                                    IndexScope | None, list[str], np.ndarray,
                                                                    np.ndarray, float]:
        """Everything up to the index-scope nudge: features, linking, scope, the model's probabilities."""
        if isinstance(history, str):  # a single earlier turn passed bare
            history = [history]
        feats = extract(question)
        notes: list[str] = []
        if history and not feats.names and len(feats.text.split()) <= 8 and len(feats.text) <= 40:
            feats = extract(f"{history[0]} {feats.text}")
            notes.append("short follow-up: read together with the previous question")
        signals: IndexSignals | None = None
        scope: IndexScope | None = None
        if index is not None and not _is_index(index):
            notes.append(f"entity linking failed ({type(index).__name__} is not an Index); decided from the wording only")
        elif index is not None:
            signals, note = _link(index, feats.text, linker)
            if note:
                notes.append(note)
            scope, note = _scope(index, feats.text, signals)
            if note:
                notes.append(note)
        dense, decision, familiarity = self._scores(feats, signals)
        proba = self._temper(self._calibrate(decision), familiarity, bool(feats.cues))
        return feats, signals, scope, notes, dense, proba, familiarity

    def scope_inputs(self, question: str, index: Any) -> tuple[np.ndarray, IndexScope | None]:
        """(the model's probabilities in `router.index_scope.CLASSES` order before the scope nudge, the scope
        measurement): what `tools.routing.scope_fit` fits the nudges on."""
        _, _, scope, _, _, proba, _ = self._before_scope(question, index, (), None)
        return proba[[self.classes.index(c) for c in SCOPE_CLASSES]], scope

    # ------------------------------------------------------------------------------------ reasons

    def _reasons(self, best: int, dense: np.ndarray, feats: QuestionFeatures,
                 signals: IndexSignals | None) -> list[str]:
        others = [k for k in range(len(self.classes)) if k != best]
        margin = self._coef_dense[best] - self._coef_dense[others].mean(axis=0)
        contribution = margin * dense
        order = np.argsort(-contribution)
        reasons: list[str] = []
        used_groups: set[str] = set()
        for j in order[:8]:
            if contribution[j] < _REASON_MIN_CONTRIBUTION or len(reasons) >= 3:
                break
            name = FEATURE_NAMES[j]
            group, text = _describe(name, feats, signals)
            if text and group not in used_groups:
                used_groups.add(group)
                reasons.append(text)
        if signals is not None and "index" not in used_groups:
            reasons.append(_index_reason(signals))
        if not reasons:
            engine = self.classes[best]
            reasons.append(f"no explicit cue; the wording is closest to {_ENGINE_WORDS[engine]} seen in training")
        return reasons


def _quote(phrases: Sequence[str], limit: int = 2) -> str:
    return ", ".join(f"'{p[:40]}'" for p in phrases[:limit])


def _names(names: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(names[:limit])
    return shown + (", ..." if len(names) > limit else "")


def _describe(name: str, feats: QuestionFeatures, signals: IndexSignals | None) -> tuple[str, str]:
    """(group, user-facing text) for one active feature; empty text when it is not worth saying."""
    if name.startswith("cue_"):
        cue = name[4:]
        return cue, REASON_TEMPLATES[cue].format(m=_quote(feats.cues.get(cue, [])))
    if name.startswith("wh_"):
        return "form", f"is a '{name[3:]}' question"
    if name == "form_yes_no":
        return "form", "is a yes/no question"
    if name == "form_imperative":
        return "form", f"is an instruction ('{feats.text.split()[0].lower()}')"
    if name == "names_0":
        return "names", "contains no name-like words"
    if name == "names_1":
        return "names", f"names one entity ({_names(feats.names)})"
    if name == "names_2plus":
        return "names", f"names {len(feats.names)} entities ({_names(feats.names)})"
    if name in ("log_tokens", "commas", "conjunctions", "clauses_long"):
        words = len(feats.text.split()) if not feats.dense[DENSE_NAMES.index("lang_zh")] else len(feats.text) // 2
        clauses = feats.dense[DENSE_NAMES.index("commas")] + feats.dense[DENSE_NAMES.index("conjunctions")]
        if words >= 25 or (name != "log_tokens" and clauses > 0 and words >= 12):
            return "shape", "is long, with several clauses"
        return "shape", ""  # length always contributes a little; only worth saying for long questions
    if name == "dates":
        return "dates", "mentions dates"
    if name == "quoted":
        return "names", "quotes a name or title"
    if name in _INTERACTION_REASONS:
        return name, _INTERACTION_REASONS[name]
    if name.startswith("idx_") and signals is not None:
        return "index", _index_reason(signals)
    return name, ""


_INTERACTION_REASONS = {
    "x_population_frequency": "asks what a group of speakers or documents generally does",
    "x_population_aggregation": "gathers views or kinds from a group of speakers or documents",
    "x_trend_without_collection": "asks for a most/least fact without pointing at the whole collection",
    "x_reasoning_with_names": "connects named things by comparison, cause or time",
    "x_identify_long": "asks for one entity, described at length",
    "x_unit_without_population": "is about one document or meeting of the series",
    "x_frequency_without_collection": "asks how something usually or commonly is",
}


def _index_reason(signals: IndexSignals) -> str:
    if signals.linked == 0:
        text = "links to no entity in the index"
    else:
        names = f" ({_names(signals.names)})" if signals.names else ""
        plural = "entity" if signals.linked == 1 else "entities"
        spans = signals.communities
        text = f"links to {signals.linked} {plural} in the index{names}"
        if spans:
            text += f" across {spans} communit{'y' if spans == 1 else 'ies'}"
    if signals.unknown:
        text += f"; {signals.unknown} name(s) that look like entities are not in the index"
    return text


def _scope(index: Any, text: str, signals: IndexSignals | None) -> tuple[IndexScope | None, str]:
    """Measure how specific the question is in this index; never raises (degrades to no nudge)."""
    from shared_context.errors import IndexFormatError

    try:
        return measure_scope(index, text, signals, signals.positions if signals else ()), ""
    except IndexFormatError as exc:  # a signal, not a requirement: say so and decide without it
        return None, f"index scope could not be measured ({exc})"


def _is_index(index: object) -> bool:
    from shared_context.index import Index  # imported only when an index is given: classify() stays light

    return isinstance(index, Index)


def _link(index: Any, text: str, linker: Callable[[str], Any] | None = None) -> tuple[IndexSignals | None, str]:
    """Run entity linking. Something that is not an Index, or index data linking cannot use, degrades to
    wording-only classification and says so; any other exception is a bug and surfaces."""
    from shared_context.errors import IndexFormatError
    from shared_context.linking import link_entities

    try:
        link = linker(text) if linker is not None else link_entities(index, text)
    except IndexFormatError as exc:  # linking is an optional signal; report and carry on with the wording
        return None, f"entity linking failed ({exc}); decided from the wording only"
    entities = index.entities

    def title_of(pos: int) -> str:
        return str(entities[pos].title)

    return signals_from_link(link, index.entity_communities, title_of), ""


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


def classify(question: str, index: Any = None, *, history: Sequence[str] = (),
             linker: Callable[[str], Any] | None = None) -> RouteDecision:
    """Route one question to "local", "global" or "drift" with the packaged model.

    Works without an index; with a `shared_context.Index`, entity-linking signals are added. `history`:
    earlier user turns, newest first. Raises `ValueError("question is empty")` for an empty or whitespace-only question.
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

    messages: list[Any] = [{"role": "system", "content": ROUTE_SYSTEM_PROMPT}, {"role": "user", "content": question}]
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


__all__ = ["DENSE_NAMES", "ENGINES", "Classifier", "ModelFileError", "RouteDecision", "classify",
           "classify_with_llm", "default_classifier"]
