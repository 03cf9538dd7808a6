"""BM25 postings on disk, and a top-k that reads the common terms' postings pruned by weight.

Stored: the lexical tables of an index, BM25 postings written once per index content, memory-mapped.

Building the BM25 tables of a 100k-entity index tokenises every description and text unit (seconds);
reading them back is a few `np.load(mmap_mode="r")` calls. Each table is a folder of `.npy` files:

- `indptr.npy`, `indices.npy`, `data.npy`: the CSC postings of `bm25.BM25` (term columns, document rows);
- `vocab_offsets.npy`, `vocab_bytes.npy`: the terms, sorted, as UTF-8 bytes with offsets, so a term is
  found by binary search without building a Python dict of a million strings;
- `impact_*.npy`: each term's largest weight and the common terms' postings in weight order
  (`Impacts`, what entity linking reads instead of a common word's whole list; a folder
  written without them builds them in memory on first use);
- `meta.json` (written last, so a folder without it is an interrupted write and is rebuilt).

Folders live under `search_cache_root()/<key>/`, where the key names the index content (see
`search_store.content_key`); a changed index gets a new key, so stale tables are never read.

Pruned: a top-k of weighted BM25 fields that reads postings pruned by weight, so a word in a quarter of
all titles costs a question no more than a rare one.

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

import bisect
import contextlib
import json
import os
import shutil
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shared_context.bm25 import BM25, Postings

__all__ = ["COMMON_POSTINGS", "IMPACT_PREFIX", "QUERY_BUDGET", "Impacts", "Pruned", "SortedVocab", "impacts_of",
           "load_bm25", "pruned_top", "save_bm25", "scores_at", "stored_bm25"]

_FORMAT = 1
_IMPACT_FIELDS = ("term_max", "terms", "indptr", "docs", "weights")
# `SortedVocab.get` keeps every this-many-th key in memory (a million keys: 62,500 short bytes objects)
_SAMPLE_STEP = 16


class SortedVocab:
    """Sorted terms stored as UTF-8 bytes + offsets; `get(term)` is a binary search (a `TermLookup`)."""

    def __init__(self, offsets: np.ndarray, data: np.ndarray, columns: np.ndarray) -> None:
        self._offsets = offsets
        self._data = data
        self._columns = columns  # postings column of the i-th sorted term
        self._views: tuple[memoryview, memoryview, list[bytes]] | None = None  # built on first `get`

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, i: int) -> str:
        lo, hi = int(self._offsets[i]), int(self._offsets[i + 1])
        return bytes(self._data[lo:hi]).decode("utf-8")

    def get(self, term: str, /) -> int | None:
        # UTF-8 byte order is the code-point order the terms were sorted in, so the search compares bytes:
        # first among every `_SAMPLE_STEP`-th key (a short list, searched by `bisect` in C), then within
        # the step, so a probe reads a few keys instead of decoding one per halving (questions look up
        # dozens of terms and title n-grams in tables of up to millions of keys).
        if self._views is None:
            offsets = np.ascontiguousarray(self._offsets, dtype=np.int64).data
            data = np.ascontiguousarray(self._data, dtype=np.uint8).data
            sample = [data[offsets[i] : offsets[i + 1]].tobytes() for i in range(0, len(self), _SAMPLE_STEP)]
            self._views = (offsets, data, sample)
        offsets, data, sample = self._views
        key = term.encode("utf-8", "surrogatepass")  # a lone surrogate matches nothing, as before
        j = bisect.bisect_left(sample, key)  # sample[j - 1] < key <= sample[j]
        lo, hi = max(j - 1, 0) * _SAMPLE_STEP, min(j * _SAMPLE_STEP, len(self))
        while lo < hi:  # the first key >= `key` lies in [lo, hi]
            mid = (lo + hi) // 2
            if data[offsets[mid] : offsets[mid + 1]].tobytes() < key:
                lo = mid + 1
            else:
                hi = mid
        if lo < len(self) and data[offsets[lo] : offsets[lo + 1]] == key:
            return int(self._columns[lo])
        return None


def _replace_dir(tmp: Path, folder: Path) -> None:
    """Move the finished `tmp` to `folder`, replacing a stale copy; a concurrent writer's copy wins."""
    if folder.exists():
        shutil.rmtree(folder, ignore_errors=True)  # open memory maps of it stay valid (POSIX)
    try:
        os.replace(tmp, folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def save_bm25(bm25: BM25, folder: Path, check: str = "") -> None:
    """Write `bm25` into `folder` atomically (a temporary sibling renamed into place)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    matrix = bm25.matrix
    np.save(tmp / "indptr.npy", np.asarray(matrix.indptr, dtype=np.int64))
    np.save(tmp / "indices.npy", np.asarray(matrix.indices, dtype=np.int32))
    np.save(tmp / "data.npy", np.asarray(matrix.data))
    vocab = bm25.vocab
    assert isinstance(vocab, dict), "only a freshly built BM25 is saved"
    terms = sorted(vocab)
    encoded = [t.encode("utf-8") for t in terms]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    np.save(tmp / "vocab_offsets.npy", offsets)
    np.save(tmp / "vocab_bytes.npy", np.frombuffer(b"".join(encoded), dtype=np.uint8))
    np.save(tmp / "vocab_columns.npy", np.asarray([vocab[t] for t in terms], dtype=np.int64))
    impacts = Impacts.build(np.asarray(matrix.indptr), np.asarray(matrix.indices), np.asarray(matrix.data))
    for name in _IMPACT_FIELDS:
        np.save(tmp / f"impact_{name}.npy", getattr(impacts, name))
    meta = {"format": _FORMAT, "n_docs": bm25.n_docs, "shape": list(matrix.shape), "check": check}
    (tmp / "meta.json").write_text(json.dumps(meta))
    _replace_dir(tmp, folder)


def load_bm25(folder: Path, check: str = "") -> BM25 | None:
    """The BM25 stored in `folder`, memory-mapped; None when absent, interrupted, of another format or
    written for texts with another `check` (`search_store.content_check`)."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        if meta.get("format") != _FORMAT or meta.get("check", "") != check:
            return None

        def arr(name: str) -> np.ndarray:  # an ndarray view of the map: np.memmap indexing is slow
            loaded: np.ndarray = np.asarray(np.load(folder / f"{name}.npy", mmap_mode="r", allow_pickle=False))
            return loaded

        n_docs, n_terms = (int(v) for v in meta["shape"])
        matrix = Postings(arr("indptr"), arr("indices"), arr("data"), (n_docs, n_terms))
        vocab = SortedVocab(arr("vocab_offsets"), arr("vocab_bytes"), arr("vocab_columns"))
        impacts = (Impacts(*(arr(f"impact_{name}") for name in _IMPACT_FIELDS))
                   if (folder / "impact_term_max.npy").exists() else None)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    bm25 = BM25.from_postings(vocab, matrix, int(meta["n_docs"]))
    if impacts is not None:
        attach_impacts(bm25, impacts)
    return bm25


def stored_bm25(folder: Path | None, build: Callable[[], BM25], check: str = "") -> BM25:
    """The BM25 in `folder` when present and written for the same `check`, else `build()` and store it.

    A cache that cannot be written (read-only home, full disk) only costs the rebuild next time.
    """
    if folder is not None:
        found = load_bm25(folder, check)
        if found is not None:
            return found
    bm25 = build()
    if folder is not None:
        with contextlib.suppress(OSError):
            save_bm25(bm25, folder, check)
        # write-then-map: the built matrix is freed; the process keeps only the postings queries read
        return load_bm25(folder, check) or bm25
    return bm25



# ---------------------------------------------------------------------------- phrase tables


class StoredPhrases:
    """Phrase -> record positions, read from disk: sorted phrases (binary search) + CSR position lists.
    Behaves like the `dict[str, list[int]]` it was written from for `get` and `in`."""

    def __init__(self, keys: SortedVocab, indptr: np.ndarray, positions: np.ndarray) -> None:
        self._keys = keys
        self._indptr = indptr
        self._positions = positions

    def get(self, key: str, /) -> list[int] | None:
        group = self._keys.get(key)
        if group is None:
            return None
        found: list[int] = self._positions[self._indptr[group] : self._indptr[group + 1]].tolist()
        return found

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._keys.get(key) is not None


def _write_phrases(folder: Path, prefix: str, phrases: dict[str, list[int]]) -> None:
    keys = sorted(phrases)
    encoded = [k.encode("utf-8") for k in keys]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    indptr = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum([len(phrases[k]) for k in keys], out=indptr[1:])
    flat = [p for k in keys for p in phrases[k]]
    np.save(folder / f"{prefix}_offsets.npy", offsets)
    np.save(folder / f"{prefix}_bytes.npy", np.frombuffer(b"".join(encoded), dtype=np.uint8))
    np.save(folder / f"{prefix}_indptr.npy", indptr)
    np.save(folder / f"{prefix}_positions.npy", np.asarray(flat, dtype=np.int64))


def _read_phrases(folder: Path, prefix: str) -> StoredPhrases:
    def arr(name: str) -> np.ndarray:
        loaded: np.ndarray = np.asarray(np.load(folder / f"{prefix}_{name}.npy", mmap_mode="r", allow_pickle=False))
        return loaded

    offsets = arr("offsets")
    keys = SortedVocab(offsets, arr("bytes"), np.arange(len(offsets) - 1, dtype=np.int64))
    return StoredPhrases(keys, arr("indptr"), arr("positions"))


PhraseTables = dict[str, "dict[str, list[int]] | StoredPhrases"]


def stored_phrases(
    folder: Path | None, build: Callable[[], tuple[dict[str, dict[str, list[int]]], int]], check: str = ""
) -> tuple[PhraseTables, int]:
    """Named phrase tables plus one integer (linking: exact and alias titles, longest title), read from
    `folder` when stored there, else `build()` and stored."""
    if folder is not None:
        try:
            meta = json.loads((folder / "meta.json").read_text())
            if meta.get("format") == _FORMAT and meta.get("check", "") == check:
                return {name: _read_phrases(folder, name) for name in meta["tables"]}, int(meta["value"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    tables, value = build()
    if folder is not None:
        with contextlib.suppress(OSError):
            folder.parent.mkdir(parents=True, exist_ok=True)
            tmp = folder.with_name(f".{folder.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            for name, phrases in tables.items():
                _write_phrases(tmp, name, phrases)
            meta = {"format": _FORMAT, "tables": list(tables), "value": value, "check": check}
            (tmp / "meta.json").write_text(json.dumps(meta))
            _replace_dir(tmp, folder)
    return dict(tables), value


# ---------------------------------------------------------------------------- pruned top-k

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
