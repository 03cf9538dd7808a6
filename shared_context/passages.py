"""Question-relevant excerpts of text units: more distinct evidence in a Sources budget.

GraphRAG's text units are long (1,200 tokens by default), so a Sources table of whole units holds only a
handful, each mostly about something else. Excerpt mode shows the parts of many units the question is
about instead:

- Blocks: each unit is cut into consecutive, non-overlapping blocks of about `excerpt_tokens / 2`
  tokens, ending at a sentence end where one is near (`unit_blocks`; cached per index).
- Windows: two adjacent blocks (a unit of one block is its own window), so a passage that straddles a
  block boundary is still scored as one. Window relevance: BM25 (the project's one BM25, `text.BM25`)
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
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from shared_context.linking import lexical_terms
from shared_context.tables import per_index_cache
from shared_context.text import BM25

__all__ = ["Block", "Excerpt", "select_excerpts", "unit_blocks"]

# A block ends at the first sentence end found between these fractions of its target length.
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*\s+|\n\s*\n")
_MIN_FRACTION, _MAX_FRACTION = 0.6, 1.4


@dataclass(frozen=True)
class Block:
    start: int  # character offsets in the unit's text
    end: int
    tokens: int
    terms: tuple[str, ...]  # lexical terms (BM25)
    counts: dict[str, int]  # the same as term -> frequency: a question reads a few terms, not all of them

    def query_terms(self, wanted: Sequence[str]) -> list[str]:
        """This block's occurrences of the (unique) `wanted` terms."""
        out: list[str] = []
        for term in wanted:
            n = self.counts.get(term)
            if n:
                out += [term] * n
        return out


@dataclass
class Excerpt:
    """What to show of one unit: character spans of its text, in text order (merged when adjacent)."""

    unit: int
    rank: int  # the unit's index in the candidate order
    spans: list[tuple[int, int]]
    tokens: int  # estimated: the sum of the shown blocks' tokens
    whole: bool  # every block shown: the unit verbatim


def _cuts(text: str, target_chars: int) -> list[int]:
    """Block end offsets: about `target_chars` apart, at a sentence end when one is near, else at a space."""
    ends: list[int] = []
    start = 0
    while len(text) - start > target_chars * _MAX_FRACTION:
        lo, hi = start + int(target_chars * _MIN_FRACTION), start + int(target_chars * _MAX_FRACTION)
        found = [m.end() for m in _SENTENCE_END.finditer(text, lo, hi)]
        if found:  # the sentence end nearest the target length
            cut = min(found, key=lambda e: (abs(e - start - target_chars), e))
        else:
            space = text.rfind(" ", lo, start + target_chars)
            cut = space + 1 if space >= 0 else start + target_chars
        ends.append(cut)
        start = cut
    ends.append(len(text))
    return ends


def unit_blocks(index: Any, unit: int, block_tokens: int) -> list[Block]:
    """The blocks of one text unit (see the module docstring). Cached per index and block size."""
    cache: dict[tuple[int, int], list[Block]] = per_index_cache(index, "passages.blocks", dict)
    key = (unit, block_tokens)
    hit = cache.get(key)
    if hit is not None:
        return hit
    text = index.text_units[unit].text
    tok = index.tokenizer
    total = max(int(index.text_unit_tokens[unit]), 1)
    target_chars = max(int(block_tokens * len(text) / total), 1)
    blocks: list[Block] = []
    start = 0
    for end in _cuts(text, target_chars):
        if end > start:
            piece = text[start:end]
            piece_terms = tuple(lexical_terms(piece))
            blocks.append(Block(start, end, tok.count(piece), piece_terms, dict(Counter(piece_terms))))
        start = end
    cache[key] = blocks
    return blocks


def _spans(blocks: Sequence[Block], chosen: set[int]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for b in sorted(chosen):
        if spans and spans[-1][1] == blocks[b].start:
            spans[-1] = (spans[-1][0], blocks[b].end)
        else:
            spans.append((blocks[b].start, blocks[b].end))
    return spans


def select_excerpts(
    index: Any,
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
    (id cell, separators); `gap` markers cost one token each (an estimate: the caller counts exactly)."""
    if excerpt_tokens <= 0:
        raise ValueError(f"excerpt_tokens must be > 0, got {excerpt_tokens}")
    if weight < 0 or rrf_k < 0:
        raise ValueError(f"weight and rrf_k must be >= 0, got {weight} and {rrf_k}")
    overhead = row_overhead or (lambda _u: 4)
    units = list(dict.fromkeys(units))
    block_tokens = max(excerpt_tokens // 2, 1)
    per_unit = [unit_blocks(index, u, block_tokens) for u in units]
    windows: list[tuple[int, int, int]] = []  # (unit rank, first block, last block)
    for r, blocks in enumerate(per_unit):
        if len(blocks) == 1:
            windows.append((r, 0, 0))
        windows.extend((r, b, b + 1) for b in range(len(blocks) - 1))
    if not windows or budget <= 0:
        return []
    query_terms = lexical_terms(query)
    wanted = list(dict.fromkeys(query_terms))
    # BM25 reads only the question's terms of a window, plus its length: take them from each block's term
    # counts once instead of indexing every term of every window.
    kept = [[blk.query_terms(wanted) for blk in blocks] for blocks in per_unit]
    terms = [kept[r][a] + kept[r][b] if b != a else kept[r][a] for r, a, b in windows]
    lengths = [len(per_unit[r][a].terms) + (len(per_unit[r][b].terms) if b != a else 0) for r, a, b in windows]
    relevance = BM25(terms, lengths=lengths).scores(query_terms)
    top = float(relevance.max())
    if top > 0:
        relevance = relevance / top
    score = [float(relevance[i]) + weight * (rrf_k + 1) / (rrf_k + r + 1) for i, (r, _, _) in enumerate(windows)]
    order = sorted(range(len(windows)), key=lambda i: (-score[i], windows[i][0], windows[i][1]))

    chosen: dict[int, set[int]] = {}
    first_pick: list[int] = []
    used = 0
    for i in order:
        r, a, b = windows[i]
        have = chosen.get(r, set())
        new = [x for x in (a, b) if x not in have]
        if not new:
            continue
        cost = sum(per_unit[r][x].tokens for x in dict.fromkeys(new))
        cost += overhead(units[r]) if not have else sum(1 for x in new if x - 1 not in have and x + 1 not in have)
        if used + cost > budget:
            continue
        used += cost
        if not have:
            first_pick.append(r)
        chosen.setdefault(r, set()).update(new)
    out: list[Excerpt] = []
    for r in first_pick:
        blocks, picked = per_unit[r], chosen[r]
        out.append(Excerpt(units[r], r, _spans(blocks, picked), sum(blocks[x].tokens for x in picked),
                           len(picked) == len(blocks)))
    return out
