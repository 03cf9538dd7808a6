"""Okapi BM25: the one lexical scoring engine (entity linking, unit search, passages, the offline model).

Documents come as term lists or as term ids of whole columns (`shared_context.text.lexical_terms` /
`lexical_term_ids` define the terms); postings are (documents x terms) CSC, built in memory or read back
from disk (`shared_context.lexical_store`), so a query reads only its own terms' postings.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Protocol

import numpy as np

from shared_context.text import TermIds

if TYPE_CHECKING:  # SciPy loads when a BM25 index is built, not on import
    import scipy.sparse as sp

__all__ = ["BM25", "Postings", "TermLookup"]

class TermLookup(Protocol):
    """Term -> column of the postings matrix: a dict, or a vocabulary read from disk."""

    def get(self, term: str, /) -> int | None: ...


@dataclass(frozen=True)
class Postings:
    """CSC postings read back from disk (memory-mapped arrays; scipy would copy them)."""

    indptr: np.ndarray  # term column t spans indices/data[indptr[t]:indptr[t + 1]]
    indices: np.ndarray  # document rows
    data: np.ndarray  # BM25 weight of (document, term)
    shape: tuple[int, int]


_BM25_CHUNK = 4096  # documents per step of the BM25 build
_ARROW_TERMS = 50_000
_WEIGHT_SLICE = 1 << 22  # above this many terms in a chunk, Arrow assigns the term ids
# `sparse_scores` gathers postings while they hold fewer entries than 1/_SPARSE_SHARE of the documents
_SPARSE_SHARE = 8


def _term_ids(flat: list[str], vocab: dict[str, int]) -> np.ndarray:
    """Each term's id, new terms numbered in order of first appearance (Arrow dictionary-encodes large
    chunks, so only their distinct terms meet the Python dict)."""
    if len(flat) < _ARROW_TERMS:
        return np.fromiter((vocab.setdefault(t, len(vocab)) for t in flat), dtype=np.int64, count=len(flat))
    import pyarrow as pa

    encoded = pa.array(flat, type=pa.string()).dictionary_encode()
    distinct = encoded.dictionary.to_pylist()
    ids = np.fromiter((vocab.setdefault(t, len(vocab)) for t in distinct), dtype=np.int64, count=len(distinct))
    out: np.ndarray = ids[encoded.indices.to_numpy(zero_copy_only=False)]
    return out


def _join(parts: list[np.ndarray]) -> np.ndarray:
    """The parts concatenated; the list is emptied so each part is freed once copied."""
    out = np.concatenate(parts)
    parts.clear()
    return out


def _idf(n_docs: int, df: np.ndarray) -> np.ndarray:
    return np.log1p((n_docs - df + 0.5) / (df + 0.5))


def _norm(doc_lengths: np.ndarray, k1: float, b: float) -> np.ndarray:
    avgdl = max(float(doc_lengths.mean()), 1e-9)
    return k1 * (1 - b + b * doc_lengths / avgdl)


def _weights(idf: np.ndarray | float, tf: np.ndarray, norm: np.ndarray, k1: float) -> np.ndarray:
    """BM25 weight of each (document, term) entry with frequency `tf`."""
    return idf * tf * (k1 + 1) / (tf + norm)  # type: ignore[no-any-return]


class BM25:
    """Okapi BM25 over a fixed list of documents given as term lists, stored as (documents x terms) CSC
    postings so a query touches only the posting lists of its own terms.

    `dtype=np.float32` halves the memory of large tables (entity linking); the default float64 gives the
    same numbers as a plain-Python BM25.
    """

    def __init__(
        self,
        docs: Iterable[Sequence[str]],
        *,
        k1: float = 1.2,
        b: float = 0.75,
        dtype: type = np.float64,
        lengths: Sequence[int] | None = None,
    ) -> None:
        """`docs`: each document's terms (any iterable: read once, a chunk at a time, so a million
        documents never hold all their terms at once). `lengths`: the documents' lengths in terms when
        `docs` holds only some of their terms (`query_scores` keeps just the query's terms; BM25 still
        needs each document's full length)."""
        vocab: dict[str, int] = {}

        def chunks() -> Iterator[TermIds]:
            it = iter(docs)
            while chunk := list(islice(it, _BM25_CHUNK)):
                flat = [t for terms in chunk for t in terms]
                sizes = np.fromiter(map(len, chunk), dtype=np.int64, count=len(chunk))
                yield sizes, (_term_ids(flat, vocab) if flat else np.zeros(0, dtype=np.int64))

        self._build(chunks(), vocab, k1, b, dtype, lengths)

    @classmethod
    def from_term_ids(
        cls,
        chunks: Iterable[TermIds],
        vocab: dict[str, int],
        *,
        k1: float = 1.2,
        b: float = 0.75,
        dtype: type = np.float64,
        lengths: Sequence[int] | None = None,
    ) -> BM25:
        """The BM25 of documents given as term ids (`lexical_term_ids`: runs of (terms per document,
        ids in document order)) of `vocab`, which may still grow while `chunks` is read: the same
        postings as `BM25(term lists)` of the same documents."""
        self = object.__new__(cls)
        self._build(chunks, vocab, k1, b, dtype, lengths)
        return self

    def _build(
        self,
        chunks: Iterable[TermIds],
        vocab: dict[str, int],
        k1: float,
        b: float,
        dtype: type,
        lengths: Sequence[int] | None,
    ) -> None:
        self.vocab: TermLookup = vocab
        # distinct (document, term) pairs with their counts, a chunk of documents at a time
        doc_parts: list[np.ndarray] = []
        term_parts: list[np.ndarray] = []
        count_parts: list[np.ndarray] = []
        size_parts: list[np.ndarray] = []
        n_docs = 0
        for sizes, ids in chunks:
            size_parts.append(sizes)
            if len(ids):
                codes = (np.repeat(np.arange(len(sizes), dtype=np.int64), sizes) << 32) | ids
                pairs, counts = np.unique(codes, return_counts=True)  # sorted: by document, then term
                doc_parts.append(np.bincount(pairs >> 32, minlength=len(sizes)))
                term_parts.append((pairs & 0xFFFFFFFF).astype(np.int32))
                count_parts.append(counts.astype(np.int32))
            else:
                doc_parts.append(np.zeros(len(sizes), dtype=np.int64))
            n_docs += len(sizes)
        if lengths is not None and len(lengths) != n_docs:
            raise ValueError(f"lengths has {len(lengths)} entries for {n_docs} documents")
        all_sizes = np.concatenate(size_parts) if size_parts else np.zeros(0, dtype=np.int64)
        doc_lengths = np.asarray(all_sizes if lengths is None else lengths, dtype=np.float64).reshape(n_docs)
        del all_sizes, size_parts
        n_terms = len(vocab)
        import scipy.sparse as sp  # here, not at module level: importing the package must stay cheap

        self.n_docs = n_docs
        self.dtype = dtype
        if not term_parts:
            self.matrix: sp.csc_matrix | Postings = sp.csc_matrix((n_docs, max(n_terms, 1)), dtype=dtype)
            return
        # the pairs are already the rows of a CSR matrix: no COO copy on the way to CSC
        indptr = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(_join(doc_parts), out=indptr[1:])
        csr = sp.csr_matrix((_join(count_parts).astype(np.float64), _join(term_parts), indptr), shape=(n_docs, n_terms))
        tf = csr.tocsc()
        del csr, indptr
        tf.sum_duplicates()
        df = np.diff(tf.indptr).astype(np.float64)
        idf = _idf(n_docs, df)
        norm = _norm(doc_lengths, k1, b)
        term_of_entry = np.repeat(np.arange(n_terms, dtype=np.int32), np.diff(tf.indptr))
        weights: np.ndarray = np.empty(len(tf.data), dtype=dtype)
        for lo in range(0, len(weights), _WEIGHT_SLICE):  # slices: the temporaries stay small
            sl = slice(lo, lo + _WEIGHT_SLICE)
            weights[sl] = _weights(idf[term_of_entry[sl]], tf.data[sl], norm[tf.indices[sl]], k1)
        tf.data = weights
        self.matrix = tf

    @staticmethod
    def frequency_scores(
        tf: np.ndarray,
        lengths: np.ndarray,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        collection: tuple[int, np.ndarray] | None = None,
    ) -> np.ndarray:
        """`BM25(docs, lengths=lengths).scores(query)` from the (documents x unique query terms, in query
        order) term frequencies `tf`: the same numbers, for callers that hold per-document term counts as
        arrays (excerpt windows) rather than term lists. `collection` = (documents, document frequency of each
        query term) of a larger collection these documents are drawn from: the idf is then the collection's."""
        n_docs = tf.shape[0]
        out: np.ndarray = np.zeros(n_docs, dtype=np.float64)
        if not n_docs:
            return out
        present = tf > 0
        if collection is None:
            idf = _idf(n_docs, present.sum(axis=0).astype(np.float64))
        else:
            idf = _idf(collection[0], np.asarray(collection[1], dtype=np.float64))
        norm = _norm(np.asarray(lengths, dtype=np.float64), k1, b)
        for j in range(tf.shape[1]):  # in query order, as `scores` adds them
            rows = np.flatnonzero(present[:, j])
            if len(rows):
                out[rows] += _weights(idf[j], tf[rows, j], norm[rows], k1)
        return out

    @classmethod
    def query_scores(
        cls, docs: Sequence[Sequence[str]], query: Sequence[str], *, k1: float = 1.2, b: float = 0.75
    ) -> np.ndarray:
        """`BM25(docs).scores(query)` for a one-off query, computed from the query's terms only.

        The same numbers (a document's score needs only its length and the query terms' frequencies), without
        indexing every term of every document: per-question scoring of candidate passages and sentences
        would otherwise spend its time building a vocabulary the query never reads. Counted straight into
        `frequency_scores`' term-frequency matrix: no postings built, so no SciPy import for one question."""
        column = {t: j for j, t in enumerate(dict.fromkeys(query))}
        tf = np.zeros((len(docs), len(column)), dtype=np.float64)
        for i, terms in enumerate(docs):
            for t in terms:
                j = column.get(t)
                if j is not None:
                    tf[i, j] += 1.0
        return cls.frequency_scores(tf, np.asarray([len(terms) for terms in docs], dtype=np.float64), k1=k1, b=b)

    @classmethod
    def from_postings(cls, vocab: TermLookup, postings: Postings, n_docs: int) -> BM25:
        """A BM25 over postings computed earlier (`lexical_store` keeps them on disk, memory-mapped)."""
        self = object.__new__(cls)
        self.vocab = vocab
        self.n_docs = n_docs
        self.dtype = postings.data.dtype.type
        self.matrix = postings
        return self

    def top_k(self, query: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions, scores) of the `k` best documents with a positive score, best first, ties by
        position."""
        positions, scores = self.sparse_scores(query)
        if k <= 0 or not len(positions):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        keep = np.arange(len(positions))
        if len(keep) > k:  # keep everything tied with the k-th best, then order exactly
            cut = np.partition(scores, len(keep) - k)[len(keep) - k]
            keep = np.flatnonzero(scores >= cut)
        best = keep[np.lexsort((positions[keep], -scores[keep]))][:k]
        return positions[best].astype(np.int64), scores[best].astype(np.float64)

    def scores_at(self, query: Sequence[str], positions: np.ndarray) -> np.ndarray:
        """Scores of the documents at `positions` (float64)."""
        wanted = np.asarray(positions, dtype=np.int64).reshape(-1)
        found, scores = self.sparse_scores(query)
        out = np.zeros(len(wanted), dtype=np.float64)
        if len(found) and len(wanted):
            slot = np.minimum(np.searchsorted(found, wanted), len(found) - 1)
            hit = found[slot] == wanted
            out[hit] = scores[slot[hit]]
        return out

    def sparse_scores(self, query: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(positions, scores) of the documents with a positive score, positions ascending: `scores(query)`
        without an array of every document. The same numbers: each document's entries are added in the
        same (query term) order in the same dtype; a query whose postings cover a large share of the
        documents is scored densely, which is then cheaper than gathering the postings."""
        m = self.matrix
        spans = []
        for term in dict.fromkeys(query):  # unique, stable
            t = self.vocab.get(term)
            if t is not None and m.indptr[t + 1] > m.indptr[t]:
                spans.append((int(m.indptr[t]), int(m.indptr[t + 1])))
        if not spans:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=self.dtype)
        if sum(hi - lo for lo, hi in spans) * _SPARSE_SHARE > self.n_docs:
            dense = self.scores(query)
            positions = np.flatnonzero(dense > 0)
            return positions, dense[positions]
        parts = [np.asarray(m.indices[lo:hi], dtype=np.int64) for lo, hi in spans]
        positions = parts[0] if len(parts) == 1 else np.unique(np.concatenate(parts))  # postings are sorted
        out: np.ndarray = np.zeros(len(positions), dtype=self.dtype)
        for (lo, hi), docs in zip(spans, parts, strict=True):
            out[np.searchsorted(positions, docs)] += m.data[lo:hi]
        return positions, out

    def scores(self, query: Sequence[str]) -> np.ndarray:
        """Score of every document for `query` (repeated query terms count once)."""
        out: np.ndarray = np.zeros(self.n_docs, dtype=self.dtype)
        m = self.matrix
        for term in dict.fromkeys(query):  # unique, stable
            t = self.vocab.get(term)
            if t is None:
                continue
            lo, hi = m.indptr[t], m.indptr[t + 1]
            out[m.indices[lo:hi]] += m.data[lo:hi]
        return out

    def postings(self, term: str) -> np.ndarray:
        """Positions of the documents that contain `term`."""
        t = self.vocab.get(term)
        if t is None:
            return np.zeros(0, dtype=np.int32)
        return np.asarray(self.matrix.indices[self.matrix.indptr[t] : self.matrix.indptr[t + 1]])
