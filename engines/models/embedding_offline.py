"""The offline embedder: TF-IDF over character n-grams + truncated SVD, fitted on the index's own text.

The SVD is computed exactly through the documents' Gram matrix (see `_top_components`), which is what
`TruncatedSVD` approximates, only faster at these sizes and with no randomness.

Character n-grams (`char_wb`, 2–4) work for any script, Chinese included, with no tokenizer or
weights to download. Vectors are L2-normalised float32 of `dim` ≤ 256 (fewer when the corpus is too
small for that many components). Saved as one `.npz` (vocabulary, idf, SVD components, metadata) read
with `allow_pickle=False`, so loading an embedder never executes code from the file.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from engines.models.base import EmbeddingResult
from engines.models.config import OFFLINE_EMBEDDING_MODEL
from engines.models.errors import ModelConfigError
from shared_context.records import values_of
from shared_context.tokens import get_tokenizer

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

    from shared_context.index import Index

FORMAT = "graphroute-offline-embedder/1"
MAX_DIM = 256
MAX_FEATURES = 200_000  # caps memory on large corpora; the rarest n-grams go first
MAX_FIT_TEXTS = 3000  # larger corpora are fitted on an evenly spaced sample of this many texts
MAX_FIT_CHARS = 6000  # per text when fitting (idf and directions need a sample, not whole chapters)
NGRAM_MIN, NGRAM_MAX = 2, 4
TRANSFORM_CHUNK = 8192  # texts embedded together (`transform`): bounds the TF-IDF rows held at once
MAX_CACHED_WORDS = 500_000  # distinct words whose n-gram columns are kept (tens of MB at most)
_NO_COLUMNS = np.zeros(0, dtype=np.int64)
_VECTORIZER_ARGS: dict[str, Any] = {
    "analyzer": "char_wb",
    "ngram_range": (NGRAM_MIN, NGRAM_MAX),
    "lowercase": True,
    "sublinear_tf": True,
    "dtype": np.float32,
}


def _top_components(tfidf: csr_matrix, k: int) -> np.ndarray:
    """The top-`k` right singular vectors of the (docs x features) matrix, exactly and deterministically.

    With few documents (≤ MAX_FIT_TEXTS) the n x n Gram matrix X·Xᵀ is small, so an exact symmetric
    eigendecomposition is several times faster than randomized SVD and has no random seed at all.
    Signs are fixed (largest |entry| positive) so the same corpus always gives the same vectors.
    """
    import scipy.linalg  # here, not at module level: importing the model layer must not load SciPy

    gram = np.asarray((tfidf @ tfidf.T).toarray(), dtype=np.float64)
    n = gram.shape[0]
    k = max(1, min(k, n))
    eigvals, eigvecs = scipy.linalg.eigh(gram, subset_by_index=[n - k, n - 1])
    order = np.argsort(eigvals)[::-1]
    eigvals, eigvecs = eigvals[order], eigvecs[:, order]
    keep = eigvals > 1e-9 * max(float(eigvals[0]), 1e-30)  # drop null directions (duplicate texts)
    eigvals, eigvecs = eigvals[keep], eigvecs[:, keep]
    components = np.asarray((tfidf.T @ eigvecs).T, dtype=np.float64) / np.sqrt(eigvals)[:, None]
    signs = np.sign(components[np.arange(components.shape[0]), np.abs(components).argmax(axis=1)])
    signs[signs == 0] = 1.0
    return np.ascontiguousarray(components * signs[:, None], dtype=np.float32)


def _normalise(matrix: np.ndarray) -> np.ndarray:
    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(m / norms, dtype=np.float32)


@dataclass(frozen=True)
class TfidfRows:
    """TF-IDF rows in CSR form (what `TfidfVectorizer.transform` returns, without SciPy)."""

    indptr: np.ndarray  # int64, row i is indices/data[indptr[i]:indptr[i + 1]]
    indices: np.ndarray  # int32 vocabulary columns, ascending within a row
    data: np.ndarray  # float32

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype


class OfflineEmbedder:
    """`Embedder` with no network: `fit` on a corpus, then `embed` any text into the same space.

    Fitting uses scikit-learn's `TfidfVectorizer` and SciPy; a fitted embedder keeps only its vocabulary,
    idf weights and basis, and embeds with numpy alone (the same numbers), so loading a saved one and
    answering a question import neither library (seconds of a command-line question's start-up)."""

    name = OFFLINE_EMBEDDING_MODEL
    offline = True

    def __init__(self, vocabulary: dict[str, int], idf: np.ndarray, components: np.ndarray, *, seed: int = 0,
                 fingerprint: str = "") -> None:
        self.vocabulary = vocabulary  # n-gram -> column, as the fitted vectorizer's `vocabulary_`
        self.idf = np.asarray(idf, dtype=np.float64)  # as its `idf_`
        # kept transposed, (n_features, dim) and contiguous: `tfidf @ basis` then reads whole rows in place
        self._basis = np.ascontiguousarray(np.asarray(components, dtype=np.float32).T)
        self.dim = int(self._basis.shape[1])
        self.seed = seed
        self.fingerprint = fingerprint  # sha256 of the fitting corpus and settings
        self.from_index_file = False  # loaded from the index's own graphroute/embedder file
        self.vector_cache: Path | None = None  # where attach_offline_vectors keeps the index's vectors
        self._vocabulary = vocabulary
        self._word_columns: dict[str, np.ndarray] = {}  # word -> vocabulary columns of its n-grams

    # ------------------------------------------------------------------ fitting
    @classmethod
    def fit(cls, texts: list[str], dim: int = MAX_DIM, seed: int = 0) -> OfflineEmbedder:
        """Fit on `texts`. `dim` is an upper bound: a small corpus yields fewer components.

        Corpora above `MAX_FIT_TEXTS` are fitted on an evenly spaced sample, and each text on its first
        `MAX_FIT_CHARS` characters (the embedder still embeds every text in full), so the fit cost is
        bounded whatever the index size.
        """
        if dim < 1:
            raise ModelConfigError(f"offline embedder dim must be >= 1 (got {dim})", key="dim")
        corpus = [t for t in texts if t and t.strip()]
        if not corpus:
            raise ModelConfigError("cannot fit the offline embedder: the corpus has no text", key="corpus")
        if len(corpus) > MAX_FIT_TEXTS:
            step = len(corpus) / MAX_FIT_TEXTS
            corpus = [corpus[int(i * step)] for i in range(MAX_FIT_TEXTS)]
        corpus = [t[:MAX_FIT_CHARS] for t in corpus]
        from sklearn.feature_extraction.text import TfidfVectorizer
        from threadpoolctl import threadpool_limits

        vectorizer = TfidfVectorizer(max_features=MAX_FEATURES, **_VECTORIZER_ARGS)
        # One BLAS thread: on a busy 2-core machine OpenBLAS threads spin and run 10-20x slower.
        with threadpool_limits(1):
            try:
                tfidf = vectorizer.fit_transform(corpus).tocsr()
            except ValueError as err:  # e.g. only one-character texts: no 2-grams at all
                raise ModelConfigError(
                    f"cannot fit the offline embedder on this corpus: {err}", key="corpus"
                ) from None
            components = _top_components(tfidf, min(dim, MAX_DIM))
        digest = hashlib.sha256()
        for text in corpus:
            digest.update(text.encode("utf-8"))
            digest.update(b"\0")
        digest.update(f"{dim}|{seed}|{FORMAT}".encode())
        return cls(vectorizer.vocabulary_, vectorizer.idf_, components, seed=seed, fingerprint=digest.hexdigest())

    # ------------------------------------------------------------------ embedding
    def transform(self, texts: list[str]) -> np.ndarray:
        """Synchronous embedding: float32 (n, dim), unit rows (all-zero for text with no known n-gram)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # A chunk of texts at a time: every row is computed on its own, so the TF-IDF rows of a million texts
        # (gigabytes of per-row arrays) are never held together; only the output is.
        for start in range(0, len(texts), TRANSFORM_CHUNK):
            chunk = texts[start : start + TRANSFORM_CHUNK]
            part = out[start : start + len(chunk)]
            self._project(self._tfidf(chunk), part)
            part[:] = _normalise(part)
        return out

    def _project(self, rows: TfidfRows, out: np.ndarray) -> None:
        """`out[i] = tfidf[i] @ basis` as SciPy's CSR product computes it: per row, each entry's float32 product
        with its basis row added in entry order (a running float32 sum, bit for bit the same). Done for every
        row at once, entry by entry: the rows sorted longest first, so the rows with a k-th entry are a prefix."""
        counts = np.diff(rows.indptr)
        order = np.argsort(-counts, kind="stable")
        longest_first = counts[order]
        starts = rows.indptr[:-1][order]
        acc = np.zeros((len(order), out.shape[1]), dtype=np.float32)
        for k in range(int(longest_first[0]) if len(order) else 0):
            m = int(np.searchsorted(-longest_first, -k, side="left"))  # rows with more than k entries
            entries = starts[:m] + k
            term = rows.data[entries, None] * self._basis[rows.indices[entries]]
            if k == 0:
                acc[:m] = term  # the sum starts at its first term (as a running sum does, -0.0 included)
            else:
                acc[:m] += term
        out[order] = acc

    def _tfidf(self, texts: list[str]) -> TfidfRows:
        """The vectorizer's TF-IDF rows for `texts`, exactly as `TfidfVectorizer.transform` computes them.

        `char_wb` n-grams never cross a word, so a text's n-gram counts are the sum of its words' n-grams:
        each distinct word is analysed once and its vocabulary columns kept (`_word_columns`), instead of
        slicing every n-gram of every text in Python again. Same counts, then the same sublinear tf, idf and
        L2 steps as scikit-learn's, in the same float precision (`tests/test_models_embedding.py` checks the
        rows are identical).
        """
        columns = self._word_columns
        if len(columns) > MAX_CACHED_WORDS:
            columns.clear()
        indptr = np.zeros(len(texts) + 1, dtype=np.int64)
        indices: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        for row, text in enumerate(texts):
            words = text.lower().split()  # what sklearn's preprocessor and `_char_wb_ngrams` split on
            parts = [columns[w] if w in columns else self._columns_of(w) for w in words]
            cols, n = np.unique(np.concatenate(parts), return_counts=True) if parts else (_NO_COLUMNS, _NO_COLUMNS)
            indices.append(cols)
            counts.append(n)
            indptr[row + 1] = indptr[row] + len(cols)
        cols = np.concatenate(indices).astype(np.int32)
        data = np.concatenate(counts).astype(np.float32)
        np.log(data, data)  # sublinear_tf, as TfidfTransformer.transform
        data += 1.0
        data = (data * self.idf[cols]).astype(np.float32)  # float32 *= float64 in place: a float64 product
        # sklearn's inplace_csr_row_normalize_l2: float32 squares summed in float64 in entry order, then
        # each entry divided by the root in float64
        for row in range(len(texts)):
            lo, hi = int(indptr[row]), int(indptr[row + 1])
            if hi > lo:
                squares = (data[lo:hi] * data[lo:hi]).astype(np.float64)
                total = float(np.cumsum(squares)[-1])
                if total != 0.0:
                    data[lo:hi] = (data[lo:hi].astype(np.float64) / np.sqrt(total)).astype(np.float32)
        return TfidfRows(indptr, cols, data)

    def _columns_of(self, word: str) -> np.ndarray:
        """Vocabulary columns of one word's padded 2-4 character n-grams (scikit-learn's `_char_wb_ngrams`)."""
        padded, vocab = f" {word} ", self._vocabulary
        grams: list[str] = []
        for n in range(NGRAM_MIN, NGRAM_MAX + 1):
            grams.extend(padded[i : i + n] for i in range(max(len(padded) - n + 1, 1)))
            if len(padded) <= n:  # a short word is counted once, at its shortest n-gram length
                break
        cols = np.fromiter((vocab[g] for g in grams if g in vocab), dtype=np.int64)
        self._word_columns[word] = cols
        return cols

    def embed_sync(self, texts: list[str]) -> EmbeddingResult:
        """`embed` in the caller's thread (CPU work only: sparse TF-IDF times the SVD basis)."""
        started = time.monotonic()
        vectors = self.transform(list(texts))
        tokens = sum(get_tokenizer().count_many(list(texts))) if texts else 0
        return EmbeddingResult(vectors=vectors, prompt_tokens=tokens, model=self.name,
                               seconds=time.monotonic() - started, cost=0.0)

    async def embed(self, texts: list[str]) -> EmbeddingResult:
        # In a worker thread, so the event loop keeps serving other questions' model calls meanwhile.
        return await asyncio.to_thread(self.embed_sync, list(texts))

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        """Write one npz file at exactly `path` (whatever its suffix); atomic via a temp file."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        vocab = self.vocabulary
        terms = np.empty(len(vocab), dtype=object)
        for term, col in vocab.items():
            terms[col] = term
        meta = {"format": FORMAT, "name": self.name, "dim": self.dim, "seed": self.seed,
                "fingerprint": self.fingerprint, "vectorizer": {k: v for k, v in _VECTORIZER_ARGS.items() if k != "dtype"}}
        buf = io.BytesIO()
        np.savez_compressed(
            buf,
            terms=np.asarray(terms.tolist(), dtype=str),
            idf=np.asarray(self.idf, dtype=np.float32),
            components=np.ascontiguousarray(self._basis.T),
            meta=np.asarray(json.dumps(meta)),
        )
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(buf.getvalue())
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | Path) -> OfflineEmbedder:
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                terms = data["terms"].tolist()
                idf = np.asarray(data["idf"], dtype=np.float64)
                components = np.asarray(data["components"], dtype=np.float32)
        except FileNotFoundError:
            raise ModelConfigError(f"{path}: offline embedder file not found", key=str(path)) from None
        except (OSError, ValueError, KeyError) as err:
            raise ModelConfigError(
                f"{path}: not an offline embedder saved by graphroute ({err}); delete it to refit", key=str(path)
            ) from None
        if meta.get("format") != FORMAT:
            raise ModelConfigError(f"{path}: unsupported offline embedder format {meta.get('format')!r}", key=str(path))
        if len(terms) != components.shape[1] or len(idf) != len(terms):
            raise ModelConfigError(f"{path}: corrupt offline embedder (vocabulary and matrix sizes differ)", key=str(path))
        vocabulary = {t: i for i, t in enumerate(terms)}
        if len(vocabulary) != len(terms):
            raise ModelConfigError(f"{path}: corrupt offline embedder (a term appears twice)", key=str(path))
        return cls(vocabulary, idf, components, seed=int(meta.get("seed", 0)), fingerprint=str(meta.get("fingerprint", "")))


# ---------------------------------------------------------------------------------------------
# fitting on an index and attaching its vector tables

INDEX_STATE_DIR = "graphroute"
INDEXER_FILES = ("embedder.npz",)  # what the graphroute indexer saves; never a pickle or joblib file


def index_texts(index: Index) -> dict[str, tuple[list[int], list[str]]]:
    """The texts GraphRAG embeds, per vector table name: (record positions, texts)."""
    return {
        "entity_description": (
            list(range(len(index.entities))),
            [
                f"{title}:{description or ''}"
                for title, description in zip(
                    values_of(index.entities, "title", str), values_of(index.entities, "description", str), strict=True
                )
            ],
        ),
        "community_full_content": (
            list(range(len(index.community_reports))),
            [r.full_content or "" for r in index.community_reports],
        ),
        "text_unit_text": (list(range(len(index.text_units))), [text or "" for text in values_of(index.text_units, "text", str)]),
    }


def _corpus_key(texts: dict[str, tuple[list[int], list[str]]], dim: int, seed: int) -> str:
    digest = hashlib.sha256(f"{FORMAT}|{dim}|{seed}".encode())
    for name in sorted(texts):
        digest.update(name.encode())
        for text in texts[name][1]:
            digest.update(text.encode("utf-8"))
            digest.update(b"\0")
    return digest.hexdigest()[:24]


def _index_is_ours_and_writable(index: Index) -> Path | None:
    path = getattr(index, "path", None)
    if path is None:
        return None
    state = Path(path) / INDEX_STATE_DIR
    if (state / "manifest.json").is_file() and os.access(state, os.W_OK):
        return state
    return None


def embedder_for_index(
    index: Index,
    cache_dir: str | Path | None = None,
    *,
    dim: int = MAX_DIM,
    seed: int = 0,
    env: dict[str, str] | None = None,
) -> OfflineEmbedder:
    """The offline embedder for `index`: the one its indexer saved, else a cached fit, else a new fit.

    A new fit is stored in `INDEX/graphroute/embedder/<key>.npz` when the index was built by graphroute
    and its folder is writable, otherwise in `<cache_dir or $GRAPHROUTE_CACHE_DIR or ~/.cache/graphroute>/
    embedders/<key>/embedder.npz`. The key hashes the index's texts, `dim` and `seed`.
    """
    from engines.models.config import default_cache_dir

    path = getattr(index, "path", None)
    if path is not None:
        for name in INDEXER_FILES:
            saved = Path(path) / INDEX_STATE_DIR / name
            if saved.is_file():
                try:
                    embedder = OfflineEmbedder.load(saved)
                    embedder.from_index_file = True
                    return embedder
                except ModelConfigError:
                    continue  # an older or foreign file: fit our own instead
    texts: dict[str, tuple[list[int], list[str]]] = {}
    store = getattr(index, "derived_store", None)
    if store is not None:  # read from files: the tables' fingerprints name the texts, nothing is hashed
        key = store.key("offline-embedder", list(_TEXT_TABLES.values()), f"{FORMAT}|{dim}|{seed}")[:24]
    else:
        texts = index_texts(index)
        key = _corpus_key(texts, dim, seed)
    local_state = _index_is_ours_and_writable(index)
    base = Path(cache_dir) if cache_dir is not None else default_cache_dir(os.environ if env is None else env)
    locations = ([local_state / "embedder" / f"{key}.npz"] if local_state else []) + [
        base / "embedders" / key / "embedder.npz"
    ]
    for location in locations:
        if location.is_file():
            try:
                embedder = OfflineEmbedder.load(location)
            except ModelConfigError:
                continue
            embedder.vector_cache = location.with_name(location.stem + ".vectors")
            return embedder
    corpus = [t for _, group in (texts or index_texts(index)).values() for t in group]
    embedder = OfflineEmbedder.fit(corpus, dim=dim, seed=seed)
    for location in locations:
        try:
            embedder.save(location)
        except OSError:
            continue  # a read-only cache just means refitting next time
        embedder.vector_cache = location.with_name(location.stem + ".vectors")
        break
    return embedder


_TEXT_TABLES = {"entity_description": "entities", "community_full_content": "community_reports",
                "text_unit_text": "text_units"}


def _cached_vectors(folder: Path | None, fingerprint: str, sizes: dict[str, int], dim: int) -> dict[str, np.ndarray]:
    """The vector tables kept for this embedder (`<name>.npy`, rows already as `VectorTable` holds them),
    memory-mapped: a question reads the rows it compares, not the whole matrices."""
    if folder is None:
        return {}
    try:
        if (folder / "fingerprint.txt").read_text() != fingerprint:
            return {}
    except OSError:
        return {}
    out = {}
    for name, n in sizes.items():
        try:
            matrix = np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError):
            continue  # a broken cache is recomputed, never fatal
        if matrix.shape == (n, dim) and matrix.dtype == np.float32:
            out[name] = np.asarray(matrix)
    return out


def _save_vectors(folder: Path, fingerprint: str, tables: dict[str, np.ndarray]) -> None:
    """Add `tables` to the vector cache folder (each file written whole, then renamed into place)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        marker = folder / "fingerprint.txt"
        if not marker.exists() or marker.read_text() != fingerprint:
            for old in folder.glob("*.npy"):
                old.unlink()
            marker.write_text(fingerprint)
        for name, matrix in tables.items():
            tmp = folder / f".{name}.{os.getpid()}.npy"
            np.save(tmp, np.ascontiguousarray(matrix), allow_pickle=False)
            os.replace(tmp, folder / f"{name}.npy")
    except OSError:
        pass  # caching is an optimisation only


class VectorSpace(Protocol):
    """An embedder whose vectors `attach_offline_vectors` can compute and cache for an index: the offline
    embedder, or anything with the same attributes (the optional `SentenceEmbedder`)."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...  # of the model and settings: cached vectors are reused only under it

    @property
    def vector_cache(self) -> Path | None: ...

    @property
    def from_index_file(self) -> bool: ...

    def transform(self, texts: list[str]) -> np.ndarray: ...


def attach_offline_vectors(index: Index, embedder: VectorSpace) -> list[str]:
    """Embed the index's texts and attach `entity_description`, `community_full_content`, `text_unit_text`.

    A table the index already has is kept when it is already in this embedder's space (same model
    name and dim, or the index's own saved embedder with a matching dim); any other table (another
    model, another dim) is replaced, since questions can only be embedded with this embedder.
    Tables embedded before are memory-mapped from the embedder's vector cache; the index's texts are
    read only for a table computed now. Returns the names attached.
    """
    from shared_context.search_backend import VectorTable, derived_vectors, vector_table

    sizes = {name: len(getattr(index, table)) for name, table in _TEXT_TABLES.items()}
    cached = _cached_vectors(embedder.vector_cache, embedder.fingerprint, sizes, embedder.dim)
    source = f"offline-embedder:{embedder.fingerprint[:12]}"
    groups: dict[str, tuple[list[int], list[str]]] = {}
    attached: list[str] = []
    computed: dict[str, np.ndarray] = {}
    for name, n in sizes.items():
        if not n:
            continue
        existing = vector_table(index, name)
        if existing is not None and existing.dim == embedder.dim and len(existing) == n and (
            existing.model == embedder.name or embedder.from_index_file
        ):
            continue
        matrix = cached.get(name)
        if matrix is not None:
            table = VectorTable(name, np.arange(n, dtype=np.int64), matrix, source=source, model=embedder.name)
        else:
            groups = groups or index_texts(index)
            positions, texts = groups[name]
            table = VectorTable.build(name, positions, embedder.transform(texts), source=source, model=embedder.name)
            computed[name] = table.matrix
        derived_vectors(index)[name] = table
        attached.append(name)
    if computed and embedder.vector_cache is not None:
        _save_vectors(embedder.vector_cache, embedder.fingerprint, computed)
    return attached
