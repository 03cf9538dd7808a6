"""Fit the index-scope nudges (`router.index_scope.SITUATIONS` x routes) on questions measured on real indexes.

`router.index_scope` recognises a few situations a question can be in *within one index* (it names one document
of the collection, several, a specific entity, nothing specific while its words spread thinly over the top-level
communities, only speakers found across the whole collection). How much each situation should move each route
is a question for data, not for hand-set constants:

1. build small offline indexes of two real corpora of `../shared/data` (podcast episodes, earnings calls), as
   `tools/routing/data/scope_fit.json` describes;
2. fill the question templates of that file with what the index holds (its documents' numbers, specific
   entities, speakers found across the collection) and with topic words written for each corpus;
3. for every question take the text model's probabilities (linking signals included) and the situation
   indicators, and fit the nudges `W` of `softmax(log p + s @ W)` by L2-penalised maximum likelihood, each
   weight bounded by `MAX_NUDGE` and kept to the direction `SIGNS` gives it; the penalty is chosen by
   cross-validation grouped by template (no template in both train and test).

The result is stored in the model file (`scope_weights`, `scope_fit`) by `python -m tools.routing.train`.
"""

from __future__ import annotations

import json
import random
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from router.classifier import Classifier
from router.index_scope import CLASSES, DEFAULT_WEIGHTS, SITUATIONS, UBIQUITOUS_SHARE

SPEC_PATH = Path(__file__).resolve().parent / "data" / "scope_fit.json"
PENALTIES = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
FOLDS = 5
# A nudge decides what the wording leaves open; it must not overturn a clear wording on its own, whatever a few
# templates suggest. Every fitted log-odds weight stays within this bound.
MAX_NUDGE = 3.0
# The direction each situation may move each route (+1: only up, -1: only down, 0: either), rows `SITUATIONS`,
# columns `CLASSES` (local, global, drift). What the design says a situation means; the data decides how much.
# Naming a specific entity or a document is never evidence *for* the whole collection, even when the few
# templates happen to link a topic word in a corpus-wide question.
SIGNS = np.array([
    [1, -1, 0],  # one named document
    [0, -1, 1],  # several named documents
    [1, -1, 1],  # one specific entity: away from global
    [0, -1, 1],  # several specific entities
    [-1, 1, 0],  # thin spread, nothing specific
    [0, 0, 0],  # only collection speakers named
])
_SLOT = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Measured:
    question: str
    label: str
    template: str
    proba: np.ndarray  # text model, `CLASSES` order
    situations: np.ndarray  # `SITUATIONS` indicators


# ------------------------------------------------------------------------------------------ indexes


def build_indexes(data_dir: Path, work: Path, spec: dict[str, Any]) -> dict[str, Any]:
    """One small offline index per corpus of the spec (a few documents each; about a minute in all)."""
    import pandas as pd

    from indexer import build_index
    from shared_context import load_index

    indexes = {}
    for corpus in spec["corpora"]:
        frame = pd.read_parquet(data_dir / corpus["file"])
        src = work / corpus["name"] / "docs"
        src.mkdir(parents=True)
        if "group_column" in corpus:  # documents stored in parts: the first few parts of the first documents
            groups = sorted(frame[corpus["group_column"]].unique())[: corpus["documents"]]
            for group in groups:
                rows = frame[frame[corpus["group_column"]] == group].sort_values(corpus["order_column"])
                text = "\n".join(rows["text"].head(corpus["parts_per_document"]))
                (src / (str(group).replace(" ", "_") + ".txt")).write_text(text, encoding="utf-8")
        else:
            rows = frame.sort_values(corpus["name_column"]).head(corpus["documents"])
            for name, text in zip(rows[corpus["name_column"]], rows[corpus["text_column"]], strict=True):
                (src / str(name)).write_text(str(text)[: corpus["characters_per_document"]], encoding="utf-8")
        build_index(src, work / corpus["name"] / "index", progress=False)
        indexes[corpus["name"]] = load_index(work / corpus["name"] / "index")
    return indexes


def _index_slots(index: Any, corpus: dict[str, Any]) -> dict[str, list[str]]:
    """Slot values the index itself provides: named documents, specific entities, collection speakers."""
    pattern = re.compile(corpus["title_pattern"])
    docs_en, docs_zh = [], []
    for document in index.documents:
        found = pattern.search(str(document.title))
        if found:
            values = {k: v.lstrip("0") or "0" for k, v in found.groupdict().items()}
            docs_en.append([t.format(**values) for t in corpus["doc_en"]])
            docs_zh.append([t.format(**values) for t in corpus["doc_zh"]])
    unit_doc = index.text_unit_document
    n_docs = max(1, len(index.documents))
    share = [len({unit_doc[u] for u in units if unit_doc[u] >= 0}) / n_docs for units in index.entity_text_units]
    ranked = sorted(range(len(index.entities)), key=lambda i: (-index.entities[i].degree, index.entities[i].title))

    def shown(i: int) -> str:
        return str(index.entities[i].title).title()

    hosts = [shown(i) for i in ranked if share[i] >= UBIQUITOUS_SHARE and index.entities[i].type == "PERSON"][:2]
    specific = [shown(i) for i in ranked if share[i] < UBIQUITOUS_SHARE and len(str(index.entities[i].title).split()) >= 2
                and "TRANSCRIPT" not in str(index.entities[i].title).upper()][:8]
    return {"docs_en": docs_en, "docs_zh": docs_zh, "host": hosts, "who": specific}  # type: ignore[dict-item]


def questions(index: Any, corpus: dict[str, Any], templates: Sequence[dict[str, str]],
              per_template: int = 6) -> list[tuple[str, str, str]]:
    """(question, label, template id) filled from the index and the corpus's word lists; seeded, deterministic."""
    slots = _index_slots(index, corpus)
    rng = random.Random(f"scope-fit:{corpus['name']}")
    out: list[tuple[str, str, str]] = []
    for template in templates:
        seen: set[str] = set()
        for _ in range(per_template * 4):
            if len(seen) >= per_template:
                break
            d1, d2 = rng.sample(range(len(slots["docs_en"])), 2)
            w1, w2 = rng.sample(slots["who"], 2)
            values = {"doc": rng.choice(slots["docs_en"][d1]), "doc2": rng.choice(slots["docs_en"][d2]),
                      "doc_zh": rng.choice(slots["docs_zh"][d1]), "doc2_zh": rng.choice(slots["docs_zh"][d2]),
                      "who": w1, "who2": w2, "host": rng.choice(slots["host"])}
            for key in ("pop_en", "pop_zh", "units_en", "unit_en", "unit_zh", "topic_en", "topic_zh"):
                values[key] = rng.choice(corpus[key])
            text = _fill(template["template"], values)
            text = text[0].upper() + text[1:]
            if text not in seen:
                seen.add(text)
                out.append((text, template["label"], f"{template['id']}"))
    return out


def _fill(template: str, values: dict[str, str]) -> str:
    return _SLOT.sub(lambda m: values[m.group(1)], template)


def measure(model: Classifier, data_dir: Path, spec: dict[str, Any] | None = None) -> list[Measured]:
    spec = spec or json.loads(SPEC_PATH.read_text(encoding="utf-8"))
    from router.index_scope import situations

    rows: list[Measured] = []
    with tempfile.TemporaryDirectory() as tmp:
        indexes = build_indexes(data_dir, Path(tmp), spec)
        for corpus in spec["corpora"]:
            index = indexes[corpus["name"]]
            for text, label, template in questions(index, corpus, spec["templates"]):
                proba, scope = model.scope_inputs(text, index)
                found = situations(scope) if scope is not None else np.zeros(len(SITUATIONS))
                rows.append(Measured(text, label, template, proba, found))
    return rows


# ------------------------------------------------------------------------------------------ fitting


def _loss(flat: np.ndarray, logp: np.ndarray, s: np.ndarray, y: np.ndarray, penalty: float) -> tuple[float, np.ndarray]:
    w = flat.reshape(len(SITUATIONS), len(CLASSES))
    z = logp + s @ w
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    n = len(y)
    loss = -float(np.log(p[np.arange(n), y] + 1e-12).mean()) + penalty * float((w**2).sum())
    grad_z = p.copy()
    grad_z[np.arange(n), y] -= 1.0
    grad = s.T @ grad_z / n + 2.0 * penalty * w
    return loss, grad.ravel()


def fit_weights(rows: Sequence[Measured], penalty: float) -> np.ndarray:
    from scipy.optimize import minimize

    logp = np.log(np.stack([r.proba for r in rows]) + 1e-12)
    s = np.stack([r.situations for r in rows])
    y = np.array([CLASSES.index(r.label) for r in rows])
    result = minimize(_loss, np.zeros(len(SITUATIONS) * len(CLASSES)), args=(logp, s, y, penalty), jac=True,
                      method="L-BFGS-B", bounds=_bounds())
    w: np.ndarray = np.asarray(result.x, dtype=np.float64).reshape(len(SITUATIONS), len(CLASSES))
    return w


def _bounds() -> list[tuple[float, float]]:
    return [(0.0 if sign > 0 else -MAX_NUDGE, 0.0 if sign < 0 else MAX_NUDGE) for sign in SIGNS.ravel()]


def _predict(rows: Sequence[Measured], weights: np.ndarray | None) -> np.ndarray:
    logp = np.log(np.stack([r.proba for r in rows]) + 1e-12)
    if weights is not None:
        logp = logp + np.stack([r.situations for r in rows]) @ weights
    best: np.ndarray = logp.argmax(axis=1)
    return best


def _accuracy(rows: Sequence[Measured], weights: np.ndarray | None) -> float:
    y = np.array([CLASSES.index(r.label) for r in rows])
    return float((_predict(rows, weights) == y).mean())


def fit(rows: Sequence[Measured]) -> tuple[np.ndarray, dict[str, Any]]:
    """Choose the penalty by grouped cross-validation, refit on everything; return (weights, report)."""
    from sklearn.model_selection import GroupKFold

    groups = [r.template for r in rows]
    splits = list(GroupKFold(n_splits=FOLDS).split(np.zeros(len(rows)), groups=groups))
    cv: dict[float, float] = {}
    held_out_accuracy: dict[str, float] = {}
    for penalty in PENALTIES:
        correct = 0
        for train_idx, test_idx in splits:
            w = fit_weights([rows[i] for i in train_idx], penalty)
            correct += round(_accuracy([rows[i] for i in test_idx], w) * len(test_idx))
        cv[penalty] = correct / len(rows)
    best = max(PENALTIES, key=lambda p: (cv[p], p))  # ties: the stronger penalty
    weights = fit_weights(rows, best)
    held_out_accuracy["fitted"] = cv[best]
    held_out_accuracy["hand_set"] = _accuracy(rows, DEFAULT_WEIGHTS)
    held_out_accuracy["no_nudge"] = _accuracy(rows, None)
    report = {"questions": len(rows), "templates": len(set(groups)), "penalty": best,
              "grouped_cv_accuracy": {str(p): round(a, 4) for p, a in cv.items()},
              "accuracy": {k: round(v, 4) for k, v in held_out_accuracy.items()}}
    return weights, report
