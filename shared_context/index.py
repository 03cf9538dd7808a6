"""The loaded index: record lists plus everything a query needs, precomputed once.

Build it with `shared_context.index_build.index_from_records(...)` (the loaders in `shared_context.loaders`
do this for GraphRAG output folders): it validates the records and derives what is below. An `Index` is
read-only; only `add_vectors` may attach vector tables (engines do this at set-up with an offline embedder).

Versions (`Index.version`, detected by the loaders from file and column names): "v3" (unprefixed
tables, text units with `document_id`), "v2" (unprefixed tables, text units with the list
`document_ids`), "v1" (`create_final_*` tables with `title`), "v0" (`create_final_*` with `name`
instead of `title`; membership from `create_final_nodes`), "v3-partial" (no communities, reports or
nodes at all, e.g. a LightRAG export) and "graphroute" (records built in memory). Missing community
`parent`/`children` links are derived at load whatever the version (`index_hierarchy.derive_hierarchy`).

Adjacency lists (`Adjacency`) are held as two flat integer arrays (CSR), so they can be stored and
memory-mapped: `Adjacency[i]` is the list of positions linked to row i (a fresh `list[int]`, so callers keep the
plain-list behaviour they had when adjacency was a list of lists); the arrays behind it may be
`np.memmap`s opened from the derived-structure store, in which case only the rows a query touches
are ever read from disk. Millions of entries then cost 8 bytes each instead of a Python list slot
plus the list objects.

Dangling-reference policy (GraphRAG indexes in the wild contain some; GraphRAG itself keeps them):
- fatal (`IndexFormatError`): duplicate ids, duplicate entity titles, duplicate community numbers,
  a relationship neither of whose endpoints names an entity (the join is clearly broken);
- recorded in `Index.warnings` and skipped in the adjacency: one unknown relationship endpoint
  (its position is -1 in `relationship_endpoints`), unknown text-unit / entity / relationship ids
  in link lists, community members that are not entities, reports of unknown communities, text
  units whose document is unknown.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import ClassVar

import numpy as np

from shared_context.derived_entries import DerivedArrays
from shared_context.derived_store import DerivedStore
from shared_context.errors import IndexFormatError
from shared_context.index_tokens import lazy_token_counts
from shared_context.records import (
    Claim,
    Community,
    CommunityReport,
    Document,
    Entity,
    Relationship,
    RowSequence,
    TextUnit,
    values_of,
)
from shared_context.search_backend import VECTOR_TARGETS, VectorTable
from shared_context.token_counts import TokenAnchors
from shared_context.tokens import Tokenizer

__all__ = ["ID_MAPS", "Adjacency", "Index", "VectorTable", "group"]

# id maps of the record tables: attribute -> (record list, field, table, column); for a RecordTable they
# are built on first use (a second load then never hashes millions of ids it does not need)
ID_MAPS = {
    "entity_pos": ("entities", "id", "entities", "id"),
    "entity_by_title": ("entities", "title", "entities", "title"),
    "relationship_pos": ("relationships", "id", "relationships", "id"),
    "text_unit_pos": ("text_units", "id", "text_units", "id"),
}


class Adjacency(RowSequence[list[int]]):
    """Row i holds `indices[indptr[i]:indptr[i + 1]]`."""

    __slots__ = ("indices", "indptr")

    def __init__(self, indptr: np.ndarray, indices: np.ndarray) -> None:
        if indptr.ndim != 1 or len(indptr) == 0 or int(indptr[-1]) != len(indices):
            raise ValueError("indptr must be 1-D, start the rows and end at len(indices)")
        self.indptr = indptr
        self.indices = indices

    @classmethod
    def from_lists(cls, lists: Sequence[Sequence[int]]) -> Adjacency:
        lengths = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
        indptr = np.zeros(len(lists) + 1, dtype=np.int64)
        np.cumsum(lengths, out=indptr[1:])
        flat = np.fromiter((v for x in lists for v in x), dtype=np.int64, count=int(indptr[-1]))
        return cls(indptr, flat)

    @classmethod
    def of(cls, rows: Sequence[Sequence[int]]) -> Adjacency:
        """`rows` itself when it is an Adjacency, else its CSR form."""
        return rows if isinstance(rows, Adjacency) else cls.from_lists(rows)

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def _row(self, i: int) -> list[int]:
        rows: list[int] = self.indices[int(self.indptr[i]) : int(self.indptr[i + 1])].tolist()
        return rows

    def __iter__(self) -> Iterator[list[int]]:
        flat = np.asarray(self.indices).tolist()
        bounds = np.asarray(self.indptr).tolist()
        for a, b in pairwise(bounds):
            yield flat[a:b]

    def lengths(self) -> np.ndarray:
        return np.diff(np.asarray(self.indptr))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Adjacency):
            return bool(np.array_equal(self.indptr, other.indptr) and np.array_equal(self.indices, other.indices))
        if isinstance(other, Sequence):
            return list(self) == [list(x) for x in other]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Adjacency(rows={len(self)}, entries={len(self.indices)})"

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The two arrays under `<prefix>_indptr` / `<prefix>_indices` (for the derived store)."""
        return {f"{prefix}_indptr": self.indptr, f"{prefix}_indices": self.indices}


def group(keys: np.ndarray, values: np.ndarray, n: int, order: np.ndarray | None = None) -> Adjacency:
    """Group `values` by integer `keys` in [0, n), each row sorted by `order` (default: the value)."""
    indptr = np.zeros(n + 1, dtype=np.int64)
    if len(keys) == 0:
        return Adjacency(indptr, np.zeros(0, dtype=np.int64))
    sort_by = values if order is None else order
    idx = np.lexsort((sort_by, keys))
    np.cumsum(np.bincount(keys, minlength=n), out=indptr[1:])
    return Adjacency(indptr, np.ascontiguousarray(values[idx], dtype=np.int64))


@dataclass(kw_only=True, eq=False, repr=False)
class Index:
    """A GraphRAG index loaded into memory with id maps, adjacency lists and token counts.

    Attribute names are a contract other packages rely on (see ARCHITECTURE.md):
    record lists `entities, relationships, text_units, communities, community_reports, claims,
    documents`; id maps `entity_pos, entity_by_title, relationship_pos, text_unit_pos, document_pos,
    claim_pos, community_pos (community number -> position), report_pos (community number ->
    report position)`; adjacency `entity_relationships` (sorted by combined_degree desc, weight desc,
    position), `entity_text_units`, `text_unit_entities`, `text_unit_relationships`, `entity_claims`,
    `entity_communities` (community numbers, shallowest level first), `relationship_endpoints`
    ((R, 2) int64 entity positions, -1 when a title names no entity), `communities_by_level`,
    `reports_by_level` (report positions), `levels`, `text_unit_document` (document position or -1);
    token counts (np.int32, aligned with the lists) `entity_tokens, relationship_tokens,
    text_unit_tokens, report_tokens, report_summary_tokens, claim_tokens`; `vectors`; `derived_store`
    (the loader's `DerivedStore`, None for an index built in memory).
    """

    path: Path | None
    version: str
    tokenizer: Tokenizer
    warnings: list[str]
    source_files: dict[str, str]
    entities: Sequence[Entity]
    relationships: Sequence[Relationship]
    text_units: Sequence[TextUnit]
    communities: Sequence[Community]
    community_reports: Sequence[CommunityReport]
    claims: Sequence[Claim]
    documents: Sequence[Document]
    document_pos: dict[str, int]
    claim_pos: dict[str, int]
    community_pos: dict[int, int]
    report_pos: dict[int, int]
    entity_relationships: Adjacency
    entity_text_units: Adjacency
    text_unit_entities: Adjacency
    text_unit_relationships: Adjacency
    entity_claims: Adjacency
    entity_communities: Adjacency
    relationship_endpoints: np.ndarray
    communities_by_level: dict[int, list[int]]
    reports_by_level: dict[int, list[int]]
    levels: list[int]
    text_unit_document: list[int]
    relationship_tokens: np.ndarray
    text_unit_tokens: np.ndarray
    text_unit_token_anchors: TokenAnchors  # where a unit's encoding may be cut (excerpt blocks count from it)
    report_tokens: np.ndarray
    report_summary_tokens: np.ndarray
    claim_tokens: np.ndarray
    vectors: dict[str, VectorTable]
    derived_store: DerivedStore | None  # where structures derived later (excerpt blocks) are kept
    id_maps: dict[str, dict[str, int]] = field(default_factory=dict)  # of the tables held as lists (built at load)

    _frozen: ClassVar[bool] = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "_frozen", True)

    def __setattr__(self, name: str, value: object) -> None:
        if self._frozen:
            raise AttributeError(
                f"Index is read-only after load (tried to set {name!r}); use add_vectors for vectors"
            )
        object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ built on first use

    def _id_map(self, name: str) -> dict[str, int]:
        """An id map: made at load for a table held as a list; for a `RecordTable` made from its column on
        first use (a second load then never hashes millions of ids it does not need)."""
        made = self.id_maps.get(name)
        if made is not None:
            return made
        records, field_name = ID_MAPS[name][:2]
        values = values_of(getattr(self, records), field_name, str)
        return dict(zip(values, range(len(values)), strict=True))

    @cached_property
    def entity_pos(self) -> dict[str, int]:
        return self._id_map("entity_pos")

    @cached_property
    def entity_by_title(self) -> dict[str, int]:
        return self._id_map("entity_by_title")

    @cached_property
    def relationship_pos(self) -> dict[str, int]:
        return self._id_map("relationship_pos")

    @cached_property
    def text_unit_pos(self) -> dict[str, int]:
        return self._id_map("text_unit_pos")

    @cached_property
    def entity_tokens(self) -> np.ndarray:
        """Read by no query: counted (or read from the derived store) on first use, not at load."""
        derived = DerivedArrays(self.derived_store, self.warnings)
        return lazy_token_counts("entity_tokens", self.entities, self.tokenizer, derived)

    # ------------------------------------------------------------------ vectors

    def _attach(self, table: VectorTable) -> None:
        target = getattr(self, VECTOR_TARGETS[table.name])
        if len(table) and (int(table.positions.min()) < 0 or int(table.positions.max()) >= len(target)):
            raise IndexFormatError(
                f"vector table {table.name!r} points outside the {len(target)} {VECTOR_TARGETS[table.name]}",
                file=table.source,
            )
        existing = self.vectors.get(table.name)
        if existing is not None and existing.dim != table.dim:
            self.warnings.append(
                f"vector table {table.name!r} from {existing.source} (dim {existing.dim}) replaced by "
                f"{table.source} (dim {table.dim})"
            )
        self.vectors[table.name] = table

    def add_vectors(self, table: VectorTable) -> None:
        """Attach (or replace) a vector table; positions must point into the matching record list."""
        self._attach(table)

    def check_embedding_dim(self, dim: int, model: str | None = None) -> None:
        """Raise IndexFormatError when a stored vector table does not match the configured embedder."""
        for table in self.vectors.values():
            if table.dim != dim:
                who = f"the configured embedder{f' ({model})' if model else ''}"
                raise IndexFormatError(
                    f"has dimension {table.dim} but {who} produces {dim}; re-embed the index with that "
                    "model or configure the embedder the index was built with"
                    + (f" ({table.model})" if table.model else ""),
                    file=table.source,
                    column=table.column,
                )

    # ------------------------------------------------------------------ convenience

    def entity_title(self, pos: int) -> str:
        return self.entities[pos].title

    def document_for_text_unit(self, text_unit_id: str) -> Document | None:
        pos = self.text_unit_pos.get(text_unit_id)
        if pos is None:
            return None
        doc = self.text_unit_document[pos]
        return self.documents[doc] if doc >= 0 else None

    def stats(self) -> dict[str, object]:
        return {
            "path": str(self.path) if self.path else None,
            "version": self.version,
            "format": "csv" if any(f.endswith(".csv") for f in self.source_files.values()) else "parquet",
            "tokenizer": self.tokenizer.encoding_name,
            "entities": len(self.entities),
            "relationships": len(self.relationships),
            "text_units": len(self.text_units),
            "communities": len(self.communities),
            "community_reports": len(self.community_reports),
            "claims": len(self.claims),
            "documents": len(self.documents),
            "levels": list(self.levels),
            "reports_per_level": {lvl: len(p) for lvl, p in self.reports_by_level.items()},
            "entities_without_community": sum(1 for c in self.entity_communities if not c),
            "vectors": {
                name: {"rows": len(t), "dim": t.dim, "source": t.source, "model": t.model}
                for name, t in self.vectors.items()
            },
            "warnings": len(self.warnings),
        }

    def __repr__(self) -> str:
        return (
            f"Index(version={self.version!r}, entities={len(self.entities)}, relationships={len(self.relationships)}, "
            f"text_units={len(self.text_units)}, community_reports={len(self.community_reports)}, path={self.path})"
        )
