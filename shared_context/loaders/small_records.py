"""Communities, reports and claims as `RecordList`s: built once, then read from the derived store by row.

First open: the records are built from the table as always (`schema.build_*`, with every check and
normalisation) and what was built is stored as an Arrow IPC table (`record_list.to_arrow`, which
refuses a table it could not give back identical). Later opens map that table and make a record only
when a row is read: at 1M entities building these lists (3M member ids, the findings, 1M claim texts)
was about 2 s of each second open. The entry depends on the tables the records are built from, so a
changed file builds (and stores) them again; the steps that follow (id repairs, hierarchy, checks in
`Index`) run on the `RecordList` exactly as on the list.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from shared_context.derived_store import DerivedStore
from shared_context.record_list import RecordList, to_arrow

__all__ = ["records"]

T = TypeVar("T")

_FORMAT = "1"


def records(
    store: DerivedStore, cls: type[T], name: str, depends_on: list[str], build: Callable[[], Sequence[T]], extra: str = ""
) -> Sequence[T]:
    """The stored records of `name` as a `RecordList`, else `build()` (stored for the next open)."""
    key = f"{_FORMAT}|{extra}"
    table = store.load_table(f"records-{name}", depends_on, extra=key)
    if table is not None:
        try:
            return RecordList(cls, table)
        except ValueError:  # written by other code: build it again
            pass
    built = build()
    if built:
        stored = to_arrow(cls, built)
        if stored is not None:
            store.save_table(f"records-{name}", depends_on, stored, extra=key)
    return built
