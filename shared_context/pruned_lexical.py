"""Top-k of weighted BM25 fields that reads postings pruned by weight, so a word in a quarter of all
titles costs a question no more than a rare one.

Entity linking scores `2 x BM25(title) + BM25(description)`. A word such as ORGANIZATION in 250,000 of a
million titles has a small IDF, so its weight in any document is small, yet reading its postings is the
largest part of scoring it. Here a query term's postings in one field (a *list*) are:

- read whole when they hold at most `COMMON_POSTINGS` documents;
- otherwise (a *common* list) never read whole: its documents are read in weight order from its
  *impact prefix* (its `IMPACT_PREFIX` heaviest entries, kept beside the postings, `Impacts`) only while
  they could still change the top k, at most `QUERY_BUDGET` entries per query in all, and the candidates
  found elsewhere look up their weight in it by binary search.

Every list has a bound, the most it can add to a document not yet seen in it (its largest weight, then
the next weight of its impact prefix, 0 once read whole). A candidate's exact score is computed only
while its partial score plus the bounds can reach the k-th best exact score found so far (MaxScore); the
search stops when no unseen document can reach it (`Pruned.exact`: the k best and every tie with the
k-th are among the candidates, with the same scores as the unpruned computation: each field's weights
added in query-term order in the field's dtype, then weighted in float64, as `BM25.sparse_scores` and
linking do), or when the budget is spent: then the top k is that of the documents read, and `unseen`
says what a document left out could still score.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from shared_context.bm25 import BM25

__all__ = ["COMMON_POSTINGS", "IMPACT_PREFIX", "QUERY_BUDGET", "Impacts", "Pruned", "impacts_of", "pruned_top",
           "scores_at"]

COMMON_POSTINGS = 4_096  # a list longer than this is common: read in weight order, never whole
IMPACT_PREFIX = 4_096  # entries of a common list kept in weight order (the most one query reads of it)
# Weight-ordered entries one query reads in all. Candidates read this way are scored exactly by binary
# search in every list, so the budget bounds that work too. When common words decide the k-th place
# (every title "PERSON <number>": a quarter of the titles tie on PERSON), no budget short of the whole
# lists proves the order of those near-equal entities, so a small one reads their heaviest entries only.
QUERY_BUDGET = 1_024
_SLACK = 1e-5  # relative: partial sums are float64, exact ones add float32 weights in another order


@dataclass(frozen=True)
class Impacts:
    """What pruning needs beside a BM25's postings: every term's largest weight, and the impact prefix
    (documents by weight, descending; ties by position) of every term with more than `COMMON_POSTINGS`
    documents."""

    term_max: np.ndarray  # (n_terms,) largest weight of each term column (0 for an empty one)
    terms: np.ndarray  # int64, ascending: the common term columns
    indptr: np.ndarray  # int64: common term i's prefix is docs/weights[indptr[i]:indptr[i + 1]]
    docs: np.ndarray  # int32 document rows
    weights: np.ndarray  # their weights

    @classmethod
    def build(cls, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray) -> Impacts:
        """From CSC postings (term columns, ascending document rows)."""
        starts = np.asarray(indptr[:-1], dtype=np.int64)
        lengths = np.diff(np.asarray(indptr, dtype=np.int64))
        term_max = np.zeros(len(lengths), dtype=data.dtype)
        filled = np.flatnonzero(lengths > 0)
        if len(filled):
            term_max[filled] = np.maximum.reduceat(np.asarray(data), starts[filled])
        common = np.flatnonzero(lengths > COMMON_POSTINGS).astype(np.int64)
        docs_parts, weight_parts, sizes = [], [], []
        for t in common.tolist():
            lo, hi = int(indptr[t]), int(indptr[t + 1])
            w = np.asarray(data[lo:hi])
            size = min(IMPACT_PREFIX, len(w))
            cut = w[np.argpartition(-w, size - 1)[size - 1]]  # the prefix's last weight
            above = np.flatnonzero(w > cut)
            tied = np.flatnonzero(w == cut)[: size - len(above)]  # lowest positions first
            rows = np.concatenate([above, tied])
            rows = rows[np.lexsort((rows, -w[rows]))]
            docs_parts.append(np.asarray(indices[lo:hi])[rows].astype(np.int32))
            weight_parts.append(w[rows])
            sizes.append(len(rows))
        prefix_ptr = np.zeros(len(common) + 1, dtype=np.int64)
        np.cumsum(sizes, out=prefix_ptr[1:])
        empty_docs, empty_w = np.zeros(0, dtype=np.int32), np.zeros(0, dtype=data.dtype)
        return cls(term_max, common, prefix_ptr, np.concatenate(docs_parts) if docs_parts else empty_docs,
                   np.concatenate(weight_parts) if weight_parts else empty_w)

    def prefix(self, term: int) -> tuple[np.ndarray, np.ndarray] | None:
        i = int(np.searchsorted(self.terms, term))
        if i >= len(self.terms) or int(self.terms[i]) != term:
            return None
        lo, hi = int(self.indptr[i]), int(self.indptr[i + 1])
        return self.docs[lo:hi], self.weights[lo:hi]


_IMPACTS: weakref.WeakKeyDictionary[BM25, Impacts] = weakref.WeakKeyDictionary()


def impacts_of(bm25: BM25) -> Impacts:
    """The `Impacts` of `bm25`: read with its stored postings (`lexical_store`), else built on first use."""
    found = _IMPACTS.get(bm25)
    if found is None:
        m = bm25.matrix
        found = Impacts.build(np.asarray(m.indptr), np.asarray(m.indices), np.asarray(m.data))
        _IMPACTS[bm25] = found
    return found


def attach_impacts(bm25: BM25, impacts: Impacts) -> None:
    """Use `impacts` (read from disk with the postings) for `bm25`."""
    _IMPACTS[bm25] = impacts


@dataclass(frozen=True)
class Pruned:
    """The candidates of a pruned top-k and their exact weighted scores."""

    positions: np.ndarray  # int64, ascending
    scores: np.ndarray  # float64, exact (the unpruned computation's numbers)
    unseen: float  # the most any other document can score
    k: int
    exact: bool  # the k best and their ties are all in `positions` (unseen < the k-th best score)
    postings_read: int  # entries read: whole lists, impact prefixes and binary-search probes


@dataclass
class _List:
    part: int
    order: int  # the term's place in the query (scores add terms in query order)
    lo: int
    hi: int
    term: int
    weight: float
    bound: float  # the most this list adds to a document not yet read from it
    prefix: tuple[np.ndarray, np.ndarray] | None = None
    read: int = 0  # entries of the impact prefix read


def _lists(parts: Sequence[tuple[float, BM25]], terms: Sequence[str]) -> list[_List]:
    out = []
    unique = list(dict.fromkeys(terms))
    for p, (weight, bm25) in enumerate(parts):
        indptr = bm25.matrix.indptr
        for j, term in enumerate(unique):
            t = bm25.vocab.get(term)
            if t is None or indptr[t + 1] <= indptr[t]:
                continue
            lo, hi = int(indptr[t]), int(indptr[t + 1])
            bound = weight * float(impacts_of(bm25).term_max[t]) if hi - lo > COMMON_POSTINGS else 0.0
            out.append(_List(p, j, lo, hi, t, weight, bound))
    return out


def _probe(bm25: BM25, lst: _List, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mask of `positions` in the list, their weights) by binary search: log2(list length) reads each."""
    docs = bm25.matrix.indices[lst.lo : lst.hi]
    needles = positions.astype(docs.dtype, copy=False)  # the haystack's dtype: never a copy of the list
    slot = np.minimum(np.searchsorted(docs, needles), len(docs) - 1)
    hit = docs[slot] == needles
    return hit, np.asarray(bm25.matrix.data[lst.lo : lst.hi])[slot[hit]] if hit.any() else np.zeros(0)


def _exact(parts: Sequence[tuple[float, BM25]], lists: list[_List], positions: np.ndarray) -> tuple[np.ndarray, int]:
    """Exact weighted scores of `positions`, and the entries read: per part, weights added in query
    order in the part's dtype, then `sum(weight * part)` in float64 (the unpruned numbers)."""
    total = np.zeros(len(positions), dtype=np.float64)
    read = 0
    if not len(positions):
        return total, 0
    for p, (weight, bm25) in enumerate(parts):
        acc: np.ndarray = np.zeros(len(positions), dtype=bm25.dtype)
        for lst in sorted((x for x in lists if x.part == p), key=lambda x: x.order):
            hit, values = _probe(bm25, lst, positions)
            acc[hit] += values
            read += len(positions) * max(1, int(np.ceil(np.log2(lst.hi - lst.lo + 1))))
        total += weight * acc.astype(np.float64)
    return total, read


def scores_at(parts: Sequence[tuple[float, BM25]], terms: Sequence[str], positions: np.ndarray) -> np.ndarray:
    """Exact `sum(weight * BM25)` of the documents at `positions` (any order), by binary search."""
    wanted = np.asarray(positions, dtype=np.int64).reshape(-1)
    order = np.argsort(wanted, kind="stable")
    out = np.zeros(len(wanted), dtype=np.float64)
    out[order] = _exact(parts, _lists(parts, terms), wanted[order])[0]
    return out


def _kth(values: np.ndarray, k: int) -> float:
    return float(np.partition(values, len(values) - k)[len(values) - k]) if len(values) >= k else 0.0


def pruned_top(parts: Sequence[tuple[float, BM25]], terms: Sequence[str], k: int) -> Pruned:
    """Candidates holding the `k` best documents of `sum(weight * BM25(part))` (see the module
    docstring), with their exact scores."""
    k = max(k, 1)
    lists = _lists(parts, terms)
    read = 0
    # whole lists first: their documents and what they add (float64, for bounds only)
    whole = [x for x in lists if x.bound == 0.0]
    docs = [np.asarray(parts[x.part][1].matrix.indices[x.lo : x.hi], dtype=np.int64) for x in whole]
    read += sum(len(d) for d in docs)
    cand = np.unique(np.concatenate(docs)) if docs else np.zeros(0, dtype=np.int64)
    partial = np.zeros(len(cand), dtype=np.float64)
    for x, d in zip(whole, docs, strict=True):
        partial[np.searchsorted(cand, d)] += x.weight * np.asarray(parts[x.part][1].matrix.data[x.lo : x.hi], dtype=np.float64)
    common = [x for x in lists if x.bound > 0.0]
    known = np.zeros(len(cand), dtype=bool)  # exact score computed
    exact_scores = np.zeros(len(cand), dtype=np.float64)
    budget = QUERY_BUDGET
    while True:
        unseen = sum(x.bound for x in common)
        floor = _kth(np.where(known, exact_scores, partial), k)  # the k-th best lower bound
        need = ~known & (partial + unseen >= floor * (1 - _SLACK))
        if need.any():
            exact_scores[need], cost = _exact(parts, lists, cand[need])
            known |= need
            read += cost
        theta = _kth(exact_scores[known], k)
        if unseen == 0.0 or (theta > 0 and unseen * (1 + _SLACK) < theta):
            done = True
            break
        # read more of the common list that could add the most, in weight order
        open_lists = [x for x in common if x.bound > 0 and budget > 0
                      and (x.prefix is None or x.read < len(x.prefix[0]))]
        if not open_lists:
            done = False
            break
        lst = max(open_lists, key=lambda x: x.bound)
        bm25 = parts[lst.part][1]
        if lst.prefix is None:
            lst.prefix = impacts_of(bm25).prefix(lst.term)
            assert lst.prefix is not None, "a common list has an impact prefix"
        p_docs, p_weights = lst.prefix
        step = min(max(lst.read, 2 * k, 64), budget, len(p_docs) - lst.read)
        new = np.asarray(p_docs[lst.read : lst.read + step], dtype=np.int64)
        new_w = lst.weight * np.asarray(p_weights[lst.read : lst.read + step], dtype=np.float64)
        lst.read += step
        budget -= step
        read += step
        if lst.read < len(p_docs):
            lst.bound = lst.weight * float(p_weights[lst.read])
        elif len(p_docs) == lst.hi - lst.lo:
            lst.bound = 0.0  # the whole list was read
        else:
            lst.bound = lst.weight * float(p_weights[-1])  # beyond the prefix: no heavier than its last
        merged = np.union1d(cand, new)
        grow = np.searchsorted(merged, cand)
        partial_m, known_m, exact_m = (np.zeros(len(merged)), np.zeros(len(merged), dtype=bool),
                                       np.zeros(len(merged)))  # fmt: skip
        partial_m[grow], known_m[grow], exact_m[grow] = partial, known, exact_scores
        partial_m[np.searchsorted(merged, new)] += new_w
        cand, partial, known, exact_scores = merged, partial_m, known_m, exact_m
    unseen = sum(x.bound for x in common)
    dropped = cand[~known]
    if len(dropped):  # candidates never scored exactly: no better than their partial score plus the bounds
        unseen = max(unseen, float((partial[~known] + unseen).max()))
    return Pruned(cand[known], exact_scores[known], unseen, k, done, read)
