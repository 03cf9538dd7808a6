"""Memory maps of the large stored tables, advised for random access.

The derived store keeps the large record tables (entities, relationships, text units: gigabytes at
1M entities) as Arrow IPC files that are memory-mapped, so a load and a question read only the pages
they touch. On a cold page cache every first touch of a page is a fault, and for a plain map the kernel
reads `read_ahead_kb` around it (8 MiB on this project's VMs): one question reading a few hundred
scattered rows read over 2 GB of a 1M index's store. `MADV_RANDOM` makes such a fault read the page it
needs; a buffer about to be scanned whole gets normal read-ahead back for its range (`will_need`).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import mmap
from pathlib import Path

import numpy as np
import pyarrow as pa

__all__ = ["load_npy", "map_ipc", "will_need", "will_need_column"]

# arrays at least this large are advised for random access: the derived store's big arrays (relationship
# endpoints, adjacency indices, passage blocks) are read by row ranges; smaller ones are often scanned
# whole, and one read-ahead of them costs little
_RANDOM_FROM = 16 << 20

_PAGE = mmap.PAGESIZE
_libc = None
with contextlib.suppress(OSError, TypeError):
    _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_RANDOM, _WILLNEED = getattr(mmap, "MADV_RANDOM", None), getattr(mmap, "MADV_WILLNEED", None)
_NORMAL = getattr(mmap, "MADV_NORMAL", None)


def _advise(address: int, size: int, advice: int | None) -> None:
    if _libc is None or advice is None or size <= 0:
        return
    start = address - address % _PAGE
    _libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(size + address - start), ctypes.c_int(advice))


def map_ipc(path: Path, random: bool = False) -> pa.Table:
    """An Arrow IPC file as a table whose buffers point into a read-only map of the file; `random`
    advises the map for random access (see the module docstring)."""
    with pa.memory_map(str(path), "r") as source:
        if random:
            whole = source.read_buffer(source.size())
            _advise(whole.address, whole.size, _RANDOM)
            source.seek(0)
        return pa.ipc.open_file(source).read_all()


def load_npy(path: Path) -> np.ndarray:
    """A stored `.npy` array memory-mapped read-only, as a plain ndarray view (np.memmap's Python-level
    indexing costs microseconds a lookup); advised for random access when large."""
    loaded = np.load(path, mmap_mode="r", allow_pickle=False)
    if loaded.nbytes >= _RANDOM_FROM:
        _advise(loaded.ctypes.data, loaded.nbytes, _RANDOM)
    return np.asarray(loaded)


def will_need(buffer: pa.Buffer | None) -> None:
    """Ask for `buffer`'s pages now, in one read-ahead (a scan of a randomly advised map would
    otherwise fault them in one page at a time)."""
    if buffer is not None:
        # back to normal read-ahead for this range (WILLNEED alone reads only its first read-ahead window)
        _advise(buffer.address, buffer.size, _NORMAL)
        _advise(buffer.address, buffer.size, _WILLNEED)


def will_need_column(values: pa.Array | pa.ChunkedArray, offsets_only: bool = False) -> None:
    """`will_need` for the buffers of a column about to be scanned whole: all of them, or only a text
    column's offsets (lengths read from them alone)."""
    for chunk in values.chunks if isinstance(values, pa.ChunkedArray) else [values]:
        buffers = chunk.buffers()
        for buffer in buffers[1:2] if offsets_only else buffers:
            will_need(buffer)
