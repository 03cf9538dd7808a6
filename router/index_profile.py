"""Per-index statistics the router reads for every question, computed once and stored beside the index.

What makes a question specific depends on the collection, so the router measures the collection once:

* **document groups** (`router.doc_names`): documents stored in parts are one group (one episode, one call);
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
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from router.doc_names import DocumentNames
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


@dataclass(frozen=True)
class IndexProfile:
    names: DocumentNames
    unit_group: np.ndarray  # int32 per text unit: its document group, -1 when unknown
    unit_top: np.ndarray  # int32 per text unit: slot of its top-level community, -1 when none
    top_reports: np.ndarray  # report positions of the top-level communities (slot order)
    entity_share: np.ndarray  # float32 per entity: share of document groups it occurs in
    entity_generic: np.ndarray  # uint8 per entity: 1 when its title is a common noun in this text
    text_scripts: np.ndarray  # float32 per `SCRIPTS` entry: its share of the sampled text's letters

    @property
    def groups(self) -> int:
        return self.names.groups

    @property
    def top_level(self) -> int:
        return len(self.top_reports)

    @property
    def scripts(self) -> frozenset[str]:
        """The scripts the index's text uses (empty when the sample holds no letters: nothing known)."""
        return frozenset(name for name, share in zip(SCRIPTS, self.text_scripts.tolist(), strict=True)
                         if share >= SCRIPT_SHARE)

    @property
    def measures_spread(self) -> bool:
        """Enough document groups for "found in most of them" to mean something."""
        return self.groups >= MIN_GROUPS


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
