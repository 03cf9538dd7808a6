"""Text tools of the offline extractive model: index terms, question terms, sentence cleaning and coverage;
proper names in text and questions (phrases, display forms, mentions); and the `[Data: Sources (1, 2);
Entities (3, +more)]` citations it writes and reads.

Tokenising, stopwords, stemming and sentence splitting live in `shared_context.text`, BM25 in `shared_context.bm25` (one home for
every text consumer); they are re-exported here for the offline modules. The reference syntax is
`shared_context.tables.CITATION_RE` / `CITATION_PART_RE`, which every reader of references uses.

Everything here is deterministic: no randomness, no clock, and no iteration over sets of
strings (whose order changes with PYTHONHASHSEED) where the order can reach the output.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from functools import cache, lru_cache
from pathlib import Path

from shared_context.bm25 import BM25
from shared_context.tables import CITATION_PART_RE
from shared_context.text import CJK_RE, STOPWORDS, read_word_lists, split_sentences, stem, tokens

__all__ = [
    "BM25",
    "BROAD_WORDS",
    "CJK_RE",
    "DATASET_ORDER",
    "MORE",
    "STOPWORDS",
    "answerable",
    "capitalised_phrases",
    "clean_sentence",
    "coverage",
    "display_name",
    "format_citation",
    "is_cjk_text",
    "is_index_meta",
    "is_informative",
    "jaccard",
    "mentions",
    "merge_refs",
    "name_terms",
    "names_themes",
    "parse_citation",
    "question_terms",
    "quoted_terms",
    "split_sentences",
    "stem",
    "strip_citations",
    "terms",
    "theme_predicate",
    "trim_sentence",
    "word_list",
    "word_stems",
]


WORDS_PATH = Path(__file__).resolve().parent / "data" / "offline_words.txt"


@lru_cache(maxsize=1)
def word_lists() -> dict[str, tuple[str, ...]]:
    """The offline model's word lists (`data/offline_words.txt`), by section name, in file order."""
    return read_word_lists(WORDS_PATH)


def word_list(name: str) -> frozenset[str]:
    return frozenset(word_lists()[name])


@cache
def word_stems(name: str) -> frozenset[str]:
    """The stems of a word list, made once: what the index terms of a question or sentence are compared with.
    "BROAD" is the scope words and the collection's names together (`BROAD_WORDS`)."""
    words = BROAD_WORDS if name == "BROAD" else word_list(name)
    return frozenset(stem(w) for w in words)


# Words that make a question corpus-wide rather than about a topic ("What are the main themes of the book?").
_COLLECTION_WORDS = word_list("COLLECTION")
BROAD_WORDS = word_list("BROAD") | _COLLECTION_WORDS
_CJK_BROAD_WORDS = word_lists()["CJK_BROAD"]  # in file order: removed from the question one after another

# Function characters of Chinese questions; a bigram made only of these carries no topic.
_CJK_FUNCTION_CHARS = (
    "的了是在和与及或吗呢吧啊么什谁哪怎如何为这那个一有也就都而被把对他她它们我你其中里请问些样"
)

# Chinese question words that are not made only of function characters.
_CJK_STOP_BIGRAMS = frozenset(
    {"哪里", "哪儿", "多少", "为何", "有何", "怎样", "是否", "何时", "何地", "几个"}
)

def is_cjk_text(text: str) -> bool:
    """True when at least 30 % of the non-space characters are CJK (decides the answer language)."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return False
    return sum(1 for c in chars if CJK_RE.match(c)) / len(chars) >= 0.3


@lru_cache(maxsize=131072)
def _token_terms(tok: str, keep_stopwords: bool) -> tuple[str, ...]:
    """Terms of one token; memoised because prose repeats the same words thousands of times."""
    if CJK_RE.match(tok):
        if len(tok) == 1:
            return () if tok in _CJK_FUNCTION_CHARS else (tok,)
        pairs = (tok[i : i + 2] for i in range(len(tok) - 1))
        return tuple(
            p
            for p in pairs
            if p not in _CJK_STOP_BIGRAMS
            and not (p[0] in _CJK_FUNCTION_CHARS and p[1] in _CJK_FUNCTION_CHARS)
        )
    low = tok.lower()
    if not keep_stopwords and low in STOPWORDS:
        return ()
    return (stem(low),)


def terms(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Index terms: stemmed lowercase words (stopwords dropped) and CJK character bigrams."""
    out: list[str] = []
    for token in tokens(text):
        out.extend(_token_terms(token, keep_stopwords))
    return out


@lru_cache(maxsize=1)
def _theme_subject_re() -> re.Pattern[str]:
    """"What/which (up to three words) theme(s) (that) VERB": the theme noun is the question's subject, so the
    word after it is what the themes do ("run through", "recur", "stand out"), not a topic."""
    nouns = "|".join(re.escape(w) for w in sorted(word_list("THEME"), key=len, reverse=True))
    return re.compile(rf"\b(?:what|which)\b(?:\s+[\w'-]+){{0,3}}?\s+(?:{nouns})\s+(?:(?:that|which)\s+)?"
                      r"(?P<verb>[a-z][\w-]*)", re.IGNORECASE)


def theme_predicate(question: str) -> list[str]:
    """The words that say what a question's themes do, dropped from its topic terms: in English the verb
    after a theme noun the question asks about ("What themes run through ...?"); in Chinese, when it names
    themes (`CJK_THEME`), the verbs, adverbs and adjectives jieba tags ("反复出现的主题", "贯穿全书的主题")."""
    if any(word in question for word in word_lists()["CJK_THEME"]):
        import jieba
        import jieba.posseg

        jieba.setLogLevel(logging.WARNING)  # its dictionary loads quietly, as in the indexer
        return [w.word for w in jieba.posseg.lcut(question)
                if CJK_RE.match(w.word[:1]) and w.flag[:1] in ("v", "d", "a")]
    match = _theme_subject_re().search(question)
    if match is None or match.group("verb").lower() in STOPWORDS:
        return []  # "What themes are ...": no verb of its own
    return [match.group("verb")]


def names_themes(question: str) -> bool:
    """The question asks for themes or topics by name ("theme", "motif", "主题")."""
    theme_stems = word_stems("THEME")
    return any(t in theme_stems for t in terms(question)) or any(w in question for w in word_lists()["CJK_THEME"])


def question_terms(question: str) -> tuple[list[str], bool]:
    """Unique content terms of a question, and whether it is corpus-wide (only broad words left, once the
    words saying what its themes do are set aside: `theme_predicate`)."""
    all_terms = list(dict.fromkeys(terms(question)))
    broad_stems = word_stems("BROAD")
    predicate = theme_predicate(question)
    verbs = {t for word in predicate if not CJK_RE.match(word[:1]) for t in terms(word)}
    stripped = question
    for word in (*[w for w in predicate if CJK_RE.match(w[:1])], *_CJK_BROAD_WORDS):
        stripped = stripped.replace(word, " ")
    content = [t for t in dict.fromkeys(terms(stripped)) if t not in broad_stems and t not in verbs]
    if content:
        return content, False
    return all_terms, True


# A sentence about the index's own structure, not about the documents: an offline report's "This level-1
# community of 25 entities ... centres on X", "Its strongest ties are between A and B (6)", "They are
# mentioned together with weight 4 in 3 text units", "Rank 7 of 10 reflects ...". No reader asked for it.
_INDEX_META_RE = re.compile(
    r"\blevel-\d+ community\b|\bcommunity of \d+ entit(?:y|ies)\b|\bstrongest ties are between\b"
    r"|\bmentioned together with weight\b|\bis mentioned in \d+ text units?\b|^rank [\d.]+ of 10 reflects\b",
    re.IGNORECASE,
)


def is_index_meta(sentence: str) -> bool:
    return _INDEX_META_RE.search(sentence) is not None


def clean_sentence(sentence: str) -> str:
    """Drop markdown decoration (heading marks, bullets, emphasis) from one sentence."""
    s = re.sub(r"^\s*(?:#{1,6}\s+|[-*•]\s+|\d+[.)]\s+)", "", sentence)
    s = re.sub(r"\*\*|__", "", s)
    return s.strip()


# A transcript's speaker label: a name in capitals and a colon ("DAPHNE KOLLER: ...").
_SPEAKER_LABEL_RE = re.compile(r"(?:^|(?<=[\s…]))[A-Z][A-Z.'’ -]{1,40}[A-Z]:(?=\s)")


def is_informative(sentence: str) -> bool:
    """Enough words to stand alone as evidence (3 words, or 5 CJK characters), and not a lead-in
    line that only announces what follows ("The minutes are summarised below:")."""
    if sentence.rstrip().endswith((":", "：")):
        return False
    if CJK_RE.search(sentence):
        return len(CJK_RE.findall(sentence)) >= 5
    spoken = _SPEAKER_LABEL_RE.sub(" ", sentence)  # "KEVIN SCOTT: Right. … ANA: Yes" says two words
    return len(re.findall(r"[^\W_]+", spoken)) >= 3


def trim_sentence(sentence: str, max_words: int = 55) -> str:
    """Shorten very long sentences (novel prose) so an answer stays readable."""
    if CJK_RE.search(sentence):
        limit = max_words * 2
        return sentence if len(sentence) <= limit + 10 else sentence[:limit].rstrip() + "…"
    words = sentence.split(" ")
    if len(words) <= max_words + 5:
        return sentence
    return " ".join(words[:max_words]).rstrip(",;:") + "…"


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    sa, sb = set(a), set(b)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)


def coverage(query: Sequence[str], found: Iterable[str]) -> float:
    """Share of the question's content terms present in `found` (uniform weights: comparable across batches)."""
    if not query:
        return 0.0
    have = set(found)
    return sum(1 for t in query if t in have) / len(query)


# ---------------------------------------------------------------------------- names

_CAP_STOP = word_list("CAPITALISED_STOP")
_CONNECTORS = frozenset({"of", "the", "to", "de", "la", "von", "van", "der"})
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'’\-]*|[^\sA-Za-z]")
_TITLES = frozenset({"Mr", "Mrs", "Ms", "Dr", "St", "Sir", "Lady", "Lord", "Miss", "Saint"})


def _finish_name(tokens: list[str]) -> str | None:
    while tokens and tokens[-1].lower() in _CONNECTORS:
        tokens.pop()
    # A leading title ("Mr Fezziwig") is part of the name; other capitalised stopwords are not.
    while tokens and tokens[0] in _CAP_STOP and not (tokens[0] in _TITLES and len(tokens) > 1):
        tokens.pop(0)
    while tokens and tokens[0].lower() in _CONNECTORS:
        tokens.pop(0)
    if not tokens:
        return None
    name = re.sub(r"['’]s$", "", " ".join(tokens)).strip(" -'’")
    if len(name) < 3 or name.upper() in {"I", "II", "III"}:
        return None
    return name


def capitalised_phrases(text: str) -> list[str]:
    """Proper-name-like phrases in order of appearance: 'Bob Cratchit', 'Ghost of Christmas Past', 'SCROOGE'."""
    names: list[str] = []
    current: list[str] = []
    for match in _WORD_RE.finditer(text):
        tok = match.group(0)
        starts_upper = tok[0].isupper()
        if starts_upper and (tok not in _CAP_STOP or tok in _TITLES):
            current.append(tok.rstrip("."))
            continue
        if current and tok.lower() in _CONNECTORS:
            current.append(tok)
            continue
        if current and tok == "." and current[-1] in _TITLES:
            continue  # "Mr. Fezziwig": the period after a title does not end the name
        if current:
            name = _finish_name(current)
            if name:
                names.append(name)
            current = []
    if current:
        name = _finish_name(current)
        if name:
            names.append(name)
    return names


def quoted_terms(text: str) -> list[str]:
    return [m.strip() for m in re.findall(r"[\"“「『]([^\"”」』]{2,60})[\"”」』]", text) if m.strip()]


def display_name(title: str) -> str:
    """'GHOST OF CHRISTMAS PAST' -> 'Ghost of Christmas Past'; mixed-case and CJK titles are kept."""
    if not title.isupper() or CJK_RE.search(title):
        return title
    small = {"of", "the", "and", "in", "on", "at", "to", "a", "an", "for"}

    def word(match: re.Match[str]) -> str:
        low = match.group(0).lower()
        return low if match.start() and low in small else low[:1].upper() + low[1:]

    return re.sub(r"[A-Za-z][A-Za-z'’]*", word, title)


def mentions(text_folded: str, name: str) -> bool:
    """Whole-word, case-insensitive mention test (substring for CJK names)."""
    key = name.casefold().strip()
    if not key:
        return False
    if CJK_RE.search(key):
        return key in text_folded
    return re.search(r"(?<![^\W_])" + re.escape(key) + r"(?![^\W_])", text_folded) is not None


def name_terms(question: str) -> list[str]:
    """Index terms of the question's proper names ("Marley", "Bob Cratchit")."""
    return [t for name in capitalised_phrases(question) for t in terms(name)]


def answerable(question: str, found: Iterable[str]) -> bool:
    """Whether text with terms `found` can speak to the question at all.

    Half of the question's content terms must be present, or one of its proper names: a stray
    shared word ("point" in "What is the boiling point of liquid nitrogen?") is not enough.
    """
    query, broad = question_terms(question)
    have = set(found)
    if broad:
        return True
    if coverage(query, have) >= 0.5:
        return True
    return any(t in have for t in name_terms(question))


# ---------------------------------------------------------------------------- citations

# References a text carries from indexing time (report findings cite the index's own ids); they
# point at records that may not be in this context, so quoted sentences must not repeat them.
_EMBEDDED_REF_RE = re.compile(
    r"\s*\[(?:Data|Records|Sources?|Entities|Relationships|Reports|Claims)\b[^\]]*\]", re.IGNORECASE
)
DATASET_ORDER = ("Sources", "Entities", "Relationships", "Reports", "Claims")
MORE = "+more"


def strip_citations(text: str) -> str:
    return _EMBEDDED_REF_RE.sub("", text)


def parse_citation(body: str) -> dict[str, list[str]]:
    """Dataset -> ids (in order, '+more' kept as a marker) from the inside of one `[Data: ...]`."""
    refs: dict[str, list[str]] = {}
    for match in CITATION_PART_RE.finditer(body):
        dataset = match.group(1).strip()
        ids = [i.strip() for i in match.group(2).split(",") if i.strip()]
        bucket = refs.setdefault(dataset, [])
        for i in ids:
            if i not in bucket:
                bucket.append(i)
    return refs


def merge_refs(into: dict[str, list[str]], other: dict[str, list[str]]) -> None:
    for dataset, ids in other.items():
        bucket = into.setdefault(dataset, [])
        for i in ids:
            if i not in bucket:
                bucket.append(i)


def format_citation(refs: dict[str, list[str]], max_ids: int = 5) -> str:
    """Render refs in the canonical dataset order, at most `max_ids` ids each, then '+more'."""
    ordered = [d for d in DATASET_ORDER if refs.get(d)] + [
        d for d in refs if d not in DATASET_ORDER and refs[d]
    ]
    parts = []
    for dataset in ordered:
        ids = [i for i in refs[dataset] if i != MORE]
        more = len(ids) > max_ids or MORE in refs[dataset]
        shown = ids[:max_ids] + ([MORE] if more else [])
        if shown:
            parts.append(f"{dataset} ({', '.join(shown)})")
    return f"[Data: {'; '.join(parts)}]" if parts else ""
