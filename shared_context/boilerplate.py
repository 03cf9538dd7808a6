"""Licence and edition boilerplate at a document's ends: which characters are front or back matter.

A digital edition wraps its text in matter no reader asks about: a licence header and footer, production
credits ("Produced by ..."), transcriber's notes, publisher and printer lines, title pages and contents
lists. This module finds that matter at the start and at the end of a document, from its structure and a
small lexicon of generic publishing and licence phrases (`data/boilerplate.txt`); nothing here knows a
corpus.

How (`boilerplate_spans`): the document is cut into segments (paragraphs; long ones into sentences).
Each segment is scored by the lexicon (licence words one point, production credits two, ...), URLs and
e-mail addresses (one point each), "Name: value" header lines and the shape of a contents list (lines or
runs ending in page numbers, roman numerals, capitals). A segment with at least `SEED_POINTS` points and
at least one point per `SEED_WORDS_PER_POINT` words is evidence; a weaker or list-shaped one only extends
a region that evidence opens; short lines and lines in capitals (a title page) are neutral; anything else
is prose. Scanning from the document's start, the front region runs to the end of the last evidence or
extension found before `GAP_CHARS` characters of prose in a row; the back region is found the same way
scanning back from the end. A framed marker line ("*** START OF ... ***", "*** END OF ... ***") closes the
front region or opens the back one. A region with no evidence is no region, so a document without such
matter has no span: prose breaks the scan within its first `GAP_CHARS` characters.

`part_shares` applies the same scan to a document given as its ordered parts (the text units of an index,
which may overlap) and gives each part's share of boilerplate characters; a part is marked when that share
is at least `MARKED_SHARE`. Work is bounded by the matter found, not by the document's length.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from shared_context.text import LazyPattern

__all__ = ["MARKED_SHARE", "boilerplate_spans", "is_boilerplate_sentence", "part_shares", "part_spans", "span_shares"]

GAP_CHARS = 2500  # prose in a row that ends a region
BRIDGE_CHARS = 300  # prose between two pieces of matter that is taken with them
LEAD_CHARS = 400  # prose before the first evidence that means there is no region at this end
SEED_POINTS = 2.0
SEED_WORDS_PER_POINT = 25  # evidence is dense: at least one point per this many words
EXTEND_WORDS_PER_POINT = 50  # a weaker segment extends a region when at least this dense
MARKED_SHARE = 0.5  # a part (text unit) at least this much boilerplate is marked
_LONG_PARAGRAPH = 1200  # longer paragraphs are scored sentence by sentence
_CLOSING_TAIL = 600  # a closing formula counts among the document's last characters only
_HEADING_WORDS = 8
_NEUTRAL_WORDS = 6

_DATA = Path(__file__).with_name("data") / "boilerplate.txt"
_POINTS = {"LICENCE": 1.0, "PRODUCTION": 2.0, "NOTES": 1.0, "EDITION": 1.0}

_PARAGRAPH = LazyPattern(r"\n[ \t\r\f\v]*\n")
_SENTENCE_END = LazyPattern(r"(?<=[.!?])[\"'”’)\]_]*\s+(?=[\"'“‘(\[_]*[A-Z])")
# a full stop after an initial or a short abbreviation ("D. C.", "No. 360", "Mr.") ends no sentence
_ABBREVIATED = LazyPattern(r"(?:^|[\s(])(?:[A-Z][a-z]{0,2}|[a-z]{1,3}|[A-Z]{1,2})\.$")
_FRAMED = LazyPattern(r"^[ \t]*\*{3}.*?\*{3}[ \t]*$", re.MULTILINE)
_URL = LazyPattern(r"https?://\S+|\bwww\.\S+|\b[\w.+-]+@[\w-]+\.[\w.-]+\w")
_WORD = LazyPattern(r"[^\W\d_]+")
_NUMBERISH = LazyPattern(r"^(?:\d{1,4}|[ivxlcdm]{1,7}|[IVXLCDM]{1,7})[.:)]?$")
_LINE_END_NUMBER = LazyPattern(r"(?:\s{2,}|\.\s?\.\s?\.\s?|\s)(?:\d{1,4}|[ivxlcdmIVXLCDM]{1,7})\s*$")
_LIST_ITEM_END = LazyPattern(r"(?:\s{3,}|\.\s?\.\s?\.\s?)(?:\d{1,4}|[ivxlcdmIVXLCDM]{1,7})\s*$")
_ENTRY = LazyPattern(r"[^\W\d_][.,]?\s+\d{1,3}(?:\s*[-–]\s*\d{1,3})?\s*(?:$|(?=[A-Z]))")
_PAGE_REFERENCE = LazyPattern(r"[,;]\s*\d{1,3}(?:\s*[-–]\s*\d{1,3})?(?![\d,.]\d)")
_SPEAKER_TURN = LazyPattern(r"[ \t]*([A-Z][\w.'’-]*(?: [A-Z][\w.'’-]*){0,3}):[ \t]+\S")
_BY_AUTHOR = LazyPattern(r"\bby\s+[A-Z]")
_FIELD_LINE = LazyPattern(r"^[ \t]*([A-Za-z][A-Za-z' ]{1,30}):[ \t]+\S", re.MULTILINE)


@dataclass(frozen=True)
class _Lexicon:
    phrases: re.Pattern[str]  # every scored phrase, longest first
    points: dict[str, float]
    fields: frozenset[str]
    headings: frozenset[str]
    heading_fillers: frozenset[str]
    closing: re.Pattern[str]
    closing_words: frozenset[str]
    start_marker: re.Pattern[str]
    end_marker: re.Pattern[str]


def _read_sections(path: Path) -> dict[str, list[str]]:
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = " ".join(raw.split()).lower()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1].upper(), [])
        elif current is None:
            raise ValueError(f"{path}:{number}: a phrase before the first [SECTION] header")
        else:
            current.append(line)
    return sections


def _alternation(phrases: Sequence[str]) -> str:
    ordered = sorted(set(phrases), key=lambda p: (-len(p), p))
    return "|".join(re.escape(p).replace(r"\ ", r"\s+") for p in ordered)


@cache
def _lexicon() -> _Lexicon:
    sections = _read_sections(_DATA)
    points: dict[str, float] = {}
    for name, value in _POINTS.items():
        for phrase in sections.get(name, []):
            points[phrase] = max(points.get(phrase, 0.0), value)
    bounded = r"(?<![\w'])(?:{})(?![\w'])"
    return _Lexicon(
        phrases=re.compile(bounded.format(_alternation(list(points)))),
        points=points,
        fields=frozenset(sections.get("FIELDS", [])),
        headings=frozenset(w for phrase in sections.get("HEADINGS", []) for w in phrase.split()),
        heading_fillers=frozenset(w for phrase in sections.get("HEADING_FILLERS", []) for w in phrase.split()),
        closing=re.compile(r"\W*(?:{})\b".format(_alternation(sections.get("CLOSING", []))), re.IGNORECASE),
        closing_words=frozenset(sections.get("CLOSING_WORDS", [])),
        start_marker=re.compile(bounded.format(_alternation(sections.get("MARKERS", [])[:1])), re.IGNORECASE),
        end_marker=re.compile(bounded.format(_alternation(sections.get("MARKERS", [])[1:])), re.IGNORECASE),
    )


# segment kinds
_PROSE, _NEUTRAL, _EXTEND, _SEED, _START, _END = range(6)


def _folded(segment: str) -> str:
    return segment.lower().replace("’", "'").replace("‘", "'")


def _points(segment: str, lex: _Lexicon) -> float:
    folded = _folded(segment)
    found = {" ".join(m.group(0).split()) for m in lex.phrases.finditer(folded)}
    # distinct phrases, a plural with its singular: "licences ... licence" is one point
    total = sum(lex.points[p] for p in found if not (p.endswith("s") and p[:-1] in found))
    total += len(set(_URL.findall(segment)))
    for m in _FIELD_LINE.finditer(segment):
        if " ".join(m.group(1).lower().split()) in lex.fields:
            total += 1.0
    return total


def _list_shaped(segment: str, words: list[str]) -> bool:
    """A contents or index list: most lines end in a page number, or (run together) many enumerations."""
    lines = [ln for ln in segment.splitlines() if ln.strip()]
    if lines and _LIST_ITEM_END.search(lines[-1]):
        return True  # one entry: "Then old Fezziwig stood out to dance          54"
    if len(words) <= 20 and _ENTRY.search(segment):
        return True  # run-on entries: "The Publication of The Sentimental Journey 35 Chapter IV."
    if len(lines) >= 2:
        numbered = sum(1 for ln in lines if _LINE_END_NUMBER.search(ln))
        if numbered >= max(2, len(lines) // 2):
            return True
    tokens = segment.split()
    if len(tokens) < 6:
        return False
    enumerations = sum(1 for t in tokens if _NUMBERISH.match(t.strip("[](){},;")))
    capitals = sum(1 for w in words if len(w) > 1 and w.isupper())
    if enumerations * 8 >= len(tokens) and capitals * 2 >= len(words):
        return True
    references = len(_PAGE_REFERENCE.findall(segment))  # an index: "Assembly, the language question, 8-12;"
    return references >= 2 and references * 8 >= len(words)


def _kind(text: str, a: int, b: int, lex: _Lexicon, tail: bool) -> int:
    segment = text[a:b]
    if _FRAMED.search(segment):
        folded = _folded(segment)
        if lex.start_marker.search(folded):
            return _START
        if lex.end_marker.search(folded):
            return _END
    words = _WORD.findall(segment)
    n = len(words)
    turn = _SPEAKER_TURN.match(segment)
    if turn and " ".join(turn.group(1).lower().split()) not in lex.fields:
        return _PROSE  # someone speaking ("ANNA REYES: ..."), even about licences
    points = _points(segment, lex)
    if n <= _HEADING_WORDS and _heading(words, lex):
        points += 2.0
    if tail and n <= 25 and _closing(segment, words, lex):
        points += 2.0
    if points >= SEED_POINTS and points * SEED_WORDS_PER_POINT >= n:
        return _SEED
    if (points > 0 and points * EXTEND_WORDS_PER_POINT >= n) or _list_shaped(segment, words):
        return _EXTEND
    if n <= _NEUTRAL_WORDS or sum(1 for w in words if w.isupper()) * 5 >= n * 3 or _bracketed(segment):
        return _NEUTRAL
    return _PROSE


def _heading(words: list[str], lex: _Lexicon) -> bool:
    """A contents or apparatus heading: "CONTENTS", "LIST OF ILLUSTRATIONS", "CONTENTS Chapter I. PAGE"."""
    lower = [w.lower() for w in words if not _NUMBERISH.match(w)]
    return any(w in lex.headings for w in lower) and all(w in lex.headings or w in lex.heading_fillers for w in lower)


def _closing(segment: str, words: list[str], lex: _Lexicon) -> bool:
    """A closing formula: the segment is one ("THE END."), or opens with one and names the work and its
    author ("End of the ... of <title>, by <author>")."""
    if words and " ".join(w.lower() for w in words) in lex.closing_words:
        return True
    return lex.closing.match(segment) is not None and _BY_AUTHOR.search(segment) is not None


def _bracketed(segment: str) -> bool:
    s = segment.strip()
    return len(s) >= 2 and s[0] in "[{(" and s[-1] in "]})"


def _segments(text: str, start: int, end: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each segment of text[start:end], in order: paragraphs, long ones cut into sentences,
    framed marker lines and closing formulas on their own."""
    a = start
    for m in _PARAGRAPH.finditer(text, start, end):
        yield from _pieces(text, a, m.start())
        a = m.end()
    yield from _pieces(text, a, end)


def _pieces(text: str, a: int, b: int) -> Iterator[tuple[int, int]]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    if a >= b:
        return
    cuts = {a, b}
    for m in _FRAMED.finditer(text, a, b):
        cuts.update((m.start(), m.end()))
    if b - a > _LONG_PARAGRAPH:
        cuts.update(
            m.end() for m in _SENTENCE_END.finditer(text, a, b)
            if not _ABBREVIATED.search(text, max(a, m.start() - 5), m.start() + 1)
        )
    if len(text) - b < _CLOSING_TAIL:
        lex = _lexicon()
        for m in re.finditer(r"(?<=\s)(?=\S)", text[max(a, len(text) - _CLOSING_TAIL) : b]):
            at = max(a, len(text) - _CLOSING_TAIL) + m.start()
            if text[at].isupper() and lex.closing.match(text, at):
                cuts.add(at)
    ordered = sorted(c for c in cuts if a <= c <= b)
    for x, y in itertools.pairwise(ordered):
        while x < y and text[x].isspace():
            x += 1
        if x < y:
            yield x, y


@dataclass
class _Scan:
    spans: list[tuple[int, int]]  # boilerplate found at this end, in scan order ([] when none)
    complete: bool  # the scan stopped inside the text, not at the far edge of what it was given


def _scan(kinds: Iterator[tuple[int, int, int]], outer: int, forward: bool) -> _Scan:
    """Matter at one end, scanned from `outer` inwards. Evidence and extensions are taken, and so are neutral
    segments right after them (a title page, the rest of a contents list); prose of up to `BRIDGE_CHARS`
    between two taken segments is taken with them, longer prose is left out (an author's preface between
    the title page and the contents), and `GAP_CHARS` of prose in a row end the scan. A marker line of this
    end is taken as evidence; one of the other end stops the scan. Nothing is taken without evidence, or
    when more than `LEAD_CHARS` of prose come before the first evidence."""
    spans: list[tuple[int, int]] = []
    current: list[int] | None = None
    found, gap, lead = False, 0, 0
    for a, b, kind in kinds:
        if kind == (_END if forward else _START):
            break
        if not found and kind == _PROSE and lead + (b - a) > LEAD_CHARS:
            return _Scan([], True)
        if kind in (_START, _END):  # everything between this end and its marker line is matter
            spans, current, found, gap = [], ([outer, b] if forward else [a, outer]), True, 0
            continue
        if kind in (_SEED, _EXTEND) or (kind == _NEUTRAL and gap == 0):
            found = found or kind == _SEED
            if current is None:
                current = [outer, b] if forward else [a, outer]
            elif gap > BRIDGE_CHARS:
                spans.append((current[0], current[1]))
                current = [a, b]
            elif forward:
                current[1] = b
            else:
                current[0] = a
            gap = 0
        elif kind == _PROSE:
            gap += b - a
            lead += 0 if found else b - a
            if gap > GAP_CHARS:
                break
    else:
        if current is not None:
            spans.append((current[0], current[1]))
        return _Scan(spans if found else [], False)
    if current is not None:
        spans.append((current[0], current[1]))
    return _Scan(spans if found else [], True)


def _front(text: str, lex: _Lexicon) -> _Scan:
    n = len(text)
    kinds = ((a, b, _kind(text, a, b, lex, n - b < _CLOSING_TAIL)) for a, b in _segments(text, 0, n))
    return _scan(kinds, 0, forward=True)


def _back(text: str, lex: _Lexicon, floor: int) -> _Scan:
    """Scan back from the end, over windows that grow until the scan stops inside one (or reaches `floor`)."""
    n = len(text)
    window = 4 * GAP_CHARS
    while True:
        start = max(floor, n - window)
        segments = list(_segments(text, start, n))
        if start > floor and segments:
            segments = segments[1:]  # may be cut by the window: it is read whole by a larger window
        kinds = ((a, b, _kind(text, a, b, lex, n - b < _CLOSING_TAIL)) for a, b in reversed(segments))
        scan = _scan(kinds, n, forward=False)
        if scan.complete or start <= floor:
            return _Scan(scan.spans, True)
        window *= 4


def boilerplate_spans(text: str) -> list[tuple[int, int]]:
    """Character spans (start, end) of the document's front and back matter, sorted; [] when none."""
    if not text.strip():
        return []
    lex = _lexicon()
    front = _front(text, lex).spans
    floor = front[-1][1] if front else 0
    back = _back(text, lex, floor).spans
    return _merged(front + back)


def is_boilerplate_sentence(sentence: str) -> bool:
    """One sentence that is licence, disclaimer or edition matter by the lexicon alone: at least one point,
    and dense (one point per `SEED_WORDS_PER_POINT` words). For lines taken out of context (an answer's
    findings), where the document-end scan of `boilerplate_spans` cannot apply."""
    lex = _lexicon()
    words = _WORD.findall(sentence)
    points = _points(sentence, lex)
    if words and len(words) <= _HEADING_WORDS and _heading(words, lex):
        points += 2.0
    return points >= 1.0 and points * SEED_WORDS_PER_POINT >= len(words)


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def span_shares(spans: Sequence[tuple[int, int]], parts: Sequence[tuple[int, int]]) -> list[float]:
    """Each part's (start, end) share of characters inside `spans` (both sorted by start)."""
    out = []
    for a, b in parts:
        inside = sum(max(0, min(b, y) - max(a, x)) for x, y in spans)
        out.append(min(1.0, inside / (b - a)) if b > a else 0.0)
    return out


_JOIN = "\n\n"
_WHOLE_PARTS = 64  # documents of up to this many parts are scanned whole


def part_shares(parts: Sequence[str]) -> list[float]:
    """Boilerplate share of each part of one document given as its ordered parts (see `part_spans`)."""
    return [
        min(1.0, sum(b - a for a, b in spans) / len(part)) if part else 0.0
        for part, spans in zip(parts, part_spans(parts), strict=True)
    ]


def part_spans(parts: Sequence[str]) -> list[list[tuple[int, int]]]:
    """The boilerplate spans inside each part of one document given as its ordered parts (text units, which
    may overlap), as offsets in that part: the parts are joined with blank lines and scanned as one text. A
    long document is read from both ends only, a growing number of parts at a time, until each scan stops
    inside what it was given."""
    n = len(parts)
    if n == 0:
        return []
    if n <= _WHOLE_PARTS:
        text, offsets = _joined(parts)
        return _local(boilerplate_spans(text), offsets)
    lex = _lexicon()
    k = 8
    while True:
        text, offsets = _joined(parts[:k])
        front = _front(text, lex)
        if front.complete or k >= n:
            break
        k *= 4
    out: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for i, spans in enumerate(_local(_merged(front.spans), offsets)):
        out[i] = spans
    k = 8
    while True:
        first = max(0, n - k)
        text, offsets = _joined(parts[first:])
        back = _back(text, lex, 0)
        if first == 0 or not back.spans or min(a for a, _b in back.spans) >= offsets[0][1]:
            break
        k *= 4
    for i, spans in enumerate(_local(_merged(back.spans), offsets), start=first):
        out[i] = _merged(out[i] + spans)
    return out


def _local(spans: list[tuple[int, int]], offsets: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """The spans (in the joined text) that fall in each part, as offsets in that part."""
    return [
        [(max(x, a) - a, min(y, b) - a) for x, y in spans if x < b and y > a]
        for a, b in offsets
    ]


def _joined(parts: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    offsets, at = [], 0
    for p in parts:
        offsets.append((at, at + len(p)))
        at += len(p) + len(_JOIN)
    return _JOIN.join(parts), offsets
