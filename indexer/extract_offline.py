"""Offline entity and relationship extraction from one chunk: no model, English and Chinese.

English: capitalised multi-word spans (leading stop words, fillers and honorifics stripped, name
connectors such as "of" kept, contractions such as "I'll" never names), acronyms, "<year> <event noun>"
events, lowercase noun-phrase bigrams and lone nouns seen after a determiner ("the door"); phrases and
nouns are kept later only when frequent across chunks. Transcript speaker turns ("NAME: ...") make the
speaker a PERSON linked to what the turn mentions. Chinese: `jieba.posseg` proper nouns (nr/ns/nt/nz)
and noun bigrams. Types are voted from cues (honorifics, organisation/place/event words, "said X",
"in X"); a bare two- or three-word capitalised name is only a possible person (`MAYBE_PERSON`), settled in
`graph.py` by whether its words are also ordinary lowercase words in the corpus. A common noun beside the name
that says what it is ("the schooner X", "X, a lens maker": `type_cues.txt`) is a `STATED` type, which wins
over the other cues when the mentions are merged.

Each chunk is processed on its own, so results can be stored per chunk and reused by incremental runs;
everything that needs the whole corpus (frequency filters, descriptions, degrees) happens in `graph.py`.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from indexer import lexicon as lx
from shared_context.text import split_sentences

# Kinds of mention: proper names and acronyms are entities at once; phrases only when frequent.
NAME, ACRONYM, EVENT, PHRASE, NOUN = "name", "acronym", "event", "phrase", "noun"
ZH_NAME, ZH_PHRASE, SPEAKER = "zh_name", "zh_phrase", "speaker"
FREQUENT_ONLY_KINDS = frozenset({PHRASE, ZH_PHRASE, NOUN})
_NAMED_KINDS = frozenset({NAME, ACRONYM, EVENT, ZH_NAME, SPEAKER})
MAYBE_PERSON = "PERSON?"  # type vote settled at merge time (see module doc)
STATED = "stated:"  # + a type: the text says what the name is ("the schooner X"); it wins at merge time

_TOKEN = re.compile(r"[A-Za-z\u00C0-\u024F][A-Za-z\u00C0-\u024F0-9'’]*(?:-[A-Za-z\u00C0-\u024F0-9'’]+)*|\d+|[^\w\s]")
_CJK = re.compile(r"[\u4e00-\u9fff]")
_ROMAN = re.compile(lx.ROMAN_NUMERAL)
_YEAR = re.compile(r"^(1[5-9]|20)\d\d$")
_PERIOD = re.compile(r"^(?:Q[1-4]|H[12]|[FC]Y\d{2}(?:\d{2})?|[FC]Y)$")  # a quarter, half or fiscal year: a time
_WS = re.compile(r"\s+")
_ZH_NAME_FLAGS = frozenset({"nr", "nrfg", "nrt", "ns"})
_ZH_RUN_FLAGS = frozenset({"n", "nz", "ns", "nt", "nr", "l", "j", "vn", "nrt", "nrfg", "eng"})
_POSSESSIVE_HEADS = lx.ORG_WORDS | lx.GEO_WORDS | lx.EVENT_WORDS
_NAME_ABBREVIATIONS = frozenset({"st", "mt", "ft", "jr", "sr"})
_DEMONYM_ENDINGS = ("ish", "ese", "ian", "ean", "can", "man", "ch", "ic", "ian")
_CONTRACTION = re.compile(r"(?:['’](?:ll|m|d|re|ve)|n['’]t)$", re.IGNORECASE)  # I'll, I'm, we're, don't
_SPEAKER = re.compile(r"^[ \t]*([A-Z][A-Za-z.'’\-]*(?: [A-Z][A-Za-z.'’\-]*){0,3})[ \t]*:[ \t]+(?=\S)", re.MULTILINE)
_COMPOUND_NOUN = re.compile(r"[a-z]{3,}|[a-z]{2,}(?:-[a-z]{2,})+")  # "door", "counting-house"
_LOWER_WORD = re.compile(r"\b[a-z][a-z\-]{2,}\b")
_EDGE_DROP = lx.STOPWORDS | lx.CONNECTORS | lx.FILLERS
_MD_PREFIX = re.compile(r"^\s*(#+|[*\-]|\d+\.)\s+")
MAX_SENTENCE_CHARS = 500
LIST_NAMES = 6  # a sentence with more names than this is a list: names link to their LIST_WINDOW neighbours
LIST_WINDOW = 2


@dataclass(slots=True)
class Mention:
    """What one chunk says about one entity."""

    kind: str
    count: int = 0
    non_initial: bool = False  # seen somewhere other than as a sentence's first word
    type_votes: dict[str, float] = field(default_factory=dict)
    sentences: list[tuple[float, str]] = field(default_factory=list)  # best (score, sentence), at most 3
    speaker: bool = False  # named as the speaker of a transcript turn


@dataclass(slots=True)
class PairStat:
    weight: float = 0.0
    score: float = -1.0
    sentence: str = ""


@dataclass(slots=True)
class ChunkExtraction:
    mentions: dict[str, Mention] = field(default_factory=dict)
    pairs: dict[tuple[str, str], PairStat] = field(default_factory=dict)
    # lowercase word -> count in this chunk: corpus-wide, tells a name ("Scrooge") from a sentence-initial
    # or title-cased common word ("Come", "Cloud")
    lowercase: dict[str, int] = field(default_factory=dict)


def normalise_title(name: str) -> str:
    """GraphRAG upper-cases titles; we also collapse spaces and strip quotes/possessives so variants merge."""
    t = _WS.sub(" ", name.replace("’", "'")).strip(" \t\"'“”‘’.,;:()[]{}")
    t = re.sub(r"['’][sS]$", "", t)
    t = t.upper()
    if t.startswith("THE "):
        t = t[4:]
    return t


def _edge_word(word: str, soft: bool) -> bool:
    """A word trimmed from a capitalised span's edge; `soft` spans keep calendar words and adjectives."""
    w = word.lower()
    return w in _EDGE_DROP and not (soft and w in lx.SOFT_EDGE_WORDS)


def _concrete_noun(t: str) -> bool:
    """A lowercase common noun WordNet classes as a person, place or thing (not "face", "hour", "doubt")."""
    cls = lx.noun_class(t) if t.isalpha() and t.islower() else None
    return cls is not None and cls not in lx.ABSTRACT_NOUN_CLASSES


def _possessive_head(word: str) -> bool:
    """A capitalised word after a possessive that continues the name: a place, building or body named after
    its owner ("St Paul's Churchyard", "St Brigid's School", "Guy's Hospital")."""
    return word in _POSSESSIVE_HEADS or lx.noun_class(word) in lx.PLACE_NOUN_CLASSES


def _head_class(word: str) -> str | None:
    """WordNet class of a noun, or of a hyphenated compound's last part ("counting-house" -> artifact)."""
    cls = lx.noun_class(word)
    if cls is None and "-" in word:
        cls = lx.noun_class(word.rsplit("-", 1)[1])
    return cls


def entity_noun(key: str) -> bool:
    """A lone noun may stand as an entity: a WordNet noun ("held" is none) of no abstract class ("HEAD",
    "MOMENT", "DOUBT") and of no class a passage names in passing ("DOG", "WATER", "FUNERAL"). Other nouns
    are still extracted, since they head noun phrases ("gross margin")."""
    cls = _head_class(key)
    return cls is not None and cls not in lx.ABSTRACT_NOUN_CLASSES and cls not in lx.PASSING_NOUN_CLASSES


# A lone noun written this many times in one chunk is what that passage is about ("the bell" rung four
# times in a scene), however rare elsewhere; a noun named once per chunk must recur across chunks instead.
NOUN_REPEATS_IN_CHUNK = 2


def noun_min_chunks(key: str, default: int) -> int:
    """In how many chunks a lone noun must occur to be an entity, without being repeated in one of them: a
    hyphenated compound naming a person or thing ("the counting-house") at once; a noun of a class listed in
    `lexicon_en.txt` [NOUN_MIN_CHUNKS] ("the baker": a person by role) in that many; other nouns, and
    plurals ("the guests"), in `default`."""
    cls = _head_class(key)
    if "-" in key and cls is not None and cls not in lx.ABSTRACT_NOUN_CLASSES:
        return 1
    if cls in lx.NOUN_MIN_CHUNKS and lx.listed_noun(key):
        return min(lx.NOUN_MIN_CHUNKS[cls], default)
    return default


def noun_kept(key: str, n_chunks: int, peak: int, default: int) -> bool:
    """A lone noun is an entity when it names a person, place or thing (`entity_noun`) and is either
    repeated within one chunk (`peak`: its most lowercase occurrences in a chunk) or found in
    `noun_min_chunks` chunks."""
    return entity_noun(key) and (peak >= NOUN_REPEATS_IN_CHUNK or n_chunks >= noun_min_chunks(key, default))


def _shouting(toks: list[str]) -> bool:
    """A sentence set in capitals (licence terms, banners): capitals then mark no names."""
    words = [t for t in toks if t[0].isalpha() and len(t) >= 2]
    return len(words) >= 4 and sum(t.isupper() for t in words) >= 0.7 * len(words)


def _noun_type(noun: str) -> str:
    return lx.NOUN_CLASS_TYPES.get(_head_class(noun) or "", "CONCEPT")


def _noun_word(t: str) -> bool:
    return _COMPOUND_NOUN.fullmatch(t) is not None and t not in lx.NOUN_STOP and not t.endswith("ly")


def _noun_heads(toks: list[str]) -> list[str]:
    """Lowercase words that end a determiner phrase: "the door.", "his old hat and", "a boy who"."""
    heads: list[str] = []
    n = len(toks)
    for i, t in enumerate(toks):
        if not _noun_word(t):
            continue
        det = i >= 1 and toks[i - 1].lower() in lx.DETERMINERS
        det_adj = i >= 2 and toks[i - 2].lower() in lx.DETERMINERS and toks[i - 1].isalpha() and toks[i - 1].islower()
        if not (det or det_adj):
            continue
        nxt = toks[i + 1] if i + 1 < n else "."
        if not nxt[0].isalnum() or nxt.lower() in lx.STOPWORDS:
            heads.append(t)
    return heads


def _play_speaker(toks: list[str]) -> str:
    """The speaker of a line of a play, set in capitals before a full stop ("SALOME. [To herself.] Lost!",
    "THE DEAN. Ha!"): the name without "THE", or ""."""
    k = 0
    while k < min(len(toks), 4) and toks[k].isupper() and toks[k][0].isalpha() and len(toks[k]) >= 2:
        k += 1
    if k == 0 or k > 3 or k >= len(toks) or toks[k] != ".":
        return ""
    words = toks[1:k] if toks[0] == "THE" else toks[:k]
    return " ".join(words) if words and not _ROMAN.match(words[-1]) else ""


def speaker_turns(text: str) -> list[tuple[str, str]]:
    """Split a transcript into (speaker title, turn text); text before the first label has speaker "".

    A label is "Name:" at a line start followed by speech. It names a person when it is not a role
    ("Operator") or a field ("Title"), and is upper case, two or more words, or used twice in the text.
    """
    labels = [m for m in _SPEAKER.finditer(text)]
    if not labels:
        return [("", text)]
    uses = Counter(m.group(1).strip() for m in labels)
    turns: list[tuple[str, str]] = []
    start, speaker = 0, ""
    for m in labels:
        if m.start() > start:
            turns.append((speaker, text[start : m.start()]))
        label = m.group(1).strip()
        words = [w.lower().strip(".") for w in label.split()]
        person = not any(w in lx.SPEAKER_ROLES or w in lx.FIELD_LABELS or w in lx.STOPWORDS for w in words) and (
            label.isupper() or len(words) >= 2 or uses[label] >= 2
        )
        speaker = normalise_title(label) if person else ""
        start = m.end()
    turns.append((speaker, text[start:]))
    return turns


def _vote(m: Mention, type_: str, w: float) -> None:
    m.type_votes[type_] = m.type_votes.get(type_, 0.0) + w


def _span_type_cues(words: list[str]) -> dict[str, float]:
    lower = [w.lower() for w in words]
    votes: dict[str, float] = {}
    if any(w in lx.ORG_WORDS for w in lower):
        votes["ORGANIZATION"] = 3.0
    if lower[-1] in lx.GEO_WORDS or lower[0] in lx.GEO_HEADS:
        votes["GEO"] = votes.get("GEO", 0.0) + 3.0
    if lower[-1] in lx.EVENT_WORDS:
        votes["EVENT"] = votes.get("EVENT", 0.0) + 3.5
    if lower[0] in lx.PERSON_TITLES:
        votes["PERSON"] = votes.get("PERSON", 0.0) + 3.0
    if lower[0] in lx.VESSEL_PREFIXES and len(words) > 1:
        votes["VESSEL"] = votes.get("VESSEL", 0.0) + 3.5  # "HMS Beagle"
    named_kind = lx.TYPE_NOUNS.get(lower[-1]) if len(words) > 1 else None
    if named_kind is not None:
        votes[named_kind] = votes.get(named_kind, 0.0) + 3.0  # "Skerry Lighthouse", "Barlow Foundry"
    if not votes:
        if (
            2 <= len(words) <= 3
            and all(w[:1].isupper() and not w.isupper() for w in words)
            and not any(w in lx.NON_PERSON_WORDS for w in lower)
        ):
            votes[MAYBE_PERSON] = 0.6
        else:
            votes["CONCEPT"] = 0.2
    return votes


_COPULAS = frozenset({"is", "was", "are", "were", "be", "became", "remains", "remained"})
_ARTICLES = frozenset({"a", "an", "the"})


def _beside_type(toks: list[str], i: int, j: int) -> str | None:
    """The type a common noun beside the name `toks[i:j]` says it has (`type_cues.txt`): before it after a
    determiner ("the schooner Alma", "the old lighthouse Skerry"), or heading an apposition or a copula's
    phrase ("Alma, a two-masted schooner,", "Alma was a schooner")."""
    for back in (i - 1, i - 2):
        if back >= 1 and toks[i - 1].islower() and toks[back - 1].lower() in lx.DETERMINERS:
            kind = lx.type_noun(toks[i - 1])
            if kind is not None:
                return kind
    k = j + 1 if j < len(toks) and (toks[j] == "," or toks[j] in _COPULAS) else -1
    if k < 0 or k >= len(toks) or toks[k].lower() not in _ARTICLES:
        return None
    head = ""
    for t in toks[k + 1 : k + 5]:  # the phrase's head: its last lowercase word before a function word
        if not (t.isalpha() or "-" in t) or not t.islower() or t in lx.STOPWORDS:
            break
        head = t
    return lx.type_noun(head) if head else None


class OfflineExtractor:
    """Extract mentions and co-occurrence pairs from chunks; regexes compiled once, jieba loaded lazily."""

    def __init__(self, *, max_entities_per_sentence: int = 12) -> None:
        self.max_entities_per_sentence = max_entities_per_sentence
        self._pseg = None

    # ---- English -----------------------------------------------------------------------------------
    def _english(self, sentence: str) -> list[tuple[str, str, dict[str, float], bool]]:
        """(title, kind, type votes, sentence_initial) for each mention in one sentence."""
        toks = _TOKEN.findall(_MD_PREFIX.sub("", sentence))
        found: list[tuple[str, str, dict[str, float], bool]] = []
        n = len(toks)
        first_word = next((i for i, t in enumerate(toks) if t[0].isalpha()), -1)
        i = n if _shouting(toks) else 0
        while i < n:
            tok = toks[i]
            if not tok[0].isalpha():
                if _YEAR.match(tok) and i + 1 < n and toks[i + 1].lower() in lx.EVENT_WORDS:
                    found.append((f"{tok} {toks[i + 1]}", EVENT, {"EVENT": 4.0}, False))
                    i += 2
                    continue
                i += 1
                continue
            if not tok[0].isupper():
                i += 1
                continue
            # collect a capitalised span with connectors
            j = i
            words: list[str] = []
            owned = ""
            person_cue = 0.0
            while j < n:
                t = toks[j]
                if _CONTRACTION.search(t):
                    break
                if words and t.lower() in lx.SPAN_BREAKERS:
                    break  # "EXPRESS OR IMPLIED", "Contact the Foundation": capitals, but no name runs on here
                if t[0].isalpha() and t[0].isupper():
                    core = re.sub(r"['’][sS]$", "", t)
                    if core.lower() in lx.HONORIFICS and not words:
                        person_cue += 3.0
                        j += 1
                        if j < n and toks[j] == ".":
                            j += 1
                        continue
                    j += 1
                    if core != t:
                        # a possessive ends the name unless it names a place or body: "St Brigid's School"
                        if j < n and toks[j][:1].isupper() and _possessive_head(toks[j].lower()):
                            words.append(t)
                            continue
                        words.append(core)
                        if j < n and _concrete_noun(toks[j]):
                            owned = toks[j]  # "Scrooge's nephew", "Bob Cratchit's house"
                        break
                    words.append(core)
                    if j < n and toks[j] == "." and (len(core) == 1 or core.lower() in _NAME_ABBREVIATIONS):
                        j += 1  # initials "J. R." and "St. Michael's Mount"
                    continue
                if t.lower() in lx.CONNECTORS and words and j + 1 < n and toks[j + 1][:1].isupper():
                    words.append(t.lower())
                    j += 1
                    continue
                break
            if len(words) >= 2 and words[-1].lower() in lx.NUMBER_WORDS:
                i = max(j, i + 1)  # a heading or label, not a name: "Chapter Two", "Part Three"
                continue
            initial = i == first_word or (i == first_word + 1 and toks[first_word].lower() in lx.HONORIFICS)
            # trim stop words and fillers at both ends; calendar words and adjectives stay inside a name
            # that does not open the sentence ("in Great Britain", "on Christmas Day")
            soft = not initial and any(w.lower() not in _EDGE_DROP for w in words)
            while words and _edge_word(words[0], soft):
                words.pop(0)
                initial = False if words else initial
            while words and _edge_word(words[-1], soft):
                words.pop()
            caps_after = len(words) > 1 and len(words[1]) > 2 and words[1].isupper() and not words[0].isupper()
            if (initial or caps_after) and len(words) > 1 and words[0].lower().endswith("ing"):
                # heading verbs ("Building the Kestrel Point Wind Farm") and a verb before a name set in
                # capitals, as stage directions write it ("Pulling TARVER after her")
                words.pop(0)
                while words and words[0].lower() in _EDGE_DROP:
                    words.pop(0)
            if "of" in words and words.index("of") >= 2:
                # "Li Wen of Haixing Marine Engineering": a name, then an organisation or place
                k = words.index("of")
                self._emit_span(words[:k], toks, i, i + k, person_cue, initial, found)
                self._emit_span(words[k + 1 :], toks, i + k + 1, j, 0.0, False, found)
            elif words:
                self._emit_span(words, toks, i, j, person_cue, initial, found)
                if owned and not all(len(w) == 1 for w in words):
                    title = f"{' '.join(words)}'s {owned}"
                    found.append((title, NAME, {_noun_type(owned): 2.0}, False))
            i = max(j, i + 1)
        # lowercase noun-phrase bigrams
        run: list[str] = []
        for t in [*toks, "."]:
            lw = t.lower()
            if t[0].isalpha() and t.islower() and len(t) >= 3 and lw not in lx.PHRASE_STOP and not lw.endswith("ly") and "'" not in t and "’" not in t:
                run.append(t)
                continue
            for a, b in itertools.pairwise(run):
                if a not in lx.FILLERS and b not in lx.NON_HEADS:
                    found.append((f"{a} {b}", PHRASE, {"EVENT": 2.0} if b in lx.EVENT_WORDS else {"CONCEPT": 1.0}, False))
            run = []
        found.extend((noun, NOUN, {"EVENT" if noun in lx.EVENT_WORDS else _noun_type(noun): 1.0}, False) for noun in _noun_heads(toks))
        label = _play_speaker(toks)
        if label:
            for title, _kind, votes, _initial in found:
                if title.upper() == label:
                    votes["PERSON"] = votes.get("PERSON", 0.0) + 1.5
                    break
        return found

    def _emit_span(
        self,
        words: list[str],
        toks: list[str],
        i: int,
        j: int,
        person_cue: float,
        initial: bool,
        found: list[tuple[str, str, dict[str, float], bool]],
    ) -> None:
        if not words:
            return
        if all(len(w) == 1 for w in words):
            return  # bare initials
        if all(w.lower() in lx.BOILERPLATE or w.lower() in lx.STOPWORDS for w in words):
            return  # "Table of Contents", "Copyright"
        if len(words) == 1:
            w = words[0]
            nxt_word = toks[j] if j < len(toks) else ""
            if (w.lower().endswith(_DEMONYM_ENDINGS) and nxt_word[:1].islower() and nxt_word.isalpha()
                    and lx.noun_class(nxt_word) is not None and nxt_word.lower() not in lx.PERSON_VERBS):
                return  # an adjective ("English literature", "German scholars"), not a named thing ("Dean laughed")
            if w.lower().endswith("ly"):
                return
            lw = w.lower()
            if lw in lx.STOPWORDS or lw in lx.NUMBER_WORDS or lw in lx.PERSON_TITLES or lw in lx.SPEAKER_ROLES or lw in lx.FILLERS or len(w) < 2:
                return
            if (_ROMAN.match(w.upper()) or _PERIOD.match(w)) and w.isupper():
                return
            if w.isupper() and len(w) >= 2 and not w.isdigit():
                if len(w) <= 6:
                    # an acronym may name anything ("AI", "Q4", "IBM", a name set in capitals): a weak
                    # default, and the context cues decide
                    found.append((w, ACRONYM, self._context_votes(toks, i, j, {"CONCEPT": 0.2}), initial))
                return
            if initial and (w.lower().endswith("ly") or w.lower().endswith("ing")):
                return
        votes = _span_type_cues(words)
        if person_cue:
            votes["PERSON"] = votes.get("PERSON", 0.0) + person_cue
        votes = self._context_votes(toks, i, j, votes)
        title = " ".join(words)
        if i > 0 and _YEAR.match(toks[i - 1]) and words[-1].lower() in lx.EVENT_WORDS:
            title = f"{toks[i - 1]} {title}"
            votes["EVENT"] = votes.get("EVENT", 0.0) + 2.0
        found.append((title, NAME, votes, initial))

    @staticmethod
    def _context_votes(toks: list[str], i: int, j: int, votes: dict[str, float]) -> dict[str, float]:
        """Type cues around the name `toks[i:j]`, added to `votes`: a verb of speech or thought ("said
        Scrooge", "Amy said"), a personal pronoun soon after ("SALOME. [To herself.]") or a person noun it
        owns ("the Dean's daughters") for a person; a
        place preposition before ("in Kentucky", "down to the Mississippi": a determiner may come between)
        or a place noun after ("the Mississippi river") for a place, unless the name holds a digit ("in Q4");
        an organisation's verb or role ("Acme announced", "joined Acme", "worked at Acme", "CEO of Acme"), an
        officer after it ("Acme CEO") or
        what it owns ("Acme's customers") for an organisation; a person noun used as a name ("the Dean"); a
        name WordNet lists as a place (`noun_classes.txt`: "london" is a location)."""
        prev = toks[i - 1].lower() if i > 0 else ""
        before_det = toks[i - 2].lower() if prev in lx.DETERMINERS and i > 1 else prev
        nxt = toks[j].lower() if j < len(toks) else ""  # after a possessive too: "Acme's customers"
        possessive = j > i and toks[j - 1][-2:].lower() in ("'s", "’s")

        def add(type_: str, w: float) -> None:
            votes[type_] = votes.get(type_, 0.0) + w

        if (prev in lx.PERSON_VERBS and prev not in lx.ORG_OBJECT_VERBS) or nxt in lx.PERSON_VERBS:
            add("PERSON", 1.5)
        if any(t.lower() in lx.PERSON_PRONOUNS for t in toks[j : j + 4]):
            add("PERSON", 0.5)
        name = toks[i + 1 : j] if toks[i].lower() == "the" else toks[i:j]  # "THE DEAN." set in capitals
        if len(name) == 1 and (prev == "the" or len(name) < j - i) and lx.noun_class(name[0]) == "person":
            add("PERSON", 1.0)  # a person noun used as a name: "the Dean", "the Colonel"
        if len(name) == 1 and lx.noun_class(name[0]) == "location":
            add("GEO", 0.3)  # WordNet knows the name as a place ("London", "Kentucky"): any person cue outweighs it
        placeable = not any(ch.isdigit() for t in toks[i:j] for ch in t)  # "in Q4" is a time
        if placeable and before_det in lx.GEO_PREPOSITIONS:
            add("GEO", 0.5)
        elif placeable and before_det in lx.WEAK_GEO_PREPOSITIONS:
            add("GEO", 0.15)
        if nxt in lx.GEO_FOLLOWERS:
            add("GEO", 1.0)
        worked_at = prev in ("at", "for", "of") and i > 1 and toks[i - 2].lower() in lx.ORG_WORK_WORDS
        if nxt in lx.ORG_FOLLOWERS or nxt in lx.ORG_VERBS or prev in lx.ORG_OBJECT_VERBS or worked_at:
            add("ORGANIZATION", 1.0)
        elif possessive and nxt in lx.ORG_POSSESSIONS:
            add("ORGANIZATION", 1.0)  # "Acme's customers"
        elif possessive and lx.noun_class(nxt) == "person":
            add("PERSON", 1.0)  # "the Dean's daughters", "Scrooge's nephew"
        kind = _beside_type(toks, i, j)
        if kind is not None:
            add(STATED + kind, 1.0)  # said in so many words: it outweighs a title in the name ("the steamer Lady X")
        follower = lx.type_noun(nxt) if nxt.islower() else None
        if follower is not None and follower != "OBJECT":
            add(follower, 1.0)  # "the Skerry lighthouse"; but "the Simon estate" is the Simons' estate: a weak cue
        return votes

    # ---- Chinese -----------------------------------------------------------------------------------
    def _chinese(self, sentence: str) -> list[tuple[str, str, dict[str, float], bool]]:
        if self._pseg is None:
            import jieba
            import jieba.posseg

            jieba.setLogLevel(logging.WARNING)
            self._pseg = jieba.posseg
        found: list[tuple[str, str, dict[str, float], bool]] = []
        prev_noun: str | None = None
        run: list[str] = []  # consecutive noun-like words, joined into an organisation name by a suffix
        name_run: list[tuple[str, str]] = []  # consecutive person/place parts of one transliterated name
        for pair in self._pseg.cut(sentence):  # type: ignore[attr-defined]
            word, flag = pair.word.strip(), pair.flag
            if not word or not _CJK.search(word):
                prev_noun, run = None, []
                self._flush_names(name_run, found)
                continue
            if word in lx.ZH_ORG_SUFFIXES and run:
                name_run.clear()  # the parts belong to the organisation name
                name = "".join(run[-3:]) + word
                found.append((name, ZH_NAME, {"ORGANIZATION": 3.0}, False))
                prev_noun, run = None, []
                continue
            if flag in _ZH_NAME_FLAGS:
                name_run.append((word, flag))
            else:
                self._flush_names(name_run, found)
            if flag in lx.ZH_FLAG_TYPES and flag not in _ZH_NAME_FLAGS and len(word) >= 2 and word not in lx.ZH_STOP:
                found.append((word, ZH_NAME, {self._zh_type(word, lx.ZH_FLAG_TYPES[flag]): 2.0}, False))
            run = [*run, word] if flag in _ZH_RUN_FLAGS else []
            if flag in ("n", "nz") and prev_noun is not None and word not in lx.ZH_STOP:
                phrase = prev_noun + word
                if len(phrase) >= 3:
                    found.append((phrase, ZH_PHRASE, {self._zh_type(phrase, "CONCEPT"): 1.0}, False))
            prev_noun = word if flag in ("n", "nz", "vn") and word not in lx.ZH_STOP else None
        self._flush_names(name_run, found)
        return found

    def _flush_names(self, name_run: list[tuple[str, str]], found: list[tuple[str, str, dict[str, float], bool]]) -> None:
        """jieba splits unknown transliterations ("索尔特" + "布里奇"): join consecutive name parts."""
        if not name_run:
            return
        name = "".join(w for w, _f in name_run)
        base = "GEO" if any(f == "ns" for _w, f in name_run) else "PERSON"
        if len(name) >= 2 and name not in lx.ZH_STOP:
            found.append((name, ZH_NAME, {self._zh_type(name, base): 2.0}, False))
        name_run.clear()

    @staticmethod
    def _zh_type(word: str, default: str) -> str:
        if word.endswith(lx.ZH_ORG_SUFFIXES):
            return "ORGANIZATION"
        if word.endswith(lx.ZH_EVENT_SUFFIXES):
            return "EVENT"
        if default == "CONCEPT" and word.endswith(lx.ZH_GEO_SUFFIXES) and len(word) <= 4:
            return "GEO"
        return default

    # ---- one chunk -------------------------------------------------------------------------------
    def extract(self, text: str) -> ChunkExtraction:
        result = ChunkExtraction()
        for word in _LOWER_WORD.findall(text):
            result.lowercase[word] = result.lowercase.get(word, 0) + 1
        turns = speaker_turns(text)
        for t_i, (speaker, turn) in enumerate(turns):
            sentences = split_sentences(turn)
            if speaker:
                m = result.mentions.setdefault(speaker, Mention(kind=SPEAKER))
                m.kind, m.speaker = SPEAKER, True
                m.count += 1
                m.non_initial = True
                _vote(m, "PERSON", 5.0)
            for s_i, raw_sentence in enumerate(sentences):
                # a chunk starts and ends mid-sentence: those fragments make poor descriptions
                fragment = (t_i == 0 and s_i == 0 and not raw_sentence[:1].isupper() and raw_sentence[:1] not in "\"'“‘(#*-")
                fragment = fragment or (
                    t_i == len(turns) - 1 and s_i == len(sentences) - 1 and raw_sentence.rstrip()[-1:] not in ".!?\"'”’)。！？"
                )
                self._sentence(result, _WS.sub(" ", raw_sentence), speaker, fragment)
        return result

    def _sentence(self, result: ChunkExtraction, sentence: str, speaker: str, fragment: bool) -> None:
        mentions = result.mentions
        pairs = result.pairs
        found = self._english(sentence)
        if _CJK.search(sentence):
            found += self._chinese(sentence)
        if not found:
            return
        order: list[str] = []
        seen: set[str] = set()
        for title, kind, votes, initial in found:
            key = normalise_title(title)
            if len(key) < 2:
                continue
            m = mentions.get(key)
            if m is None:
                m = mentions[key] = Mention(kind=kind)
            elif kind in (NAME, ZH_NAME, EVENT, ACRONYM) and m.kind in FREQUENT_ONLY_KINDS:
                m.kind = kind  # a phrase also seen as a proper name is a name
            m.count += 1
            m.non_initial = m.non_initial or not initial
            for t, w in votes.items():
                _vote(m, t, w)
            if key not in seen:
                seen.add(key)
                order.append(key)
        short = sentence if len(sentence) <= MAX_SENTENCE_CHARS else sentence[: MAX_SENTENCE_CHARS - 1] + "…"
        n_words = sentence.count(" ") + 1
        names = [k for k in order if mentions[k].kind not in FREQUENT_ONLY_KINDS]
        score = (
            2.0 * min(len(names) - 1, 4)
            + min(n_words, 30) / 10.0
            - (3.0 if n_words > 80 else 0.0)
            - 0.5 * max(0, len(names) - 6)  # long enumerations describe nobody in particular
            - (4.0 if fragment else 0.0)
        )
        upper = sentence.upper()
        for key in order:
            # a sentence that opens with the entity is usually about it
            pos = upper.find(key)
            own = score + (2.5 if 0 <= pos < 40 else 0.0)
            sents = mentions[key].sentences
            if len(sents) < 3:
                sents.append((own, short))
                sents.sort(key=lambda s: -s[0])
            elif own > sents[-1][0]:
                sents[-1] = (own, short)
                sents.sort(key=lambda s: -s[0])
        linked = order[: self.max_entities_per_sentence]
        # a sentence naming many names is a list ("Cains and Abels, Pharaoh's daughters, Queens of Sheba, ..."):
        # each name is linked to its neighbours in the list, not to every other name
        name_at = {k: n for n, k in enumerate(k for k in linked if mentions[k].kind in _NAMED_KINDS)}
        listing = len(name_at) > LIST_NAMES
        for a_i in range(len(linked)):
            for b_i in range(a_i + 1, len(linked)):
                a, b = linked[a_i], linked[b_i]
                if NOUN in (mentions[a].kind, mentions[b].kind) and _NAMED_KINDS.isdisjoint((mentions[a].kind, mentions[b].kind)):
                    continue  # a lone noun links to names only: noun-noun pairs would swamp the graph
                if listing and a in name_at and b in name_at and abs(name_at[a] - name_at[b]) > LIST_WINDOW:
                    continue
                pair_key = (a, b) if a < b else (b, a)
                p = pairs.get(pair_key)
                if p is None:
                    p = pairs[pair_key] = PairStat()
                p.weight += 1.0
                if score > p.score:
                    p.score, p.sentence = score, short
        if speaker:
            sents = mentions[speaker].sentences
            sents.append((score, short))
            sents.sort(key=lambda s: -s[0])
            del sents[3:]
            said = f"{speaker} said: {short}"
            for key in order[: self.max_entities_per_sentence]:
                if key == speaker:
                    continue
                pair_key = (speaker, key) if speaker < key else (key, speaker)
                p = pairs.setdefault(pair_key, PairStat())
                p.weight += 1.0
                if score > p.score or not p.sentence.startswith(speaker):
                    p.score, p.sentence = score, said


def chunk_anchor_pairs(extraction: ChunkExtraction, keep: set[str]) -> dict[tuple[str, str], PairStat]:
    """Links each kept entity that shares no sentence with another kept entity in this chunk to the
    chunk's most-mentioned kept entity (weight 0.5), so few entities end up isolated."""
    linked: dict[str, int] = defaultdict(int)
    for a, b in extraction.pairs:
        if a in keep and b in keep:
            linked[a] += 1
            linked[b] += 1
    present = [k for k in extraction.mentions if k in keep]
    if len(present) < 2:
        return {}
    counts = Counter({k: extraction.mentions[k].count for k in present})
    hub = max(present, key=lambda k: (counts[k], -present.index(k)))
    out: dict[tuple[str, str], PairStat] = {}
    for k in present:
        if k == hub or linked.get(k):
            continue
        sentence = extraction.mentions[k].sentences[0][1] if extraction.mentions[k].sentences else ""
        key = (k, hub) if k < hub else (hub, k)
        out[key] = PairStat(0.5, 0.0, f"{k} appears in the same passage as {hub}: {sentence}".strip())
    return out
