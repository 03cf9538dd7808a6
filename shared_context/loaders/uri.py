"""Index locations given as URIs: `file://`, `s3://`, `gs://`, `az://`, `hdfs://` (whatever pyarrow reads).

`local_folder(location)` returns a local folder holding the index's files:
- a plain path, or a `file://` URI, is that folder itself (nothing is copied);
- any other URI is opened with `pyarrow.fs.FileSystem.from_uri` (credentials come from the usual
  environment of each store, e.g. `AWS_*`, `GOOGLE_APPLICATION_CREDENTIALS`; `az://` needs a pyarrow
  built with Azure support) and its files - tables, `graphroute/manifest.json`, `lancedb/` - are mirrored
  into `<cache root>/remote/<digest of the URI>/`. A file is copied again only when its remote size or
  modification time changed, and files that disappeared remotely are removed, so the mirror always
  equals the remote folder. Each copy is written to a temporary name and renamed into place.
The loaders then read the mirror like any local folder, and derived structures are keyed by its
tables' content as usual, so the query side never touches the network after the first load.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from shared_context.derived_store import cache_root
from shared_context.errors import IndexFormatError

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = ["is_uri", "local_folder", "mirror"]

_MIRROR_STATE = ".graphroute-mirror.json"


def is_uri(location: str | Path) -> bool:
    return not isinstance(location, Path) and "://" in str(location)


def local_folder(location: str | Path) -> Path:
    """The local folder to load `location` from (see the module docstring)."""
    if not is_uri(location):
        return Path(location).expanduser()
    import pyarrow.fs as pafs  # imported on first use: pyarrow.fs costs ~15 ms at import time

    uri = str(location)
    try:
        fs, root = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError, ValueError) as exc:
        raise IndexFormatError(f"cannot open the index location: {exc}", file=uri) from exc
    if isinstance(fs, pafs.LocalFileSystem):
        return Path(root)
    digest = hashlib.sha256(uri.rstrip("/").encode()).hexdigest()[:24]
    return mirror(fs, root, cache_root() / "remote" / digest, uri)


def mirror(fs: pafs.FileSystem, root: str, dest: Path, label: str) -> Path:
    """Make `dest` an up-to-date copy of the folder `root` on `fs`; return `dest`."""
    import pyarrow.fs as pafs

    root = root.rstrip("/")
    try:
        info = fs.get_file_info(root)
        if info.type != pafs.FileType.Directory:
            what = "does not exist" if info.type == pafs.FileType.NotFound else "is not a folder"
            raise IndexFormatError(f"index location {what}; pass the GraphRAG output folder", file=label)
        listing = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    except (OSError, pa.ArrowException) as exc:
        raise IndexFormatError(f"cannot list the index location: {exc}", file=label) from exc
    remote = {
        f.path[len(root) :].lstrip("/"): f"{f.size}:{f.mtime_ns}"
        for f in listing
        if f.type == pafs.FileType.File
    }
    dest.mkdir(parents=True, exist_ok=True)
    state_file = dest / _MIRROR_STATE
    try:
        state: dict[str, str] = json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {}
    for rel in sorted(set(state) - set(remote)):  # deleted remotely
        (dest / rel).unlink(missing_ok=True)
        state.pop(rel)
    for rel, stamp in sorted(remote.items()):
        target = dest / rel
        size = int(stamp.split(":")[0])
        if state.get(rel) == stamp and target.is_file() and target.stat().st_size == size:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
        try:
            with fs.open_input_stream(f"{root}/{rel}") as src, tmp.open("wb") as out:
                while chunk := src.read(1 << 22):
                    out.write(chunk)
        except (OSError, pa.ArrowException) as exc:
            tmp.unlink(missing_ok=True)
            raise IndexFormatError(f"cannot copy {rel} from the index location: {exc}", file=label) from exc
        os.replace(tmp, target)
        state[rel] = stamp
        _write_state(state_file, state)
    _write_state(state_file, state)
    return dest


def _write_state(path: Path, state: dict[str, str]) -> None:
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
