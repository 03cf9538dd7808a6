"""Hierarchical Leiden communities with graspologic-native, in GraphRAG's `communities` layout.

Called the way GraphRAG's `cluster_graph` does (max_cluster_size 10, seed 0xDEADBEEF, resolution 1.0,
randomness 0.001, modularity, one iteration), with one deliberate difference: GraphRAG clusters only
the largest connected component (`use_lcc=True`), so every other entity belongs to no community and
disappears from local search (spec 1.3). We cluster every component, and an entity with no
relationship at all gets a level-0 community of its own, so nothing is dropped.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field

from indexer.graph import Graph

_NAMESPACE = uuid.UUID("0b6e7a43-1d2c-4f1e-8a57-3c9d2e4f6a80")


@dataclass
class CommunityRow:
    community: int
    level: int
    parent: int
    children: list[int] = field(default_factory=list)
    entity_ids: list[str] = field(default_factory=list)
    relationship_ids: list[str] = field(default_factory=list)
    text_unit_ids: list[str] = field(default_factory=list)
    id: str = ""

    @property
    def title(self) -> str:
        return f"Community {self.community}"

    @property
    def size(self) -> int:
        return len(self.entity_ids)


def detect_communities(graph: Graph, *, max_cluster_size: int = 10, seed: int = 0xDEADBEEF) -> list[CommunityRow]:
    """All levels with parent/children, ordered by level then community number."""
    index_of = {e.title: i for i, e in enumerate(graph.entities)}
    # Node names are entity positions as strings (short and unique); weights must be positive.
    edges = [(str(index_of[r.source]), str(index_of[r.target]), max(float(r.weight), 1e-6)) for r in graph.relationships]
    membership: dict[int, dict[int, int]] = defaultdict(dict)  # level -> entity position -> community
    parent_of: dict[int, int] = {}
    if edges:
        import graspologic_native as gn  # native library, loaded only when communities are detected

        for hc in gn.hierarchical_leiden(
            edges=edges,
            starting_communities=None,
            resolution=1.0,
            randomness=0.001,
            iterations=1,
            use_modularity=True,
            max_cluster_size=max_cluster_size,
            seed=seed,
        ):
            membership[hc.level][int(hc.node)] = hc.cluster
            parent_of[hc.cluster] = hc.parent_cluster if hc.parent_cluster is not None else -1
    next_id = max(parent_of, default=-1) + 1
    clustered = set(membership[0]) if membership else set()
    for i in range(len(graph.entities)):
        if i not in clustered:  # isolated entity: its own root community
            membership[0][i] = next_id
            parent_of[next_id] = -1
            next_id += 1

    members: dict[tuple[int, int], list[int]] = defaultdict(list)
    for level, nodes in membership.items():
        for node, cluster in nodes.items():
            members[(level, cluster)].append(node)
    rels_by_comm: dict[tuple[int, int], list[int]] = defaultdict(list)
    for ri, r in enumerate(graph.relationships):
        s, t = index_of[r.source], index_of[r.target]
        for level, nodes in membership.items():
            cs, ct = nodes.get(s), nodes.get(t)
            if cs is not None and cs == ct:
                rels_by_comm[(level, cs)].append(ri)

    rows: dict[int, CommunityRow] = {}
    for (level, cluster), member_nodes in sorted(members.items()):
        node_list = sorted(member_nodes)
        rel_idx = rels_by_comm.get((level, cluster), [])
        if rel_idx:
            text_units = {tu for ri in rel_idx for tu in graph.relationships[ri].text_unit_ids}
        else:  # no internal edge (an isolated entity): fall back to its own text units
            text_units = {tu for n in node_list for tu in graph.entities[n].text_unit_ids}
        entity_ids = [graph.entities[n].id for n in node_list]
        rows[cluster] = CommunityRow(
            community=cluster,
            level=level,
            parent=parent_of.get(cluster, -1),
            entity_ids=entity_ids,
            relationship_ids=sorted(graph.relationships[ri].id for ri in rel_idx),
            text_unit_ids=sorted(text_units),
            id=str(uuid.uuid5(_NAMESPACE, f"{level}\x1f" + "\x1f".join(sorted(entity_ids)))),
        )
    for row in rows.values():
        if row.parent != -1 and row.parent in rows:
            rows[row.parent].children.append(row.community)
        elif row.parent != -1:
            row.parent = -1  # a parent that lost all its nodes to children cannot be referenced
    for row in rows.values():
        row.children.sort()
    return sorted(rows.values(), key=lambda r: (r.level, r.community))
