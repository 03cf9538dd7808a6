"""Turn per-chunk extraction results into the final entity and relationship tables.

Shared by both extraction paths: `EntityRow`/`RelationshipRow` come from `merge_offline` (this module)
or from the model path, and `finalise_graph` orders them, gives stable ids and computes degrees.

Ids are uuid5 of the title (entities) or of the title pair (relationships): they look like GraphRAG's
uuids, but the same entity keeps the same id across runs, which is what incremental updates need
(GraphRAG regenerates uuid4s on every run, breaking saved vector stores). Table order is stable too:
rows that existed in the previous build keep their order (and so their `human_readable_id`, the
citation id), new rows are appended in order of first appearance.
"""

from __future__ import annotations

import gc
import hashlib
import heapq
import re
import uuid
from array import array
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from indexer import lexicon as lx
from indexer.extract_offline import (
    ACRONYM,
    FREQUENT_ONLY_KINDS,
    MAYBE_PERSON,
    NAME,
    NOUN,
    PHRASE,
    SPEAKER,
    STATED,
    ChunkExtraction,
    PairStat,
    noun_kept,
)

_NAMESPACE = uuid.UUID("6f0d3f4e-5b8a-4c59-9a55-2f1c0e7d9b11")
_TYPE_ORDER = ("PERSON", "ORGANIZATION", "GEO", "EVENT", "VESSEL", "OBJECT", "CONCEPT")


def uuid5_text(namespace: uuid.UUID, name: str) -> str:
    """`str(uuid.uuid5(namespace, name))` without building a UUID object (a third of the cost; a build makes
    one per entity, relationship and community)."""
    digest = bytearray(hashlib.sha1(namespace.bytes + name.encode("utf-8"), usedforsecurity=False).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = digest.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def entity_uuid(title: str) -> str:
    return uuid5_text(_NAMESPACE, "entity\x1f" + title)


def relationship_uuid(source: str, target: str) -> str:
    a, b = (source, target) if source <= target else (target, source)
    return uuid5_text(_NAMESPACE, f"relationship\x1f{a}\x1f{b}")


@dataclass
class EntityRow:
    title: str
    type: str
    description: str
    text_unit_ids: list[str]
    frequency: int
    id: str = ""
    human_readable_id: int = 0
    degree: int = 0


@dataclass
class RelationshipRow:
    source: str
    target: str
    description: str
    weight: float
    text_unit_ids: list[str]
    id: str = ""
    human_readable_id: int = 0
    combined_degree: int = 0


@dataclass
class Graph:
    entities: list[EntityRow] = field(default_factory=list)
    relationships: list[RelationshipRow] = field(default_factory=list)


@dataclass(slots=True)
class _Stat:
    """First pass, every mention key (most are phrases seen once): only what decides whether it is kept."""

    kind: str
    first_seen: tuple[int, int]
    words: int
    count: int = 0
    non_initial: bool = False
    n_chunks: int = 0
    last_chunk: int = -1
    peak: int = 0  # a lone noun's most lowercase occurrences in one chunk


@dataclass
class _Agg:
    """Second pass, kept entities only: type votes, the chunks they occur in and their best sentences."""

    kind: str
    first_seen: tuple[int, int]
    count: int = 0
    non_initial: bool = False
    words: int = 1
    votes: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    chunks: array[int] = field(default_factory=lambda: array("I"))
    sentences: list[tuple[float, int, int, str]] = field(default_factory=list)  # a heap: (score, -chunk, -seq, text)
    guessed: float = 0.0  # PERSON votes that only a name's shape gave (`MAYBE_PERSON`), no cue in the text

    def add_sentence(self, score: float, ci: int, seq: int, text: str) -> None:
        item = (score, -ci, -seq, text)
        if len(self.sentences) < MAX_DESCRIPTION_CANDIDATES:
            heapq.heappush(self.sentences, item)
        elif item > self.sentences[0]:
            heapq.heapreplace(self.sentences, item)

    def ranked_sentences(self) -> list[tuple[float, int, str]]:
        """Best first; ties in the order they were seen (as a stable sort of every sentence would give)."""
        return [(s, -nci, text) for s, nci, _nseq, text in sorted(self.sentences, key=lambda x: (-x[0], -x[1], -x[2]))]


# An entity named in every chunk of a 100 MB file has ~90,000 candidate sentences; its description
# uses `description_sentences` of them, so only the best few dozen are kept while merging.
MAX_DESCRIPTION_CANDIDATES = 64


class ExtractionPasses(Protocol):
    """Gives the chunks' extractions in chunk order, afresh on each call. With `keys`, only the mentions of
    those keys and the pairs between two of them are needed: a reader decoding from disk may leave the
    rest (and the lowercase counts) out, which makes the merge's second and third passes cheaper."""

    def __call__(self, keys: AbstractSet[str] | None = None) -> Iterable[ChunkExtraction]: ...


def _capitalised_name(key: str, a: _Stat | _Agg, lowercase: dict[str, int]) -> bool:
    """A one-word name seen mid-sentence, and capitalised more often than written in lower case."""
    return a.non_initial and (a.kind != NAME or lowercase.get(key.lower(), 0) < a.count)


def _common_word(key: str, st: _Stat, lowercase: dict[str, int]) -> bool:
    """An ordinary word, not an entity: a lone noun or a phrase made only of generic nouns (`lexicon_en.txt`
    [GENERIC_NOUNS]: "WIFE", "PEOPLE", "BUSINESS UNITS"); a one-word name or acronym the text writes in
    lower case at least as often ("Father" opening sentences beside "my father"; "KEY" and "LOOKING" set in
    capitals), when it is a generic noun or a verb form; an acronym of 3+ letters written in lower case
    more often than in capitals ("IDEA" in a heading, "idea" in the text). Speakers are never common words."""
    if st.kind == SPEAKER:
        return False
    words = key.split(" ")
    if st.kind in FREQUENT_ONLY_KINDS:
        return all(lx.generic_noun(w) for w in words)
    if len(words) != 1:
        return False
    lower = lowercase.get(key.lower(), 0)
    if lower and key.endswith(("ING", "ED")):
        return True  # a verb form set in capitals ("LOOKING" opening a stage direction)
    if lower and lx.generic_noun(key) and lower >= st.count // 2:
        return True
    return st.kind == ACRONYM and lower > st.count


def _settle_person(key: str, a: _Agg, lowercase: dict[str, int]) -> None:
    maybe = a.votes.pop(MAYBE_PERSON, 0.0)
    if maybe:
        common = any(lowercase.get(w, 0) >= 2 for w in key.lower().split())
        a.votes["CONCEPT" if common else "PERSON"] += maybe
        if not common:
            a.guessed += maybe


def _settle_stated(a: _Agg) -> None:
    """A type the text states beside the name ("the schooner X": `extract_offline.STATED`) wins over the
    votes of the name's shape and other cues; the most stated type when several are."""
    stated = {t.removeprefix(STATED): w for t, w in a.votes.items() if t.startswith(STATED)}
    for t in list(a.votes):
        if t.startswith(STATED):
            del a.votes[t]
    if stated:
        kind = max(sorted(stated), key=lambda t: stated[t])
        a.votes[kind] = max(a.votes.values(), default=0.0) + stated[kind]


def _evidenced_person(a: _Agg) -> bool:
    """PERSON by its votes, with some of them from a cue in the text (a title, a verb of speech, a speaker
    turn), not only from the shape of a capitalised two- or three-word name."""
    return _best_type(a.votes) == "PERSON" and a.votes.get("PERSON", 0.0) > a.guessed


_OPENING_DROP = lx.STOPWORDS | lx.CONNECTORS | lx.FILLERS


def _opening_word_renames(stats: dict[str, _Stat], lowercase: dict[str, int]) -> dict[str, str]:
    """Multi-word names seen only at the start of a sentence whose first word the corpus also writes in lower
    case ("Poor Bob!", "Limited warranty" set as "Limited Warranty"): that capital is the sentence's, not the
    name's, so the name is the rest ("BOB"), with leading function words dropped ("Spirit of Tiny Tim" ->
    "TINY TIM"). A person title ("Captain Ahab") stays. Maps each such key to its rest, or to "" when
    nothing is left."""
    renames: dict[str, str] = {}
    for key, st in stats.items():
        if st.kind != NAME or st.words < 2:
            continue
        words = key.split(" ")
        first = re.sub(r"'S$", "", words[0]).lower()
        if first in lx.PERSON_TITLES or lowercase.get(first, 0) < 1:
            continue
        if st.non_initial and not first.endswith("ing"):
            continue  # (a verb form opening a stage direction or a heading, "Pulling Blore", counts anywhere)
        rest = words[1:]
        while rest and rest[0].lower() in _OPENING_DROP:
            rest.pop(0)
        renames[key] = " ".join(rest) if rest and not all(len(w) == 1 for w in rest) else ""
    return renames


def _apply_renames(stats: dict[str, _Stat], renames: dict[str, str]) -> None:
    """Fold the statistics of each renamed key into its target's (a new name, seen mid-span, when absent)."""
    for src, dst in renames.items():
        a = stats[src]
        if not dst:
            continue
        b = stats.get(dst)
        if b is None:
            b = stats[dst] = _Stat(kind=NAME, first_seen=a.first_seen, words=dst.count(" ") + 1)
        elif b.kind in FREQUENT_ONLY_KINDS:
            b.kind = NAME  # the rest of a capitalised span is capitalised
        b.count += a.count
        b.n_chunks += a.n_chunks  # an upper bound: only frequent-only kinds are filtered by it
        b.non_initial = True  # it followed the span's first word
        b.first_seen = min(a.first_seen, b.first_seen)


def _phrase_head(word: str, nouns: set[str]) -> bool:
    """A phrase must end in a noun: one the corpus uses as a noun, and not a past-tense verb WordNet does not
    know as a noun ("revenue declined", "words choked": subject and verb, not a thing)."""
    return word in nouns and not (word.endswith("ed") and lx.noun_class(word) is None)


def _best_type(votes: dict[str, float]) -> str:
    if not votes:
        return "CONCEPT"
    return max(_TYPE_ORDER, key=lambda t: (votes.get(t, 0.0), -_TYPE_ORDER.index(t)))


def merge_offline(
    chunk_ids: list[str],
    extractions: Mapping[str, ChunkExtraction] | ExtractionPasses,
    *,
    min_phrase_chunks: int = 3,
    max_phrase_entities: int = 2000,
    description_sentences: int = 3,
) -> tuple[list[EntityRow], list[RelationshipRow]]:
    """Aggregate mentions over chunks, filter, merge name variants, describe and link entities.

    Corpus-wide filters: phrases must occur in `min_phrase_chunks` chunks, lone nouns too unless repeated
    within one chunk or naming a person or place (see `noun_kept`), and a phrase
    must end in a word also used as a noun; a one-word name must be capitalised more often than the
    same word appears in lower case ("Scrooge" yes, "Come" no); a possible person name is a person only
    when none of its words is an ordinary lowercase word ("Bob Cratchit" yes, "Microsoft Cloud" no).

    `extractions` is a mapping by chunk id, or a function giving them in `chunk_ids` order afresh on
    each call: the merge reads them three times (which keys to keep; the kept entities' details; the
    relationships), so extractions streamed from disk are never all in memory at once.
    """
    # Each pass allocates millions of acyclic containers (decoded mentions, sentence lists) beside a growing
    # set of long-lived aggregates; the cyclic collector's full scans over those reclaim nothing and took a
    # third of a streamed merge (more the larger the build). Reference counting frees everything here.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _merge_offline(chunk_ids, extractions, min_phrase_chunks=min_phrase_chunks,
                              max_phrase_entities=max_phrase_entities, description_sentences=description_sentences)
    finally:
        if was_enabled:
            gc.enable()


def _merge_offline(
    chunk_ids: list[str],
    extractions: Mapping[str, ChunkExtraction] | ExtractionPasses,
    *,
    min_phrase_chunks: int,
    max_phrase_entities: int,
    description_sentences: int,
) -> tuple[list[EntityRow], list[RelationshipRow]]:
    if isinstance(extractions, Mapping):
        by_id = extractions

        def passes(keys: AbstractSet[str] | None = None) -> Iterable[ChunkExtraction]:
            return (by_id[cid] for cid in chunk_ids)
    else:
        passes = extractions

    # pass 1: light statistics of every key, and lowercase word counts
    stats: dict[str, _Stat] = {}
    lowercase: dict[str, int] = defaultdict(int)
    n_seen = 0
    for ci, ext in enumerate(passes()):
        n_seen += 1
        for word, n in ext.lowercase.items():
            lowercase[word] += n
        for pos, (key, m) in enumerate(ext.mentions.items()):
            st = stats.get(key)
            if st is None:
                st = stats[key] = _Stat(kind=m.kind, first_seen=(ci, pos), words=key.count(" ") + 1)
            elif m.kind not in FREQUENT_ONLY_KINDS and st.kind in FREQUENT_ONLY_KINDS:
                st.kind = m.kind
            st.count += m.count
            st.non_initial = st.non_initial or m.non_initial
            if m.kind == NOUN:
                st.peak = max(st.peak, ext.lowercase.get(key.lower(), 0))
            if st.last_chunk != ci:
                st.n_chunks += 1
                st.last_chunk = ci
    if n_seen != len(chunk_ids):
        raise ValueError(f"merge_offline: {n_seen} extractions for {len(chunk_ids)} chunks")

    nouns = {key.lower() for key, st in stats.items() if st.kind == NOUN}
    renames = _opening_word_renames(stats, lowercase)
    _apply_renames(stats, renames)
    keep: set[str] = set()
    phrases: list[str] = []
    for key, st in stats.items():
        if key in renames or _common_word(key, st, lowercase):
            continue
        if st.kind in FREQUENT_ONLY_KINDS:
            if st.kind == NOUN:
                if not noun_kept(key, st.n_chunks, st.peak, min_phrase_chunks):
                    continue
            elif st.n_chunks < min_phrase_chunks:
                continue
            if st.kind == PHRASE and not _phrase_head(key.rsplit(" ", 1)[-1].lower(), nouns):
                continue
            phrases.append(key)
        elif st.kind == ACRONYM or st.words > 1 or _capitalised_name(key, st, lowercase):
            keep.add(key)
    phrases.sort(key=lambda k: (-stats[k].count, stats[k].first_seen))
    keep.update(phrases[:max_phrase_entities])
    aggs = {
        key: _Agg(kind=stats[key].kind, first_seen=stats[key].first_seen, count=stats[key].count,
                  non_initial=stats[key].non_initial, words=stats[key].words)
        for key in keep
    }
    stats.clear()  # most keys were phrases seen once: free them before the next pass

    # pass 2: votes, chunks and candidate sentences of the kept entities. Passes 2 and 3 look only at these
    # keys (an alias found below maps one of them to another), so the reader may drop every other mention.
    renames = {src: dst for src, dst in renames.items() if dst in keep}
    kept_after_pass_1 = frozenset(keep | renames.keys())
    seq = 0
    for ci, ext in enumerate(passes(kept_after_pass_1)):
        for key, m in ext.mentions.items():
            a = aggs.get(renames.get(key, key))
            if a is None:
                continue
            for t, w in m.type_votes.items():
                a.votes[t] += w
            if not a.chunks or a.chunks[-1] != ci:
                a.chunks.append(ci)
            for s, text in m.sentences:
                a.add_sentence(s, ci, seq, text)
                seq += 1
    for key, a in aggs.items():
        _settle_person(key, a, lowercase)
        _settle_stated(a)

    alias = _person_aliases(keep, aggs, lowercase)
    for src, dst in sorted(alias.items(), key=lambda kv: aggs[kv[0]].first_seen):
        a, b = aggs[src], aggs[dst]
        b.count += a.count
        for t, w in a.votes.items():
            b.votes[t] += w
        b.chunks = array("I", sorted(set(b.chunks) | set(a.chunks)))
        for item in a.sentences:
            if len(b.sentences) < MAX_DESCRIPTION_CANDIDATES:
                heapq.heappush(b.sentences, item)
            elif item > b.sentences[0]:
                heapq.heapreplace(b.sentences, item)
        b.first_seen = min(a.first_seen, b.first_seen)
        keep.discard(src)
    _name_part_votes(keep, aggs, lowercase)

    def canon(k: str) -> str | None:
        k = renames.get(k, k)
        k = alias.get(k, k)
        return k if k in keep else None

    # pass 3 - relationships: sentence co-occurrence, plus a weak chunk anchor for otherwise unlinked entities
    pair_aggs: dict[tuple[str, str], tuple[float, float, int, str, array[int]]] = {}
    pair_first: dict[tuple[str, str], tuple[int, int]] = {}

    def add_pair(a: str, b: str, stat: PairStat, ci: int, pos: int) -> None:
        key = (a, b) if a < b else (b, a)
        cur = pair_aggs.get(key)
        if cur is None:
            pair_aggs[key] = (stat.weight, stat.score, ci, stat.sentence, array("I", [ci]))
            pair_first[key] = (ci, pos)
            return
        w, s, sci, sent, cis = cur
        if cis[-1] != ci:
            cis.append(ci)
        if stat.score > s:
            s, sci, sent = stat.score, ci, stat.sentence
        pair_aggs[key] = (w + stat.weight, s, sci, sent, cis)

    for ci, ext in enumerate(passes(kept_after_pass_1)):
        linked: set[str] = set()
        pos = 0
        for (a0, b0), stat in ext.pairs.items():
            ca, cb = canon(a0), canon(b0)
            if ca is None or cb is None or ca == cb:
                continue
            add_pair(ca, cb, stat, ci, pos)
            pos += 1
            linked.update((ca, cb))
        present: dict[str, int] = {}
        for k, m in ext.mentions.items():
            c = canon(k)
            if c is not None:
                present[c] = present.get(c, 0) + m.count
        if len(present) >= 2:
            hub = max(present, key=lambda k: present[k])
            for k in present:
                if k != hub and k not in linked:
                    sentence = max(ext.mentions[k].sentences)[1] if k in ext.mentions and ext.mentions[k].sentences else ""
                    text = f"{k} appears in the same passage as {hub}. {sentence}".strip()
                    add_pair(k, hub, PairStat(0.5, -1.0, text), ci, pos)
                    pos += 1

    entities: list[EntityRow] = []
    for key in sorted(keep, key=lambda k: aggs[k].first_seen):
        a = aggs[key]
        entities.append(
            EntityRow(
                title=key,
                type=_best_type(a.votes),
                description=_describe(a.ranked_sentences(), description_sentences),
                text_unit_ids=[chunk_ids[c] for c in a.chunks],
                frequency=len(a.chunks),
            )
        )
    relationships = [
        RelationshipRow(
            source=a,
            target=b,
            description=sent,
            weight=float(w),
            text_unit_ids=[chunk_ids[c] for c in cis],
        )
        for (a, b), (w, _s, _sci, sent, cis) in sorted(pair_aggs.items(), key=lambda kv: pair_first[kv[0]])
    ]
    return entities, relationships


_SHINGLE = 6  # words: two sentences sharing a run this long repeat each other's text
_WORD = re.compile(r"\w+")


@lru_cache(maxsize=65536)  # the same sentence is a candidate for every entity it mentions
def _shingles(text: str) -> frozenset[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    if len(words) < _SHINGLE:
        return frozenset({tuple(words)} if words else ())
    return frozenset(tuple(words[i : i + _SHINGLE]) for i in range(len(words) - _SHINGLE + 1))


def _describe(ranked: list[tuple[float, int, str]], n: int) -> str:
    """The `n` most informative of the `ranked` (score, chunk, sentence) candidates, best first, in text order.

    Overlapping chunks hold the same passage twice, often once whole and once cut at a chunk edge, so a
    sentence sharing a run of words with one already chosen is skipped: no text repeats in a description.
    """
    best: list[tuple[float, int, str]] = []
    taken: set[tuple[str, ...]] = set()
    chunks: set[int] = set()
    # first pass: one sentence per chunk, so the description spans documents; second pass fills up
    for one_per_chunk in (True, False):
        for s, ci, text in ranked:
            if len(best) == n:
                break
            if one_per_chunk and ci in chunks:
                continue
            shingles = _shingles(text)
            if not shingles or shingles & taken:
                continue
            taken |= shingles
            chunks.add(ci)
            best.append((s, ci, text))
    return " ".join(text for _s, _ci, text in sorted(best, key=lambda x: x[1]))


_TITLES = lx.PERSON_TITLES | lx.HONORIFICS
# a short name merges into the full name it co-occurs with most when the other full names it is part of
# co-occur with it in at most this share of that name's chunks ("KEVIN" beside "KEVIN SCOTT" in hundreds of
# passages and a guest "KEVIN ROOSE" in a few); otherwise it is ambiguous and stays as it is
ALIAS_DOMINANCE = 0.25


def _name_core(key: str) -> tuple[str, bool]:
    """A name without its leading person titles, and whether a connector followed them: "LORD OF SANDWICH"
    -> ("SANDWICH", True), "COUSIN CÆSAR" -> ("CÆSAR", False), "KEVIN SCOTT" -> itself."""
    words = key.split(" ")
    i = 0
    while i < len(words) - 1 and words[i].lower() in _TITLES:
        i += 1
    of_form = False
    while 0 < i < len(words) - 1 and words[i].lower() in lx.CONNECTORS:
        i += 1
        of_form = True
    return " ".join(words[i:]), of_form


def _co_chunks(a: _Agg, b: _Agg) -> int:
    """In how many chunks both occur."""
    return len(set(a.chunks) & set(b.chunks))


def _name_parts(core: str, lowercase: Mapping[str, int]) -> list[str]:
    """The first and last word of a name that may be a person's full name, each only when the name's other
    words are no ordinary words: two or three words, no connector ("TAKING THE DEAN"), and none of the other
    words written in lower case in the text ("PLAYFUL SALOME" gives no "SALOME"; "STEVE SHARP" gives
    "SHARP", though "sharp" is a common word, but no "STEVE")."""
    words = core.split(" ")
    if len(words) not in (2, 3) or any(w.lower() in lx.CONNECTORS for w in words):
        return []
    common = [lowercase.get(w.lower(), 0) > 0 for w in words]
    ends = {0, len(words) - 1}
    return [words[e] for e in sorted(ends) if not any(c for i, c in enumerate(common) if i != e)]


def _person_aliases(keep: set[str], aggs: dict[str, _Agg], lowercase: Mapping[str, int]) -> dict[str, str]:
    """Names of one person merged into one entity, when one name contains the other and they co-occur (share a
    chunk). Two steps:

    1. A title and the name it is given to: "MAJOR TARVER" and "TARVER", "COUSIN CÆSAR" and "CÆSAR", "LORD
       SANDWICH" and "LORD OF SANDWICH" (a title "of" a name groups only with other titled forms: "DUKE OF
       YORK" is not "YORK"). Each such form merges into the group's most frequent form when they co-occur.
    2. A one-word name (or its group) and the two- or three-word PERSON name it is the first or last word of:
       "AMY" into "AMY HOOD", "CÆSAR" into "CÆSAR SIMON". Only full names seen somewhere other than opening a
       sentence ("Whereat Scrooge" is none) and that the short one co-occurs with count;
       a full name that merely extends another ("AMY HOOD TUESDAY") is not a second owner; with several
       owners the short name merges only when one dominates (`ALIAS_DOMINANCE`), else it stays apart.

    Before both, a name run on into calendar words ("AMY HOOD TUESDAY") merges into the name.
    Returns key -> the entity it merges into (no chains)."""
    names = [k for k in keep if aggs[k].kind in (NAME, SPEAKER, ACRONYM)]
    alias: dict[str, str] = {}
    # step 0: a name run on into calendar words or adjectives ("AMY HOOD TUESDAY", a transcript's dateline)
    for key in names:
        words = key.split(" ")
        while len(words) > 2 and words[-1].lower() in lx.SOFT_EDGE_WORDS:
            words.pop()
        base = " ".join(words)
        if base != key and base in keep and aggs[base].kind in (NAME, SPEAKER):
            alias[key] = base
    # step 1: titled forms grouped with their core
    groups: dict[str, list[tuple[str, bool]]] = defaultdict(list)
    for key in names:
        core, of_form = _name_core(key)
        if core != key and key not in alias:
            groups[core].append((key, of_form))
    for core, titled in groups.items():
        rank = {k: 0 if of else 1 for k, of in titled}  # ties: "LORD SANDWICH" before "LORD OF SANDWICH"
        if core in keep and aggs[core].kind in (NAME, SPEAKER, ACRONYM) and not all(of for _k, of in titled):
            rank[core] = -1
        if len(rank) < 2:
            continue
        members = list(rank)
        head = max(members, key=lambda k: (aggs[k].count, rank[k], -aggs[k].first_seen[0], -aggs[k].first_seen[1]))
        for k in members:
            if k != head and _co_chunks(aggs[k], aggs[head]) > 0:
                alias[k] = head
    # step 2: one-word cores into full person names
    owners: dict[str, list[str]] = defaultdict(list)
    for key in names:
        # a full name is seen somewhere other than opening a sentence ("Whereat Scrooge" is no name)
        if key in alias or _best_type(aggs[key].votes) != "PERSON" or not aggs[key].non_initial:
            continue
        for part in _name_parts(_name_core(key)[0], lowercase):
            owners[part].append(key)
    for key in names:
        if key in alias:
            continue
        core, _of = _name_core(key)
        if " " in core or not owners.get(core):
            continue
        # the short name with the titled forms step 1 merged into it ("TARVER" with "MAJOR TARVER")
        group = _Agg(kind=NAME, first_seen=aggs[key].first_seen)
        for member in (key, *(k for k, v in alias.items() if v == key)):
            for t, w in aggs[member].votes.items():
                group.votes[t] += w
            group.chunks.extend(aggs[member].chunks)
        if _best_type(group.votes) not in ("PERSON", "CONCEPT"):
            continue
        # a person by its cues: the short name ("Amy said" typed it PERSON) or the full name ("Major Tarver",
        # a speaker); "CHRISTMAS" and a "CHRISTMAS EVE" typed PERSON by its shape alone stay apart
        short_cue = _best_type(group.votes) == "PERSON"
        shared = {o: _co_chunks(group, aggs[o]) for o in owners[core]
                  if o != key and (short_cue or _evidenced_person(aggs[o]))}
        shared = {o: n for o, n in shared.items() if n > 0}
        # a full name extending another owner ("AMY HOOD TUESDAY" of "AMY HOOD") is the same person
        shared = {o: n for o, n in shared.items() if not any(p != o and o.startswith(p + " ") for p in shared)}
        if not shared:
            continue
        best = max(shared, key=lambda o: (shared[o], aggs[o].count))
        if sum(n for o, n in shared.items() if o != best) <= ALIAS_DOMINANCE * shared[best]:
            alias[key] = best
    # no chains: "MAJOR TARVER" -> "TARVER" -> "GERALD TARVER"
    for key in list(alias):
        seen = {key}
        dst = alias[key]
        while dst in alias and dst not in seen:
            seen.add(dst)
            dst = alias[dst]
        alias[key] = dst
    return {k: v for k, v in alias.items() if k != v}


def _name_part_votes(keep: set[str], aggs: dict[str, _Agg], lowercase: Mapping[str, int]) -> None:
    """A one-word name that is the first or last word of full names that are mostly persons by a cue is most
    likely a person too (a surname or first name used alone, "TARVER" of "MAJOR TARVER"; not "AZURE" of many
    "AZURE ..." products): a PERSON vote beside its own cues."""
    people: dict[str, int] = defaultdict(int)
    others: dict[str, int] = defaultdict(int)
    for key in keep:
        a = aggs[key]
        if a.kind in (NAME, SPEAKER) and a.non_initial:
            for w in _name_parts(_name_core(key)[0], lowercase):
                if _evidenced_person(a):
                    people[w] += 1
                else:
                    others[w] += 1
    for key in keep:
        a = aggs[key]
        if a.kind not in (NAME, ACRONYM) or " " in key:
            continue
        if people.get(key, 0) > others.get(key, 0):
            a.votes["PERSON"] += 0.3 * a.count


def finalise_graph(
    entities: list[EntityRow],
    relationships: list[RelationshipRow],
    *,
    previous_entity_titles: Sequence[str] | Mapping[str, int] | None = None,
    previous_relationship_pairs: Sequence[tuple[str, str]] | Mapping[tuple[str, str], int] | None = None,
) -> Graph:
    """Order rows (previous build's order first), assign ids, degrees and combined degrees.

    The previous build's rows are given as title -> human_readable_id (or a list, where the position is
    the id). Rows that survive keep their `human_readable_id`, so saved citations keep their meaning;
    new rows get numbers after the largest one ever used, never a number a removed row had.
    """
    prev_e = _previous_ids(previous_entity_titles)
    ents = sorted(
        enumerate(entities), key=lambda ie: (0, prev_e[ie[1].title]) if ie[1].title in prev_e else (1, ie[0])
    )
    ordered: list[EntityRow] = []
    fresh = iter(range(max(prev_e.values(), default=-1) + 1, 1 << 62))
    for _i, e in ents:
        e.id = entity_uuid(e.title)
        e.human_readable_id = prev_e[e.title] if e.title in prev_e else next(fresh)
        ordered.append(e)
    position = {e.title: i for i, e in enumerate(ordered)}
    rels = [r for r in relationships if r.source in position and r.target in position and r.source != r.target]
    for r in rels:  # orient each edge from the older (earlier) entity, so the orientation is stable
        if position[r.source] > position[r.target]:
            r.source, r.target = r.target, r.source
    prev_r = _previous_ids(previous_relationship_pairs)
    rels_sorted = sorted(
        enumerate(rels),
        key=lambda ir: (0, prev_r[(ir[1].source, ir[1].target)]) if (ir[1].source, ir[1].target) in prev_r else (1, ir[0]),
    )
    fresh = iter(range(max(prev_r.values(), default=-1) + 1, 1 << 62))
    for _i, r in rels_sorted:
        pair = (r.source, r.target)
        r.human_readable_id = prev_r[pair] if pair in prev_r else next(fresh)
    neighbours: dict[str, set[str]] = defaultdict(set)
    out_rels: list[RelationshipRow] = []
    for _i, r in rels_sorted:
        r.id = relationship_uuid(r.source, r.target)
        neighbours[r.source].add(r.target)
        neighbours[r.target].add(r.source)
        out_rels.append(r)
    for e in ordered:
        e.degree = len(neighbours.get(e.title, ()))
    degree = {e.title: e.degree for e in ordered}
    for r in out_rels:
        r.combined_degree = degree[r.source] + degree[r.target]
    return Graph(ordered, out_rels)


def _previous_ids(previous: Sequence[Any] | Mapping[Any, int] | None) -> dict[Any, int]:
    if previous is None:
        return {}
    if isinstance(previous, Mapping):
        return dict(previous)
    return {key: i for i, key in enumerate(previous)}
