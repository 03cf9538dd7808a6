"""Question-relevant excerpts of text units: more distinct evidence in a Sources budget.

GraphRAG's text units are long (1,200 tokens by default), so a Sources table of whole units holds only a
handful, each mostly about something else. Excerpt mode shows the parts of many units the question is
about instead:

- Blocks: each unit is cut into consecutive, non-overlapping blocks of about `excerpt_tokens / 2`
  tokens, ending at a sentence end where one is near (computed for all units once per index, kept in the
  derived store; a question only reads arrays: below).
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

Blocks (`block_table`): the blocks of every text unit, computed once per index and block size and kept as
flat arrays. Cutting a unit into blocks, counting each block's tokens and finding its lexical terms costs
about a millisecond per unit (tiktoken and the term regex), which a question paid for every candidate unit
no earlier question had touched. Here it is done for all units in one streaming pass at first need, and for an index loaded
from files written to the derived store (`derived_store.py`, keyed by the text-units table's fingerprint,
the tokenizer and the block size), so later processes memory-map it.

Layout (`BlockTable`), blocks numbered across the index in unit order:
- `unit_ptr` (units + 1): unit u owns blocks `unit_ptr[u]:unit_ptr[u + 1]`;
- `start`, `end` (character offsets in the unit's text), `tokens`, `n_terms` (the block's lexical
  terms, repeats included: BM25's document length) per block;
- `term_ptr` (blocks + 1), `term_ids`, `term_counts`: each block's distinct terms (sorted ids) and
  their frequencies - what the window scorer reads for the question's terms;
- `term_df` (per term id): how many blocks hold the term - the index-wide idf of `best_window_order`, which
  re-ranks the lexical ranking's units by their best window;
- the vocabulary: term -> id (a dict when built, a `SortedVocab` when read back).

`unit_blocks_of(text, total_tokens, block_tokens, tokenizer)` is the definition of one unit's blocks;
the batched pass gives exactly its result (tests check both and the store round trip).

The token counts of excerpt rows are `local_rows.excerpt_row_tokens`.
"""

from __future__ import annotations

import bisect
import os
import re
from array import array
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from shared_context.bm25 import BM25, TermLookup
from shared_context.lexical_store import SortedVocab
from shared_context.records import RecordTable, RowSequence, TextUnit
from shared_context.tables import per_index_cache
from shared_context.text import WordIds, lexical_term_ids, lexical_terms
from shared_context.token_counts import TokenAnchors, count_strings
from shared_context.tokens import Tokenizer

if TYPE_CHECKING:
    import numpy.typing as npt

    from shared_context.index import Index

__all__ = ["Block", "BlockTable", "Excerpt", "best_window_order", "block_table", "excerpt_blocks", "select_excerpts",
           "unit_blocks", "unit_blocks_of"]

# A block ends at the first sentence end found between these fractions of its target length.
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*\s+|\n\s*\n")
_MIN_FRACTION, _MAX_FRACTION = 0.6, 1.4
_CHUNK_UNITS = 4096  # units per streaming step: bounds the Python strings alive at once
_FIELDS = ("unit_ptr", "start", "end", "tokens", "n_terms", "term_ptr", "term_ids", "term_counts", "term_df",
           "vocab_offsets", "vocab_bytes", "vocab_columns")


@dataclass(frozen=True)
class Block:
    start: int  # character offsets in the unit's text
    end: int
    tokens: int
    n_terms: int  # lexical terms, repeats included
    counts: dict[str, int]  # lexical term -> frequency


def _cuts(text: str, target_chars: int) -> list[int]:
    """Block end offsets: about `target_chars` apart, at a sentence end when one is near, else at a space."""
    ends: list[int] = []
    start = 0
    while len(text) - start > target_chars * _MAX_FRACTION:
        lo, hi = start + int(target_chars * _MIN_FRACTION), start + int(target_chars * _MAX_FRACTION)
        found = [m.end() for m in _SENTENCE_END.finditer(text, lo, hi)]  # ascending
        if found:  # the sentence end nearest the target length (the earlier of two as near)
            target = start + target_chars
            i = bisect.bisect_left(found, target)
            if i in (0, len(found)):
                cut = found[min(i, len(found) - 1)]
            else:
                below, above = found[i - 1], found[i]
                cut = below if target - below <= above - target else above
        else:
            space = text.rfind(" ", lo, start + target_chars)
            cut = space + 1 if space >= 0 else start + target_chars
        ends.append(cut)
        start = cut
    ends.append(len(text))
    return ends


def _spans(text: str, total_tokens: int, block_tokens: int) -> list[tuple[int, int]]:
    """(start, end) of each block of a unit of `total_tokens` tokens (none for an empty text)."""
    target_chars = max(int(block_tokens * len(text) / max(total_tokens, 1)), 1)
    spans, start = [], 0
    for end in _cuts(text, target_chars):
        if end > start:
            spans.append((start, end))
        start = end
    return spans


def unit_blocks_of(text: str, total_tokens: int, block_tokens: int, tokenizer: Tokenizer) -> list[Block]:
    """The blocks of one unit's text: consecutive, non-overlapping, about `block_tokens` tokens each,
    ending at a sentence end where one is near (`total_tokens`: the unit's token count)."""
    out = []
    for start, end in _spans(text, total_tokens, block_tokens):
        piece = text[start:end]
        terms = lexical_terms(piece)
        out.append(Block(start, end, tokenizer.count(piece), len(terms), dict(Counter(terms))))
    return out


@dataclass(frozen=True)
class BlockTable:
    """Every unit's blocks as flat arrays (see the module docstring)."""

    unit_ptr: np.ndarray
    start: np.ndarray
    end: np.ndarray
    tokens: np.ndarray
    n_terms: np.ndarray
    term_ptr: np.ndarray
    term_ids: np.ndarray
    term_counts: np.ndarray
    term_df: np.ndarray  # per term id: the blocks holding it (the index-wide document frequency)
    vocab: TermLookup
    terms: Sequence[str]  # id -> term (only to rebuild `Block.counts`)

    def blocks(self, unit: int) -> list[Block]:
        """One unit's blocks as `Block` records."""
        out = []
        for b in range(int(self.unit_ptr[unit]), int(self.unit_ptr[unit + 1])):
            lo, hi = int(self.term_ptr[b]), int(self.term_ptr[b + 1])
            counts = {self.terms[int(t)]: int(n) for t, n in zip(self.term_ids[lo:hi], self.term_counts[lo:hi],
                                                                 strict=True)}
            out.append(Block(int(self.start[b]), int(self.end[b]), int(self.tokens[b]), int(self.n_terms[b]), counts))
        return out

    def query_counts(self, blocks: np.ndarray, term_ids: Sequence[int]) -> np.ndarray:
        """(len(blocks), len(term_ids)) frequencies of the given terms in the given blocks."""
        out = np.zeros((len(blocks), len(term_ids)), dtype=np.float64)
        if not len(blocks) or not len(term_ids):
            return out
        lo, hi = self.term_ptr[blocks], self.term_ptr[blocks + 1]
        sizes = hi - lo
        row = np.repeat(np.arange(len(blocks)), sizes)
        entry = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes) + np.repeat(lo, sizes)
        ids = self.term_ids[entry]
        wanted = np.asarray(term_ids, dtype=np.int64)
        order = np.argsort(wanted, kind="stable")
        slot = np.searchsorted(wanted[order], ids)
        slot = np.minimum(slot, len(wanted) - 1)
        hit = wanted[order][slot] == ids
        out[row[hit], order[slot[hit]]] = self.term_counts[entry[hit]]
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        """The arrays written to the derived store (vocabulary sorted, as `lexical_store` keeps it)."""
        ids = sorted(range(len(self.terms)), key=self.terms.__getitem__)
        encoded = [self.terms[i].encode("utf-8") for i in ids]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        return {
            "unit_ptr": self.unit_ptr, "start": self.start, "end": self.end, "tokens": self.tokens,
            "n_terms": self.n_terms, "term_ptr": self.term_ptr, "term_ids": self.term_ids,
            "term_counts": self.term_counts, "term_df": self.term_df, "vocab_offsets": offsets,
            "vocab_bytes": np.frombuffer(b"".join(encoded), dtype=np.uint8),
            "vocab_columns": np.asarray(ids, dtype=np.int64),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> BlockTable:
        vocab = SortedVocab(arrays["vocab_offsets"], arrays["vocab_bytes"], arrays["vocab_columns"])
        return cls(arrays["unit_ptr"], arrays["start"], arrays["end"], arrays["tokens"], arrays["n_terms"],
                   arrays["term_ptr"], arrays["term_ids"], arrays["term_counts"], arrays["term_df"], vocab,
                   _TermsById(vocab))


class _TermsById(RowSequence[str]):
    """id -> term over a stored `SortedVocab` (whose `vocab_columns` maps sorted position -> id)."""

    def __init__(self, vocab: SortedVocab) -> None:
        self._vocab = vocab
        self._position: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self._vocab)

    def _row(self, i: int) -> str:
        if self._position is None:
            columns = np.asarray(self._vocab._columns)
            self._position = np.empty(len(columns), dtype=np.int64)
            self._position[columns] = np.arange(len(columns))
        return self._vocab[int(self._position[i])]


def _texts(records: Sequence[TextUnit]) -> Iterator[list[str]]:
    """The units' texts, a chunk at a time (straight from the Arrow column for a `RecordTable`)."""
    for lo in range(0, len(records), _CHUNK_UNITS):
        if isinstance(records, RecordTable):
            chunk = records.table.slice(lo, _CHUNK_UNITS).column("text").to_pylist()
        else:
            chunk = [r.text for r in records[lo : lo + _CHUNK_UNITS]]
        yield [t or "" for t in chunk]


def build_block_table(records: Sequence[TextUnit], unit_tokens: np.ndarray, block_tokens: int,
                      tokenizer: Tokenizer, anchors: TokenAnchors | None = None) -> BlockTable:
    """Cut every unit into blocks (`unit_blocks_of`, batched): spans per unit, token counts from the
    units' `anchors` (`TokenAnchors.span_counts`: only the blocks' ends are encoded; exact) or else on
    a few threads (`token_counts.count_strings`), the terms of a chunk of blocks at once
    (`text.lexical_term_ids`), per-block term counts with numpy."""
    vocab: dict[str, int] = {}
    words = WordIds(vocab)  # each distinct word is stemmed once for the whole table
    # flat machine integers, not Python int objects: a million-unit index has millions of blocks
    unit_sizes, starts, ends, tokens, n_terms = (array("q") for _ in range(5))
    term_ptr_parts: list[np.ndarray] = []
    ids_parts: list[np.ndarray] = []
    counts_parts: list[np.ndarray] = []
    unit = 0
    workers = min(os.cpu_count() or 1, 4)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="graphroute-blocks") as pool:
        for texts in _texts(records):
            first_unit, first_block = unit, len(starts)
            pieces = []
            for text in texts:
                spans = _spans(text, int(unit_tokens[unit]), block_tokens)
                unit += 1
                unit_sizes.append(len(spans))
                for s, e in spans:
                    starts.append(s)
                    ends.append(e)
                    pieces.append(text[s:e])
            if anchors is not None:
                sizes = np.frombuffer(unit_sizes, dtype=np.int64)[first_unit:]
                owner = np.repeat(np.arange(len(texts), dtype=np.int64), sizes)
                lo = np.frombuffer(starts, dtype=np.int64)[first_block:]
                hi = np.frombuffer(ends, dtype=np.int64)[first_block:]
                tokens.extend(anchors.span_counts(tokenizer, texts, first_unit, owner, lo, hi).tolist())
                del sizes, lo, hi  # views of the growing arrays must go before they grow
            else:
                # one call per text (tiktoken's batch call costs a thread-pool future per short text),
                # on the pool's threads while this one waits
                tokens.extend(count_strings(tokenizer, pieces, pool).tolist())
            # the pieces' terms, a run of texts at a time (`lexical_term_ids`: `lexical_terms`' terms)
            found = list(lexical_term_ids(pieces, words))
            sizes = np.concatenate([f[0] for f in found]) if found else np.zeros(0, dtype=np.int64)
            ids = np.concatenate([f[1] for f in found]) if found else np.zeros(0, dtype=np.int64)
            n_terms.extend(sizes.tolist())
            # distinct (block, term) pairs and their counts, ordered by block then term id
            codes = (np.repeat(np.arange(len(pieces), dtype=np.int64), sizes) << 32) | ids
            pairs, counts = np.unique(codes, return_counts=True)
            term_ptr_parts.append(np.bincount(pairs >> 32, minlength=len(pieces)))
            ids_parts.append((pairs & 0xFFFFFFFF).astype(np.int32))
            counts_parts.append(counts.astype(np.int32))

    def ptr(sizes: np.ndarray) -> np.ndarray:
        out = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=out[1:])
        return out

    def cat(parts: list[np.ndarray], dtype: npt.DTypeLike) -> np.ndarray:
        """The parts joined; the list is emptied so each part is freed as soon as it is copied."""
        out = np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)
        parts.clear()
        return out

    terms = [""] * len(vocab)
    for term, i in vocab.items():
        terms[i] = term
    term_ptr = ptr(cat(term_ptr_parts, np.int64))
    term_ids = cat(ids_parts, np.int32)
    term_counts = cat(counts_parts, np.int32)
    return BlockTable(
        ptr(np.frombuffer(unit_sizes, dtype=np.int64)), np.frombuffer(starts, dtype=np.int64).copy(),
        np.frombuffer(ends, dtype=np.int64).copy(), np.frombuffer(tokens, dtype=np.int64).astype(np.int32),
        np.frombuffer(n_terms, dtype=np.int64).astype(np.int32), term_ptr, term_ids, term_counts,
        np.bincount(term_ids, minlength=len(vocab)).astype(np.int64), vocab, terms,
    )


def block_table(index: Index, block_tokens: int) -> BlockTable:
    """The index's blocks of about `block_tokens` tokens: cached per index, and for an index loaded from
    files kept in its derived store (mapped by the next process instead of recomputed)."""

    def load_or_build() -> BlockTable:
        store = getattr(index, "derived_store", None)
        name, extra = f"passage_blocks-{block_tokens}", index.tokenizer.encoding_name
        if store is not None:
            found = store.load_arrays(name, ["text_units"], _FIELDS, extra=extra)
            if found is not None and len(found["unit_ptr"]) == len(index.text_units) + 1:
                return BlockTable.from_arrays(found)
        table = build_block_table(index.text_units, index.text_unit_tokens, block_tokens, index.tokenizer,
                                  getattr(index, "text_unit_token_anchors", None))
        if store is not None:
            store.save_arrays(name, ["text_units"], table.arrays(), extra=extra)
            # mapped back, so the process holds only the pages questions touch, not the whole table
            found = store.load_arrays(name, ["text_units"], _FIELDS, extra=extra)
            if found is not None:
                return BlockTable.from_arrays(found)
        return table

    return per_index_cache(index, f"passages.blocks.{block_tokens}", load_or_build)


# ---------------------------------------------------------------------------- excerpts

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


def _merged_spans(starts: list[int], ends: list[int], chosen: set[int]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for b in sorted(chosen):
        if spans and spans[-1][1] == starts[b]:
            spans[-1] = (spans[-1][0], ends[b])
        else:
            spans.append((starts[b], ends[b]))
    return spans


@dataclass(frozen=True)
class _Windows:
    """The windows of some units (module docstring), with the question terms' frequencies in each.

    Window i belongs to the unit of rank `rank[i]` and spans its blocks `a[i]`..`b[i]` (numbered within the
    unit; `a == b` for a one-block unit). Row r of the candidates' blocks (`blocks_of`, in unit rank then block
    order) is block `blocks_of[r]` of the table; unit rank u's first row is `row0[u]`."""

    n_blocks: np.ndarray
    row0: np.ndarray
    blocks_of: np.ndarray
    rank: np.ndarray
    a: np.ndarray
    b: np.ndarray
    a_rows: np.ndarray  # rows of each window's blocks a and b in `blocks_of`
    b_rows: np.ndarray
    pair: np.ndarray
    tf: np.ndarray  # (windows, question terms)
    lengths: np.ndarray  # lexical terms per window, repeats included: BM25's document length


def _query_term_ids(table: BlockTable, query: str) -> list[int]:
    """The table's ids of the question's distinct lexical terms (terms no block holds are left out)."""
    found = (table.vocab.get(t) for t in dict.fromkeys(lexical_terms(query)))
    return [int(i) for i in found if i is not None]


def _windows(table: BlockTable, units: Sequence[int], ids: Sequence[int]) -> _Windows:
    """The windows of `units` (distinct positions, in rank order) and the frequencies of terms `ids` in them:
    BM25 over windows reads only the question's terms of each window plus its length."""
    where = np.asarray(units, dtype=np.int64)
    first = table.unit_ptr[where]
    n_blocks = table.unit_ptr[where + 1] - first
    # windows (unit rank, first block, last block): adjacent block pairs; a one-block unit is its own window
    per_unit = np.where(n_blocks == 1, 1, np.maximum(n_blocks - 1, 0))
    rank = np.repeat(np.arange(len(units)), per_unit)
    a = np.arange(len(rank)) - np.repeat(np.cumsum(per_unit) - per_unit, per_unit)
    b = np.where(n_blocks[rank] == 1, a, a + 1)
    row0 = np.cumsum(n_blocks) - n_blocks
    blocks_of = np.repeat(first, n_blocks) + (np.arange(int(n_blocks.sum())) - np.repeat(row0, n_blocks))
    counts = table.query_counts(blocks_of, ids)
    a_rows, b_rows = row0[rank] + a, row0[rank] + b
    pair = b != a
    tf = counts[a_rows] + np.where(pair[:, None], counts[b_rows], 0.0)
    sizes = table.n_terms[blocks_of].astype(np.int64)
    lengths = sizes[a_rows] + np.where(pair, sizes[b_rows], 0)
    return _Windows(n_blocks, row0, blocks_of, rank, a, b, a_rows, b_rows, pair, tf, lengths)


def best_window_order(index: Index, units: Sequence[int], query: str, window_tokens: int) -> list[int]:
    """`units` re-ranked by the BM25 of their best window for `query` (ties keep the given order), the
    term weights from the whole index: idf over all its blocks (`BlockTable.term_df`). A long unit is
    ranked by its passage about the question, not by question terms scattered through it; units with no
    question term keep their order after the rest."""
    units = list(dict.fromkeys(units))
    if not units:
        return units
    table = excerpt_blocks(index, window_tokens)
    ids = _query_term_ids(table, query)
    if not ids:
        return units
    win = _windows(table, units, ids)
    collection = (len(table.start), table.term_df[np.asarray(ids, dtype=np.int64)])
    relevance = BM25.frequency_scores(win.tf, win.lengths, collection=collection)
    best = np.zeros(len(units))
    np.maximum.at(best, win.rank, relevance)
    return [units[int(i)] for i in np.argsort(-best, kind="stable")]


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
    win = _windows(table, units, _query_term_ids(table, query))
    if not len(win.rank) or budget <= 0:
        return []
    w_rank, w_a, w_b, pair = win.rank, win.a, win.b, win.pair
    n_blocks, row0, blocks_of, a_rows, b_rows = win.n_blocks, win.row0, win.blocks_of, win.a_rows, win.b_rows
    relevance = BM25.frequency_scores(win.tf, win.lengths)
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
        out.append(Excerpt(units[r], r, _merged_spans(starts[o : o + n], ends[o : o + n], picked),
                           sum(tokens[o + x] for x in picked), len(picked) == n))
    return out


