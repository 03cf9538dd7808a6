"""GraphRAG's relationship selection for a set of entities, read from their own adjacency only."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from shared_context.index_cache import per_index_cache
from shared_context.local_rows import remember
from shared_context.records import array_of

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["select_relationships"]


@dataclass
class _RelArrays:
    combined: np.ndarray
    weight: np.ndarray


def _rel_arrays(index: Index) -> _RelArrays:
    def build() -> _RelArrays:
        rels = index.relationships
        return _RelArrays(array_of(rels, "combined_degree"), array_of(rels, "weight"))

    return per_index_cache(index, "local.rel_arrays", build)


def _entity_rel_array(index: Index, entity: int) -> np.ndarray:
    cache: dict[int, np.ndarray] = per_index_cache(index, "local.entity_rels", dict)
    arr = cache.get(entity)
    if arr is None:
        arr = remember(cache, entity, np.asarray(index.entity_relationships[entity], dtype=np.int64))
    return arr


def select_relationships(
    index: Index, entities: Sequence[int], top_k: int, ranking: str = "rank"
) -> tuple[list[int], list[int]]:
    """(in-network, out-network) relationship positions for the entity set, GraphRAG's ranking with its
    `relationship_ranking_attribute` (`ranking`): "rank" orders by combined degree, then weight; "weight" by
    weight, then combined degree. In-network relationships (both ends selected) by that order; out-network by
    links first, where links = how many selected entities the outside endpoint connects to; at most
    `top_k * len(entities)` out-network relationships. Only the entities' own adjacency is read."""
    if ranking not in ("rank", "weight"):
        raise ValueError(f"relationship ranking {ranking!r}: 'rank' or 'weight'")
    if not entities:
        return [], []
    parts = [_entity_rel_array(index, e) for e in entities]
    rels = np.unique(np.concatenate(parts)) if len(parts) > 1 else parts[0]
    if len(rels) == 0:
        return [], []
    arrays = _rel_arrays(index)
    selected = np.asarray(sorted(set(entities)), dtype=np.int64)
    ends = index.relationship_endpoints[rels]
    # a handful of selected entities: comparing with each is cheaper than np.isin's sort
    inside = (ends[..., None] == selected).any(axis=-1) if len(selected) <= 32 else np.isin(ends, selected)
    in_net = inside[:, 0] & inside[:, 1]
    out_net = inside[:, 0] ^ inside[:, 1]
    combined, weight = arrays.combined[rels], arrays.weight[rels]
    first, second = (combined, weight) if ranking == "rank" else (weight, combined)
    in_rels = rels[in_net]
    in_order = np.lexsort((in_rels, -second[in_net], -first[in_net]))
    in_list = in_rels[in_order].tolist()
    out_rels = rels[out_net]
    if len(out_rels) == 0 or top_k == 0:
        return in_list, []
    o_ends = ends[out_net]
    outside = np.where(inside[out_net][:, 0], o_ends[:, 1], o_ends[:, 0])
    member = np.where(inside[out_net][:, 0], o_ends[:, 0], o_ends[:, 1])
    # links(x): distinct selected entities linked to outside entity x (a dangling end, -1, is its own x)
    pair_codes = np.unique((outside + 1) * (len(index.entities) + 1) + member)
    linked_outside = pair_codes // (len(index.entities) + 1) - 1
    uniq, counts = np.unique(linked_outside, return_counts=True)
    links = counts[np.searchsorted(uniq, outside)]
    order = np.lexsort((out_rels, -second[out_net], -first[out_net], -links))
    return in_list, out_rels[order][: top_k * len(entities)].tolist()
