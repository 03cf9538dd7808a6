"""Where a passage says what an answer quoted from it: the web page opens a cited passage scrolled to, and
highlighting, these sentences.

The passage is cut into sentences at their end marks or blank lines, keeping their offsets; each is scored by
the share of the quote's lexical terms (`shared_context.text.lexical_terms`: stemmed, stopwords dropped) it
holds. The best sentence is marked, with the others that hold at least `KEEP_SHARE` of its score (the answer
may quote a sentence and the one after it), `MAX_MARKS` at most. Offsets are in UTF-16 code units, as the
page's JavaScript strings count them.
"""

from __future__ import annotations

import re

from shared_context.text import lexical_terms

MAX_QUOTE_CHARS = 4000  # a few answer sentences; longer is refused as a request error
MAX_MARKS = 4
KEEP_SHARE = 0.6
# a sentence runs to its end mark or a blank line: hard-wrapped text breaks lines inside sentences
_SENTENCE = re.compile(r"(?:[^.!?。！？\n]|\n(?![ \t]*\n))+(?:[.!?。！？]+[\"'”’)]*|(?=\n)|$)")


def quoted_spans(text: str, quote: str) -> list[tuple[int, int]]:
    """(start, end) UTF-16 offsets of the sentences of `text` that best match `quote`, in text order; empty
    when no sentence shares a term with it."""
    wanted = set(lexical_terms(quote))
    if not wanted:
        return []
    scored: list[tuple[float, int, int]] = []
    for match in _SENTENCE.finditer(text):
        start, end = match.start(), match.end()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end <= start:
            continue
        shared = wanted.intersection(lexical_terms(text[start:end]))
        if shared:
            scored.append((len(shared) / len(wanted), start, end))
    if not scored:
        return []
    best = max(score for score, _, _ in scored)
    kept = sorted(scored, key=lambda s: -s[0])[:MAX_MARKS]
    spans = sorted((start, end) for score, start, end in kept if score >= KEEP_SHARE * best)
    return [(_utf16(text, start), _utf16(text, end)) for start, end in spans]


def _utf16(text: str, offset: int) -> int:
    return len(text[:offset].encode("utf-16-le")) // 2
