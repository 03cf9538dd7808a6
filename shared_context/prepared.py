"""Whether an index's derived store was prepared (`graphroute prepare INDEX`) for the tables it has now.

Opening an index the first time builds its derived store (`derived_store.py`): on a large index that takes
minutes and several times the tables' memory, which a replica must not pay under load. `graphroute prepare`
opens the index once, warms what a service builds before it listens, and then writes `prepared.json` into
the index's store folder: the fingerprints of the tables it was prepared from. `prepared_problem` compares
them with the tables' fingerprints now, reading only the files' parquet footers, so a replica can refuse an
index whose store is missing or stale (`[serve] require_prepared`) before loading anything.

The store folder is named by the index's location (its resolved local path, or its URI for object storage):
replicas find a prepared store when they open the index at the same location with the same cache folder
(`$GRAPHROUTE_CACHE_DIR`, e.g. a shared or copied folder), with the table files' sizes and modification times
kept when copied (`rsync -a`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from shared_context.derived_store import DerivedStore
from shared_context.loaders.files import locate

MARKER = "prepared.json"


def store_for(path: str | Path) -> DerivedStore:
    """The derived store `load_index(path)` reads and writes (object storage is mirrored first)."""
    files = locate(path)
    return DerivedStore.for_tables(files.root.resolve(), files.files)


def mark_prepared(store: DerivedStore, seconds: float, peak_bytes: int) -> Path:
    """Record that `store` holds everything its tables need now (after a whole open and warm-up)."""
    marker = store.dir / MARKER
    store.dir.mkdir(parents=True, exist_ok=True)
    record = {"location": store.location, "fingerprints": store.fingerprints, "prepared_at": time.time(),
              "seconds": round(seconds, 2), "peak_bytes": peak_bytes}
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1), encoding="utf-8")
    tmp.replace(marker)
    return marker


def prepared_problem(path: str | Path) -> str:
    """Why the index at `path` has no usable prepared store ('' when it has one)."""
    store = store_for(path)
    marker = store.dir / MARKER
    try:
        record = json.loads(marker.read_text(encoding="utf-8"))
        prepared = record["fingerprints"]
    except FileNotFoundError:
        return (f"no prepared store for {path} in {store.dir.parent.parent} (run `graphroute prepare {path}` "
                "with the same GRAPHROUTE_CACHE_DIR)")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"the prepared store's {marker} is unreadable ({exc}); run `graphroute prepare {path}` again"
    changed = sorted(t for t in set(prepared) | set(store.fingerprints) if prepared.get(t) != store.fingerprints.get(t))
    if changed:
        return (f"the prepared store of {path} is stale: {', '.join(changed)} changed since it was prepared; "
                f"run `graphroute prepare {path}` again")
    return ""
