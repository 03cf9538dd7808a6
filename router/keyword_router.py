"""The keyword router: the keyword rules of the enterprise GraphRAG guide (`choose_search_method`), kept as a
baseline to measure the trained classifier against (route-bench `keyword-router`, `benchmarks/router_eval.py`).

The rule, as the guide states it, applied in this order:

1. **global** when a summary/analysis/trend/overview/core/main word appears (总结/分析/趋势/概述/核心/主要);
2. **drift** when the question is long or joins two things ("and", "between", "compare", 和/与/之间/比较...);
3. **local** when a who/what/where/which/when word appears (谁/什么/哪里/哪个/何时) in the (now known short)
   question;
4. **drift** otherwise: the guide's fallback for a question no rule claims.

Global words win over length because the guide lists them as the global trigger whatever else the question
says; "joins two things" is checked before the wh-words because "what links A and B" is the guide's DRIFT
case, not a one-entity look-up. The word lists and the length limit are data (`router/data/keyword_router.json`).
No training, no index: the same text always gets the same route.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

_DATA = Path(__file__).resolve().parent / "data" / "keyword_router.json"
_CJK = re.compile(r"[\u3400-\u9fff]")
_LATIN_WORD = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")


@dataclass(frozen=True)
class _Rules:
    local: re.Pattern[str]
    global_: re.Pattern[str]
    join: re.Pattern[str]
    short_max_units: float


def _pattern(words: dict[str, list[str]]) -> re.Pattern[str]:
    english = [re.escape(w[:-1]) + r"\w*" if w.endswith("*") else re.escape(w) for w in words.get("en", [])]
    chinese = [re.escape(w) for w in words.get("zh", [])]
    parts = []
    if english:
        parts.append(r"\b(?:" + "|".join(english) + r")\b")
    if chinese:
        parts.append("(?:" + "|".join(chinese) + ")")
    return re.compile("|".join(parts) or r"(?!x)x", re.IGNORECASE)


@cache
def _rules() -> _Rules:
    data = json.loads(_DATA.read_text(encoding="utf-8"))
    return _Rules(_pattern(data["local_words"]), _pattern(data["global_words"]), _pattern(data["join_words"]),
                  float(data["short_max_units"]))


def length_units(question: str) -> float:
    """One unit per Latin word, one per two CJK characters (a Chinese word is about two characters)."""
    return len(_LATIN_WORD.findall(question)) + len(_CJK.findall(question)) / 2.0


def keyword_route(question: str) -> str:
    """Route one question with the keyword rules of the enterprise GraphRAG guide: returns "local", "global" or "drift"."""
    if not isinstance(question, str):
        raise TypeError(f"question must be a str, not {type(question).__name__}")
    text = " ".join(question.split())
    if not text:
        raise ValueError("question is empty")
    rules = _rules()
    if rules.global_.search(text):
        return "global"
    if length_units(text) > rules.short_max_units or rules.join.search(text):
        return "drift"
    if rules.local.search(text):
        return "local"
    return "drift"


# The guide's own name for the rule.
choose_search_method = keyword_route
