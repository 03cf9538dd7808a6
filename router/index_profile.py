"""Per-index statistics the router reads for every question, computed once and stored beside the index.

What makes a question specific depends on the collection, so the router measures the collection once:

* **document groups** (below): documents stored in parts are one group (one episode, one call);
* **where each entity occurs**: the share of document groups its text units belong to. A name found in most
  groups (the host, the company) does not narrow a question to one place;
* **which entity titles are common nouns**: an offline graph extracts GUESTS, TRENDS, LEADER or BUSINESS UNITS
  as entities. Their words are written in lower case in the text (a name is capitalised mid-sentence), so a
  title whose every word is mostly lower case in the text is a common noun, not a name. Read from a sample of
  at most `CASE_SAMPLE_CHARS` characters of text, evenly spread;
* **the top-level community of each text unit**: the most common top-level community of the entities it
  mentions, so a question's best passages can be counted over the top of the community hierarchy;
* **which scripts the text is written in** (share of Latin letters and of CJK characters in the same sample): a
  question written only in a script the index's text does not use ("领英的收购…" over English transcripts) can
  be neither linked nor searched by its words, so finding nothing says nothing about whether the index covers it.

For an index loaded from files the arrays are kept in its derived store (`router_profile` entry, keyed by the
tables they come from) and memory-mapped by the next process; per process they are cached beside the index.

**Named documents** (`DocumentNames`): which documents of the collection a question names: "episode 29", "the
FY20 Q3 call", "第45期", "the third quarter of fiscal 2016", "the conversation with Randall Munroe".

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
from typing import TYPE_CHECKING, Any

import numpy as np

from shared_context.text import CJK, LazyPattern

if TYPE_CHECKING:
    from shared_context.index import Index

MIN_GROUPS = 3  # with fewer document groups every entity is "everywhere": the share says nothing
CASE_SAMPLE_CHARS = 3_000_000
GENERIC_CAPITAL_SHARE = 0.25  # a word capitalised mid-sentence less often than this is a common noun
_DEPENDS_ON = ("entities", "text_units", "documents", "communities", "community_reports", "nodes")
_FIELDS = ("unit_group", "unit_top", "entity_share", "entity_generic", "text_scripts")
_VERSION = "2"
SCRIPT_SHARE = 0.01  # a script is used by the index's text when at least this share of its letters is in it
SCRIPTS = ("latin", "cjk")

_LOWER_WORD = LazyPattern(r"\b[a-z][a-z'’\-]*[a-z]\b")
# capitalised after a lower-case word, comma or semicolon and one space: mid-sentence, so a name's spelling
_MID_CAPITAL = LazyPattern(r"(?<=[a-z,;] )[A-Z][A-Za-z'’\-]*[A-Za-z]\b")
_TITLE_WORD = re.compile(r"[^\W\d_]+")
_LATIN_LETTER = LazyPattern(r"[A-Za-z\u00c0-\u024f]")
_CJK_CHAR = LazyPattern(f"[{CJK}]")
_LATIN_WORD = LazyPattern(r"[A-Za-z\u00c0-\u024f]{2,}")


# ---------------------------------------------------------------------------- document names

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
    groups: int = field(init=False)  # how many groups: set once here, read by every question

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", len(self.titles))

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


# ---------------------------------------------------------------------------- the profile


@dataclass(frozen=True)
class IndexProfile:
    names: DocumentNames
    unit_group: np.ndarray  # int32 per text unit: its document group, -1 when unknown
    unit_top: np.ndarray  # int32 per text unit: slot of its top-level community, -1 when none
    top_reports: np.ndarray  # report positions of the top-level communities (slot order)
    entity_share: np.ndarray  # float32 per entity: share of document groups it occurs in
    entity_generic: np.ndarray  # uint8 per entity: 1 when its title is a common noun in this text
    text_scripts: np.ndarray  # float32 per `SCRIPTS` entry: its share of the sampled text's letters
    # What follows depends only on the fields above: set once when the profile is made, so the probe of every
    # question reads plain values.
    groups: int = field(init=False)  # document groups
    top_level: int = field(init=False)  # top-level communities
    # the scripts the index's text uses (empty when the sample holds no letters: nothing known)
    scripts: frozenset[str] = field(init=False)
    measures_spread: bool = field(init=False)  # enough groups for "found in most of them" to mean something

    def __post_init__(self) -> None:
        derived = {"groups": self.names.groups, "top_level": len(self.top_reports),
                   "scripts": frozenset(name for name, share in zip(SCRIPTS, self.text_scripts.tolist(), strict=True)
                                        if share >= SCRIPT_SHARE),
                   "measures_spread": self.names.groups >= MIN_GROUPS}
        for name, value in derived.items():
            object.__setattr__(self, name, value)


def profile(index: Index) -> IndexProfile:
    """The index's profile: cached per index, read from its derived store when there."""
    from shared_context.tables import per_index_cache

    return per_index_cache(index, "router.index_profile", lambda: _load_or_build(index))


def _load_or_build(index: Index) -> IndexProfile:
    names = DocumentNames.build([str(d.title or "") for d in index.documents])
    top_reports = _top_reports(index)
    store = index.derived_store
    if store is not None:
        found = store.load_arrays("router_profile", _DEPENDS_ON, _FIELDS, extra=_VERSION)
        if found is not None and len(found["unit_group"]) == len(index.text_units) and \
                len(found["entity_share"]) == len(index.entities):
            return IndexProfile(names, found["unit_group"], found["unit_top"], top_reports, found["entity_share"],
                                found["entity_generic"], found["text_scripts"])
    unit_group = _unit_groups(index, names)
    sample = _sample_texts(index)
    arrays = {"unit_group": unit_group, "unit_top": _unit_top(index, top_reports),
              "entity_share": _entity_share(index, unit_group, names.groups),
              "entity_generic": _generic_titles(index, sample), "text_scripts": script_shares(sample)}
    if store is not None:
        store.save_arrays("router_profile", _DEPENDS_ON, arrays, extra=_VERSION)
    return IndexProfile(names, arrays["unit_group"], arrays["unit_top"], top_reports, arrays["entity_share"],
                        arrays["entity_generic"], arrays["text_scripts"])


def _top_reports(index: Index) -> np.ndarray:
    levels = index.reports_by_level
    return np.asarray(levels[min(levels)], dtype=np.int64) if levels else np.zeros(0, dtype=np.int64)


def _unit_groups(index: Index, names: DocumentNames) -> np.ndarray:
    docs = np.asarray(index.text_unit_document, dtype=np.int64)
    group_of = np.asarray(names.group_of_document, dtype=np.int32)
    out = np.full(len(docs), -1, dtype=np.int32)
    ok = (docs >= 0) & (docs < len(group_of))
    out[ok] = group_of[docs[ok]]
    return out


def _entity_share(index: Index, unit_group: np.ndarray, groups: int) -> np.ndarray:
    """Share of document groups each entity's text units belong to (distinct (entity, group) pairs)."""
    n = len(index.entities)
    adj = index.entity_text_units
    indptr, units = np.asarray(adj.indptr, dtype=np.int64), np.asarray(adj.indices, dtype=np.int64)
    if groups == 0 or len(units) == 0:
        return np.zeros(n, dtype=np.float32)
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    valid = (units >= 0) & (units < len(unit_group))
    group = np.full(len(units), -1, dtype=np.int64)
    group[valid] = unit_group[units[valid]]
    keep = group >= 0
    pairs = np.unique(owner[keep] * groups + group[keep])
    counts = np.bincount(pairs // groups, minlength=n)
    return (counts / groups).astype(np.float32)


def _unit_top(index: Index, top_reports: np.ndarray) -> np.ndarray:
    """Per text unit, the slot of the top-level community most of its entities belong to (-1: none)."""
    n_units = len(index.text_units)
    out = np.full(n_units, -1, dtype=np.int32)
    if len(top_reports) == 0 or n_units == 0:
        return out
    slot_of = {int(index.community_reports[int(r)].community): s for s, r in enumerate(top_reports.tolist())}
    ecm = index.entity_communities
    indptr, comms = np.asarray(ecm.indptr, dtype=np.int64), np.asarray(ecm.indices, dtype=np.int64)
    entity_slot = np.full(len(indptr) - 1, -1, dtype=np.int64)
    for e in np.flatnonzero(np.diff(indptr) > 0).tolist():  # shallowest community first
        entity_slot[e] = slot_of.get(int(comms[indptr[e]]), -1)
    tue = index.text_unit_entities
    t_indptr, t_ents = np.asarray(tue.indptr, dtype=np.int64), np.asarray(tue.indices, dtype=np.int64)
    unit = np.repeat(np.arange(n_units, dtype=np.int64), np.diff(t_indptr))
    slots = entity_slot[t_ents] if len(t_ents) else np.zeros(0, dtype=np.int64)
    keep = slots >= 0
    if not keep.any():
        return out
    width = len(top_reports)
    pairs, counts = np.unique(unit[keep] * width + slots[keep], return_counts=True)
    owner, slot = pairs // width, pairs % width
    order = np.lexsort((slot, -counts, owner))  # per unit: most entities first, then the lower slot
    first = np.ones(len(order), dtype=bool)
    first[1:] = owner[order][1:] != owner[order][:-1]
    chosen = order[first]
    out[owner[chosen]] = slot[chosen].astype(np.int32)
    return out


def _sample_texts(index: Index) -> list[str]:
    units = index.text_units
    if not len(units):
        return []
    sizes = [len(str(units[0].text or ""))]
    per_unit = max(1, sizes[0])
    take = max(1, min(len(units), CASE_SAMPLE_CHARS // per_unit))
    positions = np.linspace(0, len(units) - 1, num=take).astype(np.int64)
    return [str(units[int(p)].text or "") for p in np.unique(positions)]


def case_counts(texts: Sequence[str]) -> tuple[Counter[str], Counter[str]]:
    """(lower-case occurrences, mid-sentence capitalised occurrences) of each word, keyed lower case."""
    lower: Counter[str] = Counter()
    capital: Counter[str] = Counter()
    for text in texts:
        lower.update(_LOWER_WORD.findall(text))
        capital.update(w.lower() for w in _MID_CAPITAL.findall(text))
    return lower, capital


def generic_flags(titles: Sequence[str], lower: Counter[str], capital: Counter[str]) -> np.ndarray:
    """1 for a title all of whose words are written mostly in lower case in the text (a common noun)."""
    out = np.zeros(len(titles), dtype=np.uint8)
    for i, title in enumerate(titles):
        words = _TITLE_WORD.findall(str(title).lower())
        if not words or not all(w.isascii() for w in words):
            continue  # no case to read (CJK) or no words: never called generic
        shares = []
        for w in words:
            seen = lower[w] + capital[w]
            if seen < 2:
                break  # a word the text hardly uses: no evidence either way
            shares.append(capital[w] / seen)
        else:
            out[i] = 1 if max(shares) < GENERIC_CAPITAL_SHARE else 0
    return out


def script_shares(texts: Sequence[str]) -> np.ndarray:
    """Share of the letters of `texts` in each of `SCRIPTS` (zeros when there are none)."""
    counts = np.array([sum(len(_LATIN_LETTER.findall(t)) for t in texts),
                       sum(len(_CJK_CHAR.findall(t)) for t in texts)], dtype=np.float64)
    total = counts.sum()
    return (counts / total if total else counts).astype(np.float32)


def question_scripts(text: str) -> frozenset[str]:
    """The scripts a question's words are written in (a Latin word needs two letters: "Q3", "a" do not count)."""
    found = set()
    if _LATIN_WORD.search(text):
        found.add("latin")
    if _CJK_CHAR.search(text):
        found.add("cjk")
    return frozenset(found)


def _generic_titles(index: Index, sample: Sequence[str]) -> np.ndarray:
    from shared_context.records import values_of

    lower, capital = case_counts(sample)
    return generic_flags([str(t) for t in values_of(index.entities, "title")], lower, capital)
