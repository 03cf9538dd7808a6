"""Question-relevant excerpts of text units: more distinct evidence in a Sources budget.

GraphRAG's text units are long (1,200 tokens by default), so a Sources table of whole units holds only a
handful, each mostly about something else. Excerpt mode shows the parts of many units the question is
about instead:

- Blocks: each unit is cut into consecutive, non-overlapping blocks of about `excerpt_tokens / 2`
  tokens, ending at a sentence end where one is near (`passage_blocks.py`: computed for all units once
  per index, kept in the derived store; a question only reads arrays).
- Windows: two adjacent blocks (a unit of one block is its own window), so a passage that straddles a
  block boundary is still scored as one. Window relevance: BM25 (the project's one BM25, `bm25.BM25`)
  over the windows of all candidate units, for the question's lexical terms.
- Score: the window's BM25 relative to the best window, plus a prior from its unit's rank in the
  Sources order (entity link + question rankings, `text_unit_selection`), on the same reciprocal-rank
  scale as that order's fusion:
      score(w) = bm25(w) / max bm25 + weight * (k + 1) / (k + r_unit(w))      (k = `hybrid_rrf_k`, r from 1)
  so a passage that matches the question beats the unrelated middle of a better-ranked unit, and among
  equally matching passages the better-ranked unit wins. Without any question term in any window the
  prior alone orders them: the units' own order, each unit's blocks from its start.
- Selection: windows best first; a window costs the tokens of its blocks not yet shown; windows are
  taken while they fit the budget (a later, cheaper one may still fit). Selected blocks of one unit merge
  into excerpts; a unit whose blocks are all selected is shown whole.

Pure and deterministic: ties go to the better-ranked unit, then the earlier block.

Token counts of the excerpt rows (`excerpt_row_tokens`): exact, without encoding each row whole.

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
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from shared_context.bm25 import BM25
from shared_context.linking import lexical_terms
from shared_context.passage_blocks import Block, BlockTable, block_table
from shared_context.tables import per_index_cache

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["Block", "Excerpt", "excerpt_blocks", "excerpt_row_tokens", "select_excerpts", "unit_blocks",
           "warm_unit_chunks"]

@dataclass
class Excerpt:
    """What to show of one unit: character spans of its text, in text order (merged when adjacent)."""

    unit: int
    rank: int  # the unit's index in the candidate order
    spans: list[tuple[int, int]]
    tokens: int  # estimated: the sum of the shown blocks' tokens
    whole: bool  # every block shown: the unit verbatim


def excerpt_blocks(index: Index, excerpt_tokens: int) -> BlockTable:
    """The block table excerpts of `excerpt_tokens` are cut from: blocks of half that size, so a window of
    two adjacent blocks fits."""
    return block_table(index, max(excerpt_tokens // 2, 1))


def unit_blocks(index: Index, unit: int, block_tokens: int) -> list[Block]:
    """The blocks of one text unit (see the module docstring)."""
    return block_table(index, block_tokens).blocks(unit)


def _spans(starts: list[int], ends: list[int], chosen: set[int]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for b in sorted(chosen):
        if spans and spans[-1][1] == starts[b]:
            spans[-1] = (spans[-1][0], ends[b])
        else:
            spans.append((starts[b], ends[b]))
    return spans


def select_excerpts(
    index: Index,
    units: Sequence[int],
    query: str,
    budget: int,
    *,
    excerpt_tokens: int,
    weight: float = 1.0,
    rrf_k: int = 60,
    row_overhead: Callable[[int], int] | None = None,
) -> list[Excerpt]:
    """Excerpts of `units` (candidate positions, best first) for `query` within `budget` tokens, in the
    order their first window was chosen. `row_overhead(unit)`: tokens a unit's row costs beyond its text
    (id cell, separators; >= 0), asked only for units a window of which fits what is left of the budget; `gap`
    markers cost one token each (an estimate: the caller counts exactly)."""
    if excerpt_tokens <= 0:
        raise ValueError(f"excerpt_tokens must be > 0, got {excerpt_tokens}")
    if weight < 0 or rrf_k < 0:
        raise ValueError(f"weight and rrf_k must be >= 0, got {weight} and {rrf_k}")
    row_cost = row_overhead or (lambda _u: 4)
    overheads: dict[int, int] = {}

    def overhead(unit: int) -> int:  # by rank; asked again for every window of a unit not chosen yet
        cost = overheads.get(unit)
        if cost is None:
            cost = overheads[unit] = row_cost(units[unit])
            if cost < 0:
                raise ValueError(f"row_overhead must be >= 0, got {cost} for unit {units[unit]}")
        return cost

    units = list(dict.fromkeys(units))
    table = excerpt_blocks(index, excerpt_tokens)
    first = table.unit_ptr[np.asarray(units, dtype=np.int64)] if units else np.zeros(0, dtype=np.int64)
    n_blocks = table.unit_ptr[np.asarray(units, dtype=np.int64) + 1] - first if units else first
    # windows (unit rank, first block, last block): adjacent block pairs; a one-block unit is its own window
    per_unit = np.where(n_blocks == 1, 1, np.maximum(n_blocks - 1, 0))
    if not per_unit.sum() or budget <= 0:
        return []
    w_rank = np.repeat(np.arange(len(units)), per_unit)
    w_a = np.arange(len(w_rank)) - np.repeat(np.cumsum(per_unit) - per_unit, per_unit)
    w_b = np.where(n_blocks[w_rank] == 1, w_a, w_a + 1)
    query_terms = lexical_terms(query)
    # BM25 over the windows reads only the question's terms of each window plus its length
    found = (table.vocab.get(t) for t in dict.fromkeys(query_terms))
    ids = [int(i) for i in found if i is not None]
    row0 = np.cumsum(n_blocks) - n_blocks  # each candidate unit's first row in `counts`
    blocks_of = np.repeat(first, n_blocks) + (np.arange(int(n_blocks.sum())) - np.repeat(row0, n_blocks))
    counts = table.query_counts(blocks_of, ids)  # candidate blocks, in unit rank then block order
    block_at = row0[w_rank]  # each window's first block row in `counts`
    a_rows, b_rows = block_at + w_a, block_at + w_b
    pair = w_b != w_a
    tf = counts[a_rows] + np.where(pair[:, None], counts[b_rows], 0.0)
    sizes = table.n_terms[blocks_of].astype(np.int64)
    lengths = sizes[a_rows] + np.where(pair, sizes[b_rows], 0)
    relevance = BM25.frequency_scores(tf, lengths)
    top = float(relevance.max())
    if top > 0:
        relevance = relevance / top
    score = relevance + weight * (rrf_k + 1) / (rrf_k + w_rank + 1)
    order = np.lexsort((w_a, w_rank, -score))

    block_tokens = table.tokens[blocks_of].astype(np.int64)
    tokens = block_tokens.tolist()
    starts, ends = table.start[blocks_of].tolist(), table.end[blocks_of].tolist()
    offset = row0.tolist()
    # What each window's blocks cost while its unit shows nothing yet: most windows are met in that state,
    # many after the budget is nearly spent, so they are rejected on one comparison instead of set and
    # token arithmetic - and before the row's overhead (>= 0) is asked for, which reads the unit's id: a
    # unit none of whose windows could fit is never read.
    fresh = block_tokens[a_rows] + np.where(pair, block_tokens[b_rows], 0)
    # any window that adds a block costs at least the cheapest block: below that, nothing more fits
    cheapest = int(block_tokens.min())
    chosen: dict[int, set[int]] = {}
    first_pick: list[int] = []
    used = 0
    for r, a, b, c in zip(w_rank[order].tolist(), w_a[order].tolist(), w_b[order].tolist(),
                          fresh[order].tolist(), strict=True):
        have = chosen.get(r)
        if have is None:
            if used + c > budget:
                continue
            c += overhead(r)
            if used + c > budget:
                continue
            used += c
            first_pick.append(r)
            chosen[r] = {a, b}
        else:
            new = [x for x in (a, b) if x not in have]
            if not new:
                continue
            cost = sum(tokens[offset[r] + x] for x in new)  # a != b here: a one-block unit has one window
            cost += sum(1 for x in new if x - 1 not in have and x + 1 not in have)  # a gap marker each
            if used + cost > budget:
                continue
            used += cost
            have.update(new)
        if budget - used < cheapest:
            break
    out: list[Excerpt] = []
    for r in first_pick:
        picked, o, n = chosen[r], offset[r], int(n_blocks[r])
        out.append(Excerpt(units[r], r, _spans(starts[o : o + n], ends[o : o + n], picked),
                           sum(tokens[o + x] for x in picked), len(picked) == n))
    return out


# ---------------------------------------------------------------------------- excerpt rows' token counts

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
