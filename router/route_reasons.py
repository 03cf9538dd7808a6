"""The user-facing reasons of a route: which features pushed the chosen engine up, in words."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from router.cues import REASON_TEMPLATES
from router.features import DENSE_NAMES, QuestionFeatures

MIN_CONTRIBUTION = 0.15  # log-odds; weaker features are not worth telling the user about
ENGINE_WORDS = {"local": "questions about specific entities", "global": "questions about the whole collection",
                "drift": "questions that connect several entities"}
_INTERACTIONS = {
    "x_population_frequency": "asks what a group of speakers or documents generally does",
    "x_population_aggregation": "gathers views or kinds from a group of speakers or documents",
    "x_trend_without_collection": "asks for a most/least fact without pointing at the whole collection",
    "x_reasoning_with_names": "connects named things by comparison, cause or time",
    "x_identify_long": "asks for one entity, described at length",
    "x_unit_without_population": "is about one document or meeting of the series",
    "x_frequency_without_collection": "asks how something usually or commonly is",
    "x_series_change": "asks how something changed across the documents of a series",
    "x_compound_about_one": "asks several things about the one entity it opens with",
}


def _quote(phrases: Sequence[str], limit: int = 2) -> str:
    return ", ".join(f"'{p[:40]}'" for p in phrases[:limit])


def _names(names: Sequence[str], limit: int = 3) -> str:
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


def describe(name: str, feats: QuestionFeatures) -> tuple[str, str]:
    """(group, user-facing text) for one active wording feature; empty text when it is not worth saying."""
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
    if name in _INTERACTIONS:
        return name, _INTERACTIONS[name]
    return name, ""


def wording_reasons(coef_dense: np.ndarray, best: int, feats: QuestionFeatures, engine: str) -> list[str]:
    """Up to three wording features that raised `best` over the other engines the most."""
    others = [k for k in range(coef_dense.shape[0]) if k != best]
    contribution = (coef_dense[best] - coef_dense[others].mean(axis=0)) * feats.dense
    reasons: list[str] = []
    used: set[str] = set()
    for j in np.argsort(-contribution)[:8]:
        if contribution[j] < MIN_CONTRIBUTION or len(reasons) >= 3:
            break
        group, text = describe(DENSE_NAMES[j], feats)
        if text and group not in used:
            used.add(group)
            reasons.append(text)
    if not reasons:
        reasons.append(f"no explicit cue; the wording is closest to {ENGINE_WORDS[engine]} seen in training")
    return reasons
