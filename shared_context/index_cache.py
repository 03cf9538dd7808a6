"""Per-index side caches: what is derived from a read-only `Index` for queries lives beside it, never on it."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["per_index_cache"]

T = TypeVar("T")

_caches: weakref.WeakKeyDictionary[object, dict[str, Any]] = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


def per_index_cache(index: object, name: str, build: Callable[[], T]) -> T:
    """Return `build()` computed once per index (kept beside it, never stored on it).

    The Index is read-only, so derived query structures (BM25 matrices, row token counts) live in a
    weak side table and disappear with the index.
    """
    with _cache_lock:
        slot = _caches.get(index)
        if slot is None:
            slot = {}
            _caches[index] = slot
        if name in slot:
            return slot[name]  # type: ignore[no-any-return]
    value = build()
    with _cache_lock:
        return slot.setdefault(name, value)  # type: ignore[no-any-return]
