"""The private run directory of `graphroute serve --workers N` (`$TMPDIR/graphroute-serve-*`, mode 0700):
the shared admission counts and the workers' metrics files.

The supervisor removes it when it stops; a supervisor that is killed (`kill -9`) cannot, so each directory
names its owner's pid in `owner`, and the next server started by the same user removes the directories
whose owner is gone before it makes its own.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger("graphroute.serve")
PREFIX = "graphroute-serve-"
OWNER = "owner"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process has that pid now: not ours to judge, keep the folder
        return True
    return True


def _owner(folder: Path) -> int | None:
    try:
        return int((folder / OWNER).read_text().strip())
    except (OSError, ValueError):
        return None


def remove_orphans(parent: Path | None = None) -> list[Path]:
    """Remove this user's run directories under `parent` (the temp folder) whose owner process is gone;
    the ones removed. A directory without a readable owner file (being made, or not ours) is kept."""
    parent = Path(parent or tempfile.gettempdir())
    removed = []
    for folder in parent.glob(PREFIX + "*"):
        try:
            if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        pid = _owner(folder)
        if pid is None or pid == os.getpid() or _alive(pid):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        log.info("removed the run directory %s of a server that is gone (pid %d)", folder, pid)
        removed.append(folder)
    return removed


def make_run_dir(parent: Path | None = None) -> Path:
    """A new run directory owned by this process (after removing those of servers that are gone)."""
    remove_orphans(parent)
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))  # 0700: this user's only
    (folder / OWNER).write_text(str(os.getpid()))
    return folder
