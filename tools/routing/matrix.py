"""Design matrices for training: the wording features of many questions as one sparse matrix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from router.features import CUE_FEATURES, N_HASH_FEATURES, QuestionFeatures, ngram_vector

if TYPE_CHECKING:
    import scipy.sparse as sp
    from sklearn.feature_extraction.text import HashingVectorizer


def reference_hasher() -> HashingVectorizer:
    """The scikit-learn vectoriser `hashed_ngrams` reproduces exactly (used by the tests to check it)."""
    from sklearn.feature_extraction.text import HashingVectorizer

    return HashingVectorizer(analyzer="char_wb", ngram_range=(2, 4), n_features=N_HASH_FEATURES,
                             alternate_sign=False, norm="l2", lowercase=True, dtype=np.float64)


def hashed_ngrams(texts: Sequence[str]) -> sp.csr_matrix:
    import scipy.sparse as sp

    rows = [ngram_vector(t) for t in texts]
    indptr = np.cumsum([0] + [len(c) for c, _ in rows])
    columns = np.concatenate([c for c, _ in rows]) if rows else np.zeros(0, dtype=np.int64)
    values = np.concatenate([v for _, v in rows]) if rows else np.zeros(0, dtype=np.float64)
    return sp.csr_matrix((values, columns, indptr), shape=(len(texts), N_HASH_FEATURES))


def dense_block(features: Sequence[QuestionFeatures], *, cues: bool = True) -> np.ndarray:
    """The cue/form features; `cues=False` zeroes the cue-lexicon features and their interactions."""
    dense = np.vstack([f.dense for f in features]).astype(np.float64)
    if not cues:
        dense[:, list(CUE_FEATURES)] = 0.0
    return dense


def build_matrix(features: Sequence[QuestionFeatures], *, cues: bool = True) -> sp.csr_matrix:
    """Full design matrix: [dense cue/form block | hashed n-grams]."""
    import scipy.sparse as sp

    return sp.hstack([sp.csr_matrix(dense_block(features, cues=cues)), hashed_ngrams([f.text for f in features])],
                     format="csr")
