"""Text tools of the offline extractive model: terms, stemming, sentences, BM25 and coverage.

Everything here is deterministic: no randomness, no clock, and no iteration over sets of
strings (whose order changes with PYTHONHASHSEED) where the order can reach the output.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

# Ideographs, kana and hangul are written without spaces; we index them as character bigrams.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
CJK_RE = re.compile(f"[{_CJK}]")
_TOKEN_RE = re.compile(f"[{_CJK}]+|[^\\W_{_CJK}]+")  # a Latin/digit run never swallows CJK text
_POSSESSIVE_RE = re.compile(r"(?<=\w)['’]s\b", re.IGNORECASE)


def wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


STOPWORDS = wordset(
    """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing done down during each either else ever few for
    from further had has have having he her here hers herself him himself his how i if in into is it its
    itself just let me more most much must my myself no nor not now of off on once only or other our ours
    ourselves out over own please same shall she should so some such tell than that the their theirs them
    themselves then there these they this those through to too under until up upon us very was we were what
    whats when where which while who whom whose why will with within without would yet you your yours
    yourself anything something someone anyone everything describe explain know give list show"""
)

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

_ABBREVIATIONS = ("mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "e.g", "i.e", "no", "mt", "prof")


def is_cjk_text(text: str) -> bool:
    """True when at least 30 % of the non-space characters are CJK (decides the answer language)."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return False
    return sum(1 for c in chars if CJK_RE.match(c)) / len(chars) >= 0.3


# Irregular forms common in questions ("Who led ...?", "What did he see?") mapped to their base.
_IRREGULAR = dict(
    pair.split(":")
    for pair in wordset("""led:lead wrote:write written:write saw:see seen:see went:go gone:go met:meet ran:run
    began:begin begun:begin died:die took:take taken:take gave:give given:give made:make found:find
    told:tell said:say knew:know known:know came:come became:become held:hold built:build bought:buy
    sold:sell left:leave felt:feel kept:keep lost:lose won:win fought:fight brought:bring thought:think
    taught:teach caught:catch sent:send spent:spend paid:pay children:child men:man women:woman
    wives:wife""")
)


def stem(word: str) -> str:
    """Light suffix stripping; it only has to map inflections of one word to the same key."""
    w = _IRREGULAR.get(word, word)
    if len(w) <= 3:
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ness") and len(w) > 6:
        w = w[:-4]
    elif w.endswith("ing") and len(w) > 5:
        w = w[:-3]
    elif (
        (w.endswith("ed") and len(w) > 4)
        or (w.endswith("ly") and len(w) > 5)
        or (w.endswith("er") and len(w) > 5)
    ):
        w = w[:-2]  # "leader" -> "lead", "manager" -> "manag" (as "manage")
    elif w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        w = w[:-1]
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    return w


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
    for match in _TOKEN_RE.finditer(_POSSESSIVE_RE.sub("", text)):
        out.extend(_token_terms(match.group(0), keep_stopwords))
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


# ---------------------------------------------------------------------------------------------
# Sentences

# A sentence ends at . ! ? (plus closing quotes/brackets) before whitespace and a capital, digit or
# CJK character; CJK full stops end a sentence without any space.
# A protected citation placeholder (\x00n\x00, see offline_answer.cited_units) may sit after the stop.
# One leading character class keeps the scan fast (an alternation at the start defeats the regex
# engine's prefix search); Latin stops are then checked for the following capital in Python.
_BOUNDARY_RE = re.compile(r"[.!?。！？；][\"'”’)\]」』）]*(?:\s*\x00\d+\x00)*")
_NEXT_SENTENCE_RE = re.compile(r"\s+[\"'“‘(\[]?[A-Z0-9" + _CJK + r"]")
_MARKDOWN_BLOCK_RE = re.compile(r"\n(?=\s*(?:#{1,6}\s|[-*•]\s|\d+[.)]\s))")
_CJK_NEWLINE_RE = re.compile(f"(?<=[{_CJK}])\\s*\\n\\s*(?=[{_CJK}])")


def _ends_with_abbreviation(fragment: str) -> bool:
    last = fragment.rstrip().rsplit(" ", 1)[-1].lower().rstrip(".")
    return last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())


def split_sentences(text: str) -> list[str]:
    """Split prose or markdown into sentences; headings and list items become their own units."""
    out: list[str] = []
    text = _CJK_NEWLINE_RE.sub("", text.replace("\r", ""))
    for paragraph in re.split(r"\n\s*\n", text):
        for block in _MARKDOWN_BLOCK_RE.split(paragraph):
            flat = re.sub(r"\s+", " ", block).strip()
            if not flat:
                continue
            pieces, last = [], 0
            for m in _BOUNDARY_RE.finditer(flat):
                if m.group(0)[0] in ".!?" and not _NEXT_SENTENCE_RE.match(flat, m.end()):
                    continue
                pieces.append(flat[last : m.end()])
                last = m.end()
            pieces.append(flat[last:])
            pieces = [p for p in pieces if p.strip()]
            merged: list[str] = []
            for piece in pieces:
                if merged and _ends_with_abbreviation(merged[-1]):
                    merged[-1] = f"{merged[-1]} {piece.strip()}"
                else:
                    merged.append(piece.strip())
            out.extend(merged)
    return out


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


# ---------------------------------------------------------------------------------------------
# BM25


@dataclass
class BM25:
    """Okapi BM25 over a fixed list of term lists (one per candidate sentence)."""

    docs: list[list[str]]
    k1: float = 1.2
    b: float = 0.75

    def __post_init__(self) -> None:
        self._tf = [Counter(d) for d in self.docs]
        self._df: Counter[str] = Counter()
        for tf in self._tf:
            self._df.update(tf.keys())
        lengths = [len(d) for d in self.docs]
        self._avg = (sum(lengths) / len(lengths)) if lengths else 1.0
        self._n = len(self.docs)

    def idf(self, term: str) -> float:
        df = self._df.get(term, 0)
        return math.log(1.0 + (self._n - df + 0.5) / (df + 0.5))

    def score(self, query: Sequence[str], i: int) -> float:
        tf = self._tf[i]
        length = len(self.docs[i]) or 1
        total = 0.0
        for term in query:
            f = tf.get(term, 0)
            if f:
                total += (
                    self.idf(term)
                    * f
                    * (self.k1 + 1)
                    / (f + self.k1 * (1 - self.b + self.b * length / self._avg))
                )
        return total


def coverage(query: Sequence[str], found: Iterable[str]) -> float:
    """Share of the question's content terms present in `found` (uniform weights: comparable across batches)."""
    if not query:
        return 0.0
    have = set(found)
    return sum(1 for t in query if t in have) / len(query)
