"""Proper names in text and questions for the offline model: phrases, display forms, mentions."""

from __future__ import annotations

import re
from collections.abc import Iterable

from engines.models.offline_text import CJK_RE, coverage, question_terms, terms, wordset

_CAP_STOP = wordset(
    """The A An This That These Those He She It They We I You His Her Its Their Our My Your In On At By For
    From With Without Of To And But Or Nor So As If When While Where What Who Whom Whose Which Why How
    Is Are Was Were Be Been Do Does Did Can Could Will Would Shall Should May Might Must Has Have Had Not No
    Yes Tell Please Also However Although Because Then There Here After Before During Since Until Upon Through
    Thus Hence Finally Overall Each Every All Some Many Most Both Either Neither One Two Three Let Mr Mrs
    Ms Dr St Report Reports Data Entities Relationships Sources Claims Summary Community Findings Answer
    Related Other About Based Offline According Key Role Impact Influence"""
)
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
