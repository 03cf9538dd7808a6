"""Where a build writes: a staging folder beside INDEX, swapped into place in one step at the end.

Why: a failed, interrupted or killed build must leave the previous index exactly as it was, with no
half-written folder, and a build must never delete or overwrite files it did not write.

- `check_target` refuses a non-empty folder that is not a graphroute index (no `graphroute/manifest.json`)
  unless `force`; even then it refuses when such a folder holds a file under a name the build writes.
- `Staging` is `.<INDEX>.graphroute-build-<pid>-<random>` in the same parent (same file system, so the
  final move is a rename). Everything in it was written by this build, so discarding it is safe.
- `Staging.commit` swaps the two folders with one `renameat2(RENAME_EXCHANGE)` on Linux (two renames
  elsewhere), then moves every entry of the old folder that a build does not write (a user's notes, the
  query side's embedder cache, ...) into the new one, and deletes only what a build writes.
- Leftovers of a killed process (its pid is gone) are finished the same way at the next build.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import sys
import tempfile
from pathlib import Path

from indexer.config import IndexerError
from indexer.state import MANIFEST, STATE_DIR, WRITTEN_BY_BUILD

TABLE_FILES = tuple(
    f"{t}.parquet"
    for t in ("entities", "relationships", "communities", "community_reports", "text_units", "documents", "covariates")
)
WRITTEN_TOP = (*TABLE_FILES, "lancedb", "lancedb.tmp", STATE_DIR)  # lancedb.tmp: older versions' scratch folder
_BUILD_TAG = "graphroute-build"
_OLD_TAG = "graphroute-old"


def is_graphroute_index(folder: Path) -> bool:
    return (folder / STATE_DIR / MANIFEST).is_file()


def check_target(out: Path, *, force: bool) -> None:
    """Raise `IndexerError` unless a build may write `out` (see the module docstring)."""
    if out.exists() and not out.is_dir():
        raise IndexerError(f"output path {out} exists and is not a folder")
    if not out.exists() or is_graphroute_index(out):
        return
    names = sorted(p.name for p in out.iterdir())
    if not names:
        return
    clashes = [n for n in names if n in WRITTEN_TOP]
    if clashes:
        raise IndexerError(
            f"{out} is not a graphroute index (no {STATE_DIR}/{MANIFEST}) but holds {', '.join(clashes)}, which "
            "graphroute did not build and a build would replace; choose an empty or new folder" + (" (--force never replaces such files)" if force else "")
        )
    if not force:
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise IndexerError(
            f"{out} is not empty and is not a graphroute index (it holds {shown}); choose an empty or new folder, "
            "or pass --force to build the index beside these files (they are kept untouched)"
        )


class Staging:
    """A private folder the build writes into; `commit()` puts it in place of `out`, `discard()` removes it."""

    def __init__(self, out: Path) -> None:
        self.out = out
        out.parent.mkdir(parents=True, exist_ok=True)
        self.notes = recover_leftovers(out)
        self.path = Path(tempfile.mkdtemp(prefix=f".{out.name}.{_BUILD_TAG}-{os.getpid()}-", dir=out.parent))
        self.committed = False

    def commit(self) -> None:
        if self.out.is_dir():
            old = self.path
            if not _exchange(self.path, self.out):
                old = self.path.with_name(self.path.name.replace(_BUILD_TAG, _OLD_TAG))
                os.rename(self.out, old)
                os.rename(self.path, self.out)  # a crash between the renames is undone by recover_leftovers
            self.committed = True
            _retire(old, self.out, self.notes)
        else:
            os.rename(self.path, self.out)
            self.committed = True

    def discard(self) -> None:
        if not self.committed and self.path.exists():
            shutil.rmtree(self.path, ignore_errors=True)


def recover_leftovers(out: Path) -> list[str]:
    """Finish what a killed build left beside `out`: restore a moved-away index, drop staging folders."""
    notes: list[str] = []
    for tag in (_OLD_TAG, _BUILD_TAG):
        for left in sorted(out.parent.glob(f".{out.name}.{tag}-*")):
            if not left.is_dir() or _owner_alive(left.name, tag):
                continue
            if tag == _OLD_TAG and not out.exists():
                os.rename(left, out)
                notes.append(f"restored the previous index from {left.name} (a build was killed while swapping)")
                continue
            _retire(left, out if out.is_dir() else None, notes)
            notes.append(f"removed {left.name}, left by a build that was killed")
    return notes


def _retire(old: Path, new: Path | None, notes: list[str]) -> None:
    """Move what a build does not write from `old` into `new`, delete what it writes, then `old` if empty."""
    for entry in sorted(old.iterdir()):
        if entry.name == STATE_DIR and entry.is_dir() and not entry.is_symlink():
            for sub in sorted(entry.iterdir()):
                if _written(sub.name, WRITTEN_BY_BUILD):
                    _remove(sub)
                else:
                    _keep(sub, None if new is None else new / STATE_DIR / sub.name, notes)
            with contextlib.suppress(OSError):
                entry.rmdir()
        elif _written(entry.name, WRITTEN_TOP):
            _remove(entry)
        else:
            _keep(entry, None if new is None else new / entry.name, notes)
    try:
        old.rmdir()
    except OSError:
        notes.append(f"kept {old} (it still holds files graphroute did not write)")


def _written(name: str, written: tuple[str, ...]) -> bool:
    """A name a build writes, or the temporary name it writes it under first (`.NAME.<pid>.tmp`)."""
    return name in written or (name.endswith(".tmp") and any(name.startswith(f".{w}.") for w in written))


def _keep(entry: Path, target: Path | None, notes: list[str]) -> None:
    if target is None or target.exists() or target.is_symlink():
        return  # stays where it is; `_retire` then keeps the folder and says so
    target.parent.mkdir(parents=True, exist_ok=True)
    os.rename(entry, target)


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry)
    else:
        entry.unlink(missing_ok=True)


def _owner_alive(name: str, tag: str) -> bool:
    try:
        pid = int(name.split(f"{tag}-", 1)[1].split("-", 1)[0])
    except (IndexError, ValueError):
        return True  # not one of ours: leave it alone
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False when the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))
