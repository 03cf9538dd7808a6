"""What the web page shows beside an answer: its citations by name with the text of each record, the graph
of the entities and relationships it cited (with their neighbours), and one entity opened whole.

Read-only lookups in the loaded index by id (the id maps and adjacency lists): nothing here reads a file, so a
request names records, never paths. Input is checked by `parse_graph_request` (RequestError naming the field).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engines.citations import KINDS, record_text, resolve_position
from engines.models.base import JSON, JSONObject
from router.service.errors import RequestError
from shared_context.index import Index

MAX_CITATIONS = 200  # an answer cites a few dozen records at most
MAX_NEIGHBOURS = 20  # per cited entity
GRAPH_NODES = 30  # a graph a reader can still read; "show more" asks for more
MAX_NODES = 200  # the most a request may ask for
REPORT_ENTITIES = 10  # a cited report's best-connected members offered to the graph
PREVIEW_CHARS = 600  # the hover preview; the whole record opens on click
ENTITY_RELATIONSHIPS = 40  # relationships listed when an entity is opened
ENTITY_SOURCES = 12  # text units listed when an entity is opened


@dataclass(frozen=True)
class GraphRequest:
    citations: list[tuple[str, str]]  # (kind, id) as the answer cites them
    neighbours: int
    max_nodes: int = GRAPH_NODES


def parse_graph_request(body: JSONObject) -> GraphRequest:
    unknown = set(body) - {"citations", "neighbours", "max_nodes"}
    if unknown:
        name = sorted(unknown)[0]
        raise RequestError(f"unknown field {name!r} (use citations, neighbours, max_nodes)", param=name,
                           code="unknown_parameter")
    raw = body.get("citations")
    if not isinstance(raw, list):
        raise RequestError("'citations' must be a list of {kind, id}", param="citations")
    if len(raw) > MAX_CITATIONS:
        raise RequestError(f"'citations' has {len(raw)} entries; the limit is {MAX_CITATIONS}", param="citations")
    pairs: dict[tuple[str, str], None] = {}
    for i, c in enumerate(raw):
        if not isinstance(c, dict) or c.get("kind") not in KINDS:
            raise RequestError(f"citations[{i}].kind must be one of {', '.join(KINDS)}", param=f"citations[{i}].kind")
        ident = c.get("id")
        if not isinstance(ident, str | int) or isinstance(ident, bool) or not 0 < len(str(ident)) <= 200:
            raise RequestError(f"citations[{i}].id must be a record id (1 to 200 characters)",
                               param=f"citations[{i}].id")
        pairs.setdefault((str(c["kind"]), str(ident)), None)
    neighbours = body.get("neighbours", 6)
    if not isinstance(neighbours, int) or isinstance(neighbours, bool) or not 0 <= neighbours <= MAX_NEIGHBOURS:
        raise RequestError(f"'neighbours' must be a whole number from 0 to {MAX_NEIGHBOURS}", param="neighbours")
    max_nodes = body.get("max_nodes", GRAPH_NODES)
    if not isinstance(max_nodes, int) or isinstance(max_nodes, bool) or not 1 <= max_nodes <= MAX_NODES:
        raise RequestError(f"'max_nodes' must be a whole number from 1 to {MAX_NODES}", param="max_nodes")
    return GraphRequest(list(pairs), neighbours, max_nodes)


def _clip(text: str, limit: int = PREVIEW_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def citation_label(index: Index, kind: str, ident: str) -> str | None:
    """What a reader calls the record: an entity's name, "A → B" for a relationship, a report's title, the
    document a text unit comes from. None when the index does not know the id."""
    pos = resolve_position(index, kind, ident)
    if pos is None:
        return None
    if kind == "Entities":
        return index.entities[pos].title
    if kind == "Relationships":
        rel = index.relationships[pos]
        return f"{rel.source} → {rel.target}"
    if kind == "Claims":
        claim = index.claims[pos]
        return f"{claim.subject}: {claim.type or 'claim'}".strip()
    if kind == "Reports":
        return index.community_reports[pos].title or f"community {ident}"
    doc = index.document_for_text_unit(index.text_units[pos].id)
    where = doc.title if doc is not None else "a document"
    return f"passage {ident} of {where}"


def named_citations(index: Index, pairs: Iterable[tuple[str, str]]) -> list[JSON]:
    out: list[JSON] = []
    for kind, ident in pairs:
        label = citation_label(index, kind, ident)
        text = record_text(index, kind, ident) if label is not None else None
        out.append({"kind": kind, "id": ident, "known": label is not None,
                    "label": label if label is not None else f"{kind} {ident} (not in this index)",
                    "preview": _clip(text) if text else ""})
    return out


class _Graph:
    """Nodes (entity positions) and edges (relationship positions) in the order they were added, at most
    `max_nodes` nodes; the entities refused for want of room are counted as hidden."""

    def __init__(self, index: Index, max_nodes: int) -> None:
        self.index = index
        self.max_nodes = max_nodes
        self.nodes: dict[int, bool] = {}  # position -> cited
        self.edges: dict[int, bool] = {}
        self.hidden: set[int] = set()

    def node(self, pos: int, cited: bool) -> bool:
        if pos < 0:
            return False
        if pos in self.nodes:
            self.nodes[pos] = self.nodes[pos] or cited
            return True
        if len(self.nodes) >= self.max_nodes:
            self.hidden.add(pos)
            return False
        self.nodes[pos] = cited
        return True

    def edge(self, pos: int, cited: bool, new_nodes: bool = True) -> bool:
        ends = self.index.relationship_endpoints[pos]
        source, target = int(ends[0]), int(ends[1])
        if source < 0 or target < 0:
            return False
        if pos in self.edges:
            self.edges[pos] = self.edges[pos] or cited
            return True
        if not new_nodes and not (source in self.nodes and target in self.nodes):
            return False
        if not (self.node(source, False) and self.node(target, False)):
            return False
        self.edges[pos] = cited
        return True

    def neighbours(self, pos: int, k: int) -> None:
        """The entity's k strongest relationships (the adjacency is sorted by combined degree, then weight)."""
        for rel in self.index.entity_relationships[pos][:k]:
            self.edge(int(rel), False)

    def ties(self, pos: int) -> None:
        """The entity's relationships to entities already shown (no new node)."""
        for rel in self.index.entity_relationships[pos]:
            self.edge(int(rel), False, new_nodes=False)

    def to_dict(self) -> JSONObject:
        ix = self.index
        nodes: list[JSON] = []
        for pos, cited in self.nodes.items():
            e = ix.entities[pos]
            nodes.append({"id": e.short_id, "title": e.title, "type": e.type, "degree": e.degree, "cited": cited})
        edges: list[JSON] = []
        for pos, cited in self.edges.items():
            r = ix.relationships[pos]
            ends = ix.relationship_endpoints[pos]
            edges.append({"id": r.short_id, "source": ix.entities[int(ends[0])].short_id,
                          "target": ix.entities[int(ends[1])].short_id, "label": _clip(r.description, 160),
                          "weight": r.weight, "cited": cited})
        return {"nodes": nodes, "edges": edges, "hidden": len(self.hidden - set(self.nodes))}


def cited_graph(index: Index, request: GraphRequest) -> JSONObject:
    """The cited entities and relationships (marked `cited`), the best-connected members of the communities
    whose reports the answer cited (marked `cited`: the answer cites them through its reports; a global or
    DRIFT answer's graph), then each directly cited entity's strongest neighbours. An answer citing neither
    gets the entities of the passages it cited (basic search), so every answer has a graph to show. At most
    `request.max_nodes` nodes; `hidden` counts the entities left out for want of room."""
    graph = _Graph(index, request.max_nodes)
    cited_entities: list[int] = []
    for kind, ident in request.citations:
        pos = resolve_position(index, kind, ident)
        if pos is None:
            continue
        if kind == "Entities" and graph.node(pos, True):
            cited_entities.append(pos)
        elif kind == "Relationships" and graph.edge(pos, True):
            ends = index.relationship_endpoints[pos]
            cited_entities.extend(int(e) for e in ends)
    reports = [ident for kind, ident in request.citations if kind == "Reports"]
    members = [_entities_behind(index, "Reports", ident, REPORT_ENTITIES) for ident in reports]
    for rank in range(REPORT_ENTITIES):  # each report's first member, then each one's second...
        for found in members:
            if rank < len(found):
                graph.node(found[rank], True)
    for pos in list(graph.nodes):
        graph.ties(pos)  # the relationships among the reports' members, with no neighbour added
    if not graph.nodes:
        for kind, ident in request.citations:
            for e in _entities_behind(index, kind, ident):
                if graph.node(e, False):
                    cited_entities.append(e)
    for pos in dict.fromkeys(cited_entities):
        graph.neighbours(pos, request.neighbours)
    return graph.to_dict()


def _entities_behind(index: Index, kind: str, ident: str, k: int = 8) -> list[int]:
    """The entities a passage mentions, or a report's community's best-connected members (k at most)."""
    pos = resolve_position(index, kind, ident)
    if pos is None:
        return []
    if kind == "Sources":
        return [int(e) for e in index.text_unit_entities[pos][:k]]
    if kind == "Reports":
        cpos = index.community_pos.get(index.community_reports[pos].community)
        if cpos is None:
            return []
        members = [index.entity_pos[e] for e in index.communities[cpos].entity_ids if e in index.entity_pos]
        return sorted(members, key=lambda e: -index.entities[e].degree)[:k]
    return []


def entity_record(index: Index, ident: str) -> JSONObject | None:
    """One entity by id, short id or exact title: its description, strongest relationships and sources."""
    pos = index.entity_pos.get(ident)
    if pos is None:
        pos = resolve_position(index, "Entities", ident)
    if pos is None:
        pos = index.entity_by_title.get(ident)
    if pos is None:
        return None
    e = index.entities[pos]
    relationships: list[JSON] = []
    for rpos in index.entity_relationships[pos][:ENTITY_RELATIONSHIPS]:
        r = index.relationships[int(rpos)]
        other = r.target if r.source == e.title else r.source
        relationships.append({"id": r.short_id, "other": other, "source": r.source, "target": r.target,
                              "description": r.description, "weight": r.weight})
    sources: list[JSON] = []
    for uid in e.text_unit_ids[:ENTITY_SOURCES]:
        upos = index.text_unit_pos.get(uid)
        if upos is None:
            continue
        unit = index.text_units[upos]
        doc = index.document_for_text_unit(unit.id)
        sources.append({"id": unit.id, "short_id": unit.short_id, "preview": _clip(unit.text, 240),
                        "document": None if doc is None else {"id": doc.id, "title": doc.title}})
    return {"id": e.id, "short_id": e.short_id, "title": e.title, "type": e.type, "description": e.description,
            "degree": e.degree, "relationship_count": len(index.entity_relationships[pos]),
            "relationships": relationships, "source_count": len(e.text_unit_ids), "sources": sources}
