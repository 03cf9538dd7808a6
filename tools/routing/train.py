"""Rebuild the router's question classifier: `python -m tools.routing.train [--data-dir ../shared/data] [--out PATH]`.

Training data (see `router.classifier` for the model design):

* `tools/routing/data/questions.jsonl` - the project's own labelled set (sources ``graphroute``, the domain templates and
  hand-written questions, and ``collections``, questions about collections of documents and speakers; see
  `tools.routing.question_bank`);
* GraphRAG-Bench novel + medical development questions and the MultiHop-RAG development sample, read from
  `--data-dir` and mapped to routes by each data set's `router_label_map.json` (labels mapped to ``exclude``
  are dropped). They are read at train time only; the saved model does not need them.

After the text model, the index-scope nudges (`router.index_scope.SITUATIONS`) are fitted for it on questions
measured against small offline indexes of two corpora of `--data-dir` (`tools.routing.scope_fit`; about a minute;
`--no-scope-fit` keeps the hand-set defaults).

Every question is used twice: once with the index block empty (no index given) and once with simulated
index-linking signals, so the model learns both situations. The simulation is seeded per question, and
scikit-learn's solvers and fold splits are deterministic, so rebuilding gives the same model file.

The two "new styles" evaluation sets (`tools/routing/data/new_styles.jsonl` and `tools/routing/data/new_styles_2.jsonl`) are
never training data: every loader here refuses to read them, so `benchmarks/router_eval.py` can report them as
questions the model has never seen.
"""

from __future__ import annotations

import argparse
import json
import random
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sklearn
from sklearn.calibration import CalibratedClassifierCV
from sklearn.svm import LinearSVC

from router.features import (
    FEATURE_NAMES,
    N_DENSE,
    N_HASH_FEATURES,
    N_WORD_BUCKETS,
    IndexSignals,
    QuestionFeatures,
    entity_like_names,
    extract,
    wording_buckets,
)
from tools.routing.matrix import build_matrix

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
QUESTIONS = DATA / "questions.jsonl"
MODEL_PATH = REPO_ROOT / "router" / "data" / "router_model.npz"
NEW_STYLES = DATA / "new_styles.jsonl"  # evaluation only, never trained on
NEW_STYLES_2 = DATA / "new_styles_2.jsonl"  # second held-out set, same rule
HELD_OUT = (NEW_STYLES, NEW_STYLES_2)
DEFAULT_DATA_DIR = REPO_ROOT.parent / "shared" / "data"
CLASSES = ("drift", "global", "local")
MODEL_FORMAT = 2
C_REGULARISATION = 0.3


@dataclass(frozen=True)
class Example:
    question: str
    label: str
    source: str  # graphroute | collections | graphrag_bench | multihop
    subset: str  # finer grouping for reports: graphroute | collections | novel | medical | multihop
    lang: str
    entities: tuple[str, ...] = ()
    domain: str = ""
    group: str = ""  # template id (questions expanded from one template share it); "" = the question itself

    @property
    def cv_group(self) -> str:
        """What grouped cross-validation keeps together: the template, or the question when hand-written."""
        return self.group or f"{self.source}:{self.question}"


# ------------------------------------------------------------------------------------------------ data


class HeldOutDataError(ValueError):
    """Raised when training code is pointed at a held-out new-styles evaluation set."""


def refuse_held_out(path: Path) -> None:
    for held_out in HELD_OUT:
        if path.resolve() == held_out.resolve() or path.name == held_out.name:
            raise HeldOutDataError(f"{path} is a held-out new-styles evaluation set; it is never training data")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_own(path: Path = QUESTIONS) -> list[Example]:
    refuse_held_out(path)
    rows = []
    for r in read_jsonl(path):
        source = str(r.get("source", "graphroute"))
        rows.append(Example(r["question"], r["label"], source, source, r.get("lang", "en"),
                            tuple(r.get("entities", ())), r.get("domain", ""), str(r.get("template", ""))))
    return rows


def _label_map(path: Path) -> tuple[str, dict[str, str]]:
    spec = json.loads(path.read_text(encoding="utf-8"))
    return spec["field"], dict(spec["map"])


def load_graphrag_bench(data_dir: Path) -> list[Example]:
    import pandas as pd  # only needed at train time

    base = data_dir / "graphrag_bench"
    field, mapping = _label_map(base / "router_label_map.json")
    rows = []
    for subset in ("novel", "medical"):
        frame = pd.read_parquet(base / "questions" / f"{subset}_questions_dev.parquet", columns=["question", field])
        for question, qtype in zip(frame["question"], frame[field], strict=True):
            label = mapping.get(str(qtype), "exclude")
            if label in CLASSES:
                rows.append(Example(str(question), label, "graphrag_bench", subset, "en", domain=subset))
    return rows


def load_multihop(data_dir: Path) -> list[Example]:
    base = data_dir / "multihop_rag_sample500"
    field, mapping = _label_map(base / "router_label_map.json")
    rows = []
    with (base / "multihop_rag_sample500_dev.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                r = json.loads(line)
                label = mapping.get(str(r[field]), "exclude")
                if label in CLASSES:
                    rows.append(Example(str(r["query"]), label, "multihop", "multihop", "en", domain="news"))
    return rows


def load_all(data_dir: Path | None) -> list[Example]:
    rows = load_own()
    if data_dir is not None:
        rows += load_graphrag_bench(data_dir) + load_multihop(data_dir)
    return rows


# ------------------------------------------------------------------------- simulated index signals


def simulate_signals(example: Example) -> IndexSignals:
    """Plausible entity-linking output for a question, as if its corpus had been indexed.

    Mirrors `router.features.signals_from_link`, which counts an entity as linked when its title occurs in
    the question. Names the question mentions (annotated for the project's set, guessed from capitalised /
    quoted spans otherwise) are in the index most of the time; the others become unknown names. A common
    word sometimes is an entity title too (a spurious link). Entities of one question often share a
    community. Seeded by the question text, so training is deterministic.
    """
    rng = random.Random(zlib.crc32(example.question.encode("utf-8")))
    mentions = list(example.entities) or list(entity_like_names(example.question))
    scores: list[float] = []
    unknown = 0
    for _ in mentions:
        if rng.random() < 0.85:
            scores.append(rng.uniform(0.6, 1.0))
        else:
            unknown += 1
    for _ in range(sum(rng.random() < 0.2 for _ in range(2))):  # a common word that is also an entity title
        scores.append(rng.uniform(0.3, 0.7))
    communities = 0
    if scores:
        pool = rng.randint(1, len(scores))
        communities = len({rng.randrange(pool) for _ in scores})
    return IndexSignals(linked=len(scores), max_score=max(scores, default=0.0),
                        mean_score=sum(scores) / len(scores) if scores else 0.0, exact=len(scores),
                        communities=communities, unknown=unknown)


# ------------------------------------------------------------------------------------------ fitting


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


def fit(examples: Sequence[Example], *, with_index_copies: bool = True) -> dict[str, Any]:
    """Fit the calibrated model and return the payload that `router.classifier.Classifier` loads."""
    feats: list[QuestionFeatures] = [extract(e.question) for e in examples]
    signals: list[IndexSignals | None] = [None] * len(examples)
    labels = [e.label for e in examples]
    weights = sample_weights(examples)
    if with_index_copies:
        feats = feats + feats
        signals = signals + [simulate_signals(e) for e in examples]
        labels = labels + labels
        weights = np.concatenate([weights, weights]) / 2.0
    matrix = build_matrix(feats, signals)
    classes = sorted(set(labels))
    base = LinearSVC(C=C_REGULARISATION, random_state=0)  # liblinear shuffles coordinates: fix the seed
    model = CalibratedClassifierCV(base, method="sigmoid", cv=3, ensemble=False)
    model.fit(matrix, np.asarray(labels), sample_weight=weights)
    seen_words = np.zeros(N_WORD_BUCKETS, dtype=bool)
    for f in feats[: len(examples)]:
        seen_words[wording_buckets(f.text, f.names)] = True
    payload = export(model, classes, Counter(e.subset for e in examples), Counter(labels[: len(examples)]))
    payload["seen_words"] = np.packbits(seen_words)
    return payload


def export(model: CalibratedClassifierCV, classes: list[str], subsets: Counter[str], labels: Counter[str]) -> dict[str, Any]:
    """Plain arrays only (no pickled estimators), so the file is small and loads under any sklearn.

    Always writes the three routes. A model trained without one route (only in leave-one-source-out
    evaluation) gets that route with zero weights and a calibrator that gives it probability ~0; a binary
    model's single decision value is expanded into two mirrored rows with the same calibrated probabilities.
    """
    calibrated = model.calibrated_classifiers_[0]
    estimator = calibrated.estimator
    assert list(estimator.classes_) == classes and list(model.classes_) == classes
    coef = np.asarray(estimator.coef_, dtype=np.float64)
    intercept = np.asarray(estimator.intercept_, dtype=np.float64)
    a = np.asarray([c.a_ for c in calibrated.calibrators], dtype=np.float64)
    b = np.asarray([c.b_ for c in calibrated.calibrators], dtype=np.float64)
    if len(classes) == 2:  # p1 = expit(-(a d + b)), p0 = 1 - p1 = expit(-(a (-d) - b))
        coef = np.vstack([-coef[0], coef[0]])
        intercept = np.array([-intercept[0], intercept[0]])
        a = np.array([a[0], a[0]])
        b = np.array([-b[0], b[0]])
    rows = {c: i for i, c in enumerate(classes)}
    full_coef = np.zeros((len(CLASSES), coef.shape[1]))
    full_intercept = np.zeros(len(CLASSES))
    full_a = np.zeros(len(CLASSES))
    full_b = np.full(len(CLASSES), 60.0)  # a route never seen in training: expit(-60) ~ 0
    for k, c in enumerate(CLASSES):
        if c in rows:
            i = rows[c]
            full_coef[k], full_intercept[k], full_a[k], full_b[k] = coef[i], intercept[i], a[i], b[i]
    hashed = full_coef[:, N_DENSE:].astype(np.float32)
    used = np.flatnonzero(np.abs(hashed).max(axis=0) > 1e-6).astype(np.int32)
    return {
        "format": MODEL_FORMAT,
        "classes": list(CLASSES),
        "feature_names": list(FEATURE_NAMES),
        "n_hash_features": N_HASH_FEATURES,
        "coef_dense": full_coef[:, :N_DENSE].astype(np.float32),
        "coef_hash_index": used,
        "coef_hash_value": hashed[:, used],
        "intercept": full_intercept.astype(np.float32),
        "calib_a": full_a,
        "calib_b": full_b,
        "trained_on": {"subsets": dict(sorted(subsets.items())), "labels": dict(sorted(labels.items()))},
        "sklearn_version": sklearn.__version__,
    }


def save(payload: dict[str, Any], path: Path = MODEL_PATH) -> None:
    """Compressed numpy arrays plus one JSON string for the scalars: no pickle, so loading runs no code."""
    arrays = {k: v for k, v in payload.items() if isinstance(v, np.ndarray)}
    meta = {k: v for k, v in payload.items() if not isinstance(v, np.ndarray)}
    with path.open("wb") as fh:
        np.savez_compressed(fh, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Rebuild the router question classifier.")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR,
                        help="shared data folder with graphrag_bench/ and multihop_rag_sample500/")
    parser.add_argument("--own-only", action="store_true", help="train on the project's question set only")
    parser.add_argument("--out", type=Path, default=MODEL_PATH)
    parser.add_argument("--no-scope-fit", action="store_true",
                        help="skip fitting the index-scope nudges on real indexes (the model then uses the defaults)")
    args = parser.parse_args(argv)
    data_dir = None if args.own_only else args.data_dir
    if data_dir is not None and not (data_dir / "graphrag_bench").is_dir():
        parser.error(f"{data_dir} has no graphrag_bench/ folder; pass --data-dir or --own-only")
    examples = load_all(data_dir)
    payload = fit(examples)
    if data_dir is not None and not args.no_scope_fit:
        add_scope_weights(payload, data_dir)
    save(payload, args.out)
    size = args.out.stat().st_size / 1e6
    print(f"trained on {len(examples)} questions {payload['trained_on']}; wrote {args.out} ({size:.2f} MB)")


def add_scope_weights(payload: dict[str, Any], data_dir: Path) -> None:
    """Fit the index-scope nudges for this text model on real indexes (`tools.routing.scope_fit`) and store them."""
    from router.classifier import Classifier
    from tools.routing import scope_fit

    weights, report = scope_fit.fit(scope_fit.measure(Classifier(payload), data_dir))
    payload["scope_weights"] = weights
    payload["scope_fit"] = report
    print(f"index-scope nudges fitted on {report['questions']} questions from {report['templates']} templates, "
          f"penalty {report['penalty']}; accuracy with them (grouped CV) {report['accuracy']['fitted']:.3f}, "
          f"hand-set {report['accuracy']['hand_set']:.3f}, none {report['accuracy']['no_nudge']:.3f}")


if __name__ == "__main__":
    main()
