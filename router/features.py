"""Turn a question's wording into the classifier's features, and say in words which of them decided a route
(what the index says is `router.index_probe`'s).

Two blocks:

1. **cue and form features** (dense, named): one count-based feature per cue group (below), the
   question form (first wh-word, yes/no, imperative), length and clause structure (tokens, commas,
   conjunctions), entity-looking spans (capitalised spans, quoted names, CJK bracketed titles and titled
   names, dates), and a few interactions of cue groups;
2. **character n-grams** (char_wb 2-4, hashed): language-neutral and small, no vocabulary to store.

Everything here is pure and fast: the cue block is a dozen compiled regexes, the n-gram block memoised hashes.
A question with no words at all (only punctuation or symbols) has nothing to route on and is refused with a
`ValueError` naming the problem; so is one of only one or two function words ("who?", "and why?") unless an
earlier turn says what it is about (`has_content_words`, checked by the classifier).

**Cue lexicons** (English and Chinese) signal what kind of question is being asked. The lexicons are data
(`router/data/cues.json`); each group compiles into one regular expression. English phrases match on word
boundaries, Chinese phrases as substrings (Chinese has no spaces). The groups are deliberately about the *form*
of a question, not about any dataset's topics, so they carry over to corpora the model has never seen:

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

**Reasons** (`wording_reasons`): the user-facing reasons of a route are the wording features that pushed the
chosen engine up the most, each described in words (`describe`).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

import mmh3
import numpy as np

from shared_context.text import LazyPattern  # patterns compile on the first question, not at import

# ---------------------------------------------------------------------------------- cue lexicons

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


# ---------------------------------------------------------------------------------- features

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


# ---------------------------------------------------------------------------------- reasons

MIN_CONTRIBUTION = 0.15  # log-odds; weaker features are not worth telling the user about
ENGINE_WORDS = {"local": "questions about specific entities", "global": "questions about the whole collection",
                "drift": "questions that connect several entities"}
_INTERACTIONS = {
    "x_population_frequency": "asks what a group of speakers or documents generally does",
    "x_population_aggregation": "gathers views or kinds from a group of speakers or documents",
    "x_trend_without_collection": "asks for a most/least fact without pointing at the whole collection",
    "x_reasoning_with_names": "connects named things by comparison, cause or time",
    "x_identify_long": "asks for one entity, described at length",
    "x_unit_without_population": "is about one document or meeting of the series",
    "x_frequency_without_collection": "asks how something usually or commonly is",
    "x_series_change": "asks how something changed across the documents of a series",
    "x_compound_about_one": "asks several things about the one entity it opens with",
}


def _quote(phrases: Sequence[str], limit: int = 2) -> str:
    return ", ".join(f"'{p[:40]}'" for p in phrases[:limit])


def _names(names: Sequence[str], limit: int = 3) -> str:
    return ", ".join(names[:limit]) + (", ..." if len(names) > limit else "")


def describe(name: str, feats: QuestionFeatures) -> tuple[str, str]:
    """(group, user-facing text) for one active wording feature; empty text when it is not worth saying."""
    if name.startswith("cue_"):
        cue = name[4:]
        return cue, REASON_TEMPLATES[cue].format(m=_quote(feats.cues.get(cue, [])))
    if name.startswith("wh_"):
        return "form", f"is a '{name[3:]}' question"
    if name == "form_yes_no":
        return "form", "is a yes/no question"
    if name == "form_imperative":
        return "form", f"is an instruction ('{feats.text.split()[0].lower()}')"
    if name == "names_0":
        return "names", "contains no name-like words"
    if name == "names_1":
        return "names", f"names one entity ({_names(feats.names)})"
    if name == "names_2plus":
        return "names", f"names {len(feats.names)} entities ({_names(feats.names)})"
    if name in ("log_tokens", "commas", "conjunctions", "clauses_long"):
        words = len(feats.text.split()) if not feats.dense[DENSE_NAMES.index("lang_zh")] else len(feats.text) // 2
        clauses = feats.dense[DENSE_NAMES.index("commas")] + feats.dense[DENSE_NAMES.index("conjunctions")]
        if words >= 25 or (name != "log_tokens" and clauses > 0 and words >= 12):
            return "shape", "is long, with several clauses"
        return "shape", ""  # length always contributes a little; only worth saying for long questions
    if name == "dates":
        return "dates", "mentions dates"
    if name == "quoted":
        return "names", "quotes a name or title"
    if name in _INTERACTIONS:
        return name, _INTERACTIONS[name]
    return name, ""


def wording_reasons(coef_dense: np.ndarray, best: int, feats: QuestionFeatures, engine: str) -> list[str]:
    """Up to three wording features that raised `best` over the other engines the most."""
    others = [k for k in range(coef_dense.shape[0]) if k != best]
    contribution = (coef_dense[best] - coef_dense[others].mean(axis=0)) * feats.dense
    reasons: list[str] = []
    used: set[str] = set()
    for j in np.argsort(-contribution)[:8]:
        if contribution[j] < MIN_CONTRIBUTION or len(reasons) >= 3:
            break
        group, text = describe(DENSE_NAMES[j], feats)
        if text and group not in used:
            used.add(group)
            reasons.append(text)
    if not reasons:
        reasons.append(f"no explicit cue; the wording is closest to {ENGINE_WORDS[engine]} seen in training")
    return reasons
