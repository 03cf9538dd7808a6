"""The loaded index: record lists plus everything a query needs, precomputed once.

Build it with `Index.from_records(...)` (the loaders in `shared_context.loaders` do this for
GraphRAG output folders). After construction an `Index` is read-only; only `add_vectors` may attach
vector tables (engines do this at set-up with an offline embedder).

Versions (`Index.version`, detected by the loaders from file and column names): "v3" (unprefixed
tables, text units with `document_id`), "v2" (unprefixed tables, text units with the list
`document_ids`), "v1" (`create_final_*` tables with `title`), "v0" (`create_final_*` with `name`
instead of `title`; membership from `create_final_nodes`), "v3-partial" (no communities, reports or
nodes at all, e.g. a LightRAG export) and "graphroute" (records built in memory). Missing community
`parent`/`children` links are derived here whatever the version (see `_derive_hierarchy`).

Dangling-reference policy (GraphRAG indexes in the wild contain some; GraphRAG itself keeps them):
- fatal (`IndexFormatError`): duplicate ids, duplicate entity titles, duplicate community numbers,
  a relationship neither of whose endpoints names an entity (the join is clearly broken);
- recorded in `Index.warnings` and skipped in the adjacency: one unknown relationship endpoint
  (its position is -1 in `relationship_endpoints`), unknown text-unit / entity / relationship ids
  in link lists, community members that are not entities, reports of unknown communities, text
  units whose document is unknown.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from pathlib import Path
from typing import Any, TypeAlias, cast

import numpy as np
import pyarrow as pa

from shared_context import arrow_keys
from shared_context.adjacency import Adjacency, group
from shared_context.derived_store import DerivedStore, cache_root
from shared_context.errors import IndexFormatError
from shared_context.record_list import RecordList
from shared_context.record_table import (
    RecordTable,
    array_of,
    numeric_view,
    release_arrow_memory,
    string_array,
    values_of,
)
from shared_context.records import (
    Claim,
    Community,
    CommunityReport,
    Document,
    Entity,
    Relationship,
    TextUnit,
)
from shared_context.token_counts import TokenAnchors, TokenCounts, count_texts
from shared_context.tokens import Tokenizer, get_tokenizer
from shared_context.vectors import VECTOR_TARGETS, VectorTable

__all__ = ["Index", "VectorTable", "token_cache_dir"]

_TOKEN_FIELDS = (
    "entity_tokens",
    "relationship_tokens",
    "text_unit_tokens",
    "report_tokens",
    "report_summary_tokens",
    "claim_tokens",
)
# Read by no query (no engine weighs an entity description by its tokens): counted, or read from the
# derived store, on first use instead of at load (100k entities: 22 MB of text, ~1 s of a first load's CPU).
_LAZY_TOKENS = ("entity_tokens",)
# Bump when what `from_records` derives changes, so stored structures of older code are not reused.
_DERIVED_FORMAT = "1"
# table each token-count field is derived from (the derived store invalidates per table)
_TOKEN_TABLES = {
    "entity_tokens": "entities",
    "relationship_tokens": "relationships",
    "text_unit_tokens": "text_units",
    "report_tokens": "community_reports",
    "report_summary_tokens": "community_reports",
    "claim_tokens": "covariates",
}


def token_cache_dir() -> Path:
    """Root of the on-disk caches (`$GRAPHROUTE_CACHE_DIR` or `~/.cache/graphroute`); token counts and
    the other derived structures live under its `derived/` folder (see `derived_store`)."""
    return cache_root()


def _file_for(source_files: dict[str, str], table: str) -> str:
    return source_files.get(table, table)


# id maps of the record tables: attribute -> (record list, field, table, column); built on first use
# when the records are a RecordTable (a second load then never hashes millions of ids it does not need)
_ID_MAPS = {
    "entity_pos": ("entities", "id", "entities", "id"),
    "entity_by_title": ("entities", "title", "entities", "title"),
    "relationship_pos": ("relationships", "id", "relationships", "id"),
    "text_unit_pos": ("text_units", "id", "text_units", "id"),
}


def _check_unique_column(records: RecordTable[Any], field: str, file: str, column: str) -> None:
    """IndexFormatError on duplicates, checked in Arrow without building a dict."""
    col = records.arrow_column(field)
    if arrow_keys.count_distinct(col) == len(col):
        return
    _check_unique(records.column(field), file, column)


def _check_unique(values: Sequence[Any], file: str, column: str) -> dict[Any, int]:
    """Map value -> position, raising IndexFormatError on duplicates."""
    pos = {v: i for i, v in enumerate(values)}
    if len(pos) != len(values):
        dups = [v for v, n in Counter(values).items() if n > 1]
        raise IndexFormatError(
            f"{len(dups)} duplicate values (e.g. {dups[0]!r}); every row needs a unique value",
            file=file,
            column=column,
        )
    return pos


Keys: TypeAlias = "dict[str, int] | pa.Array | pa.ChunkedArray"


Values: TypeAlias = "Sequence[str] | pa.Array | pa.ChunkedArray"


def _column(records: Sequence[Any], field: str) -> Values:
    """One field of every record: the Arrow column of a `RecordTable` (no Python object per row at load),
    else a list."""
    return records.arrow_column(field) if isinstance(records, RecordTable) else values_of(records, field)


def _positions(values: Values, pos: Keys) -> np.ndarray:
    """Position of each value among the keys (-1 when absent), hashed in Arrow rather than per-item
    dict lookups (2x faster on millions of ids). `pos` is the Arrow array of the unique keys in row
    order, or a dict mapping them to 0..n-1 in insertion order."""
    if not len(values):
        return np.zeros(0, dtype=np.int64)
    keys = pos if isinstance(pos, pa.Array | pa.ChunkedArray) else string_array(list(pos))
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    arrow = values if isinstance(values, pa.Array | pa.ChunkedArray) else string_array(values)
    return arrow_keys.index_in(arrow, keys)


def _lookup_lists(lists: Sequence[Sequence[str]] | pa.ChunkedArray, pos: Keys) -> tuple[np.ndarray, np.ndarray, int]:
    """Flatten id lists (Python lists, or an Arrow list column flattened in Arrow) into (row, target
    position) pairs; returns also the number of unknown ids."""
    if isinstance(lists, pa.ChunkedArray):
        import pyarrow.compute as pc  # imported on first use: ~50 ms at import time

        lengths = np.asarray(numeric_view(pc.list_value_length(lists), fill=0), dtype=np.int64)
        flat: Values = pa.chunked_array([chunk.flatten() for chunk in lists.chunks], type=lists.type.value_type)
    else:
        lengths = np.array(list(map(len, lists)), dtype=np.int64)
        flat = list(chain.from_iterable(lists))
    rows = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    del lengths
    targets = _positions(flat, pos)  # the flattened ids are read in place: no copy of the list column
    del flat
    ok = targets >= 0
    return rows[ok], targets[ok], int((~ok).sum())


def _unique_pairs(a: np.ndarray, b: np.ndarray, n_b: int) -> tuple[np.ndarray, np.ndarray]:
    if len(a) == 0:
        return a, b
    codes = np.sort(a * max(n_b, 1) + b)  # sort-based dedupe: faster than np.unique's hashing here
    keep = np.ones(len(codes), dtype=bool)
    keep[1:] = codes[1:] != codes[:-1]
    codes = codes[keep]
    return codes // max(n_b, 1), codes % max(n_b, 1)


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
    entity_pos: dict[str, int]
    entity_by_title: dict[str, int]
    relationship_pos: dict[str, int]
    text_unit_pos: dict[str, int]
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
    entity_tokens: np.ndarray
    relationship_tokens: np.ndarray
    text_unit_tokens: np.ndarray
    text_unit_token_anchors: TokenAnchors  # where a unit's encoding may be cut (excerpt blocks count from it)
    report_tokens: np.ndarray
    report_summary_tokens: np.ndarray
    claim_tokens: np.ndarray
    vectors: dict[str, VectorTable]
    derived_store: DerivedStore | None  # where structures derived later (excerpt blocks) are kept

    _frozen: bool = False

    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails: an id map of a RecordTable not built yet, a lazy count
        if name in _LAZY_TOKENS:
            counts = self._lazy_token_counts(name)
            object.__setattr__(self, name, counts)
            return counts
        spec = _ID_MAPS.get(name)
        if spec is None:
            raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")
        values = values_of(object.__getattribute__(self, spec[0]), spec[1])
        mapping = dict(zip(values, range(len(values)), strict=True))
        object.__setattr__(self, name, mapping)
        return mapping

    def _keys(self, records_attr: str, field: str) -> Keys:
        """The values of one unique field of a record list, for `_positions` / `_lookup_lists`."""
        records = getattr(self, records_attr)
        if isinstance(records, RecordTable):
            return cast(Keys, records.arrow_column(field))
        return cast(Keys, getattr(self, next(a for a, spec in _ID_MAPS.items() if spec[:2] == (records_attr, field))))

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen:
            raise AttributeError(
                f"Index is read-only after load (tried to set {name!r}); use add_vectors for vectors"
            )
        object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_records(
        cls,
        *,
        entities: Iterable[Entity],
        relationships: Iterable[Relationship],
        text_units: Iterable[TextUnit],
        communities: Iterable[Community] = (),
        community_reports: Iterable[CommunityReport] = (),
        claims: Iterable[Claim] = (),
        documents: Iterable[Document] = (),
        vectors: Iterable[VectorTable] | dict[str, VectorTable] | None = None,
        version: str = "graphroute",
        path: str | Path | None = None,
        tokenizer: Tokenizer | str | None = None,
        source_files: dict[str, str] | None = None,
        warnings: Iterable[str] = (),
        store: DerivedStore | None = None,
    ) -> Index:
        """Validate the records, derive missing links and precompute everything a query needs.

        `store` (set by the loaders: keyed by the fingerprints of the index's table files) keeps what
        is derived here on disk - adjacency, links, claims and community membership per entity, token
        counts - so the next load maps it instead of computing it; each entry depends only on the
        tables it is computed from. In-memory indexes are computed every time.
        """
        self = object.__new__(cls)
        self.path = Path(path) if path is not None else None
        self.version = version
        if tokenizer is None or isinstance(tokenizer, str):
            self.tokenizer = get_tokenizer(tokenizer) if tokenizer else get_tokenizer()
        else:
            self.tokenizer = tokenizer
        self.warnings = list(warnings)
        self.source_files = dict(source_files or {})
        # RecordTables (from the loaders) stay columnar; anything else becomes a list of records
        self.entities = entities if isinstance(entities, RecordTable) else list(entities)
        self.relationships = relationships if isinstance(relationships, RecordTable) else list(relationships)
        self.text_units = text_units if isinstance(text_units, RecordTable) else list(text_units)
        # small tables: a RecordList (from the loaders' store) makes its records as rows are read
        self.communities = _records(communities)
        self.community_reports = _records(community_reports)
        self.claims = _records(claims)
        self.documents = _records(documents)
        missing, counting = self._start_token_counts(store)  # counted on other threads meanwhile
        try:
            self._build_id_maps()
            release_arrow_memory()  # each step's Arrow scratch (id hash tables) goes before the next
            self._build_graph(store)
            release_arrow_memory()
            self._build_text_unit_links(store)
            release_arrow_memory()
            self._build_claims(store)
            self._build_communities(store)
            self._build_documents()
            self._finish_token_counts(store, missing, counting)
        finally:
            counting.cancel()
        self.vectors = {}
        self.derived_store = store
        if vectors is not None:
            tables = vectors.values() if isinstance(vectors, dict) else vectors
            for table in tables:
                self._attach(table)
        self._frozen = True
        return self

    def _file(self, table: str) -> str:
        return _file_for(self.source_files, table)

    def _build_id_maps(self) -> None:
        for attr, (records_attr, field, table, column) in _ID_MAPS.items():
            records = getattr(self, records_attr)
            if isinstance(records, RecordTable):  # map built on first use; ids checked unless stored checked
                if not records.validated:
                    _check_unique_column(records, field, self._file(table), column)
            else:
                setattr(self, attr, _check_unique(values_of(records, field), self._file(table), column))
        self.document_pos = _check_unique(values_of(self.documents, "id"), self._file("documents"), "id")
        self.claim_pos = _check_unique(values_of(self.claims, "id"), self._file("covariates"), "id")
        self.community_pos = _check_unique(
            values_of(self.communities, "community"), self._file("communities"), "community"
        )
        self.report_pos = _check_unique(
            values_of(self.community_reports, "community"), self._file("community_reports"), "community"
        )

    def _derived(
        self, store: DerivedStore | None, name: str, depends_on: list[str], build: Callable[[], dict[str, np.ndarray]]
    ) -> dict[str, np.ndarray]:
        """The arrays of one derived entry: mapped from the store when it holds them, else built (and
        stored). Warnings raised while building are stored with the arrays and repeated on a hit."""
        found = self._stored(store, name, depends_on)
        if found is not None:
            return found
        before = len(self.warnings)
        arrays = build()
        return self._store(store, name, depends_on, arrays, self.warnings[before:])

    def _stored(self, store: DerivedStore | None, name: str, depends_on: list[str]) -> dict[str, np.ndarray] | None:
        """A stored entry's arrays (its warnings repeated into `self.warnings`), or None."""
        if store is None:
            return None
        found = store.load_arrays(name, depends_on, extra=_DERIVED_FORMAT)
        if found is None or "warnings" not in found:
            return None
        self.warnings.extend(str(w) for w in found.pop("warnings").tolist())
        return found

    def _store(
        self,
        store: DerivedStore | None,
        name: str,
        depends_on: list[str],
        arrays: dict[str, np.ndarray],
        warnings: list[str],
    ) -> dict[str, np.ndarray]:
        """Store built arrays with the warnings their building raised; returns them mapped from the store
        (write-then-map: the process keeps the stored pages it touches, not the arrays just built)."""
        if store is None:
            return arrays
        stored_warnings = np.array(warnings or [""], dtype=str)[: len(warnings)]
        store.save_arrays(name, depends_on, {**arrays, "warnings": stored_warnings}, extra=_DERIVED_FORMAT)
        found = store.load_arrays(name, depends_on, list(arrays), extra=_DERIVED_FORMAT)
        return arrays if found is None else found

    def _build_graph(self, store: DerivedStore | None) -> None:
        """Relationship endpoints and per-entity relationship lists, pre-sorted for local search."""
        found = self._derived(store, "graph", ["entities", "relationships", "nodes"], self._compute_graph)
        self.relationship_endpoints = found["endpoints"]
        self.entity_relationships = Adjacency(found["er_indptr"], found["er_indices"])
        if len(found["entity_degree"]) and self.entities:
            _set_values(self.entities, "degree", found["entity_degree"])
        if len(found["combined_degree"]) and self.relationships:
            _set_values(self.relationships, "combined_degree", found["combined_degree"])

    def _compute_graph(self) -> dict[str, np.ndarray]:
        n_ent, n_rel = len(self.entities), len(self.relationships)
        titles = self._keys("entities", "title")
        src = _positions(_column(self.relationships, "source"), titles)
        tgt = _positions(_column(self.relationships, "target"), titles)
        both = (src < 0) & (tgt < 0)
        if both.any():
            bad = [self.relationships[i].source for i in np.flatnonzero(both)[:1]]
            raise IndexFormatError(
                f"{int(both.sum())} relationships name no entity at either end (e.g. {bad[0]!r}); "
                "source/target must be entity titles",
                file=self._file("relationships"),
                column="source",
            )
        for col, arr, attr in (("source", src, "source"), ("target", tgt, "target")):
            missing = np.flatnonzero(arr < 0)
            if len(missing):
                example = getattr(self.relationships[int(missing[0])], attr)
                self.warnings.append(
                    f"{self._file('relationships')}: column {col!r}: {len(missing)} values name no entity "
                    f"(e.g. {example!r}); those relationships are kept and listed under their other endpoint"
                )
        endpoints = np.stack([src, tgt], axis=1) if n_rel else np.zeros((0, 2), dtype=np.int64)
        entity_degree, combined_degree = self._derive_degrees(src, tgt)
        combined = array_of(self.relationships, "combined_degree").reshape(n_rel)
        weight = array_of(self.relationships, "weight").reshape(n_rel)
        positions = np.arange(n_rel, dtype=np.int64)
        rank = np.empty(n_rel, dtype=np.int64)
        rank[np.lexsort((positions, -weight, -combined))] = positions
        self_loop = src == tgt
        keys = np.concatenate([src, tgt[~self_loop]])
        rels = np.concatenate([positions, positions[~self_loop]])
        ok = keys >= 0
        adjacency = group(keys[ok], rels[ok], n_ent, order=rank[rels[ok]])
        return {
            "endpoints": endpoints,
            **adjacency.arrays("er"),
            "entity_degree": entity_degree,
            "combined_degree": combined_degree,
        }

    def _derive_degrees(self, src: np.ndarray, tgt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Fill entity degree / relationship combined_degree when the tables lacked them (all zero);
        returns the filled arrays (empty when the table had the column) for the derived store."""
        none = np.zeros(0, dtype=np.int64)
        if not self.relationships:
            return none, none
        need_entity = bool(len(self.entities)) and not array_of(self.entities, "degree").any()
        need_combined = not array_of(self.relationships, "combined_degree").any()
        if not (need_entity or need_combined):
            return none, none
        n_ent = len(self.entities)
        ok = (src >= 0) & (tgt >= 0) & (src != tgt)
        lo, hi = np.minimum(src[ok], tgt[ok]), np.maximum(src[ok], tgt[ok])
        a, b = _unique_pairs(lo, hi, n_ent)
        degree = (
            np.bincount(np.concatenate([a, b]), minlength=n_ent) if n_ent else np.zeros(0, dtype=np.int64)
        )
        entity_degree, combined_degree = none, none
        if need_entity:
            entity_degree = degree.astype(np.int64)
            _set_values(self.entities, "degree", degree)
        if need_combined:
            deg = array_of(self.entities, "degree", np.int64).reshape(n_ent)
            combined_degree = np.where(src >= 0, deg[np.maximum(src, 0)], 0) + np.where(
                tgt >= 0, deg[np.maximum(tgt, 0)], 0
            )
            _set_values(self.relationships, "combined_degree", combined_degree)
            self.warnings.append(
                f"{self._file('relationships')}: column 'combined_degree' missing; derived from entity degrees"
            )
        return entity_degree, combined_degree

    def _build_text_unit_links(self, store: DerivedStore | None) -> None:
        """entity <-> text unit and text unit -> relationship links, taking the union of both sides."""
        found = self._derived(
            store, "text_unit_links", ["entities", "relationships", "text_units"], self._compute_text_unit_links
        )
        self.entity_text_units = Adjacency(found["etu_indptr"], found["etu_indices"])
        self.text_unit_entities = Adjacency(found["tue_indptr"], found["tue_indices"])
        self.text_unit_relationships = Adjacency(found["tur_indptr"], found["tur_indices"])
        # Fill the record fields a table did not carry (e.g. LightRAG text units have no entity_ids).
        fill_tu_entities, fill_entity_tus, fill_tu_rels, fill_rel_tus = found["fill"].tolist()
        if fill_tu_entities or fill_entity_tus or fill_tu_rels or fill_rel_tus:
            entity_ids, unit_ids = values_of(self.entities, "id"), values_of(self.text_units, "id")
        if fill_tu_entities:
            _set_values(self.text_units, "entity_ids", [[entity_ids[i] for i in m] for m in self.text_unit_entities])
        if fill_entity_tus:
            _set_values(self.entities, "text_unit_ids", [[unit_ids[j] for j in u] for u in self.entity_text_units])
        if fill_tu_rels:
            rel_ids = values_of(self.relationships, "id")
            _set_values(
                self.text_units, "relationship_ids", [[rel_ids[i] for i in m] for m in self.text_unit_relationships]
            )
        if fill_rel_tus:
            tur = self.text_unit_relationships
            units_of = np.repeat(np.arange(len(tur), dtype=np.int64), tur.lengths())
            rel_units = group(np.asarray(tur.indices), units_of, len(self.relationships))
            _set_values(self.relationships, "text_unit_ids", [[unit_ids[j] for j in u] for u in rel_units])

    def _compute_text_unit_links(self) -> dict[str, np.ndarray]:
        # One side of the links at a time, grouped and its scratch arrays freed before the next: at 1M
        # entities each id list holds millions of entries.
        n_ent, n_tu = len(self.entities), len(self.text_units)
        ents, tus, from_entities, from_units = self._link_pairs(
            ("entities", "text_unit_ids", "text unit"), ("text_units", "entity_ids", "entity"), "entities"
        )
        fill = [not from_units and len(ents) > 0, not from_entities and len(ents) > 0]
        out = {**group(ents, tus, n_ent).arrays("etu"), **group(tus, ents, n_tu).arrays("tue")}
        del ents, tus
        rels, tus2, from_relationships, from_units = self._link_pairs(
            ("relationships", "text_unit_ids", "text unit"), ("text_units", "relationship_ids", "relationship"),
            "relationships",
        )
        fill += [not from_units and len(rels) > 0, not from_relationships and len(rels) > 0]
        out.update(group(tus2, rels, n_tu).arrays("tur"))
        return {**out, "fill": np.array(fill, dtype=np.int8)}

    def _link_pairs(
        self, owner: tuple[str, str, str], units: tuple[str, str, str], target: str
    ) -> tuple[np.ndarray, np.ndarray, bool, bool]:
        """Unique (record position, text unit position) pairs from both sides: the records' unit id lists
        and the units' record id lists; plus whether each side named any."""
        table, column, what = owner
        rows, tus, bad = _lookup_lists(_column(getattr(self, table), column), self._keys("text_units", "id"))
        self._warn_dangling(bad, table, column, what)
        u_table, u_column, u_what = units
        u_rows, targets, u_bad = _lookup_lists(_column(self.text_units, u_column), self._keys(target, "id"))
        self._warn_dangling(u_bad, u_table, u_column, u_what)
        named = (len(rows) > 0, len(u_rows) > 0)
        a, b = np.concatenate([rows, targets]), np.concatenate([tus, u_rows])
        del rows, tus, u_rows, targets
        pairs = _unique_pairs(a, b, len(self.text_units))
        return pairs[0], pairs[1], named[0], named[1]

    def _warn_dangling(self, count: int, table: str, column: str, what: str) -> None:
        if count:
            self.warnings.append(
                f"{self._file(table)}: column {column!r}: {count} ids name no {what}; ignored"
            )

    def _build_claims(self, store: DerivedStore | None) -> None:
        found = self._derived(store, "claims", ["entities", "covariates", "text_units"], self._compute_claims)
        self.entity_claims = Adjacency(found["ec_indptr"], found["ec_indices"])

    def _compute_claims(self) -> dict[str, np.ndarray]:
        n = len(self.claims)
        subj = _positions([c.subject for c in self.claims], self._keys("entities", "title"))
        ok = subj >= 0
        unit_of = _positions([c.text_unit_id for c in self.claims], self._keys("text_units", "id"))
        bad_units = sum(1 for c, u in zip(self.claims, unit_of.tolist(), strict=True) if c.text_unit_id and u < 0)
        self._warn_dangling(bad_units, "covariates", "text_unit_id", "text unit")
        return group(subj[ok], np.arange(n, dtype=np.int64)[ok], len(self.entities)).arrays("ec")

    def _entity_communities(self) -> dict[str, np.ndarray]:
        rows, members, bad = _lookup_lists([c.entity_ids for c in self.communities], self._keys("entities", "id"))
        self._warn_dangling(bad, "communities", "entity_ids", "entity")
        numbers = np.fromiter(
            (c.community for c in self.communities), dtype=np.int64, count=len(self.communities)
        )
        levels = np.fromiter((c.level for c in self.communities), dtype=np.int64, count=len(self.communities))
        span = int(numbers.max()) + 1 if len(numbers) else 1
        comm_numbers = numbers[rows]
        order = levels[rows] * span + comm_numbers
        return group(members, comm_numbers, len(self.entities), order=order).arrays("ecm")

    def _build_communities(self, store: DerivedStore | None) -> None:
        found = self._derived(
            store, "entity_communities", ["entities", "communities", "nodes"], self._entity_communities
        )
        self.entity_communities = Adjacency(found["ecm_indptr"], found["ecm_indices"])
        self._derive_hierarchy()
        # read column-wise: a RecordList then makes only the records a step changes
        self.communities_by_level = {}
        levels = values_of(self.communities, "level")
        for level, number in sorted(zip(levels, values_of(self.communities, "community"), strict=True)):
            self.communities_by_level.setdefault(level, []).append(number)

        reports = self.community_reports
        numbers = values_of(reports, "community")
        unknown = [n for n in numbers if n not in self.community_pos]
        if self.communities and unknown:
            self.warnings.append(
                f"{self._file('community_reports')}: column 'community': {len(unknown)} reports name no community "
                f"in {self._file('communities')} (e.g. {unknown[0]})"
            )
        self.reports_by_level = {}
        columns = (values_of(reports, "parent"), values_of(reports, "children"), values_of(reports, "level"))
        for pos, (number, parent, children, level) in enumerate(zip(numbers, *columns, strict=True)):
            c_pos = self.community_pos.get(number)
            if c_pos is not None and parent == -1 and not children:
                community, report = self.communities[c_pos], reports[pos]
                report.parent, report.children = community.parent, list(community.children)
            self.reports_by_level.setdefault(level, []).append(pos)
        self.reports_by_level = dict(sorted(self.reports_by_level.items()))
        self.levels = sorted(set(self.communities_by_level) | set(self.reports_by_level))
        if not self.community_reports:
            self.warnings.append("no community reports: global search and DRIFT primers have nothing to read")

    def _derive_hierarchy(self) -> None:
        """Fill parent/children links that older schemas did not store.

        No links at all (v0/v1): each community's parent is the community one level up holding most
        of its entities. Only one side stored: the other side is its inverse.
        """
        if not self.communities:
            return
        has_parent = any(p != -1 for p in values_of(self.communities, "parent"))
        has_children = any(values_of(self.communities, "children"))
        if has_parent and has_children:
            return
        file = self._file("communities")
        if not has_parent and has_children:
            for comm in self.communities:
                for child in comm.children:
                    if child in self.community_pos:
                        self.communities[self.community_pos[child]].parent = comm.community
            self.warnings.append(f"{file}: no 'parent' column; parents derived from 'children'")
            return
        if not has_parent:
            levels = sorted({c.level for c in self.communities})
            if len(levels) < 2:
                return
            self._parents_from_membership(levels)
            self.warnings.append(
                f"{file}: no parent/children columns; hierarchy derived from entity membership"
            )
        else:
            self.warnings.append(f"{file}: no 'children' column; children derived from 'parent'")
        for comm in self.communities:
            if comm.parent in self.community_pos:
                self.communities[self.community_pos[comm.parent]].children.append(comm.community)
        for comm in self.communities:
            comm.children.sort()

    def _parents_from_membership(self, levels: list[int]) -> None:
        level_of = {c.community: c.level for c in self.communities}
        entity_comm_at = [{level_of[c]: c for c in comms} for comms in self.entity_communities]
        for comm in self.communities:
            if comm.level == levels[0]:
                continue
            up = levels[levels.index(comm.level) - 1]
            votes = Counter(
                entity_comm_at[self.entity_pos[e]].get(up, -1)
                for e in comm.entity_ids
                if e in self.entity_pos
            )
            votes.pop(-1, None)
            if votes:  # most shared members wins; ties go to the smaller community number
                comm.parent = min(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0]

    def _build_documents(self) -> None:
        named_in_place = _positions(_column(self.text_units, "document_id"), self.document_pos)
        if "" not in self.document_pos and (not len(named_in_place) or int(named_in_place.min()) >= 0):
            # every unit names a known document (a stored table has them filled): nothing to repair,
            # and no Python string per unit
            self.text_unit_document = named_in_place.tolist()
            return
        doc_of: dict[str, int] = {}
        for d_pos, doc in enumerate(self.documents):
            for tu_id in doc.text_unit_ids:
                doc_of.setdefault(tu_id, d_pos)
        unit_docs = values_of(self.text_units, "document_id")
        named = _positions(unit_docs, self.document_pos).tolist()
        result: list[int] = []
        filled: list[str] = []
        unknown = 0
        unit_ids = values_of(self.text_units, "id") if doc_of else None
        for j, (doc_id, pos) in enumerate(zip(unit_docs, named, strict=True)):
            if not doc_id:
                pos = -1
            if pos < 0:
                pos = doc_of.get(unit_ids[j], -1) if unit_ids is not None else -1
                if doc_id and self.documents:
                    unknown += 1
            filled.append(doc_id if doc_id or pos < 0 else self.documents[pos].id)
            result.append(pos)
        if filled != unit_docs:
            _set_values(self.text_units, "document_id", filled)
        self.text_unit_document = result
        self._warn_dangling(unknown, "text_units", "document_id", "document")

    # ------------------------------------------------------------------ token counts

    def _token_texts(self) -> dict[str, tuple[Sequence[Any], str]]:
        """The records and text field each token-count field counts."""
        return {
            "entity_tokens": (self.entities, "description"),
            "relationship_tokens": (self.relationships, "description"),
            "text_unit_tokens": (self.text_units, "text"),
            "report_tokens": (self.community_reports, "full_content"),
            "report_summary_tokens": (self.community_reports, "summary"),
            "claim_tokens": (self.claims, "description"),
        }

    def _start_token_counts(self, store: DerivedStore | None) -> tuple[list[str], TokenCounts]:
        """Set the stored token counts and start counting the missing ones on other threads
        (`token_counts.count_texts`); returns the missing fields and the counts in progress. The text
        units' `TokenAnchors` come from the same encodings (stored beside their counts)."""
        texts = self._token_texts()
        missing = []
        anchors = self._stored(store, self._anchors_entry, ["text_units"])
        for name, table in _TOKEN_TABLES.items():
            if name in _LAZY_TOKENS:
                continue
            found = self._stored(store, f"{name}-{self.tokenizer.encoding_name}", [table])
            if found is None or (name == "text_unit_tokens" and anchors is None):
                missing.append(name)
            else:
                setattr(self, name, found["counts"])
        if anchors is not None and "text_unit_tokens" not in missing:
            self.text_unit_token_anchors = TokenAnchors(anchors["ptr"], anchors["pos"], anchors["before"])
        anchored = [missing.index("text_unit_tokens")] if "text_unit_tokens" in missing else []
        return missing, count_texts(self.tokenizer, [texts[name] for name in missing], anchored)

    def _lazy_token_counts(self, name: str) -> np.ndarray:
        """One of `_LAZY_TOKENS`: from the derived store, else counted now and stored like the others."""
        store, entry, table = self.derived_store, f"{name}-{self.tokenizer.encoding_name}", _TOKEN_TABLES[name]
        found = self._stored(store, entry, [table])
        if found is None:
            (counts,) = count_texts(self.tokenizer, [self._token_texts()[name]]).result()
            found = self._store(store, entry, [table], {"counts": counts}, [])
        return found["counts"]

    @property
    def _anchors_entry(self) -> str:
        return f"text_unit_token_anchors-{self.tokenizer.encoding_name}"

    def _finish_token_counts(self, store: DerivedStore | None, missing: list[str], counting: TokenCounts) -> None:
        for i, (name, counts) in enumerate(zip(missing, counting.result(), strict=True)):
            entry = f"{name}-{self.tokenizer.encoding_name}"
            setattr(self, name, self._store(store, entry, [_TOKEN_TABLES[name]], {"counts": counts}, [])["counts"])
            if name == "text_unit_tokens":
                empty = np.zeros(0, dtype=np.int32)
                found = counting.anchors.get(i) or TokenAnchors(np.zeros(len(counts) + 1, dtype=np.int64), empty, empty)
                arrays = {"ptr": found.ptr, "pos": found.pos, "before": found.before}
                kept = self._store(store, self._anchors_entry, ["text_units"], arrays, [])
                self.text_unit_token_anchors = TokenAnchors(kept["ptr"], kept["pos"], kept["before"])

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

    def stats(self) -> dict[str, Any]:
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


def _records(records: Iterable[Any]) -> Sequence[Any]:
    return records if isinstance(records, RecordList) else list(records)


def _set_values(records: Sequence[Any], field: str, values: list[Any] | np.ndarray) -> None:
    """Set one field of every record (load-time repairs), column-wise for a RecordTable."""
    if isinstance(records, RecordTable):
        records.with_column(field, values)
        return
    if isinstance(values, np.ndarray):
        values = values.tolist()
    for record, value in zip(records, values, strict=True):
        setattr(record, field, value)
