"""On-disk store of what is derived from an index's tables, keyed by the tables' content.

The index folder stays read-only: derived structures (adjacency, id positions, token counts, and
other packages' search tables) live under the cache root (`$GRAPHROUTE_CACHE_DIR` or
`~/.cache/graphroute`) in `derived/<location digest>/<name>-<key>/`.

- `table_fingerprint(path)` identifies one table file by size, mtime and a sha256 of the parquet
  footer (schema, row groups and column statistics; cheap, and it changes when any value changes
  the row groups' statistics or sizes) or, for other files, of the whole file.
- An entry's key hashes the store format, the entry's name, the fingerprints of *only* the tables
  it is derived from and any extra parameters (e.g. the tokenizer). Changing the claims table thus
  leaves the relationships' entries valid.
- Entries are written into a temporary sibling folder and renamed into place, so a reader never sees
  a half-written entry; each entry has a `meta.json` listing its files and byte sizes, written last.
  An entry whose files are missing, truncated or unreadable is treated as absent and rebuilt.
- Arrays are `.npy` opened with `np.load(mmap_mode="r")`; tables are Arrow IPC files opened through
  `pa.memory_map`, so opening costs no parsing and pages are read only when touched.

Usage: `store = DerivedStore.for_tables(location, {"entities": path, ...})`, then
`store.load_arrays("graph", ["entities", "relationships"])` / `store.save_arrays(...)`, or
`store.entry_dir(...)` + `store.write_entry(...)` for a folder of files written by another library.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

__all__ = ["DerivedStore", "cache_root", "table_fingerprint"]

STORE_FORMAT = "1"
_META = "meta.json"
_PARQUET_MAGIC = b"PAR1"
_WHOLE_FILE_LIMIT = 64 << 20  # non-parquet files above this are hashed by head, tail and size


def cache_root() -> Path:
    """`$GRAPHROUTE_CACHE_DIR` or `~/.cache/graphroute` (token counts, vectors and derived tables)."""
    base = os.environ.get("GRAPHROUTE_CACHE_DIR")
    return Path(base) if base else Path.home() / ".cache" / "graphroute"


def _sha(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def _parquet_footer(fh: object, size: int) -> bytes | None:
    """The footer (file metadata) of a parquet file, or None when the file is not parquet."""
    if size < 12:
        return None
    fh.seek(size - 8)  # type: ignore[attr-defined]
    tail = fh.read(8)  # type: ignore[attr-defined]
    if tail[4:] != _PARQUET_MAGIC:
        return None
    (length,) = struct.unpack("<I", tail[:4])
    if length + 8 > size:
        return None
    fh.seek(size - 8 - length)  # type: ignore[attr-defined]
    return fh.read(length)  # type: ignore[attr-defined,no-any-return]


def table_fingerprint(path: str | Path) -> str:
    """Identity of a table file's content: size, mtime_ns and a hash of its parquet footer (or bytes)."""
    p = Path(path)
    st = p.stat()
    digest = hashlib.sha256()
    with p.open("rb") as fh:
        footer = _parquet_footer(fh, st.st_size)
        if footer is not None:
            digest.update(footer)
        elif st.st_size <= _WHOLE_FILE_LIMIT:
            fh.seek(0)
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        else:
            fh.seek(0)
            digest.update(fh.read(1 << 20))
            fh.seek(st.st_size - (1 << 20))
            digest.update(fh.read(1 << 20))
    return f"{st.st_size}:{st.st_mtime_ns}:{digest.hexdigest()}"


class DerivedStore:
    """Entries derived from one index's tables (see the module docstring)."""

    def __init__(self, location: str, fingerprints: Mapping[str, str], root: Path | None = None):
        self.location = location
        self.fingerprints = dict(fingerprints)
        self.dir = (root or cache_root()) / "derived" / _sha(location)[:24]

    @classmethod
    def for_tables(cls, location: str | Path, files: Mapping[str, Path], root: Path | None = None) -> DerivedStore:
        """A store for the index at `location` whose tables are `files` (table name -> local path)."""
        return cls(str(location), {t: table_fingerprint(p) for t, p in files.items()}, root)

    def key(self, name: str, depends_on: Sequence[str], extra: str = "") -> str:
        """Digest of the entry's name, the fingerprints of the tables it uses, and `extra`."""
        deps = sorted(set(depends_on))
        return _sha(STORE_FORMAT, name, extra, *(f"{t}={self.fingerprints.get(t, '-')}" for t in deps))

    def entry_dir(self, name: str, depends_on: Sequence[str], extra: str = "") -> Path:
        """The folder of an entry (it may not exist yet)."""
        return self.dir / f"{name}-{self.key(name, depends_on, extra)[:32]}"

    # ------------------------------------------------------------------ generic entries

    def is_complete(self, entry: Path) -> bool:
        """True when `meta.json` exists and every file it lists has the recorded size."""
        try:
            meta = json.loads((entry / _META).read_text(encoding="utf-8"))
            files = meta["files"]
            return all((entry / name).stat().st_size == size for name, size in files.items())
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return False

    @contextlib.contextmanager
    def write_entry(self, name: str, depends_on: Sequence[str], extra: str = "") -> Iterator[Path]:
        """Yield an empty temporary folder; on success it gets a `meta.json` and is renamed into place.

        A failure (exception, full disk, read-only cache) leaves no entry behind; the caller's
        exception propagates, except OSError from the store itself, which is swallowed because the
        derived data can always be computed again.
        """
        final = self.entry_dir(name, depends_on, extra)
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
        except OSError:
            with tempfile.TemporaryDirectory() as scratch:  # still give the caller somewhere to write
                yield Path(scratch)
            return
        try:
            yield tmp
            sizes = {p.name: p.stat().st_size for p in sorted(tmp.iterdir()) if p.name != _META}
            meta = {"format": STORE_FORMAT, "name": name, "location": self.location, "files": sizes}
            (tmp / _META).write_text(json.dumps(meta), encoding="utf-8")
            if final.exists():  # a stale or corrupt entry under the same key, or a concurrent writer
                shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except OSError:
            pass
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    # ------------------------------------------------------------------ numpy arrays

    def load_arrays(
        self, name: str, depends_on: Sequence[str], fields: Sequence[str] | None = None, extra: str = ""
    ) -> dict[str, np.ndarray] | None:
        """Memory-mapped arrays of an entry (`fields`, default all), or None when absent, incomplete or
        unreadable."""
        entry = self.entry_dir(name, depends_on, extra)
        if not self.is_complete(entry):
            return None
        try:
            if fields is None:
                meta = json.loads((entry / _META).read_text(encoding="utf-8"))
                fields = [f[: -len(".npy")] for f in meta["files"] if f.endswith(".npy")]
            # plain ndarray views of the maps: np.memmap's Python-level indexing costs microseconds a lookup
            return {f: np.asarray(np.load(entry / f"{f}.npy", mmap_mode="r", allow_pickle=False)) for f in fields}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save_arrays(
        self, name: str, depends_on: Sequence[str], arrays: Mapping[str, np.ndarray], extra: str = ""
    ) -> None:
        with self.write_entry(name, depends_on, extra) as tmp:
            for field, arr in arrays.items():
                np.save(tmp / f"{field}.npy", np.ascontiguousarray(arr), allow_pickle=False)

    # ------------------------------------------------------------------ Arrow tables

    def load_table(self, name: str, depends_on: Sequence[str], extra: str = "") -> pa.Table | None:
        """A memory-mapped Arrow IPC table of an entry, or None when absent or unreadable."""
        entry = self.entry_dir(name, depends_on, extra)
        if not self.is_complete(entry):
            return None
        try:
            with pa.memory_map(str(entry / "table.arrow"), "r") as source:
                return pa.ipc.open_file(source).read_all()
        except (OSError, pa.ArrowInvalid):
            return None

    def save_table(self, name: str, depends_on: Sequence[str], table: pa.Table, extra: str = "") -> None:
        with (
            self.write_entry(name, depends_on, extra) as tmp,
            pa.OSFile(str(tmp / "table.arrow"), "wb") as sink,
            pa.ipc.new_file(sink, table.schema) as writer,
        ):
            writer.write_table(table)
