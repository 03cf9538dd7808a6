"""Which index answers a question: the coverage probe over several indexes and the decision it leads to.

Routing the index comes before routing the engine. Each index is probed with what it already precomputes (no
model call): its entity titles (`router.index_probe.summarise_links`, split by `router.index_profile` into
specific names and collection-wide or common-noun ones), its document names (`router.index_profile.DocumentNames`) and the BM25
postings of its text units. Per index the probe measures

* **specific names**: entities the question names by title that are specific in this index;
* **documents**: documents of this index the question names ("the FY20 Q3 call");
* **vocabulary share**: the share of the question's content words found in the index's text at all;
* **distinctness**: how much more often (per text unit) this index uses the question's words than the other
  indexes do, averaged over the words: a word every index uses tells nothing, a word only this one uses says
  it is about this index;
* **best passage**: the share of the question's content words that its best passage holds together;
* **weighted share**: the vocabulary share with each word weighted by its rarity over all the indexes (the IDF of
  its pooled per-unit frequency; a word no index holds weighs most): "the boiling point of liquid nitrogen" shares
  "point" and "liquid" with a medical index but not the words that say what it asks about;
* **posterior**: each word's rarity weight split between the indexes by their per-unit frequency, summed: the
  share of the question this index explains better than the others (the index with the highest one *leads*).

`choose` turns these into one of three outcomes: one index clearly covers the question (route there), several do
(fan out over them, `router.fanout`), or none does (say so, with the closest index). Names and documents are the
strong evidence: the index naming them wins, and several naming them fan out when their scores are within
`NAMED_MARGIN`; a one-word title the question writes in lower case ("mass", "valley") is a name only when most of
the question's words are in that index too and its best passage holds a good part of them; such a title, and a
one-word name another index's text holds too ("Jacob": Jacob Marley here, Jacob Collier there), count only for the
index that leads on the words. Names of several words and named documents in different indexes fan out whatever
their scores. A name no title covers but that the index's text holds is known to it. Without them the words decide:
an index covers the question when most of its words are there, most of its rare words too, and one passage holds
several of them together; the best such index wins unless another comes within `FANOUT_MARGIN` of its score *and*
its best passage adds rare words the best one's text lacks (`MIN_ADDED_SHARE`). An index far ahead of the others
on the rare words (`LEAD_RATIO`) covers a long question whose words no single passage holds half of. A name an
index knows, written beside more names no index knows, is a bystander there (`Coverage.outnamed`). A name no index knows ("Douro")
says the question is about none of them, unless one index's best passage holds most of the weighted question anyway
(`UNKNOWN_NAME_PASSAGE`: "the CFO" in calls that never write the acronym). A question about a collection as a whole
that names nothing ("what are the main themes?") is covered by every index sharing a word with it, so it goes to
the best one or fans out the same way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from shared_context.bm25 import BM25
    from shared_context.index import Index

# An index covers a question by its words alone when at least this share of them is in its text ...
MIN_VOCABULARY_SHARE = 0.6
# ... and one of its passages holds at least this share of them together.
MIN_PASSAGE_SHARE = 0.5
# Another covering index within this much of the best score is asked too (the question fans out).
FANOUT_MARGIN = 0.12
MAX_FANOUT = 3  # at most this many indexes answer one question: the rest are named in the reasons
PASSAGES = 3  # best passages read for the passage share
MIN_NAME_STRENGTH = 0.8  # a title or alias the question names (not one only inside a longer matched title)
# Several indexes naming something all answer only when their scores are this close to the best one's (a name
# matched by a common word of the question, "bank" naming BANKS, must not pull in an index that has little else)
NAMED_MARGIN = 0.3
# ... and the question's rare words (weighted by rarity) are mostly there too: common words alone do not cover it
MIN_WEIGHTED_SHARE = 0.5
# A one-word title the question writes in lower case is a name only with this share of the question's words
WEAK_NAME_SHARE = 0.5
# Without names, another covering index is asked too only when its best passage holds at least this weighted
# share of the question's words that the best index's text lacks: a second index with the same words adds nothing
MIN_ADDED_SHARE = 0.1
# A name no index knows does not veto an index whose best passage holds this weighted share of the question
# (the unknown name included, at its full weight): the rest of the question is plainly about that index
UNKNOWN_NAME_PASSAGE = 0.6
# ... and its best passage holds this weighted share of the question ("the ceiling of the sistine chapel" links
# CHAPEL in a novel whose passages hold none of the rest)
WEAK_NAME_PASSAGE = 0.35
# An index that explains the question's rare words this much (posterior) and LEAD_RATIO times more than any other
# covers it without one passage holding half of its words: a long question (a note to write, a scenario to
# rewrite) spreads its words over many passages of the one collection that holds them
LEAD_POSTERIOR = 0.45
LEAD_RATIO = 2.5
LEAD_PASSAGE_SHARE = 0.35  # ... as long as one passage still holds a good part of them ("the sistine chapel")
# Words are weighted by their rarity over all indexes (IDF of the pooled per-unit frequency): a word no index
# holds weighs as if one unit in UNSEEN_UNITS held it.
UNSEEN_UNITS = 500

Outcome = Literal["one", "several", "none"]
_FILLER = frozenset(("the", "of", "de", "la", "le", "van", "von", "der", "du", "da", "mr", "mrs", "ms", "dr", "st"))


@dataclass(frozen=True)
class Coverage:
    """What the probe found in one index for one question."""

    name: str
    specific: tuple[str, ...] = ()
    documents: tuple[str, ...] = ()
    terms: int = 0  # the question's distinct content words
    vocabulary_share: float = 0.0
    passage_share: float = 0.0
    distinctness: float = 0.0  # filled in by `choose`, which sees every index
    unit_shares: tuple[float, ...] = ()  # per question word: share of this index's text units holding it
    unknown_names: tuple[str, ...] = ()  # names the question writes that no title of this index covers
    passage_terms: tuple[bool, ...] = ()  # per question word: held by the passage holding the most of them
    weak: tuple[str, ...] = ()  # of `specific`: one-word titles the question does not write as a name
    words: tuple[str, ...] = ()  # the question's content words (lexical terms), in the order of `unit_shares`
    # filled in by `choose`, which sees every index:
    # of `specific`: one-word names another index's text holds too ("Jacob": Jacob Marley here, Jacob Collier there)
    shared: tuple[str, ...] = ()
    # the question's words weighted by rarity, each split between the indexes by their per-unit frequency: the
    # weighted share of the question this index explains best (summed over the indexes: the share any holds)
    posterior: float = 0.0
    leads: bool = True  # no other index has a higher posterior
    clear_lead: bool = False  # a posterior of LEAD_POSTERIOR or more, LEAD_RATIO times any other index's
    weights: tuple[float, ...] = ()  # per question word: its rarity weight over all indexes, summing to 1
    # the vocabulary and passage shares with each word weighted by its rarity over all indexes (`choose`)
    weighted_share: float = 1.0
    weighted_passage: float = 1.0

    @property
    def names(self) -> tuple[str, ...]:
        """The specific names that count as evidence. A one-word title the question writes in lower case ("mass",
        "valley") counts only when most of the question's words are in this index too; it, and a one-word name
        another index's text holds too ("Jacob"), count only when this index also explains the question's rare
        words better than any other: a lone word is no name of this index unless the rest of the question agrees."""
        doubtful = set(self.weak) | set(self.shared)
        if not self.leads:
            return tuple(t for t in self.specific if t not in doubtful)
        if self.vocabulary_share >= WEAK_NAME_SHARE and self.weighted_passage >= WEAK_NAME_PASSAGE:
            return self.specific
        return tuple(t for t in self.specific if t not in self.weak)

    @property
    def full_names(self) -> tuple[str, ...]:
        """Names of several words ("Elsie Inglis") and documents: evidence no common word of the question fakes."""
        return tuple(t for t in self.names if len(_words(t)) > 1) + self.documents

    def adds_to(self, lead: Coverage) -> float:
        """The weighted share of the question's words that `lead`'s text lacks and this index's best passage holds:
        what asking this index too would add (an index sharing only the best index's words adds nothing)."""
        if not self.weights or len(lead.unit_shares) != len(self.passage_terms):
            return 0.0
        return sum(w for w, mine, theirs in zip(self.weights, self.passage_terms, lead.unit_shares, strict=True)
                   if mine and theirs == 0)

    @property
    def strong(self) -> bool:
        """Names something specific of this index or one of its documents."""
        return bool(self.names or self.documents)

    @property
    def covers(self) -> bool:
        return self.strong or self.covers_by_words

    @property
    def covers_by_words(self) -> bool:
        """Most of the question's words and rare words are in this index, and one passage holds them together
        or this index explains the rare words far better than any other (`clear_lead`)."""
        return (self.vocabulary_share >= MIN_VOCABULARY_SHARE and self.weighted_share >= MIN_WEIGHTED_SHARE
                and (self.passage_share >= MIN_PASSAGE_SHARE
                     or (self.clear_lead and self.passage_share >= LEAD_PASSAGE_SHARE)))

    def outnamed(self, unknown_everywhere: int) -> bool:
        """The question writes more names that no index knows than it names of this index, and no passage here
        holds most of it: what this index knows is a bystander ("New York" beside three names no index knows).
        Names another index knows do not count: they make a question about two indexes."""
        return (unknown_everywhere > len(self.names) + len(self.documents)
                and self.weighted_passage < UNKNOWN_NAME_PASSAGE)

    @property
    def score(self) -> float:
        """Comparable across indexes: strong evidence first, then words (each part in [0, 1])."""
        words = 0.3 * self.vocabulary_share + 0.3 * self.passage_share + 0.4 * self.distinctness
        return float(self.strong) + 0.5 * min(len(self.names) + len(self.documents), 2) / 2 + words

    def reason(self) -> str:
        parts: list[str] = []
        if self.documents:
            parts.append(f"names its document(s) {_shown(self.documents)}")
        if self.names:
            parts.append(f"names {_shown(self.names)}, specific in it")
        parts.append(f"{self.vocabulary_share:.0%} of the question's content words are in its text, "
                     f"{self.passage_share:.0%} together in one passage, distinctness {self.distinctness:.2f}")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, object]:
        return {"index": self.name, "score": round(self.score, 3), "specific": list(self.specific),
                "documents": list(self.documents), "vocabulary_share": round(self.vocabulary_share, 3),
                "passage_share": round(self.passage_share, 3), "distinctness": round(self.distinctness, 3)}


@dataclass(frozen=True)
class IndexChoice:
    """The indexes a question goes to and why."""

    outcome: Outcome
    names: tuple[str, ...]  # the chosen index(es); for "none" the closest one
    coverages: tuple[Coverage, ...]  # every probed index, best first
    reasons: tuple[str, ...]

    @property
    def index(self) -> str | list[str]:
        """What an answer's route reports: a name, or the list of names when the question fans out."""
        return list(self.names) if self.outcome == "several" else self.names[0]


def measure(name: str, index: Index, text: str) -> Coverage:
    """One index's coverage of `text` (its distinctness needs the other indexes: `choose` fills it in)."""
    from router.index_profile import profile
    from shared_context.linking import exact_matches, name_spans
    from shared_context.text import lexical_terms

    prof = profile(index)
    terms = list(dict.fromkeys(lexical_terms(text)))
    positions, strengths = exact_matches(index, text)
    named = [int(p) for p, s in zip(positions.tolist(), strengths.tolist(), strict=True) if s >= MIN_NAME_STRENGTH]
    # Names found across this whole collection (the host, the company) still say the question is about it; only
    # titles that are common nouns here do not, nor a title that is a word of a longer name the question writes
    # ("AMY" for "Amy Hood", "FRANCE" for "Tour de France")
    titles = [str(index.entities[p].title) for p in named if not _generic(prof.entity_generic, p)]
    spans = [_words(span) for span in name_spans(text)]
    known = set().union(*(_words(t) for t in titles)) if titles else set()
    # and when the question writes names capitalised, a title it writes only in lower case ("the valley") is a
    # common word of the question, not a name it asks about
    written = {w.lower() for w in re.findall(r"[^\W\d_]+", text) if not w.islower()} if spans else None
    specific = tuple(t for t in titles if not any(_words(t) < span and not span <= known for span in spans)
                     and (written is None or _words(t) & written))
    unknown = tuple(" ".join(sorted(span)) for span in spans if not span <= known)
    proper = _proper_words(text)
    weak = tuple(t for t in specific if len(_words(t)) == 1 and not _words(t) <= proper)
    documents = tuple(prof.names.titles[g] for g in prof.names.named(text))
    if not terms:
        return Coverage(name, specific, documents, unknown_names=unknown, weak=weak)
    bm25 = _unit_bm25(index)
    if bm25 is None or bm25.n_docs == 0:
        return Coverage(name, specific, documents, len(terms), unknown_names=unknown, weak=weak)
    # a name no title covers but whose every word this index's text holds ("Ebenezer", in a text that writes
    # "Ebenezer Scrooge" while its entity is SCROOGE) is known to it: only the extractor missed it
    unknown = tuple(u for u in unknown if not all(len(bm25.postings(t)) for t in lexical_terms(u)))
    postings = [bm25.postings(t) for t in terms]
    shares = tuple(len(p) / bm25.n_docs for p in postings)
    found = sum(1 for p in postings if len(p))
    passage: tuple[bool, ...] = (False,) * len(terms)
    if found:
        from shared_context.linking import lexical_top

        best, _ = lexical_top(index, "text_units", text, PASSAGES)
        held = [tuple(bool(len(p)) and _holds(p, int(u)) for p in postings) for u in np.asarray(best)]
        passage = max(held, key=sum, default=passage)
    return Coverage(name, specific, documents, len(terms), found / len(terms), sum(passage) / len(terms), 0.0,
                    shares, unknown, passage, weak, tuple(terms))


def choose(coverages: Sequence[Coverage], corpus_wide: bool = False) -> IndexChoice:
    """The decision over every probed index (at least one). `corpus_wide`: the question asks about a collection
    as a whole (themes, a summary: `router.features`); naming nothing, it is about any index that shares a word with
    it, not about none."""
    if not coverages:
        raise ValueError("index routing needs at least one index")
    scored = sorted(_with_distinctness(coverages), key=lambda c: (-c.score, c.name))
    # a name the question writes that no index knows: what it asks about is in none of them, whatever its
    # other words share with them ("grapes of the Douro valley"); more such names than an index's own names
    # outweigh those
    unknown_everywhere = set.intersection(*(set(c.unknown_names) for c in scored))
    strong = [c for c in scored if c.strong and not c.outnamed(len(unknown_everywhere))]
    covering = strong or [c for c in scored if c.covers_by_words
                          and (not unknown_everywhere or c.weighted_passage >= UNKNOWN_NAME_PASSAGE)]
    if not covering and corpus_wide:
        covering = [c for c in scored if c.vocabulary_share > 0]
    if not covering:
        best = scored[0]
        unknown = f" (it names {_shown(sorted(unknown_everywhere))}, which no index knows)" if unknown_everywhere else ""
        why = f"no index covers the question{unknown}; the closest is {best.name} ({best.reason()})"
        return IndexChoice("none", (best.name,), tuple(scored), (why,))
    lead = covering[0]
    margin = NAMED_MARGIN if strong else FANOUT_MARGIN
    # names of several words and documents are asked whatever their scores ("Jacob Collier" in one index and
    # "Elsie Inglis" in another); without names a second index must add words the best one lacks
    close = [c for c in covering if c is lead or (c.full_names and lead.full_names) or (
        c.score >= lead.score - margin and (strong or c.adds_to(lead) >= MIN_ADDED_SHARE))]
    chosen, left_out = close[:MAX_FANOUT], [c.name for c in close[MAX_FANOUT:]]
    if len(chosen) == 1:
        why = f"routed to index {lead.name}: {lead.reason()}"
        others = [c.name for c in covering[1:] if c.name not in left_out]
        if others:
            why += f" (also covered, further behind: {', '.join(others)})"
        return IndexChoice("one", (lead.name,), tuple(scored), (why,))
    reasons = [f"asked {len(chosen)} indexes that cover the question: " + ", ".join(c.name for c in chosen),
               *(f"index {c.name}: {c.reason()}" for c in chosen)]
    if left_out:
        reasons.append(f"not asked (at most {MAX_FANOUT} indexes per question): {', '.join(left_out)}")
    return IndexChoice("several", tuple(c.name for c in chosen), tuple(scored), tuple(reasons))


def route_indexes(indexes: Mapping[str, Index], text: str) -> IndexChoice:
    """Probe every index and decide."""
    from router.classifier import CORPUS_WIDE_CUES
    from router.features import match_cues

    corpus_wide = bool(CORPUS_WIDE_CUES & set(match_cues(text)))
    return choose([measure(name, index, text) for name, index in indexes.items()], corpus_wide)


def _with_distinctness(coverages: Sequence[Coverage]) -> list[Coverage]:
    """Each index's mean, over the question's words found anywhere, of its share of the per-unit frequency
    summed over all indexes (1.0: only this index uses the words; 1/n: every index uses them alike)."""
    from dataclasses import replace

    rows = [c.unit_shares for c in coverages if c.unit_shares]
    if not rows or len({len(r) for r in rows}) != 1:
        return list(coverages)
    total = np.sum(np.array(rows, dtype=np.float64), axis=0)
    used = total > 0
    if not used.any():
        return list(coverages)
    pooled = total / len(rows)
    weight = np.log1p(1.0 / np.maximum(pooled, 1.0 / UNSEEN_UNITS))
    normalised = tuple(float(w) for w in weight / weight.sum())
    out = []
    for c in coverages:
        if not c.unit_shares:
            out.append(c)
            continue
        mine = np.asarray(c.unit_shares, dtype=np.float64)
        share = mine[used] / total[used]
        held = np.asarray(c.passage_terms, dtype=np.float64) if c.passage_terms else np.zeros_like(mine)
        own = np.where(used, mine / np.maximum(total, 1e-12), 0.0)
        out.append(replace(c, distinctness=float(share.mean()),
                           weighted_share=float(weight @ (mine > 0)) / float(weight.sum()),
                           weighted_passage=float(weight @ held) / float(weight.sum()),
                           posterior=float(weight @ own) / float(weight.sum()),
                           shared=_shared_names(c, coverages), weights=normalised))
    ranked = sorted((c.posterior for c in out), reverse=True)
    best, second = ranked[0], (ranked[1] if len(ranked) > 1 else 0.0)
    return [replace(c, leads=c.posterior >= best, clear_lead=c.posterior >= max(LEAD_POSTERIOR, LEAD_RATIO * second))
            for c in out]


def _shared_names(c: Coverage, coverages: Sequence[Coverage]) -> tuple[str, ...]:
    """`c`'s one-word specific names whose word another index's text holds as well."""
    out = []
    for title in c.specific:
        words = _words(title)
        if len(words) != 1 or next(iter(words)) not in c.words:
            continue
        at = c.words.index(next(iter(words)))
        if any(o is not c and o.words == c.words and o.unit_shares[at] > 0 for o in coverages):
            out.append(title)
    return tuple(out)


def _proper_words(text: str) -> set[str]:
    """Words the question writes capitalised other than at the start of a sentence: written as names."""
    out: set[str] = set()
    for m in re.finditer(r"[^\W\d_][\w'-]*", text):
        before = text[: m.start()].rstrip()
        if m.group()[0].isupper() and before and before[-1] not in ".?!:\"'(":
            out.update(_words(m.group()))
    return out


def _unit_bm25(index: Index) -> BM25 | None:
    """The text units' in-memory BM25 (its postings give document frequencies); None when it is on disk."""
    from shared_context.bm25 import BM25
    from shared_context.linking import lexical_search

    search = lexical_search(index, "text_units")
    return search if isinstance(search, BM25) else None


def _holds(postings: np.ndarray, unit: int) -> bool:
    """Postings are sorted by position: a binary search."""
    i = int(np.searchsorted(postings, unit))
    return i < len(postings) and int(postings[i]) == unit


def _words(name: str) -> set[str]:
    return {w for w in re.findall(r"[^\W_]+", name.lower()) if w not in _FILLER and len(w) > 1}  # no possessive s


def _generic(flags: np.ndarray, pos: int) -> bool:
    return 0 <= pos < len(flags) and bool(flags[pos])


def _shown(names: Sequence[str], limit: int = 2) -> str:
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")
