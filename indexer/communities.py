"""Hierarchical Leiden communities with graspologic-native, in GraphRAG's `communities` layout.

Called the way GraphRAG's `cluster_graph` does (max_cluster_size 10, seed 0xDEADBEEF, resolution 1.0,
randomness 0.001, modularity, one iteration), with one deliberate difference: GraphRAG clusters only
the largest connected component (`use_lcc=True`), so every other entity belongs to no community and
disappears from local search (spec 1.3). We cluster every component, and an entity with no
relationship at all gets a level-0 community of its own, so nothing is dropped.

Updates recompute communities only where the graph changed (`previous` given), level by level
(`_Refiner`). With the previous build's relationships (`previous_edges`), a previous community none of
whose entities the change reached (`touched_entities`: new entities and both ends of every relationship
added, removed or reweighted) is kept as it was, with its whole sub-hierarchy and numbers, without
running Leiden over it. The rest of a changed parent is Leiden started from the previous membership at
that level (new entities each start alone), except that the entities of an untouched previous community
one level down are never spread over several clusters (they join the cluster holding most of them, so
the next level can keep that community); a resulting community whose entities and internal
relationships are exactly those of a previous one of its level is kept too, and only the other
communities larger than `max_cluster_size` are split again, the same way, on their own subgraph.
Unchanged communities then produce unchanged reports, whose vectors the build reuses. So an update's
partition differs from a fresh build's: the untouched parts keep their old clustering (relationships
from a kept community to the changed part are not reconsidered), as GraphRAG's own updates keep old
communities.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

from indexer.graph import Graph, uuid5_text

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


@dataclass
class Partition:
    membership: dict[int, dict[int, int]] = field(default_factory=lambda: defaultdict(dict))  # level -> node -> cluster
    parent_of: dict[int, int] = field(default_factory=dict)
    reused: int = 0  # communities whose structure was kept from the previous build


def detect_communities(
    graph: Graph,
    *,
    max_cluster_size: int = 10,
    seed: int = 0xDEADBEEF,
    previous: list[CommunityRow] | None = None,
) -> list[CommunityRow]:
    """All levels with parent/children, ordered by level then community number."""
    return cluster_graph(graph, max_cluster_size=max_cluster_size, seed=seed, previous=previous)[0]


# relationship id -> (source entity id, target entity id, weight) of the previous build
PreviousEdges = Mapping[str, tuple[str, str, float]]


def touched_entities(graph: Graph, previous: list[CommunityRow], previous_edges: PreviousEdges) -> set[str]:
    """Ids of the entities an update reached: entities the previous build did not have, and both ends of every
    relationship added, removed or given another weight. Every other entity has exactly its old neighbours."""
    known = {eid for c in previous if c.level == 0 for eid in c.entity_ids}
    touched = {e.id for e in graph.entities if e.id not in known}
    by_title = {e.title: e.id for e in graph.entities}
    current: set[str] = set()
    for r in graph.relationships:
        current.add(r.id)
        old = previous_edges.get(r.id)
        if old is None or old[2] != float(r.weight):
            touched.update((by_title[r.source], by_title[r.target]))
    for rid, (source, target, _w) in previous_edges.items():
        if rid not in current:
            touched.update((source, target))
    return touched


def cluster_graph(
    graph: Graph,
    *,
    max_cluster_size: int = 10,
    seed: int = 0xDEADBEEF,
    previous: list[CommunityRow] | None = None,
    previous_edges: PreviousEdges | None = None,
) -> tuple[list[CommunityRow], int]:
    """`detect_communities`' rows, and how many of them kept their structure from `previous` (the previous
    build's communities; with `previous_edges`, its relationships, communities the change did not reach are
    kept without re-clustering them: see the module doc)."""
    index_of = {e.title: i for i, e in enumerate(graph.entities)}
    # Node names are entity positions as strings (short and unique); weights must be positive.
    edges = [(str(index_of[r.source]), str(index_of[r.target]), max(float(r.weight), 1e-6)) for r in graph.relationships]
    if previous:
        touched = touched_entities(graph, previous, previous_edges) if previous_edges is not None else None
        part = _update_partition(graph, edges, previous, touched, max_cluster_size=max_cluster_size, seed=seed)
    else:
        part = Partition()
        _hierarchical(edges, part, max_cluster_size=max_cluster_size, seed=seed, level_offset=0, parent=-1,
                      number=lambda c: c)
    membership, parent_of = part.membership, part.parent_of
    next_id = max(parent_of, default=-1) + 1
    clustered = set(membership[0]) if membership else set()
    for i in range(len(graph.entities)):
        if i not in clustered:  # isolated entity: its own root community
            membership[0][i] = next_id
            parent_of[next_id] = -1
            next_id += 1
    return _rows(graph, index_of, membership, parent_of), part.reused


def _hierarchical(
    edges: list[tuple[str, str, float]],
    part: Partition,
    *,
    max_cluster_size: int,
    seed: int,
    level_offset: int,
    parent: int,
    number: Callable[[int], int],
) -> None:
    """GraphRAG's hierarchical Leiden over `edges`, its levels placed at `level_offset` and below `parent`."""
    if not edges:
        return
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
        cluster = number(hc.cluster)
        part.membership[hc.level + level_offset][int(hc.node)] = cluster
        part.parent_of[cluster] = number(hc.parent_cluster) if hc.parent_cluster is not None else parent


def _update_partition(
    graph: Graph,
    edges: list[tuple[str, str, float]],
    previous: list[CommunityRow],
    touched: AbstractSet[str] | None,
    *,
    max_cluster_size: int,
    seed: int,
) -> Partition:
    part = Partition()
    if not edges:
        return part
    _Refiner(graph, edges, previous, part, touched, max_cluster_size=max_cluster_size, seed=seed).split(
        list(range(len(edges))), level=0, parent=-1
    )
    return part


def _leiden(edges: list[tuple[str, str, float]], start: dict[str, int], seed: int) -> dict[str, int]:
    """One Leiden run started from `start`, each of whose communities is first split into its connected
    parts in `edges` (a previous community can fall apart in a changed subgraph, and graspologic-native
    panics with a Rust index error on a disconnected starting community). Should it still panic, the run
    starts from singletons."""
    import graspologic_native as gn

    args: dict[str, Any] = {"resolution": 1.0, "randomness": 0.001, "iterations": 1, "use_modularity": True, "seed": seed}
    try:
        return dict(gn.leiden(edges=edges, starting_communities=_connected_parts(edges, start), **args)[1])
    except BaseException as exc:  # a Rust panic arrives as pyo3's PanicException, a BaseException
        if type(exc).__name__ != "PanicException":
            raise
    return dict(gn.leiden(edges=edges, starting_communities=None, **args)[1])


def _connected_parts(edges: list[tuple[str, str, float]], start: dict[str, int]) -> dict[str, int]:
    """`start` with every community split into its connected components, labelled 0, 1, ... by smallest node."""
    neighbours: dict[str, list[str]] = defaultdict(list)
    for a, b, _w in edges:
        if start[a] == start[b]:
            neighbours[a].append(b)
            neighbours[b].append(a)
    out: dict[str, int] = {}
    labels = 0
    for node in sorted(start, key=int):
        if node in out:
            continue
        label = out[node] = labels
        labels += 1
        stack = [node]
        while stack:
            for other in neighbours[stack.pop()]:
                if other not in out:
                    out[other] = label
                    stack.append(other)
    return out


class _Refiner:
    """Re-clusters an updated graph level by level, keeping every community the change did not reach.

    At each level, within one changed parent (the whole graph at level 0): previous communities of that level
    lying wholly inside it with no touched entity are kept as they were (`touched` None: none is). Leiden,
    started from the previous build's membership at that level (new entities each alone), clusters the other
    entities over the relationships between them; an entity left with none of those is a community alone; an
    untouched community of the next level is moved whole into one cluster (`_keep_whole`). A resulting cluster with exactly the entities and internal relationships of a previous community of that
    level keeps it too; any other cluster gets a new number and, when larger than `max_cluster_size`, is split
    the same way one level down. So a change deep in one community renumbers only the communities on its
    path, as hierarchical Leiden would split them.
    """

    def __init__(self, graph: Graph, edges: list[tuple[str, str, float]], previous: list[CommunityRow],
                 part: Partition, touched: AbstractSet[str] | None, *, max_cluster_size: int, seed: int) -> None:
        self.graph, self.edges, self.part = graph, edges, part
        self.max_cluster_size, self.seed = max_cluster_size, seed
        self.position = {e.id: i for i, e in enumerate(graph.entities)}
        self.prev_of: dict[int, dict[str, int]] = defaultdict(dict)  # level -> entity id -> previous community
        self.prev_by_members: dict[int, dict[frozenset[str], CommunityRow]] = defaultdict(dict)
        self.prev_children: dict[int, list[CommunityRow]] = defaultdict(list)
        self.prev_row: dict[int, CommunityRow] = {c.community: c for c in previous}
        for c in previous:
            for eid in c.entity_ids:
                self.prev_of[c.level][eid] = c.community
            self.prev_by_members[c.level][frozenset(c.entity_ids)] = c
            if c.parent != -1:
                self.prev_children[c.parent].append(c)
        self.numbers = _Numbers(max((c.community for c in previous), default=-1) + 1)
        self.untouched: set[int] | None = None  # previous communities none of whose entities the change reached
        if touched is not None:
            self.untouched = {
                c.community for c in previous
                if all(e in self.position and e not in touched for e in c.entity_ids)
            }

    def split(self, edge_idx: list[int], *, level: int, parent: int) -> None:
        nodes = {int(n) for i in edge_idx for n in self.edges[i][:2]}
        held = self._untouched_inside(nodes, level)
        held_nodes = {self.position[e] for c in held for e in c.entity_ids}
        if level > 0 and len(held) == 1 and held_nodes == nodes:
            held, held_nodes = [], set()  # the parent is that one community: split it as hierarchical Leiden would
        for row in held:
            self._keep(row, parent)
        loose_idx = [i for i in edge_idx if not held_nodes & {int(n) for n in self.edges[i][:2]}] if held else edge_idx
        membership = self._leiden_membership(loose_idx, level)
        for n in nodes - held_nodes - membership.keys():
            membership[n] = -1 - n  # linked only to kept communities: a community alone
        self._keep_whole(membership, level + 1)
        clusters: dict[int, list[int]] = defaultdict(list)
        for n, cluster in membership.items():
            clusters[cluster].append(n)
        if level > 0 and not held and len(clusters) < 2:
            return  # Leiden cannot split the parent: it stays a leaf
        inside: dict[int, list[int]] = defaultdict(list)  # cluster -> its internal edges
        for i in loose_idx:
            a, b, _w = self.edges[i]
            if membership[int(a)] == membership[int(b)]:
                inside[membership[int(a)]].append(i)
        for cluster, nodes_in in sorted(clusters.items(), key=lambda kv: min(kv[1])):
            self._place(sorted(nodes_in), inside.get(cluster, []), level=level, parent=parent)

    def _keep_whole(self, membership: dict[int, int], below: int) -> None:
        """Moves the entities of every untouched previous community of level `below` that `membership` spread over
        several clusters into the cluster holding most of them, so the level below can keep it."""
        if self.untouched is None:
            return
        prev_of, graph = self.prev_of[below], self.graph
        numbers = {prev_of.get(graph.entities[n].id) for n in membership} - {None}
        for number in sorted(n for n in numbers if n is not None and n in self.untouched):
            nodes = [self.position[e] for e in self.prev_row[number].entity_ids]
            if any(n not in membership for n in nodes):
                continue
            held: dict[int, int] = defaultdict(int)
            for n in nodes:
                held[membership[n]] += 1
            if len(held) > 1:
                target = max(sorted(held), key=lambda c: held[c])
                for n in nodes:
                    membership[n] = target

    def _untouched_inside(self, nodes: set[int], level: int) -> list[CommunityRow]:
        """Previous communities of `level` lying wholly within `nodes` that the change did not reach."""
        if self.untouched is None:
            return []
        prev_of, graph = self.prev_of[level], self.graph
        numbers = {prev_of.get(graph.entities[n].id) for n in nodes} - {None}
        out = []
        for number in sorted(n for n in numbers if n is not None and n in self.untouched):
            row = self.prev_row[number]
            if all(self.position[e] in nodes for e in row.entity_ids):
                out.append(row)
        return out

    def _leiden_membership(self, edge_idx: list[int], level: int) -> dict[int, int]:
        """Node -> cluster of Leiden over `edge_idx`, started from the previous membership at `level`."""
        if not edge_idx:
            return {}
        graph = self.graph
        sub = [self.edges[i] for i in edge_idx]
        start: dict[str, int] = {}
        for n in {n for a, b, _w in sub for n in (a, b)}:
            previous = self.prev_of[level].get(graph.entities[int(n)].id)
            start[n] = previous if previous is not None else -1 - int(n)  # a new entity starts alone
        return {int(n): c for n, c in _leiden(sub, start, self.seed).items()}

    def _place(self, nodes_in: list[int], inside: list[int], *, level: int, parent: int) -> None:
        """One cluster of `level` under `parent`: a previous community when it is exactly one, else a new one."""
        graph, part = self.graph, self.part
        old = self.prev_by_members[level].get(frozenset(graph.entities[n].id for n in nodes_in))
        if old is not None and set(old.relationship_ids) == {graph.relationships[i].id for i in inside}:
            self._keep(old, parent)
            return
        number = self.numbers.new()
        for node in nodes_in:
            part.membership[level][node] = number
        part.parent_of[number] = parent
        if len(nodes_in) > self.max_cluster_size and inside:
            self.split(inside, level=level + 1, parent=number)

    def _keep(self, root: CommunityRow, parent: int) -> None:
        """An unchanged community keeps its whole sub-hierarchy and numbers, under `parent`."""
        stack = [root]
        while stack:
            row = stack.pop()
            for eid in row.entity_ids:
                self.part.membership[row.level][self.position[eid]] = row.community
            self.part.parent_of[row.community] = parent if row is root else row.parent
            self.part.reused += 1
            stack.extend(self.prev_children.get(row.community, []))


class _Numbers:
    """Community numbers for new communities: after every number the previous build used."""

    def __init__(self, first: int) -> None:
        self._next = first

    def new(self) -> int:
        self._next += 1
        return self._next - 1

    def renumbering(self) -> Callable[[int], int]:
        """A map from one Leiden run's cluster numbers to new community numbers."""
        seen: dict[int, int] = {}

        def number(cluster: int) -> int:
            if cluster not in seen:
                seen[cluster] = self.new()
            return seen[cluster]

        return number


def _internal_relationships(
    graph: Graph, index_of: dict[str, int], membership: dict[int, dict[int, int]]
) -> dict[tuple[int, int], list[int]]:
    """(level, community) -> positions of the relationships with both ends in it, ascending (array work: the
    per-relationship, per-level loop was most of this step)."""
    import numpy as np

    n_rel = len(graph.relationships)
    source = np.fromiter((index_of[r.source] for r in graph.relationships), dtype=np.int64, count=n_rel)
    target = np.fromiter((index_of[r.target] for r in graph.relationships), dtype=np.int64, count=n_rel)
    out: dict[tuple[int, int], list[int]] = {}
    for level, nodes in membership.items():
        community = np.full(len(graph.entities), -1, dtype=np.int64)
        if nodes:
            community[np.fromiter(nodes.keys(), dtype=np.int64)] = np.fromiter(nodes.values(), dtype=np.int64)
        cs = community[source]
        inside = np.flatnonzero((cs >= 0) & (cs == community[target]))
        if not len(inside):  # no relationship inside any community of this level (a tiny or sparse graph)
            continue
        order = inside[np.argsort(cs[inside], kind="stable")]  # by community, ascending position within one
        groups, starts = np.unique(cs[order], return_index=True)
        for cluster, part in zip(groups.tolist(), np.split(order, starts[1:]), strict=True):
            out[(level, cluster)] = part.tolist()
    return out


def _rows(
    graph: Graph, index_of: dict[str, int], membership: dict[int, dict[int, int]], parent_of: dict[int, int]
) -> list[CommunityRow]:
    members: dict[tuple[int, int], list[int]] = defaultdict(list)
    for level, nodes in membership.items():
        for node, cluster in nodes.items():
            members[(level, cluster)].append(node)
    rels_by_comm = _internal_relationships(graph, index_of, membership)

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
            id=uuid5_text(_NAMESPACE, f"{level}\x1f" + "\x1f".join(sorted(entity_ids))),
        )
    for row in rows.values():
        if row.parent != -1 and row.parent in rows:
            rows[row.parent].children.append(row.community)
        elif row.parent != -1:
            row.parent = -1  # a parent that lost all its nodes to children cannot be referenced
    for row in rows.values():
        row.children.sort()
    return sorted(rows.values(), key=lambda r: (r.level, r.community))
