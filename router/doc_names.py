"""Which documents of a collection a question names: "episode 29", "the FY20 Q3 call", "第45期",
"the third quarter of fiscal 2016", "the conversation with Randall Munroe".

Documents are first grouped: a document stored in parts ("...-part1.txt", "...-part2.txt") is one group, so a
question about an episode names one episode, not twenty files. A title and a question are then read the same
way into keys:

* **counted units**: a unit word next to a number ("episode 29", "Q3", "FY2016", "third quarter", "第45期"),
  with unit words, ordinals and Chinese counters from `router/data/document_names.json` (generic naming
  conventions of numbered documents, never a collection's titles). Years count with their two-digit form too
  ("fiscal 2016" is "FY16");
* **years** standing alone in a title ("2020 Year in Review");
* **distinctive title words**: words found in at most `MAX_WORD_GROUPS` group titles ("munroe", "kaliouby"),
  so "Behind the Tech" or "Transcript", found in every title, name nothing.

A group is named when every counted unit the question gives for one of the group's units agrees with it and at
least one key matches (two distinctive words, for words alone). Groups matched by the same words are one
conversation split under two titles. More than `MAX_NAMED` matches is a family of documents ("the Q4 calls"),
not a name.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from shared_context.text import LazyPattern

NAMES_PATH = Path(__file__).resolve().parent / "data" / "document_names.json"
MAX_NAMED = 3  # more matching groups than this is a family of documents, not a name
MAX_WORD_GROUPS = 3  # a title word in more group titles than this is not distinctive
MIN_YEAR, MAX_YEAR = 1900, 2100

_SPLIT = LazyPattern(r"[A-Za-z]+|\d+|[\u4e00-\u9fff]")
_CAMEL = LazyPattern(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Za-z])(?=\d)|(?<=\d)(?=[A-Za-z])")
_SUFFIX = LazyPattern(r"\.(?:txt|md|pdf|docx?|html?|json|csv|parquet)$", re.IGNORECASE)

Key = tuple[str, int]  # (unit, number); unit "year" for a year standing alone


@dataclass(frozen=True)
class _Conventions:
    units: dict[str, str]  # word -> canonical unit
    skip_after: dict[str, frozenset[str]]
    ordinals: dict[str, int]
    zh_units: dict[str, str]
    zh_numerals: dict[str, int]
    part_units: frozenset[str]
    stopwords: frozenset[str]
    zh_pattern: re.Pattern[str]


@cache
def conventions() -> _Conventions:
    spec: dict[str, Any] = json.loads(NAMES_PATH.read_text(encoding="utf-8"))
    units = {word: unit for unit, words in spec["units"].items() for word in words}
    zh_units: dict[str, str] = spec["zh_units"]
    numerals = "".join(spec["zh_numerals"])
    counters = "|".join(sorted(zh_units, key=len, reverse=True))
    # "第四季度", "第45期", "45期", "2023财年"; a bare Chinese numeral ("那一期": that episode) counts nothing
    zh = re.compile(rf"(?:第\s*(\d+|[{numerals}]+)|(\d+))\s*(?:个)?({counters})")
    return _Conventions(units, {k: frozenset(v) for k, v in spec["skip_after"].items()}, dict(spec["ordinals"]),
                        zh_units, dict(spec["zh_numerals"]), frozenset(spec["part_units"]),
                        frozenset(spec["stopwords"]), zh)


def tokens(text: str) -> list[str]:
    """Lower-cased words, numbers and CJK characters; camel case and letter-digit runs split ("FY14Q4")."""
    text = _SUFFIX.sub("", text)
    return [t.lower() for part in _CAMEL.sub(" ", text).split() for t in _SPLIT.findall(part)]


def _number(token: str, c: _Conventions) -> int | None:
    if token.isdigit():
        return int(token)
    return c.ordinals.get(token)


def _zh_number(text: str, c: _Conventions) -> int | None:
    if text.isdigit():
        return int(text)
    if text == "十":
        return 10
    if len(text) == 2 and text[0] == "十":
        return 10 + c.zh_numerals.get(text[1], 0)
    if len(text) == 2 and text[1] == "十":
        return 10 * c.zh_numerals.get(text[0], 0)
    if len(text) == 3 and text[1] == "十":
        return 10 * c.zh_numerals.get(text[0], 0) + c.zh_numerals.get(text[2], 0)
    return c.zh_numerals.get(text) if len(text) == 1 else None


def _with_year_forms(unit: str, n: int) -> set[Key]:
    if MIN_YEAR <= n <= MAX_YEAR:
        return {(unit, n), (unit, n % 100)}
    return {(unit, n)}


def keys(text: str) -> tuple[set[Key], set[str]]:
    """(counted units and lone years, plain words) of a title or a question."""
    c = conventions()
    toks = tokens(text)
    found: set[Key] = set()
    used: set[int] = set()  # token positions of numbers a unit took
    for i, tok in enumerate(toks):
        unit = c.units.get(tok)
        if unit is None:
            continue
        j = i + 1
        while j < len(toks) and toks[j] in c.skip_after.get(unit, ()):
            j += 1
        n = _number(toks[j], c) if j < len(toks) else None
        if n is None and i > 0 and not toks[i - 1].isdigit():  # "third quarter", "3rd episode" (not "Q3 call")
            n, j = _number(toks[i - 1], c), i - 1
        if n is not None and n >= 0:
            found |= _with_year_forms(unit, n)
            used.add(j)
    counted_zh: set[int] = set()  # numbers a Chinese counter took ("2023财年", "第45期")
    for m in c.zh_pattern.finditer(text):
        n = _zh_number(m.group(1), c) if m.group(1) is not None else int(m.group(2))
        if n is not None:
            found |= _with_year_forms(c.zh_units[m.group(3)], n)
            counted_zh.add(n)
    for i, tok in enumerate(toks):
        if i not in used and tok.isdigit() and MIN_YEAR <= int(tok) <= MAX_YEAR and int(tok) not in counted_zh:
            found |= _with_year_forms("year", int(tok))
    words = {t for t in toks if t.isalpha() and len(t) >= 3 and t not in c.stopwords and t not in c.units}
    return found, words


def group_key(title: str) -> str:
    """The title without its part marker: "..._Transcript-part12.txt" and "...-part3.txt" share one key."""
    c = conventions()
    toks = tokens(title)
    while len(toks) >= 2 and toks[-1].isdigit() and c.units.get(toks[-2]) in c.part_units:
        toks = toks[:-2]
    return " ".join(toks)


@dataclass(frozen=True)
class DocumentNames:
    """The named-document tables of one index: its document groups and their keys."""

    group_of_document: tuple[int, ...]  # document position -> group
    titles: tuple[str, ...]  # one shown title per group (its first document's, part marker removed)
    counted: tuple[frozenset[Key], ...]  # per group: counted units ("ep", 29), years
    words: tuple[frozenset[str], ...]  # per group: its distinctive title words
    by_counted: dict[Key, list[int]] = field(default_factory=dict, repr=False)  # key -> groups holding it
    by_word: dict[str, list[int]] = field(default_factory=dict, repr=False)  # distinctive word -> groups

    @property
    def groups(self) -> int:
        return len(self.titles)

    @classmethod
    def build(cls, titles: Sequence[str]) -> DocumentNames:
        by_key: dict[str, int] = {}
        group_of: list[int] = []
        shown: list[str] = []
        for title in titles:
            key = group_key(title)
            if key not in by_key:
                by_key[key] = len(shown)
                shown.append(_SUFFIX.sub("", title))
            group_of.append(by_key[key])
        parsed = [keys(key) for key in by_key]
        spread = Counter(w for _, words in parsed for w in words)
        distinctive = tuple(frozenset(w for w in words if spread[w] <= MAX_WORD_GROUPS) for _, words in parsed)
        counted = tuple(frozenset(k) for k, _ in parsed)
        by_counted: dict[Key, list[int]] = {}
        by_word: dict[str, list[int]] = {}
        for g, (found, words) in enumerate(zip(counted, distinctive, strict=True)):
            for k in found:
                by_counted.setdefault(k, []).append(g)
            for w in words:
                by_word.setdefault(w, []).append(g)
        return cls(tuple(group_of), tuple(_strip_part(t) for t in shown), counted, distinctive, by_counted, by_word)

    def named(self, question: str) -> tuple[int, ...]:
        """Groups the question names (empty when none, or when it names a whole family of them)."""
        if self.groups < 2:
            return ()
        asked, words = keys(question)
        asked_units = {u for u, _ in asked}
        candidates = sorted({g for k in asked for g in self.by_counted.get(k, ())})
        by_count: list[int] = []
        for g in candidates:
            counted = self.counted[g]
            shared_units = {u for u, _ in counted} & asked_units
            # every unit both give must agree: "FY20 Q4" does not name FY20 Q3
            if all(any((u, n) in asked for n in _numbers(counted, u)) for u in shared_units):
                by_count.append(g)
        if len(by_count) > MAX_NAMED:  # a family ("the Q4 calls"): words may still single one out
            by_count = []
        by_words: dict[frozenset[str], list[int]] = {}
        for g in sorted({g for w in words for g in self.by_word.get(w, ())}):
            hit = self.words[g] & words
            if len(hit) >= 2:
                by_words.setdefault(frozenset(hit), []).append(g)
        found = list(by_count)
        for groups in by_words.values():
            if not set(groups) & set(by_count):  # numbers already chose among the groups these words fit
                found.append(groups[0])  # one conversation under several titles counts once
        found = list(dict.fromkeys(found))
        return tuple(found) if len(found) <= MAX_NAMED else ()


def _numbers(counted: frozenset[Key], unit: str) -> list[int]:
    return [n for u, n in counted if u == unit]


def _strip_part(title: str) -> str:
    return re.sub(r"[\s_\-]*(?:part|pt)[\s_\-]*\d+$", "", title, flags=re.IGNORECASE)
