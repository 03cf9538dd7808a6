"""The small tables (communities, reports, claims, documents, nodes) kept in the derived store as read.

They are read on every open and turned into record lists; at 1M entities decoding their parquet files is
about 4 s of CPU (the communities' member lists alone ~3 s) on every second open. The first open reads
each file as usual and writes the Arrow table it got, less the skipped columns, as Arrow IPC into the
derived store, keyed by that file's fingerprint and the skipped columns; later opens map it (no
decoding, pages read as touched). The records are built from the same Arrow table either way, so
normalisation, repairs and format errors are unchanged. A changed file has a new fingerprint, hence a
new entry.
"""

from __future__ import annotations

import pyarrow as pa

from shared_context.derived_store import DerivedStore
from shared_context.loaders.columns import TableData
from shared_context.loaders.files import IndexFiles, read_table

__all__ = ["read_small_table"]

_FORMAT = "1"


def read_small_table(
    files: IndexFiles, store: DerivedStore, table: str, skip: tuple[str, ...] = ()
) -> TableData | None:
    """`read_table(files, table, skip)`, mapped from the store when it holds the table (see module)."""
    path = files.files.get(table)
    if path is None:
        return None
    name, extra = f"table-{table}", f"{_FORMAT}|{','.join(sorted(skip))}"
    from_csv = path.suffix == ".csv"
    mapped = store.load_table(name, [table], extra=extra)
    if mapped is not None:
        return TableData(table, path.name, mapped, from_csv=from_csv)
    data = read_table(files, table, skip)
    assert data is not None
    try:
        store.save_table(name, [table], data.table, extra=extra)
    except pa.ArrowException:  # a type Arrow IPC cannot write: this table is decoded on every open
        return data
    # write-then-map: the decoded copy goes, the process keeps only the stored pages it touches
    mapped = store.load_table(name, [table], extra=extra)
    return data if mapped is None else TableData(table, path.name, mapped, from_csv=from_csv)
