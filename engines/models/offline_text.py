"""Text tools of the offline extractive model: index terms, question terms, sentence cleaning and coverage.

Tokenising, stopwords, stemming and sentence splitting live in `shared_context.text`, BM25 in `shared_context.bm25` (one home for
every text consumer); they are re-exported here for the offline modules.

Everything here is deterministic: no randomness, no clock, and no iteration over sets of
strings (whose order changes with PYTHONHASHSEED) where the order can reach the output.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from shared_context.bm25 import BM25
from shared_context.text import CJK_RE, STOPWORDS, split_sentences, stem, tokens

__all__ = [
    "BM25",
    "BROAD_WORDS",
    "CJK_RE",
    "STOPWORDS",
    "clean_sentence",
    "coverage",
    "is_cjk_text",
    "is_informative",
    "jaccard",
    "question_terms",
    "split_sentences",
    "stem",
    "terms",
    "trim_sentence",
    "wordset",
]


def wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Words that make a question corpus-wide rather than about a topic ("What are the main themes?").
BROAD_WORDS = wordset(
    """main key major overall theme themes topic topics summary summarize summarise overview general
    important importance whole entire dataset data corpus story document documents trend trends idea
    ideas across throughout top common central primary recurring collection files"""
)

# Chinese words that make a question corpus-wide; removed before the question's bigrams are taken, so
# "这些文件的主要主题是什么？" leaves no topic bigram and is read as a question about the whole collection.
_CJK_BROAD_WORDS = (
    "主要", "主题", "总体", "整体", "所有", "全部", "趋势", "概括", "总结", "概述", "文件", "文档",
    "资料", "数据", "常见", "重要", "核心", "共同", "反复", "这些", "哪些", "整个", "总的来说",
)

# Function characters of Chinese questions; a bigram made only of these carries no topic.
_CJK_FUNCTION_CHARS = (
    "的了是在和与及或吗呢吧啊么什谁哪怎如何为这那个一有也就都而被把对他她它们我你其中请问些样"
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


def question_terms(question: str) -> tuple[list[str], bool]:
    """Unique content terms of a question, and whether it is corpus-wide (only broad words left)."""
    all_terms = list(dict.fromkeys(terms(question)))
    broad_stems = {stem(w) for w in BROAD_WORDS}
    stripped = question
    for word in _CJK_BROAD_WORDS:
        stripped = stripped.replace(word, " ")
    content = [t for t in dict.fromkeys(terms(stripped)) if t not in broad_stems]
    if content:
        return content, False
    return all_terms, True


def clean_sentence(sentence: str) -> str:
    """Drop markdown decoration (heading marks, bullets, emphasis) from one sentence."""
    s = re.sub(r"^\s*(?:#{1,6}\s+|[-*•]\s+|\d+[.)]\s+)", "", sentence)
    s = re.sub(r"\*\*|__", "", s)
    return s.strip()


def is_informative(sentence: str) -> bool:
    """Enough words to stand alone as evidence (3 words, or 5 CJK characters), and not a lead-in
    line that only announces what follows ("The minutes are summarised below:")."""
    if sentence.rstrip().endswith((":", "：")):
        return False
    if CJK_RE.search(sentence):
        return len(CJK_RE.findall(sentence)) >= 5
    return len(re.findall(r"[^\W_]+", sentence)) >= 3


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
