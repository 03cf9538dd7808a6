"""Where this index's evidence for a question lies: the measurements the router decides with, besides the wording.

The same words can ask about one thing or about everything, depending on the collection. Before deciding, the
router probes the index (all cheap per question once `router.index_profile` has measured the index):

* **linked names, by how specific they are here**: entities the question names by title
  (`summarise_links`), split into *specific* ones, *collection-wide* ones (found in at least `UBIQUITOUS_SHARE`
  of the document groups: the host, the company) and *common nouns* (titles written in lower case in the text:
  GUESTS, TRENDS, BUSINESS UNITS; or a title that is only a word of a longer name the index does not know and
  that its own text units write in lower case: "River Tane" linking RIVER). Only specific ones narrow a
  question to one place;
* **named documents** (`router.index_profile.DocumentNames`): "episode 29", "the FY20 Q3 call";
* **where the best passages are**: the question's `UNIT_DEPTH` best text units by BM25, their score mass over
  document groups (effective number of groups as a share, the best group's share) and over top-level
  communities, and how peaked their scores are;
* **how thinly the words spread over the top-level community reports**;
* and what a corpus-wide question looks like: its passages spread over many documents *while* it names nothing
  specific and no document (`unspecific_spread`; a question about one call spreads too, but names the call);
* **whether the index can read the question at all** (`readable`): a question written only in a script the
  index's text does not use ("领英的收购…" over English transcripts) that names no document links nothing and
  finds no passage whatever it asks, so then finding nothing is no evidence that the index does not cover it.

`Probe.vector()` gives these as the named features `PROBE_NAMES` that the classifier's index stage weighs (fitted
on labelled questions measured on real indexes: `tools.routing.index_fit`); `Probe.reasons()` says in words what
was found. Everything is deterministic and reads only the index.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from router.index_profile import IndexProfile, case_counts, profile, question_scripts

if TYPE_CHECKING:
    from shared_context.index import Index
    from shared_context.linking import LinkResult

UBIQUITOUS_SHARE = 0.5  # an entity in at least this share of document groups is collection-wide
UNIT_DEPTH = 20  # best text units looked at
MIN_LINK_SCORE = 0.6  # below this an "exact" match is only a title nested in a longer phrase

PROBE_NAMES: tuple[str, ...] = (
    "linked_none", "specific_1", "specific_2plus", "collection_wide", "common_nouns", "unknown_names",
    "documents_1", "documents_2plus", "groups_measured", "unit_hits_none", "unit_group_spread",
    "unit_best_group_share", "unit_community_spread", "unit_peak", "report_spread", "unspecific_spread",
)

_TITLE_WORD = re.compile(r"[^\W_]+")
_CASE_UNITS = 8  # text units of a linked entity read for how its title's words are written
_TITLE_FILLER = frozenset(("the", "a", "an", "of", "mr", "mrs", "ms", "miss", "dr", "sir", "lady", "lord", "st", "and"))
_CJK = re.compile(r"[\u3400-\u9fff]")


@dataclass(frozen=True)
class LinkSummary:
    """The distinct names a question links to (title matches only), best first."""

    positions: tuple[int, ...] = ()
    titles: tuple[str, ...] = ()
    scores: tuple[float, ...] = ()
    unknown: int = 0  # name-like spans of the question that are in no title
    unknown_spans: tuple[str, ...] = ()  # those spans ("River Tane")

    def as_dict(self) -> dict[str, float]:
        return {"linked_entities": float(len(self.positions)), "max_link_score": max(self.scores, default=0.0),
                "unknown_names": float(self.unknown)}


def _title_words(title: str) -> set[str]:
    words = {w for w in _TITLE_WORD.findall(title.lower()) if w not in _TITLE_FILLER}
    return words or {title.lower()}


def _same_name_word(a: str, b: str) -> bool:
    """Same word up to a plural or possessive ending ("fezziwig" / "fezziwigs"); CJK titles by containment."""
    if a == b:
        return True
    if _CJK.search(a + b):
        return a in b or b in a
    short, long_ = sorted((a, b), key=len)
    return len(short) >= 4 and long_.startswith(short) and len(long_) - len(short) <= 2


def summarise_links(link: LinkResult, title_of: Callable[[int], str]) -> LinkSummary:
    """The distinct names a `LinkResult` found by title.

    The linker also returns BM25 matches on descriptions for almost any content word; only title/alias matches
    count here. An entity whose title shares a word with a better-ranked one ("MRS. CRATCHIT" after "BOB
    CRATCHIT", "MR. SCROOGE" after "SCROOGE") is the same mention, not another entity.
    """
    kept: list[tuple[int, float, str]] = []
    seen: set[str] = set()
    for e in sorted(link.entities, key=lambda e: -e.score):
        if not e.exact or e.score < MIN_LINK_SCORE:
            continue
        title = title_of(e.position)
        words = _title_words(title)
        if any(_same_name_word(w, s) for w in words for s in seen):
            continue
        seen |= words
        kept.append((e.position, float(e.score), title))
    return LinkSummary(tuple(p for p, _, _ in kept), tuple(t for _, _, t in kept), tuple(s for _, s, _ in kept),
                       len(link.unknown_names), tuple(link.unknown_names))


@dataclass(frozen=True)
class Probe:
    links: LinkSummary
    specific: tuple[str, ...] = ()
    collection_wide: tuple[str, ...] = ()
    common_nouns: tuple[str, ...] = ()
    documents: tuple[str, ...] = ()
    groups: int = 0  # document groups of the index
    groups_measured: bool = False
    unit_hits: int = 0
    unit_groups: int = 0  # distinct document groups among the best units
    unit_group_spread: float = 0.0  # effective number of groups of their score mass / min(hits, groups)
    unit_best_group_share: float = 0.0
    unit_communities: int = 0
    unit_community_spread: float = 0.0
    unit_peak: float = 0.0  # best unit's share of the best units' score mass
    top_level: int = 0
    report_touched: int = 0
    report_spread: float = 0.0
    readable: bool = True  # the question has words in a script the index's text uses (or that is unknown)
    extra: dict[str, float] = field(default_factory=dict)
    # share of the specific names' text units in the one document group holding most of them (each name weighs
    # the same): where the things the question names live, whatever other words it shares with other documents
    named_best_group_share: float = 0.0

    @property
    def found_across_collection(self) -> bool:
        """The question's words reach a full set of best passages and the top-level reports: the index has
        something on it, even when it names nothing (a question the index does not cover finds few passages)."""
        return self.unit_hits >= UNIT_DEPTH and self.report_touched > 0

    def vector(self) -> np.ndarray:
        """`PROBE_NAMES` in order."""
        n_specific = len(self.specific)
        return np.array([
            float(not self.links.positions), float(n_specific == 1), float(n_specific >= 2),
            min(2.0, float(len(self.collection_wide))) / 2.0, min(2.0, float(len(self.common_nouns))) / 2.0,
            min(3.0, float(self.links.unknown)) / 3.0,
            float(len(self.documents) == 1), float(len(self.documents) >= 2), float(self.groups_measured),
            float(self.unit_hits == 0), self.unit_group_spread, self.unit_best_group_share, self.unit_community_spread,
            self.unit_peak, self.report_spread,
            self.unit_group_spread if not self.specific and not self.documents else 0.0,
        ], dtype=np.float64)

    def as_dict(self) -> dict[str, float]:
        found = self.links.as_dict()
        found.update({
            "specific_entities": float(len(self.specific)), "collection_wide_entities": float(len(self.collection_wide)),
            "common_noun_entities": float(len(self.common_nouns)), "named_documents": float(len(self.documents)),
            "document_groups": float(self.groups), "unit_hits": float(self.unit_hits),
            "unit_groups": float(self.unit_groups), "unit_group_spread": round(self.unit_group_spread, 3),
            "unit_best_group_share": round(self.unit_best_group_share, 3),
            "unit_communities": float(self.unit_communities),
            "unit_community_spread": round(self.unit_community_spread, 3), "unit_peak": round(self.unit_peak, 3),
            "top_level_communities": float(self.top_level), "report_touched": float(self.report_touched),
            "report_spread": round(self.report_spread, 3), "question_script_in_index": float(self.readable),
            "named_best_group_share": round(self.named_best_group_share, 3),
        })
        return found

    def reasons(self) -> list[str]:
        """What the probe found, in words (documents, names by kind, where the best passages are)."""
        out: list[str] = []
        if not self.readable:
            return ["written in a script this index's text does not use: its words could not be looked up in the "
                    "index, so finding nothing there does not mean the index does not cover it"]
        if len(self.documents) == 1:
            out.append(f"names one document of the collection ({self.documents[0]})")
        elif self.documents:
            out.append(f"names {len(self.documents)} documents of the collection ({_shown(self.documents)})")
        if self.specific:
            out.append(f"names something specific in this index ({_shown(self.specific)})")
        if self.collection_wide:
            out.append(f"{_shown(self.collection_wide)} occur(s) across most of the collection, so naming them "
                       "does not narrow the question")
        if self.common_nouns:
            out.append(f"{_shown(self.common_nouns)} are common nouns in this text (written in lower case), not names")
        if not self.links.positions:
            out.append("links to no entity in the index by name")
        if self.unit_hits == 0:
            out.append("no passage of the index shares a content word with it")
        elif self.groups_measured:
            out.append(f"its best passages come from {self.unit_groups} of {self.groups} documents "
                       f"({self.unit_best_group_share:.0%} of their weight in one) and {self.unit_communities} of "
                       f"{self.top_level} top-level communities")
        elif self.top_level:
            out.append(f"its best passages fall in {self.unit_communities} of {self.top_level} top-level communities")
        return out


def _shown(names: Sequence[str], limit: int = 2) -> str:
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


def _effective(mass: np.ndarray) -> float:
    """exp(entropy) of a non-negative mass vector: how many parts it is effectively spread over."""
    total = float(mass.sum())
    if total <= 0:
        return 0.0
    p = mass[mass > 0] / total
    return math.exp(float(-(p * np.log(p)).sum()))


def _mass_by(keys: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Score mass per distinct non-negative key (order irrelevant)."""
    keep = keys >= 0
    if not keep.any():
        return np.zeros(0)
    mass = np.bincount(keys[keep], weights=scores[keep])
    out: np.ndarray = mass[mass > 0]
    return out


def probe(index: Index, text: str, links: LinkSummary) -> Probe:
    """All measurements for one question."""
    from shared_context.linking import lexical_scores, lexical_top

    prof = profile(index)
    specific: list[str] = []
    wide: list[str] = []
    common: list[str] = []
    for pos, title in zip(links.positions, links.titles, strict=True):
        if (0 <= pos < len(prof.entity_generic) and prof.entity_generic[pos]) or _common_word_of_another_name(index, pos, title, links.unknown_spans):
            common.append(title)
        elif prof.measures_spread and 0 <= pos < len(prof.entity_share) and prof.entity_share[pos] >= UBIQUITOUS_SHARE:
            wide.append(title)
        else:
            specific.append(title)
    documents = tuple(prof.names.titles[g] for g in prof.names.named(text))
    positions, scores = lexical_top(index, "text_units", text, UNIT_DEPTH)
    units = _unit_measures(prof, np.asarray(positions, dtype=np.int64), np.asarray(scores, dtype=np.float64))
    touched, spread = _report_spread(np.asarray(lexical_scores(index, "reports", text), dtype=np.float64), prof)
    asked_in = question_scripts(text)
    # a question that names a document or links a title was read, whatever script the rest of it is in
    readable = not prof.scripts or not asked_in or bool(asked_in & prof.scripts) or bool(links.positions or documents)
    named = [pos for pos, title in zip(links.positions, links.titles, strict=True) if title in specific]
    return Probe(links, tuple(specific), tuple(wide), tuple(common), documents, prof.groups, prof.measures_spread,
                 *units, prof.top_level, touched, spread, readable,
                 named_best_group_share=_named_group_share(index, prof, named))


def _named_group_share(index: Index, prof: IndexProfile, positions: Sequence[int]) -> float:
    """Share of the named entities' text units in their most common document group, each entity weighing the same
    (0 when the index has too few groups to tell, or nothing is named)."""
    if not prof.measures_spread or not positions:
        return 0.0
    mass = np.zeros(prof.groups, dtype=np.float64)
    adjacency = index.entity_text_units
    counted = 0
    for pos in positions:
        if not 0 <= pos < len(adjacency):
            continue
        units = np.asarray(adjacency[pos], dtype=np.int64)
        units = units[(units >= 0) & (units < len(prof.unit_group))]
        groups = prof.unit_group[units]
        groups = groups[(groups >= 0) & (groups < prof.groups)]
        if len(groups):
            mass += np.bincount(groups, minlength=prof.groups) / len(groups)
            counted += 1
    return float(mass.max()) / counted if counted else 0.0


def _common_word_of_another_name(index: Index, pos: int, title: str, unknown_spans: Sequence[str]) -> bool:
    """The linked title is a word of a longer name the index does not know ("River Tane" linking RIVER), and its
    own text units write that word only in lower case: the question names something else, not this entity.
    ("Uncle Scrooge" keeps SCROOGE: the text writes Scrooge capitalised.)"""
    words = _title_words(title)
    if not any(words < _title_words(span) for span in unknown_spans):
        return False
    from shared_context.records import field_of

    text = field_of(index.text_units, "text")
    units = index.entity_text_units[pos][:_CASE_UNITS] if 0 <= pos < len(index.entity_text_units) else []
    lower, capital = case_counts([str(text(int(u)) or "") for u in units])
    return all(lower[w] > 0 and capital[w] == 0 for w in words)


def _unit_measures(prof: IndexProfile, positions: np.ndarray, scores: np.ndarray
                   ) -> tuple[int, int, float, float, int, float, float]:
    hits = len(positions)
    if hits == 0:
        return 0, 0, 0.0, 0.0, 0, 0.0, 0.0
    scores = np.maximum(scores, 0.0)
    total = float(scores.sum()) or 1.0
    groups = _mass_by(prof.unit_group[positions], scores)
    group_spread = best_share = 0.0
    if prof.measures_spread and len(groups):
        group_spread = _effective(groups) / min(hits, prof.groups)
        best_share = float(groups.max()) / total
    communities = _mass_by(prof.unit_top[positions], scores)
    community_spread = _effective(communities) / min(hits, prof.top_level) if prof.top_level and len(communities) else 0.0
    return (hits, len(groups), group_spread, best_share, len(communities), community_spread,
            float(scores[0]) / total)


def _report_spread(report_scores: np.ndarray, prof: IndexProfile) -> tuple[int, float]:
    """(top-level reports sharing a word with the question, effective share of them its BM25 mass covers)."""
    if prof.top_level == 0:
        return 0, 0.0
    scores = report_scores[prof.top_reports]
    return int(np.count_nonzero(scores > 0)), _effective(scores) / prof.top_level
