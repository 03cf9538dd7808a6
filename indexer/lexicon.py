"""Word lists the offline extractor uses, read from `indexer/data/*.txt` (provenance noted in each file).

Lists are data, not code: `lexicon_en.txt` (stop words, honorifics, type cue words), `lexicon_zh.txt`
(jieba flag types and Chinese suffix cues), `stop_phrases.txt` (fillers, speaker roles, boilerplate) and
`noun_classes.txt` (WordNet's class of common nouns: person, artifact, body, time...), `type_cues.txt` (nouns
that say what a name beside them names: "the schooner Alma").
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from shared_context.text import STOPWORDS as _FUNCTION_WORDS
from shared_context.text import read_word_lists

DATA_DIR = Path(__file__).with_name("data")
ROMAN_NUMERAL = r"^(?=[MDCLXVI])M*(C[MD]|D?C{0,3})(X[CL]|L?X{0,3})(I[XV]|V?I{0,3})$"


@cache
def read_lists(name: str) -> dict[str, tuple[str, ...]]:
    """`[SECTION]`-headed word lists of one data file, words in file order ("#" lines are comments)."""
    return read_word_lists(DATA_DIR / name)


def _set(name: str, section: str) -> frozenset[str]:
    return frozenset(read_lists(name)[section])


_EN, _ZH, _STOP, _NOUNS = "lexicon_en.txt", "lexicon_zh.txt", "stop_phrases.txt", "noun_classes.txt"
_CUES = "type_cues.txt"

PERSON_NOUNS = _set(_EN, "PERSON_NOUNS")
# words a capitalised span may keep at its edges when it does not open a sentence ("Great Britain")
SOFT_EDGE_WORDS = (_set(_EN, "SOFT_STOPWORDS") | PERSON_NOUNS) - _FUNCTION_WORDS - _set(_EN, "STOPWORDS")
# the shared function-word list (shared_context/data/stopwords.txt) plus sentence starters and the like
STOPWORDS = _FUNCTION_WORDS | _set(_EN, "STOPWORDS") | SOFT_EDGE_WORDS
HONORIFICS = _set(_EN, "HONORIFICS")
PERSON_TITLES = _set(_EN, "PERSON_TITLES")
CONNECTORS = _set(_EN, "CONNECTORS")
SPAN_BREAKERS = _set(_EN, "SPAN_BREAKERS") - CONNECTORS
ORG_WORDS = _set(_EN, "ORG_WORDS")
GEO_WORDS = _set(_EN, "GEO_WORDS")
GEO_HEADS = _set(_EN, "GEO_HEADS")
EVENT_WORDS = _set(_EN, "EVENT_WORDS")
PERSON_VERBS = _set(_EN, "PERSON_VERBS")
GEO_PREPOSITIONS = _set(_EN, "GEO_PREPOSITIONS")
WEAK_GEO_PREPOSITIONS = _set(_EN, "WEAK_GEO_PREPOSITIONS")
GEO_FOLLOWERS = _set(_EN, "GEO_FOLLOWERS")
PERSON_PRONOUNS = _set(_EN, "PERSON_PRONOUNS")
ORG_FOLLOWERS = _set(_EN, "ORG_FOLLOWERS")
ORG_POSSESSIONS = _set(_EN, "ORG_POSSESSIONS")
ORG_VERBS = _set(_EN, "ORG_VERBS")
ORG_WORK_WORDS = _set(_EN, "ORG_WORK_WORDS")
ORG_OBJECT_VERBS = _set(_EN, "ORG_OBJECT_VERBS")
_GENERIC_NOUNS = _set(_EN, "GENERIC_NOUNS")
PHRASE_STOP = STOPWORDS | _set(_EN, "PHRASE_STOP")
NON_PERSON_WORDS = _set(_EN, "NON_PERSON_WORDS")
NUMBER_WORDS = _set(_EN, "NUMBER_WORDS")
DETERMINERS = _set(_EN, "DETERMINERS")
FILLERS = _set(_STOP, "FILLERS")
NON_HEADS = _set(_STOP, "NON_HEADS")
SPEAKER_ROLES = _set(_STOP, "SPEAKER_ROLES")
FIELD_LABELS = _set(_STOP, "FIELD_LABELS")
BOILERPLATE = _set(_STOP, "BOILERPLATE")
# a lone noun entity may be a person noun ("clerk", "boy") but no filler, role or boilerplate word
NOUN_STOP = (PHRASE_STOP - PERSON_NOUNS) | FILLERS | NON_HEADS | SPEAKER_ROLES | BOILERPLATE

ZH_FLAG_TYPES = dict(pair.split(":", 1) for pair in read_lists(_ZH)["FLAG_TYPES"])
ZH_ORG_SUFFIXES = read_lists(_ZH)["ORG_SUFFIXES"]
ZH_GEO_SUFFIXES = read_lists(_ZH)["GEO_SUFFIXES"]
ZH_EVENT_SUFFIXES = read_lists(_ZH)["EVENT_SUFFIXES"]
ZH_STOP = _set(_ZH, "STOP")

# WordNet classes of nouns that name no thing a reader would look up alone ("face", "hour", "doubt")
ABSTRACT_NOUN_CLASSES = _set(_EN, "ABSTRACT_NOUN_CLASSES")
# WordNet classes of concrete nouns named in passing ("the dog", "the water"): no lone-noun entity
PASSING_NOUN_CLASSES = _set(_EN, "PASSING_NOUN_CLASSES")
# WordNet classes of a capitalised noun that continues a name after a possessive ("St Paul's Churchyard")
PLACE_NOUN_CLASSES = _set(_EN, "PLACE_NOUN_CLASSES")
# WordNet class -> in how many chunks a lone noun of that class must occur (fewer than `min_phrase_chunks`)
NOUN_MIN_CHUNKS = {cls: int(n) for cls, n in (pair.split(":", 1) for pair in read_lists(_EN)["NOUN_MIN_CHUNKS"])}
# WordNet class -> entity type for a lone noun or a possessive phrase's head ("the baker", "Scrooge's office")
NOUN_CLASS_TYPES = dict(pair.split(":", 1) for pair in read_lists(_EN)["NOUN_CLASS_TYPES"])
# a common noun beside a name -> the type of the name ("the schooner Alma": VESSEL; `type_cues.txt`)
TYPE_NOUNS = {word: type_ for type_, words in read_lists(_CUES).items() if type_.isupper() and "_" not in type_
              for word in words}
VESSEL_PREFIXES = _set(_CUES, "VESSEL_PREFIXES")
_PLURALS = (("ies", "y"), ("ches", "ch"), ("shes", "sh"), ("ses", "s"), ("xes", "x"), ("men", "man"), ("s", ""))


@cache
def _noun_classes() -> dict[str, str]:
    return {word: cls for cls, words in read_lists(_NOUNS).items() for word in words}


def noun_class(word: str) -> str | None:
    """WordNet class of a noun's usual sense, plurals folded ("houses" -> artifact); None: not a noun."""
    classes = _noun_classes()
    w = word.lower()
    if w in classes:
        return classes[w]
    for suffix, repl in _PLURALS:
        if w.endswith(suffix) and len(w) > len(suffix) + 2 and (base := w[: -len(suffix)] + repl) in classes:
            return classes[base]
    return None


def listed_noun(word: str) -> bool:
    """The word is a WordNet noun as written: a singular or an irregular plural ("guest", "men"; not "guests")."""
    return word.lower() in _noun_classes()


def type_noun(word: str) -> str | None:
    """The type a common noun beside a name gives it (`type_cues.txt`), or None."""
    return TYPE_NOUNS.get(word.lower())


def abstract_noun(word: str) -> bool:
    return noun_class(word) in ABSTRACT_NOUN_CLASSES


def generic_noun(word: str) -> bool:
    """A kinship, generic person or role noun, or a generic group or thing ("wife", "guests", "team", "door"),
    plurals folded: no entity on its own (`lexicon_en.txt` [GENERIC_NOUNS])."""
    w = word.lower()
    if w in _GENERIC_NOUNS:
        return True
    return any(w.endswith(suffix) and len(w) >= len(suffix) and w[: -len(suffix)] + repl in _GENERIC_NOUNS
               for suffix, repl in (*_PLURALS, ("ves", "fe"), ("ren", "")))
