"""Adjacency lists held as two flat integer arrays (CSR), so they can be stored and memory-mapped.

`Adjacency[i]` is the list of positions linked to row i (a fresh `list[int]`, so callers keep the
plain-list behaviour they had when adjacency was a list of lists); the arrays behind it may be
`np.memmap`s opened from the derived-structure store, in which case only the rows a query touches
are ever read from disk. Millions of entries then cost 8 bytes each instead of a Python list slot
plus the list objects.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import pairwise
from typing import overload

import numpy as np

from shared_context.records import row_position

__all__ = ["Adjacency", "group"]


class Adjacency(Sequence[list[int]]):
    """Row i holds `indices[indptr[i]:indptr[i + 1]]`."""

    __slots__ = ("indices", "indptr")

    def __init__(self, indptr: np.ndarray, indices: np.ndarray) -> None:
        if indptr.ndim != 1 or len(indptr) == 0 or int(indptr[-1]) != len(indices):
            raise ValueError("indptr must be 1-D, start the rows and end at len(indices)")
        self.indptr = indptr
        self.indices = indices

    @classmethod
    def from_lists(cls, lists: Sequence[Sequence[int]]) -> Adjacency:
        lengths = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
        indptr = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        flat = np.fromiter((v for x in lists for v in x), dtype=np.int64, count=int(indptr[-1]))
        return cls(indptr, flat)

    @classmethod
    def of(cls, rows: Sequence[Sequence[int]]) -> Adjacency:
        """`rows` itself when it is an Adjacency, else its CSR form."""
        return rows if isinstance(rows, Adjacency) else cls.from_lists(rows)

    def __len__(self) -> int:
        return len(self.indptr) - 1

    @overload
    def __getitem__(self, i: int) -> list[int]: ...
    @overload
    def __getitem__(self, i: slice) -> list[list[int]]: ...
    def __getitem__(self, i: int | slice) -> list[int] | list[list[int]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = row_position(i, len(self))
        rows: list[int] = self.indices[int(self.indptr[i]) : int(self.indptr[i + 1])].tolist()
        return rows

    def __iter__(self) -> Iterator[list[int]]:
        flat = np.asarray(self.indices).tolist()
        bounds = np.asarray(self.indptr).tolist()
        for a, b in pairwise(bounds):
            yield flat[a:b]

    def lengths(self) -> np.ndarray:
        return np.diff(np.asarray(self.indptr))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Adjacency):
            return bool(np.array_equal(self.indptr, other.indptr) and np.array_equal(self.indices, other.indices))
        if isinstance(other, Sequence):
            return list(self) == [list(x) for x in other]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Adjacency(rows={len(self)}, entries={len(self.indices)})"

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The two arrays under `<prefix>_indptr` / `<prefix>_indices` (for the derived store)."""
        return {f"{prefix}_indptr": self.indptr, f"{prefix}_indices": self.indices}


def group(keys: np.ndarray, values: np.ndarray, n: int, order: np.ndarray | None = None) -> Adjacency:
    """Group `values` by integer `keys` in [0, n), each row sorted by `order` (default: the value)."""
    indptr = np.zeros(n + 1, dtype=np.int64)
    if len(keys) == 0:
        return Adjacency(indptr, np.zeros(0, dtype=np.int64))
    sort_by = values if order is None else order
    idx = np.lexsort((sort_by, keys))
    np.cumsum(np.bincount(keys, minlength=n), out=indptr[1:])
    return Adjacency(indptr, np.ascontiguousarray(values[idx], dtype=np.int64))
