"""Text units most similar to the question: the question side of the `hybrid` Sources strategy.

Two rankings, each cut to the best `depth` units:
- lexical: BM25 over the units' text. This is the project's one BM25 (`linking.lexical_top` on the
  `text_units` table: stored postings, or Lance full-text search above the size threshold of
  `search_backend.SearchParams`); a query reads only the posting lists of its own terms.
- vector: cosine with the index's `text_unit_text` vectors, only when a query vector of the same
  dimension is given (the engine embeds the question once, with the embedder the index was built with).

Pure and deterministic: ties go to the lower unit position.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from shared_context.linking import lexical_top
from shared_context.text import lexical_terms, word_terms
from shared_context.vectors import VectorTable, vector_search, vector_table

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["QuestionUnits", "best_window", "question_units", "top_positions"]

# How deep each question ranking goes. Far more units than any Sources budget holds at usual chunk
# sizes (12k tokens / 300-token chunks = 40), so the budget, not this cut, decides what is shown.
DEFAULT_DEPTH = 60
_GAP_RE = re.compile(r"([\W_]+)")  # between the words `lexical_terms` reads from plain (non-CJK) text


@dataclass(frozen=True)
class QuestionUnits:
    lexical: list[int]  # unit positions, best BM25 first (only units sharing a term with the question)
    vector: list[int]  # unit positions, best cosine first; [] when no usable vector
    notes: list[str] = field(default_factory=list)


def top_positions(scores: np.ndarray, depth: int, *, positive_only: bool) -> list[int]:
    """Positions of the `depth` highest scores, best first, ties by position."""
    if depth <= 0 or scores.size == 0:
        return []
    candidates = np.flatnonzero(scores > 0) if positive_only else np.arange(scores.size)
    if len(candidates) > depth:
        cut = np.partition(scores[candidates], len(candidates) - depth)[len(candidates) - depth]
        candidates = candidates[scores[candidates] >= cut]
    order = np.lexsort((candidates, -scores[candidates]))
    best: list[int] = candidates[order][:depth].tolist()
    return best


def question_units(
    index: Index, query: str, query_vector: np.ndarray | None = None, depth: int = DEFAULT_DEPTH
) -> QuestionUnits:
    """The lexical and (when usable) vector rankings of the index's text units for `query`."""
    notes: list[str] = []
    if not index.text_units or not query.strip():
        return QuestionUnits([], [], notes)
    lexical: list[int] = lexical_top(index, "text_units", query, depth)[0].tolist()
    vector: list[int] = []
    table = vector_table(index, "text_unit_text")
    if query_vector is None:
        notes.append("no query vector: question-similar units found lexically only")
    elif table is None or len(table) == 0:
        notes.append("the index has no text_unit_text vectors: question-similar units found lexically only")
    elif np.asarray(query_vector).reshape(-1).shape[0] != table.dim:
        notes.append(
            f"text unit vectors have dim {table.dim} but the query vector has "
            f"{np.asarray(query_vector).reshape(-1).shape[0]}: question-similar units found lexically only"
        )
    else:
        search = vector_search(index, "text_unit_text")
        if isinstance(search, VectorTable):
            sims = np.asarray(search.similarities(query_vector), dtype=np.float64)
            vector = [int(search.positions[r]) for r in top_positions(sims, depth, positive_only=True)]
        elif search is not None:  # ANN above the size threshold (search_backend)
            vector = [pos for pos, sim in search.search(query_vector, depth) if sim > 0]
    return QuestionUnits(lexical, vector, notes)


def best_window(text: str, query: str, chars: int) -> tuple[int, int]:
    """(start, end) character offsets of the `chars`-long window of `text` sharing the most distinct
    question terms (first such window on ties), starting on a word boundary. Used to trim a unit to the
    part the question is about rather than to its head."""
    if chars <= 0:
        return 0, 0
    if len(text) <= chars:
        return 0, len(text)
    wanted = set(lexical_terms(query))
    step = max(chars // 4, 1)
    starts = [min(start, len(text) - chars) for start in range(0, len(text) - chars + step, step)]
    # Plain ASCII text (lower-casing maps character to character, no CJK runs): score every window from one
    # pass over the words; anything else re-reads each window. Both give the same scores.
    score = _window_scorer(text, wanted, chars) if text.isascii() else None
    best_score, best_start = -1, 0
    for start in starts:
        found = (
            score(start)
            if score is not None
            else len(wanted.intersection(lexical_terms(text[start : start + chars])))
        )
        if found > best_score:
            best_score, best_start = found, start
    if best_start > 0:  # do not open on half a word
        space = text.find(" ", best_start, best_start + 40)
        best_start = space + 1 if space >= 0 else best_start
    return best_start, min(best_start + chars, len(text))


def _window_scorer(text: str, wanted: set[str], chars: int) -> Callable[[int], int]:
    """`score(start)` == len(wanted & set(lexical_terms(text[start:start + chars]))) for ASCII `text`.

    Words wholly inside a window count with their term; a word cut by either window edge counts with the
    term of the part inside, exactly as `lexical_terms` sees the slice.
    """
    lowered = text.lower()
    # [word, gap, word, gap, ..., word] (first/last word may be ""): offsets from the cumulative lengths, all
    # in C, rather than a match object per word.
    parts = _GAP_RE.split(lowered)
    offsets = list(itertools.accumulate(map(len, parts), initial=0))
    spans = list(zip(offsets[0::2], offsets[1::2], strict=False))
    word_starts = offsets[0::2]
    terms = word_terms(parts[0::2])
    hits = [(a, b, t) for (a, b), t in zip(spans, terms, strict=True) if t in wanted]
    hit_starts = [a for a, _, _ in hits]

    def term_of(piece: str) -> str | None:
        term = word_terms([piece])[0]
        return term if term in wanted else None

    def score(start: int) -> int:
        end = start + chars
        found: set[str] = set()
        lo = bisect.bisect_left(hit_starts, start)
        for _, b, term in hits[lo : bisect.bisect_left(hit_starts, end)]:
            if b <= end:
                found.add(term)
        # a word running into the window from the left, and one running out of it on the right
        i = bisect.bisect_left(word_starts, start) - 1
        if i >= 0 and spans[i][1] > start:
            edge = term_of(lowered[start : min(spans[i][1], end)])
            if edge:
                found.add(edge)
        j = bisect.bisect_left(word_starts, end) - 1
        if j >= 0 and spans[j][0] >= start and spans[j][1] > end:
            edge = term_of(lowered[spans[j][0] : end])
            if edge:
                found.add(edge)
        return len(found)

    return score
