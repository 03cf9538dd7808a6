"""Cue lexicons (English and Chinese) that signal what kind of question is being asked.

The lexicons are data (`router/data/cues.json`); this module compiles each group into one regular
expression. English phrases match on word boundaries, Chinese phrases as substrings (Chinese has no spaces).
The groups are deliberately about the *form* of a question, not about any dataset's topics, so they carry
over to corpora the model has never seen:

* scope, theme, summary, trend: the usual corpus-wide vocabulary;
* population: collection nouns and generic plural subjects ("guests", "analysts", "episodes", 嘉宾, 大家);
* frequency: how often or how generally something holds ("often", "typically", "any", 经常, 普遍, 有没有);
* aggregation: gathering views, kinds or patterns from many places ("views on", "in common", 看法, 共同点);
* overview: plain whole-collection overviews ("what is this book about", "in a few sentences", 讲的是什么);
* unit: a reference to *one* document or meeting of a series ("episode 12", "the Q3 call", 第五章);
* comparison, causal, relation, time, creative: reasoning across entities (DRIFT);
* identify, fact: looking up one entity or fact (local).
* multi_ask, interpret: several linked things asked at once ("what are the X and Y of...", "..., and why?",
  两个问号) and what something means or why it matters ("what does X suggest", "what role does X play",
  "rationale", 意味着): a scoped summary or reasoning, not one stated fact (DRIFT);
* attribute: the usual or most common property of *one* thing ("the most common cause of X", "typical signs
  of", 最常见的): "most"/"common" qualifying a fact, not quantifying over a population (local).
* account: what one speaker or one document says in its own words ("according to X's remarks", "how does X
  describe", 据…说): one source's account, which is local unless a population of speakers is asked about.

A group may name groups it yields to (`not_inside`): its matches that lie inside a match of one of those are
dropped. A document noun that is part of a reference to *one* document ("第二场访谈", "the first call") is not a
population of documents.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared_context.text import LazyPattern

CUES_PATH = Path(__file__).resolve().parent / "data" / "cues.json"


@dataclass(frozen=True)
class CueGroup:
    name: str
    reason: str  # how the group is described to a user; `{m}` is replaced by the matched phrases
    pattern: LazyPattern  # compiled on the first question: the lexicons are hundreds of alternatives
    not_inside: tuple[str, ...] = ()  # groups whose matches swallow this group's matches


def _group(name: str, reason: str, english: list[str], chinese: list[str], not_inside: tuple[str, ...] = ()
           ) -> CueGroup:
    parts = []
    if english:
        parts.append(r"\b(?:" + "|".join(english) + r")\b")
    if chinese:
        parts.append("(?:" + "|".join(chinese) + ")")
    return CueGroup(name, reason, LazyPattern("|".join(parts), re.IGNORECASE), not_inside)


def load_groups(path: Path = CUES_PATH) -> tuple[CueGroup, ...]:
    spec: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    groups = tuple(_group(g["name"], g["reason"], g.get("en", []), g.get("zh", []), tuple(g.get("not_inside", ())))
                   for g in spec["groups"])
    names = {g.name for g in groups}
    unknown = {n for g in groups for n in g.not_inside} - names
    if unknown:
        raise ValueError(f"{path}: not_inside names unknown groups {sorted(unknown)}")
    return groups


CUE_GROUPS: tuple[CueGroup, ...] = load_groups()
CUE_NAMES: tuple[str, ...] = tuple(group.name for group in CUE_GROUPS)


def match_cues(text: str) -> dict[str, list[str]]:
    """Return, for every cue group that fires, the phrases that matched (in order, deduplicated); a match inside
    a match of a group it yields to (`CueGroup.not_inside`) does not count."""
    spans: dict[str, list[tuple[int, int, str]]] = {}
    for group in CUE_GROUPS:
        hits = [(m.start(), m.end(), m.group(0).strip().lower()) for m in group.pattern.finditer(text)]
        spans[group.name] = [h for h in hits if h[2]]
    found: dict[str, list[str]] = {}
    for group in CUE_GROUPS:
        outer = [s for name in group.not_inside for s in spans[name]]
        kept = [h for h in spans[group.name] if not any(o[0] <= h[0] and h[1] <= o[1] for o in outer)]
        if kept:
            found[group.name] = list(dict.fromkeys(h[2] for h in kept))
    return found


REASON_TEMPLATES: dict[str, str] = {group.name: group.reason for group in CUE_GROUPS}
