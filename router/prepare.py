"""`graphroute prepare INDEX`: build an index's derived store once, before any replica serves it, and the
check replicas make with `[serve] require_prepared` (`split_prepared`).

Preparing is what a first `serve` start does before it listens — load the index (building the derived store:
graph, links, token counts, the large tables as Arrow), then warm every engine and model up (the offline
embedder's fit, the lexical and vector search tables, the rendered local-context rows) — in a process of its
own, after which `shared_context.prepared.mark_prepared` records the tables it was built from.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from shared_context.prepared import mark_prepared, prepared_problem

if TYPE_CHECKING:
    from router.router import Router


def split_prepared(specs: dict[str, str], required: bool) -> tuple[dict[str, str], dict[str, str]]:
    """(name -> path of the indexes to load, name -> why an index is refused). Without `required` every index
    is loaded. ValueError when every index is refused: a replica that can serve nothing should not start."""
    if not required:
        return dict(specs), {}
    ready: dict[str, str] = {}
    refused: dict[str, str] = {}
    for name, path in specs.items():
        problem = prepared_problem(path)
        if problem:
            refused[name] = problem
        else:
            ready[name] = path
    if not ready:
        raise ValueError("[serve] require_prepared: no index is prepared: " + "; ".join(refused.values()))
    return ready, refused


def peak_memory_bytes() -> int:
    """This process's peak resident memory (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def prepare(index: str, load_router: Callable[[str], Router], warm_rows: int) -> tuple[str, float, int]:
    """Open `index` through `load_router(index)`, warm it as `serve` does, and mark its store prepared;
    (marker path, seconds, peak bytes)."""
    from router.service.warmup import warm_for_service
    from shared_context.prepared import store_for

    started = time.perf_counter()
    router = load_router(index)
    try:
        warm_for_service(router, warm_rows)
    finally:
        router.close()
    seconds = time.perf_counter() - started
    peak = peak_memory_bytes()
    marker = mark_prepared(store_for(index), seconds, peak)
    return str(marker), seconds, peak
