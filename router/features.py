"""Turn a question's wording into the classifier's features (what the index says is `router.index_probe`'s).

Two blocks:

1. **cue and form features** (dense, named): one count-based feature per cue group of `router.cues`, the
   question form (first wh-word, yes/no, imperative), length and clause structure (tokens, commas,
   conjunctions), entity-looking spans (capitalised spans, quoted names, CJK bracketed titles and titled
   names, dates), and a few interactions of cue groups;
2. **character n-grams** (char_wb 2-4, hashed): language-neutral and small, no vocabulary to store.

Everything here is pure and fast: the cue block is a dozen compiled regexes, the n-gram block memoised hashes.
A question with no words at all (only punctuation or symbols) has nothing to route on and is refused with a
`ValueError` naming the problem; so is one of only one or two function words ("who?", "and why?") unless an
earlier turn says what it is about (`has_content_words`, checked by the classifier).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain

import mmh3
import numpy as np

from router.cues import CUE_NAMES, match_cues
from shared_context.text import LazyPattern  # patterns compile on the first question, not at import

MAX_CHARS = 600  # longer questions are truncated before featurisation (and the decision says so)
# Length saturates: beyond this many tokens a question is not "more DRIFT"; unbounded length let one data
# set's habit of long questions decide the route of every long question.
_LENGTH_CAP = 20
N_HASH_FEATURES = 2**18

_WH_WORDS = ("who", "what", "where", "when", "which", "how", "why")
_YES_NO = ("is", "are", "was", "were", "does", "do", "did", "can", "could", "has", "have", "had", "will",
           "should", "would")
_IMPERATIVES = ("describe", "summarize", "summarise", "list", "give", "tell", "explain", "compare", "trace",
                "rewrite", "retell", "narrate", "write", "draft", "compose", "name", "show", "find", "provide",
                "outline", "identify", "rank", "imagine", "remind")
_ZH_IMPERATIVES = ("请", "介绍", "列出", "总结", "概括", "比较", "梳理", "把", "以", "帮我", "简单说说", "归纳", "用")
# question and function words that carry nothing to search for on their own ("who?", "and why?", "what now?")
_FUNCTION_WORDS = frozenset((*_WH_WORDS, *_YES_NO, "and", "or", "but", "so", "then", "now", "it", "this", "that",
                             "else", "more", "again", "really", "ok", "okay", "yes", "no", "huh", "please"))
_CONJUNCTIONS = LazyPattern(r"\b(?:and|or|while|whereas|but|versus)\b|和|与|及|并且|而|以及|还是", re.IGNORECASE)
_TOKEN = LazyPattern(r"[A-Za-z0-9][A-Za-z0-9'’.\-]*|[\u4e00-\u9fff]")
_CJK = LazyPattern(r"[\u4e00-\u9fff]")
_CAP_SPAN = LazyPattern(
    # word characters other than CJK: a Latin name run straight into Chinese text ("FY15Q3电话会") ends there
    r"(?:(?:Mr|Mrs|Ms|Dr|St|Prof|Gen|Capt)\.\s)?[A-Z][^\W\u3400-\u9fff’'\-]*[’'\-]*(?:[^\W\u3400-\u9fff]|[’'\-])*"
    r"(?:\s+(?:of|the|de|van|von|la|du)?\s*[A-Z](?:[^\W\u3400-\u9fff]|[’'\-])*)*"
)
_QUOTED = LazyPattern(r"[\"“「『《]([^\"”」』》]{1,60})[\"”」』》]|(?<!\w)'([^']{2,60})'(?!\w)")
_ZH_TITLED = LazyPattern(r"[\u4e00-\u9fff]{1,3}(?:医生|教授|老师|律师|法官|先生|女士|主任|博士|校长|市长|部长|总监|经理|主播)")
_LATIN_IN_ZH = LazyPattern(r"[A-Za-z][A-Za-z0-9\-]+")
_POSSESSIVE_END = LazyPattern(r"['’]s?$")
_DATE = LazyPattern(
    r"\b(?:1[5-9]\d\d|20\d\d)\b|\b(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December)\b|\d{4}年|\d{1,2}月",
)
_NOT_NAMES = frozenset(
    w.lower() for w in _WH_WORDS + _YES_NO + _IMPERATIVES
    + ("I", "The", "A", "An", "In", "On", "At", "According", "Between", "From", "After", "Before", "During",
       "If", "Considering", "Based", "Looking", "Overall", "Across", "Quick", "Can", "Please", "Does", "While",
       "For", "As", "To", "Of", "By", "With", "Which", "Whose", "Whom", "Then", "Also", "And", "Or", "This",
       "These", "That", "Those", "It", "Its", "My", "Me", "Our", "We", "You", "Your", "Q&A")
)

# Interactions of cue groups: a linear model cannot express "X together with Y", and that is what carries the
# structure across styles. "often" means corpus-wide when it quantifies over a population ("do guests often..."),
# not when it qualifies a fact ("the most common cause of pneumonia"); a cause-or-comparison cue means DRIFT
# when it ties named things together; a request for one entity stays a look-up however long the description.
INTERACTION_NAMES: tuple[str, ...] = (
    "x_population_frequency",  # population noun + frequency/quantifier word: what a collection generally does
    "x_population_aggregation",  # population noun + views/kinds/in common: gathering from many places
    "x_trend_without_collection",  # most/least/common with no population, scope, theme or overview cue
    "x_reasoning_with_names",  # comparison/causal/relation/time cue and at least one name
    "x_identify_long",  # asks for one entity (who is the.../which company...) in a long, descriptive question
    "x_unit_without_population",  # names one document/meeting and no population of them
    "x_frequency_without_collection",  # usually/often/common with no population, scope, theme or overview cue
    "x_series_change",  # a change or trend over the documents of a series ("shifted over the quarters")
    "x_compound_about_one",  # "Who is X and why/what ... he/his ...": several asks about one named entity
    "x_account_of_one",  # one speaker's or one document's own account, no population asked about
    "x_account_of_many",  # how a population of speakers puts something: what they generally say
    "x_how_in_one_unit",  # "how ..." asked inside one document or meeting, nothing compared, no population
)

DENSE_NAMES: tuple[str, ...] = (
    *(f"cue_{name}" for name in CUE_NAMES),
    *(f"wh_{w}" for w in _WH_WORDS),
    "form_yes_no", "form_imperative", "form_other",
    "log_tokens", "commas", "conjunctions", "clauses_long",
    "names_0", "names_1", "names_2plus", "quoted", "dates", "lang_zh", "truncated",
    *INTERACTION_NAMES,
)
FEATURE_NAMES: tuple[str, ...] = DENSE_NAMES
N_DENSE = len(FEATURE_NAMES)
# the cue-lexicon features and the interactions built from them (zeroed to measure the model without lexicons)
CUE_FEATURES: tuple[int, ...] = tuple(i for i, n in enumerate(DENSE_NAMES) if n.startswith(("cue_", "x_")))

_MAX_CACHED_NGRAMS = 400_000
_bucket_cache: dict[str, int] = {}  # n-gram -> hashed column; dict reads/writes are atomic under the GIL
_word_cache: dict[str, tuple[int, ...]] = {}  # word -> columns of its n-grams


@dataclass(frozen=True)
class QuestionFeatures:
    text: str  # the (possibly truncated) text that was featurised
    truncated: bool
    cues: dict[str, list[str]]
    names: tuple[str, ...]
    dense: np.ndarray = field(repr=False)  # len(DENSE_NAMES)


def normalise(question: str) -> tuple[str, bool]:
    if not isinstance(question, str):
        raise TypeError(f"question must be a str, not {type(question).__name__}")
    text = " ".join(question.split())
    if not text:
        raise ValueError("question is empty")
    if not any(ch.isalnum() for ch in text):
        raise ValueError(f"question has no words to search for ({text[:40]!r} is only punctuation or symbols)")

    if len(text) > MAX_CHARS:
        return text[:MAX_CHARS], True
    return text, False


def has_content_words(question: str) -> bool:
    """False for one or two question/function words alone ("who?", "and why?"): nothing to search for unless an
    earlier turn says what they are about."""
    words = _TOKEN.findall(question)
    return not (len(words) <= 2 and all(w.lower() in _FUNCTION_WORDS for w in words))


def entity_like_names(text: str) -> tuple[str, ...]:
    """Spans that look like names: capitalised runs (not sentence-initial function words), quoted titles,
    CJK bracketed titles and titled CJK names, and Latin words inside Chinese text."""
    names: list[str] = []
    for match in _QUOTED.finditer(text):
        names.append((match.group(1) or match.group(2)).strip())
    for match in _CAP_SPAN.finditer(text):
        span = match.group(0).strip()
        words = span.split()
        while words and words[0].lower() in _NOT_NAMES:
            words = words[1:]
        if words and not (len(words) == 1 and len(words[0]) <= 1):
            names.append(" ".join(words))
    if _CJK.search(text):
        names.extend(m.group(0) for m in _ZH_TITLED.finditer(text))
        names.extend(m.group(0) for m in _LATIN_IN_ZH.finditer(text))
    cleaned = (_POSSESSIVE_END.sub("", n).strip() for n in names)
    return tuple(dict.fromkeys(n for n in cleaned if n))


def _form(text: str, lower: str) -> tuple[str | None, str]:
    first = lower.split(" ", 1)[0].strip("¿?¡!,.:;\"'")
    wh = next((w for w in _WH_WORDS if first == w or first.startswith(w + "'")), None)
    if wh is None:
        # wh-word later in the sentence ("In the novel, who ...", "According to X, what ...")
        head = re.search(r"\b(" + "|".join(_WH_WORDS) + r")\b", lower[:80])
        wh = head.group(1) if head else None
    if first in _YES_NO or text.endswith("吗？") or text.endswith("吗?") or "是否" in text:
        return wh, "yes_no"
    if first in _IMPERATIVES or text.startswith(_ZH_IMPERATIVES):
        return wh, "imperative"
    return wh, "other"


def extract(question: str) -> QuestionFeatures:
    text, truncated = normalise(question)
    lower = text.lower()
    cues = match_cues(text)
    names = entity_like_names(text)
    wh, form = _form(text, lower)
    tokens = _TOKEN.findall(text)
    cjk_share = len(_CJK.findall(text)) / max(1, len(text))
    commas = text.count(",") + text.count("，") + text.count("、")
    conj = len(_CONJUNCTIONS.findall(text))
    values: list[float] = [min(3.0, float(len(cues.get(name, ())))) for name in CUE_NAMES]
    values += [1.0 if wh == w else 0.0 for w in _WH_WORDS]
    values += [1.0 if form == f else 0.0 for f in ("yes_no", "imperative", "other")]
    values += [math.log1p(min(len(tokens), _LENGTH_CAP)) / 4.0, min(4.0, commas) / 2.0, min(4.0, conj) / 2.0,
               1.0 if len(tokens) > 30 and commas + conj >= 2 else 0.0]
    values += [1.0 if len(names) == 0 else 0.0, 1.0 if len(names) == 1 else 0.0, 1.0 if len(names) >= 2 else 0.0,
               min(2.0, len(_QUOTED.findall(text))), min(2.0, len(_DATE.findall(text))),
               1.0 if cjk_share > 0.3 else 0.0, 1.0 if truncated else 0.0]
    values += _interactions(cues, len(names), len(tokens), text, wh)
    return QuestionFeatures(text, truncated, cues, names, np.asarray(values, dtype=np.float32))


_REASONING = ("comparison", "causal", "relation", "time")
_COLLECTION = ("population", "scope", "theme", "overview", "summary")


# "Who is X and what/why ... his/her ...", "What is X, and why does it ...", "X是谁？他……": the later asks refer back
# to the one entity the question opens with
_ABOUT_ONE = LazyPattern(
    r"^(?i:who|what) (?i:is|was|are|were) (?:the )?[A-Z][\w'’.\-]*(?: [A-Z][\w'’.\-]*){0,3},? and (?i:what|why|how|"
    r"where|when|which|who|whom)\b.*\b(?:he|she|him|his|her|hers|it|its|they|them|their)\b"
    r"|^[\u4e00-\u9fff·•・]{1,12}(?:是谁|是什么)[？?，,].*[他她它]"
)


def _interactions(cues: dict[str, list[str]], n_names: int, n_tokens: int, text: str = "", wh: str | None = None
                  ) -> list[float]:
    """The `INTERACTION_NAMES` features, 0/1 each, in that order."""
    has = cues.__contains__
    return [float(x) for x in (
        has("population") and has("frequency"),
        has("population") and has("aggregation"),
        has("trend") and not any(has(c) for c in _COLLECTION),
        n_names >= 1 and any(has(c) for c in _REASONING),
        has("identify") and n_tokens >= 20,
        has("unit") and not has("population"),
        has("frequency") and not any(has(c) for c in _COLLECTION),
        has("series") and any(has(c) for c in ("time", "trend", "causal", "comparison")),
        bool(_ABOUT_ONE.search(text)),
        has("account") and not has("population"),
        has("account") and has("population"),
        wh == "how" and has("unit") and not any(has(c) for c in ("population", "comparison", "series")),
    )]


_WORD = LazyPattern(r"[a-z][a-z'’\-]*|[\u4e00-\u9fff]+")
N_WORD_BUCKETS = 2**21  # familiarity bitmap: large, so an unseen word rarely collides with a seen one


def wording_buckets(text: str, names: Sequence[str] = ()) -> list[int]:
    """Hashed buckets of the question's own wording, for the familiarity check: lower-cased Latin words and
    CJK character bigrams, with name-like spans removed first (a new name is not unfamiliar *wording*)."""
    for name in names:
        text = text.replace(name, " ")
    out: list[int] = []
    for run in _WORD.findall(text.lower()):
        if _CJK.match(run):
            grams = [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
        else:
            grams = [run.strip("'’-")]
        out.extend(mmh3.hash(g, 7, signed=False) % N_WORD_BUCKETS for g in grams if g)
    return out


def _bucket(gram: str) -> int:
    column = _bucket_cache.get(gram)
    if column is None:
        # the signed MurmurHash3 that scikit-learn's HashingVectorizer uses (mmh3 is the same C code and, unlike
        # sklearn.utils.murmurhash, imports in microseconds without pulling in scikit-learn and pandas)
        h = mmh3.hash(gram, 0, signed=True)
        column = (2147483647 - (N_HASH_FEATURES - 1)) % N_HASH_FEATURES if h == -(2**31) else abs(h) % N_HASH_FEATURES
        if len(_bucket_cache) < _MAX_CACHED_NGRAMS:
            _bucket_cache[gram] = column
    return column


def _word_columns(word: str) -> tuple[int, ...]:
    """Hashed columns of every char_wb 2-4 n-gram of one (lower-cased) word, memoised per word."""
    columns = _word_cache.get(word)
    if columns is None:
        padded = f" {word} "
        size = len(padded)
        found: list[int] = []
        for n in (2, 3, 4):
            if size <= n:  # a short word counts once, as in scikit-learn
                found.append(_bucket(padded))
                break
            found.extend(_bucket(padded[start : start + n]) for start in range(size - n + 1))
        columns = tuple(found)
        if len(_word_cache) < _MAX_CACHED_NGRAMS:
            _word_cache[word] = columns
    return columns


def ngram_vector(text: str) -> tuple[np.ndarray, np.ndarray]:
    """Hashed char_wb 2-4 n-grams of one text, L2-normalised, as (column indices, values).

    Same output as scikit-learn's `HashingVectorizer(analyzer="char_wb", ngram_range=(2, 4), alternate_sign=False)`
    (`tools.routing.matrix.reference_hasher`, checked by the tests), many times faster for
    one question: no per-call validation, and the columns of each word are memoised.
    """
    counts = Counter(chain.from_iterable(_word_columns(word) for word in text.lower().split()))
    if not counts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    columns = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
    values = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
    return columns, values / math.sqrt(float(values @ values))
