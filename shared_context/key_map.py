"""A read-only `str -> list[int]` map stored as sorted UTF-8 keys and CSR values, memory-mappable.

Entity linking's exact-title tables (normalised title / alias / upper-cased title -> entity positions)
are derived from the entities' titles alone. For a large index they are built once, written with
`save_key_maps` and memory-mapped by `load_key_maps` on later loads: a lookup is a binary search over
the sorted keys (about 20 probes), and no dict of a million tuples is ever built.
"""

from __future__ import annotations

import bisect
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["JOIN", "KeyMap", "load_key_maps", "save_key_maps"]

JOIN = "\x1f"  # joins the tokens of a tuple key (never produced by tokenisation)
_FORMAT = 1
_PARTS = ("key_offsets", "key_bytes", "indptr", "indices")


class KeyMap:
    """`get(key)` -> the positions stored for `key` (a fresh list), or `default`."""

    def __init__(self, key_offsets: np.ndarray, key_bytes: np.ndarray, indptr: np.ndarray, indices: np.ndarray):
        self._offsets, self._bytes, self._indptr, self._indices = key_offsets, key_bytes, indptr, indices

    @classmethod
    def build(cls, mapping: Mapping[str, Sequence[int]]) -> KeyMap:
        keys = sorted(mapping)
        encoded = [k.encode("utf-8") for k in keys]
        offsets = np.zeros(len(keys) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        indptr = np.zeros(len(keys) + 1, dtype=np.int64)
        np.cumsum([len(mapping[k]) for k in keys], out=indptr[1:])
        indices = np.fromiter((v for k in keys for v in mapping[k]), dtype=np.int64, count=int(indptr[-1]))
        return cls(offsets, np.frombuffer(b"".join(encoded), dtype=np.uint8), indptr, indices)

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, i: int) -> str:  # the i-th sorted key (what bisect probes)
        return bytes(self._bytes[int(self._offsets[i]) : int(self._offsets[i + 1])]).decode("utf-8")

    def _find(self, key: str) -> int:
        i = bisect.bisect_left(self, key)
        return i if i < len(self) and self[i] == key else -1

    def get(self, key: str, default: Any = None) -> Any:
        i = self._find(key)
        if i < 0:
            return default
        values: list[int] = self._indices[int(self._indptr[i]) : int(self._indptr[i + 1])].tolist()
        return values

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._find(key) >= 0

    def arrays(self) -> dict[str, np.ndarray]:
        return dict(zip(_PARTS, (self._offsets, self._bytes, self._indptr, self._indices), strict=True))


def save_key_maps(folder: Path, maps: Mapping[str, KeyMap], meta: Mapping[str, Any]) -> None:
    """Write the maps into `folder` atomically (temporary sibling renamed into place; meta.json last)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        for name, key_map in maps.items():
            for part, arr in key_map.arrays().items():
                np.save(tmp / f"{name}.{part}.npy", arr, allow_pickle=False)
        (tmp / "meta.json").write_text(json.dumps({"format": _FORMAT, "maps": sorted(maps), **meta}))
        os.replace(tmp, folder)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def load_key_maps(folder: Path) -> tuple[dict[str, KeyMap], dict[str, Any]] | None:
    """The maps and meta stored in `folder`, memory-mapped; None when absent, partial or unreadable."""
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        if meta.get("format") != _FORMAT:
            return None
        maps = {
            name: KeyMap(*(np.load(folder / f"{name}.{part}.npy", mmap_mode="r", allow_pickle=False) for part in _PARTS))
            for name in meta["maps"]
        }
        for key_map in maps.values():  # a truncated file fails here rather than on a later lookup
            if int(key_map._offsets[-1]) != len(key_map._bytes) or int(key_map._indptr[-1]) != len(key_map._indices):
                return None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None
    return maps, meta
