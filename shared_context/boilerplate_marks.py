"""How much of each text unit, entity and community report of an index is licence or edition boilerplate,
and the weights that down-rank them at query time.

`boilerplate_shares(index)`: per text unit, the share of its characters that is front or back matter
(`shared_context.boilerplate`); an index built by `graphroute index` records it in the `boilerplate`
column of `text_units.parquet`, any other index (GraphRAG's) is scanned, each document's units in table
order. Per entity, the smallest share among its text units (an entity is boilerplate only when every unit
that supports it is); per community report, the mean share of its community's entities (a report built
mostly from such entities). Computed once per index content: kept in the derived store (entry
`boilerplate`, from the text units, documents, entities, relationships and communities) and beside the
index in memory, so a question pays nothing for it.

`boilerplate_weights(index)`: the multipliers the rankings apply, 1 - (1 - FLOOR_WEIGHT) * share (1 for
story text, FLOOR_WEIGHT for pure boilerplate), or None when the index has no boilerplate or down-ranking is
off (graphroute.toml `[search] down_rank_boilerplate = false`). Rankings call it once per question and
multiply: text units in `text_unit_selection`, reports in `community_context`, entities where linking falls
back to degree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from shared_context.boilerplate import MARKED_SHARE, part_spans
from shared_context.index import Adjacency
from shared_context.records import RowSequence, field_of
from shared_context.tables import per_index_cache

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = [
    "FLOOR_WEIGHT", "BoilerplateShares", "BoilerplateWeights", "boilerplate_shares", "boilerplate_weights", "shown_rank",
]

FLOOR_WEIGHT = 0.1  # what a unit, entity or report made only of boilerplate keeps of its score
_ENTRY = "boilerplate"
_FORMAT = "2"  # bumped when the detection changes, so stored shares are computed again
_DEPENDS_ON = ["text_units", "documents", "entities", "relationships", "communities"]
COLUMN = "boilerplate"  # the text-unit column `graphroute index` writes


@dataclass(frozen=True)
class BoilerplateShares:
    units: np.ndarray  # float32, one per text unit position
    entities: np.ndarray  # float32, one per entity position
    reports: np.ndarray  # float32, one per community report position

    @property
    def any(self) -> bool:
        return bool(self.units.size and float(self.units.max()) > 0)


@dataclass(frozen=True)
class BoilerplateWeights:
    units: np.ndarray  # float64 multipliers in [FLOOR_WEIGHT, 1]
    entities: np.ndarray
    reports: np.ndarray
    shares: BoilerplateShares

    def mostly_boilerplate_report(self, pos: int) -> bool:
        """The report is built mostly (at least `MARKED_SHARE`) from licence or front/back matter."""
        return bool(self.shares.reports[pos] >= MARKED_SHARE)

    def down_ranked(self, hits: Iterable[tuple[int, float]], weights: np.ndarray, k: int) -> list[tuple[int, float]]:
        """(position, score) hits re-ordered by score times weight (ties keep their order), best `k`."""
        ranked = sorted(((pos, score * float(weights[pos])) for pos, score in hits), key=lambda h: -h[1])
        return ranked[:k]


def boilerplate_shares(index: Index) -> BoilerplateShares:
    """The index's shares (see the module docstring), computed once per index content."""

    def build() -> BoilerplateShares:
        store = getattr(index, "derived_store", None)
        found = store.load_arrays(_ENTRY, _DEPENDS_ON, extra=_FORMAT) if store is not None else None
        if found is not None and {"units", "entities", "reports"} <= found.keys():
            return BoilerplateShares(found["units"], found["entities"], found["reports"])
        shares = _compute(index)
        if store is not None:
            arrays = {"units": shares.units, "entities": shares.entities, "reports": shares.reports}
            store.save_arrays(_ENTRY, _DEPENDS_ON, arrays, extra=_FORMAT)
        return shares

    shares: BoilerplateShares = per_index_cache(index, "boilerplate.shares", build)
    return shares


def boilerplate_weights(index: Index) -> BoilerplateWeights | None:
    """Multipliers for the index's rankings, or None when nothing is down-ranked."""
    from shared_context.search_backend import search_params

    if not search_params(index).down_rank_boilerplate:
        return None

    def build() -> BoilerplateWeights | None:
        shares = boilerplate_shares(index)
        if not shares.any:
            return None
        return BoilerplateWeights(_weights(shares.units), _weights(shares.entities), _weights(shares.reports), shares)

    weights: BoilerplateWeights | None = per_index_cache(index, "boilerplate.weights", build)
    return weights


def shown_rank(index: Index, pos: int) -> float | None:
    """A community report's rank as global search shows and orders it: its own rank times its boilerplate
    weight (unchanged when nothing is down-ranked; None when the report has no rank)."""
    rank = index.community_reports[pos].rank
    weights = boilerplate_weights(index)
    if rank is None or weights is None:
        return rank
    return round(float(rank) * float(weights.reports[pos]), 2)


def _weights(shares: np.ndarray) -> np.ndarray:
    return 1.0 - (1.0 - FLOOR_WEIGHT) * np.clip(np.asarray(shares, dtype=np.float64), 0.0, 1.0)


def _compute(index: Index) -> BoilerplateShares:
    units, inside = _unit_shares(index)
    entities = _entity_shares(index, units, inside)
    return BoilerplateShares(units, entities, _report_shares(index, entities))


def _unit_shares(index: Index) -> tuple[np.ndarray, dict[int, list[tuple[int, int]]]]:
    """Each unit's share, and the boilerplate spans of units that are only partly boilerplate (scanned
    indexes only: those units' entities are told apart by where their names occur)."""
    n = len(index.text_units)
    stored = _stored_column(index, n)
    if stored is not None:
        return stored, {}
    shares = np.zeros(n, dtype=np.float32)
    partly: dict[int, list[tuple[int, int]]] = {}
    if n == 0:
        return shares, partly
    text = field_of(index.text_units, "text")
    docs = np.asarray(index.text_unit_document, dtype=np.int64)
    order = np.argsort(docs, kind="stable")  # each document's units in table order
    bounds = np.flatnonzero(np.diff(docs[order])) + 1
    for group in np.split(order, bounds):
        positions = group.tolist()
        texts = _Texts(text, positions)
        for pos, spans in zip(positions, part_spans(texts), strict=True):
            if spans:
                length = len(str(text(pos) or "")) or 1
                shares[pos] = min(1.0, sum(b - a for a, b in spans) / length)
                if shares[pos] < 1.0:
                    partly[pos] = spans
    return shares, partly


class _Texts(RowSequence[str]):
    """The texts of some units, read from the column only when the scan asks for them."""

    def __init__(self, text: Callable[[int], object], positions: list[int]) -> None:
        self._text, self._positions = text, positions

    def __len__(self) -> int:
        return len(self._positions)

    def _row(self, i: int) -> str:
        return str(self._text(self._positions[i]) or "")


def _stored_column(index: Index, n: int) -> np.ndarray | None:
    """The `boilerplate` column an index built by `graphroute index` carries, when it has one row per unit."""
    path = getattr(index, "path", None)
    source = getattr(index, "source_files", {}).get("text_units", "")
    if path is None or not str(source).endswith(".parquet"):
        return None
    import pyarrow.parquet as pq

    try:
        file = pq.ParquetFile(str(Path(path) / str(source)))
        if COLUMN not in file.schema_arrow.names or file.metadata.num_rows != n:
            return None
        column = file.read(columns=[COLUMN]).column(COLUMN)
    except (OSError, ValueError):
        return None
    values: np.ndarray = np.nan_to_num(np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float32), nan=0.0)
    return values


def _entity_shares(index: Index, units: np.ndarray, partly: dict[int, list[tuple[int, int]]]) -> np.ndarray:
    """Per entity, the smallest boilerplate share among the text units that support it (0 with none). In a
    unit only partly boilerplate, an entity whose name occurs outside the boilerplate counts that unit as
    clean, one named only inside it as boilerplate; an index built by `graphroute index` extracted nothing
    from boilerplate, so there a unit counts as boilerplate only when it is all boilerplate."""
    adjacency = Adjacency.of(index.entity_text_units)
    n = len(adjacency)
    out = np.zeros(n, dtype=np.float32)
    if n == 0 or units.size == 0:
        return out
    flat_units = np.asarray(adjacency.indices, dtype=np.int64)
    flat = units[flat_units].astype(np.float32)
    if not partly:
        flat = np.where(flat >= 1.0, 1.0, 0.0).astype(np.float32) if _stored_column(index, len(units)) is not None else flat
    else:
        owners = np.repeat(np.arange(n, dtype=np.int64), adjacency.lengths())
        title = field_of(index.entities, "title")
        text = field_of(index.text_units, "text")
        for k in np.flatnonzero(np.isin(flat_units, np.fromiter(partly, dtype=np.int64))).tolist():
            unit = int(flat_units[k])
            flat[k] = _named_inside(str(title(int(owners[k])) or ""), str(text(unit) or ""), partly[unit], flat[k])
    lengths = adjacency.lengths()
    has = lengths > 0
    starts = np.asarray(adjacency.indptr[:-1], dtype=np.int64)
    if flat.size:
        out[has] = np.minimum.reduceat(flat, starts[has])
    return out


def _named_inside(title: str, text: str, spans: list[tuple[int, int]], share: float) -> float:
    """1 when the name occurs in the unit only inside its boilerplate, 0 when it occurs outside, else `share`."""
    name = " ".join(title.split()).lower()
    if not name:
        return share
    lowered = text.lower()
    at, seen = lowered.find(name), False
    while at >= 0:
        if not any(a <= at < b for a, b in spans):
            return 0.0
        seen = True
        at = lowered.find(name, at + 1)
    return 1.0 if seen else share


def _report_shares(index: Index, entities: np.ndarray) -> np.ndarray:
    """Per report, the mean share of its community's entities."""
    n_reports = len(index.community_reports)
    out = np.zeros(n_reports, dtype=np.float32)
    if n_reports == 0 or entities.size == 0:
        return out
    memberships = Adjacency.of(index.entity_communities)
    numbers = np.asarray(memberships.indices, dtype=np.int64)
    members = np.repeat(np.arange(len(memberships), dtype=np.int64), memberships.lengths())
    report_of = np.full(int(numbers.max(initial=-1)) + 2, -1, dtype=np.int64)
    for community, pos in index.report_pos.items():
        if 0 <= community < len(report_of):
            report_of[community] = pos
    reports = report_of[np.clip(numbers, -1, len(report_of) - 1)]
    hit = (numbers >= 0) & (reports >= 0)
    # bincount of an empty selection (no report's community has members) returns int64, whatever the weights
    total = np.bincount(reports[hit], weights=entities[members[hit]], minlength=n_reports).astype(np.float64)
    count = np.bincount(reports[hit], minlength=n_reports)
    np.divide(total, np.maximum(count, 1), out=total)
    return total.astype(np.float32)
