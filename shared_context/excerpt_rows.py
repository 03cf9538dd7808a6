"""Exact token counts of the Sources table's excerpt rows, without encoding each row whole.

An excerpt row (`local_sources.excerpt_sources`) is `id|… part … part …`, CSV-quoted when a part holds
`"`, `|` or a line end; each part is a span of whole blocks of one unit's text (`passage_blocks`), stripped.
tiktoken cuts text into pieces with a regex and encodes each piece alone, and two kinds of place always
start a piece, whatever comes before or after them:

- a space followed by a character that is not whitespace (the space can only be the optional first
  character of a word or punctuation piece, or a lone-space piece);
- the character after a line end when it is neither whitespace nor "/" (a line-end piece stops at the last
  line end of its run, and only a punctuation piece's trailing `[\\r\\n/]*` runs on past one).

Cut at such places, the text before a cut is split the same way whatever follows, and the text after it
whatever precedes, so the row's count is the sum of its chunks' counts. The chunks are the "…" separators,
the parts' first and last stretches (with the row's id cell, quotes and line end where they touch them) and
the stretches between block boundaries. A block boundary at a sentence end is such a place (or one
character before it), so the stretches recur from question to question: each is counted once per index
and kept (at most `limit` entries). `tests/test_local_context_excerpts.py` compares with counting the row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from shared_context.tables import per_index_cache

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["excerpt_row_tokens", "warm_unit_chunks"]

_NONE, _SPACE, _ID = 0, 1, 2  # what a chunk starts with before its text: nothing, " ", the row's id cell


def _piece_start(text: str, cut: int) -> int | None:
    """A position at or just before `cut` (0 < cut < len(text)) where a piece always starts, or None."""
    after = text[cut]
    if after.isspace():  # str.isspace covers every character the tokenizer's \s does (and a few more)
        return None
    before = text[cut - 1]
    if before == " ":
        return cut - 1
    if before in "\r\n" and after != "/":
        return cut
    return None


def excerpt_row_tokens(
    index: Index,
    unit: int,
    id_cell: str,
    text: str,
    spans: Sequence[tuple[int, int]],
    block_starts: Sequence[int],
    quoted: bool,
    limit: int,
) -> int | None:
    """`count(line + "\\n")` of the row `render_row([id, _join_spans(text, spans)])` whose rendered id cell
    is `id_cell` and whose text cell is `quoted`; `block_starts`: the unit's block start offsets. None when a
    part is empty after stripping (the caller then counts the row itself)."""
    tok = index.tokenizer
    cache: dict[tuple[int, ...], int] = per_index_cache(index, "local.excerpt_chunks", dict)
    q = int(quoted)
    prefix = id_cell + "|" + ('"' if quoted else "")
    suffix = ('"' if quoted else "") + "\n"

    def counted(key: tuple[int, ...], make: Callable[[], str]) -> int:
        n = cache.get(key)
        if n is None:
            n = tok.count(make())
            if len(cache) < limit:
                cache[key] = n
        return n

    def chunk(x: int, y: int, lead: int, trail: bool) -> str:
        body = text[x:y].replace('"', '""') if quoted else text[x:y]
        return ("" if lead == _NONE else " " if lead == _SPACE else prefix) + body + (suffix if trail else "")

    head = spans[0][0] > 0
    tail = spans[-1][1] < len(text)
    total = counted((unit, -1, -1, _ID, 0, q), lambda: prefix + "…") if head else 0
    last_part = len(spans) - 1
    for i, (a, b) in enumerate(spans):
        seg = text[a:b]
        start, end = a + len(seg) - len(seg.lstrip()), a + len(seg.rstrip())
        if start >= end:
            return None
        cuts = [start]
        for c in block_starts:
            if start < c < end:
                g = _piece_start(text, c)
                if g is not None and g > cuts[-1]:
                    cuts.append(g)
        cuts.append(end)
        for j in range(len(cuts) - 1):
            x, y = cuts[j], cuts[j + 1]
            lead = (_SPACE if i or head else _ID) if j == 0 else _NONE
            trail = i == last_part and j == len(cuts) - 2 and not tail
            total += counted((unit, x, y, lead, int(trail), q), partial(chunk, x, y, lead, trail))
        if i < last_part:
            total += counted((-1, 0, 0, 0, 0, q), lambda: " …")
    if tail:
        total += counted((-1, 1, 0, 0, 0, q), lambda: " …" + suffix)
    return total


def warm_unit_chunks(index: Index, unit: int, id_cell: str, text: str, starts: Sequence[int], ends: Sequence[int],
                     quoted: bool, limit: int) -> None:
    """Count ahead (into the per-index cache) the chunks of every excerpt row of one unit whose text cell is
    `quoted`: each run of consecutive blocks counted as a one-part row. A part's chunks depend only on its
    span, never on the rest of its row: its lead is the id cell exactly when it starts the text (else " "),
    its trail the line end exactly when it ends the text, and its inner cuts are the block boundaries
    inside it. So a question's excerpt rows then find every chunk counted (with the unit's usual quoting)."""
    for k in range(len(starts)):
        for m in range(k, len(starts)):
            excerpt_row_tokens(index, unit, id_cell, text, [(starts[k], ends[m])], starts, quoted, limit)
