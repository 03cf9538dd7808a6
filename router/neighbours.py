"""How close a question's wording is to the nearest question the model was trained on.

The familiarity share (`router.features.wording_buckets` against a bitmap of seen words) says whether the words
are known one by one; a question built of known words in an unfamiliar arrangement ("Considering the information
from an article by ... and another by ..., which ...") still scores high there. This measure compares whole
questions: the idf-weighted cosine between the question's set of words (names removed, the same hashed buckets)
and each training question's, keeping the best. Words never seen in training count in the question's norm with
the highest idf, so they pull the similarity down.

The table is plain arrays (an inverted index from word bucket to training questions), stored in the model file;
a look-up gathers the postings of the question's known words and takes one weighted `bincount`. numpy only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

FIELDS = ("terms", "idf", "indptr", "rows", "norms")


@dataclass(frozen=True)
class Neighbours:
    terms: np.ndarray  # int64, sorted: the word buckets of the training questions
    idf: np.ndarray  # float64 per term: log((1 + n) / (1 + df)) + 1
    indptr: np.ndarray  # int64, len(terms) + 1: postings of term i are rows[indptr[i]:indptr[i + 1]]
    rows: np.ndarray  # int64: training-question positions
    norms: np.ndarray  # float64 per training question: its idf vector's length

    @property
    def size(self) -> int:
        return len(self.norms)

    @property
    def unseen_idf(self) -> float:
        return math.log(1.0 + self.size) + 1.0

    @classmethod
    def build(cls, bucket_lists: Sequence[Sequence[int]]) -> Neighbours:
        """The table for these training questions (one list of word buckets each)."""
        sets = [np.unique(np.asarray(b, dtype=np.int64)) for b in bucket_lists]
        n = len(sets)
        if n == 0 or not any(len(s) for s in sets):
            empty = np.zeros(0, dtype=np.int64)
            return cls(empty, np.zeros(0), np.zeros(1, dtype=np.int64), empty, np.zeros(n))
        owner = np.concatenate([np.full(len(s), i, dtype=np.int64) for i, s in enumerate(sets)])
        flat = np.concatenate(sets)
        order = np.lexsort((owner, flat))
        flat, owner = flat[order], owner[order]
        terms, starts, df = np.unique(flat, return_index=True, return_counts=True)
        idf = np.log((1.0 + n) / (1.0 + df)) + 1.0
        weight = idf[np.repeat(np.arange(len(terms)), df)] ** 2
        norms = np.sqrt(np.bincount(owner, weights=weight, minlength=n))
        indptr = np.append(starts, len(flat)).astype(np.int64)
        return cls(terms, idf, indptr, owner, norms)

    def nearest(self, buckets: Sequence[int]) -> float:
        """The best idf-weighted cosine between these word buckets and a training question (0 when none)."""
        query = np.unique(np.asarray(buckets, dtype=np.int64))
        if len(query) == 0 or len(self.terms) == 0:
            return 0.0
        at = np.searchsorted(self.terms, query)
        at[at >= len(self.terms)] = 0
        known = at[self.terms[at] == query]
        unseen = len(query) - len(known)
        q_norm = math.sqrt(float((self.idf[known] ** 2).sum()) + unseen * self.unseen_idf**2)
        if len(known) == 0:
            return 0.0
        starts, ends = self.indptr[known], self.indptr[known + 1]
        lengths = ends - starts
        positions = np.repeat(ends - lengths.cumsum(), lengths) + np.arange(int(lengths.sum()))
        weights = np.repeat(self.idf[known] ** 2, lengths)
        shared = np.bincount(self.rows[positions], weights=weights, minlength=self.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            cosine = np.where(self.norms > 0, shared / (self.norms * q_norm), 0.0)
        return float(min(1.0, cosine.max()))

    def arrays(self, prefix: str = "nn") -> dict[str, np.ndarray]:
        """For the model file (compact dtypes)."""
        return {f"{prefix}_terms": self.terms.astype(np.uint32), f"{prefix}_idf": self.idf.astype(np.float32),
                f"{prefix}_indptr": self.indptr.astype(np.int64), f"{prefix}_rows": self.rows.astype(np.int32),
                f"{prefix}_norms": self.norms.astype(np.float32)}

    @classmethod
    def from_arrays(cls, found: dict[str, np.ndarray], prefix: str = "nn") -> Neighbours:
        return cls(np.asarray(found[f"{prefix}_terms"], dtype=np.int64),
                   np.asarray(found[f"{prefix}_idf"], dtype=np.float64),
                   np.asarray(found[f"{prefix}_indptr"], dtype=np.int64),
                   np.asarray(found[f"{prefix}_rows"], dtype=np.int64),
                   np.asarray(found[f"{prefix}_norms"], dtype=np.float64))
