"""The index's derived arrays kept in its `DerivedStore`, each entry with the load warnings building it
raised (repeated into the index's warnings when the entry is read back instead of built)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from shared_context.derived_store import DerivedStore

__all__ = ["DERIVED_FORMAT", "DerivedArrays"]

# Bump when what the index derives at load changes, so stored structures of older code are not reused.
DERIVED_FORMAT = "1"


class DerivedArrays:
    """Get-or-build of named array entries, each depending on some of the index's tables. Without a store
    (an index built in memory) everything is built every time."""

    def __init__(self, store: DerivedStore | None, warnings: list[str]) -> None:
        self.store = store
        self.warnings = warnings

    def get(self, name: str, depends_on: list[str], build: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """The arrays of one entry: mapped from the store when it holds them, else built (and stored).
        Warnings raised while building are stored with the arrays and repeated on a hit."""
        found = self.stored(name, depends_on)
        if found is not None:
            return found
        before = len(self.warnings)
        arrays = build()
        return self.keep(name, depends_on, arrays, self.warnings[before:])

    def stored(self, name: str, depends_on: list[str]) -> dict[str, np.ndarray] | None:
        """A stored entry's arrays (its warnings repeated into `warnings`), or None."""
        if self.store is None:
            return None
        found = self.store.load_arrays(name, depends_on, extra=DERIVED_FORMAT)
        if found is None or "warnings" not in found:
            return None
        self.warnings.extend(str(w) for w in found.pop("warnings").tolist())
        return found

    def keep(
        self, name: str, depends_on: list[str], arrays: dict[str, np.ndarray], warnings: list[str]
    ) -> dict[str, np.ndarray]:
        """Store built arrays with the warnings their building raised; returns them mapped from the store
        (write-then-map: the process keeps the stored pages it touches, not the arrays just built)."""
        if self.store is None:
            return arrays
        stored_warnings = np.array(warnings or [""], dtype=str)[: len(warnings)]
        self.store.save_arrays(name, depends_on, {**arrays, "warnings": stored_warnings}, extra=DERIVED_FORMAT)
        found = self.store.load_arrays(name, depends_on, list(arrays), extra=DERIVED_FORMAT)
        return arrays if found is None else found
