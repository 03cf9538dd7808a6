"""Updates cost what changed: the index keeps its embedder, and only new or changed texts are embedded."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Sequence
from pathlib import Path

import lancedb
import numpy as np
import pandas as pd

from indexer import SourceDocument
from indexer.graph import Graph
from indexer.pipeline import build_index_from_documents

PLACES = ["Arden Vale", "Brisk Harbour", "Corran Fell", "Dunmore Reach", "Elswick Down"]
GUILDS = ["Orrin Guild", "Saltmark Company", "Tolbeck Society", "Varn Union"]


def _doc(i: int) -> SourceDocument:
    person = f"Keeper{chr(65 + i % 26)} Marlow{i}"
    place, guild, other = PLACES[i % len(PLACES)], GUILDS[i % len(GUILDS)], PLACES[(i + 2) % len(PLACES)]
    text = (
        f"{person} of the {guild} surveyed the old mill at {place} in spring. "
        f"The {guild} paid {person} to repair the granary roof before the autumn fair. "
        f"Later {person} travelled to {other}, where the {guild} kept its ledgers and its barges."
    )
    return SourceDocument(title=f"doc-{i:02d}.txt", text=text)


def _vectors(out: Path, table: str) -> dict[str, np.ndarray]:
    t = lancedb.connect(str(out / "lancedb")).open_table(table).to_arrow()
    return dict(zip(t.column("id").to_pylist(), np.array(t.column("vector").to_pylist(), dtype=np.float32), strict=True))


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_update_adding_ten_percent_embeds_only_what_changed(tmp_path: Path) -> None:
    docs = [_doc(i) for i in range(10)]
    out = tmp_path / "index"
    first = build_index_from_documents(docs, out, progress=False)
    embedder_sha = _sha(out / "graphroute" / "embedder.npz")
    embedder_inode = (out / "graphroute" / "embedder.npz").stat().st_ino
    units_before = _vectors(out, "text_unit_text")
    assert first.vectors_reused == 0 and first.embedded["text_unit_text"] == first.chunks

    second = build_index_from_documents([*docs, _doc(10)], out, progress=False)
    assert second.new_chunks == 1 and second.chunks == first.chunks + 1
    assert second.embedded["text_unit_text"] == 1  # the new document's text unit alone
    ents = pd.read_parquet(out / "entities.parquet")
    assert 0 < second.embedded["entity_description"] < len(ents)  # only new or re-described entities
    assert _sha(out / "graphroute" / "embedder.npz") == embedder_sha  # kept, not refitted
    assert (out / "graphroute" / "embedder.npz").stat().st_ino == embedder_inode  # linked, not written again
    assert second.step_cpu_seconds.keys() == second.step_seconds.keys() - {"read"}
    units_after = _vectors(out, "text_unit_text")
    assert set(units_before) < set(units_after)
    assert all(np.array_equal(units_before[i], units_after[i]) for i in units_before)

    refit = build_index_from_documents([*docs, _doc(10), _doc(11)], out, progress=False, refit_embedder=True)
    assert refit.vectors_reused == 0 and refit.embedded["text_unit_text"] == refit.chunks


def test_deleting_a_document_removes_what_only_it_supported(tmp_path: Path) -> None:
    docs = [_doc(i) for i in range(6)]
    out = tmp_path / "index"
    build_index_from_documents(docs, out, progress=False)
    only_in_last = "KEEPERF MARLOW5"
    assert only_in_last in set(pd.read_parquet(out / "entities.parquet")["title"])
    report = build_index_from_documents(docs[:5], out, progress=False)
    assert report.removed_chunks == 1
    ents = pd.read_parquet(out / "entities.parquet")
    assert only_in_last not in set(ents["title"]) and "ORRIN GUILD" in set(ents["title"])
    rels = pd.read_parquet(out / "relationships.parquet")
    assert only_in_last not in set(rels["source"]) | set(rels["target"])
    assert set(_vectors(out, "entity_description")) == set(ents["id"])


def test_every_stage_reports_progress(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    build_index_from_documents([_doc(i) for i in range(3)], tmp_path / "index", progress=True)
    err = capsys.readouterr().err
    for stage in ("read", "chunk", "extract", "graph", "communities", "reports", "embed", "write"):
        assert f"[index] {stage}: " in err, stage
    assert "entities" in err and "texts embedded" in err and " s)" in err


def _group_doc(group: int, i: int) -> SourceDocument:
    """Documents in four groups that share no word: an added document changes one group's graph only."""
    person, guild, place = f"Warden{chr(65 + i)} Castell{group}{i}", GUILDS[group], PLACES[group]
    thing = ("lantern", "anchor", "loom", "kiln")[group]
    text = (
        f"{person} of the {guild} mended the {thing} at {place} in spring. "
        f"The {guild} paid {person} for the {thing}. "
        f"Later {person} returned to {place}, where the {guild} kept its {thing}."
    )
    return SourceDocument(title=f"g{group}-{i}.txt", text=text)


def test_update_reclusters_only_what_changed_and_keeps_the_other_reports(tmp_path: Path) -> None:
    docs = [_group_doc(g, i) for g in range(4) for i in range(3)]
    out = tmp_path / "index"
    first = build_index_from_documents(docs, out, progress=False)
    communities_before = pd.read_parquet(out / "communities.parquet")
    reports_before = pd.read_parquet(out / "community_reports.parquet")
    changed = ("CASTELL0", GUILDS[0].upper(), PLACES[0].upper())  # the group the new document joins

    update = build_index_from_documents([*docs, _group_doc(0, 3)], out, progress=False)
    assert update.new_chunks == 1 and update.embedded["text_unit_text"] == 1
    assert 0 < update.communities_reused < update.communities
    assert 0 < update.reports_reused < update.reports
    assert update.embedded["community_full_content"] == update.reports - update.reports_reused
    after = pd.read_parquet(out / "communities.parquet")
    reports_after = pd.read_parquet(out / "community_reports.parquet")
    ents = pd.read_parquet(out / "entities.parquet").set_index("id")["title"]
    # every community of the untouched groups is the same community with the same report as before
    kept = after[[not any(n in t for t in ents[list(e)] for n in changed) for e in after["entity_ids"]]]
    assert len(kept) == update.communities_reused and set(kept["id"]) <= set(communities_before["id"])
    kept_reports = reports_after[reports_after["community"].isin(kept["community"])]
    assert set(kept_reports["id"]) <= set(reports_before["id"])
    assert first.communities_reused == 0 and "communities: " in update.summary()


def test_a_starting_community_that_fell_apart_is_split_before_leiden() -> None:
    """Found in a real update: community 2 (three leaves of one hub) is no longer connected in the changed
    subgraph, and graspologic-native panics (a Rust index error) when started from it. It is split into its
    connected parts first (with a restart from singletons as the last resort)."""
    from indexer.communities import _connected_parts, _leiden

    hub, clique = "8694", ["8803", "8804", "8805", "8806"]
    edges = [(n, hub, 0.5) for n in ("3379", "3350", "3381", "3382")]
    edges += [(a, b, 2.0 if {a, b} == {hub, "8805"} else 1.0) for a, b in
              [("8803", "8804"), ("8803", "8805"), (hub, "8803"), ("8803", "8806"), ("8804", "8805"), (hub, "8804"),
               ("8804", "8806"), (hub, "8805"), ("8805", "8806"), (hub, "8806"), ("8723", "8806"), ("2119", "8806")]]
    start = {"2119": 0, "3350": 1, "3379": 2, "3381": 2, "3382": 2, hub: 3, "8723": 4}
    start.update({n: 5 + i for i, n in enumerate(clique)})
    parts = _connected_parts(edges, start)
    assert len({parts[n] for n in ("3379", "3381", "3382")}) == 3 and sorted(set(parts.values())) == list(range(11))
    membership = _leiden(edges, start, seed=0xDEADBEEF)
    assert set(membership) == set(start) and len(set(membership.values())) >= 2


def _cliques(groups: dict[str, int], extra: Sequence[tuple[str, str, float]] = ()) -> Graph:
    """Groups of fully linked entities ("A0".."A3"), each group's first entity weakly linked to the next group's."""
    from indexer.graph import EntityRow, RelationshipRow, finalise_graph

    names = {g: [f"{g}{i}" for i in range(n)] for g, n in groups.items()}
    entities = [EntityRow(n, "CONCEPT", f"{n} is a node.", ["u1"], 1) for ns in names.values() for n in ns]
    rels = [RelationshipRow(a, b, "", 2.0, ["u1"]) for ns in names.values() for i, a in enumerate(ns) for b in ns[i + 1 :]]
    order = list(names.values())
    rels += [RelationshipRow(a[0], b[0], "", 0.1, ["u1"]) for a, b in itertools.pairwise(order)]
    known = {e.title for e in entities}
    entities += [EntityRow(n, "CONCEPT", f"{n} is new.", ["u2"], 1) for a, b, _w in extra for n in (a, b) if n not in known]
    rels += [RelationshipRow(a, b, "", w, ["u2"]) for a, b, w in extra]
    return finalise_graph(entities, rels)


def _edges_of(graph: Graph) -> dict[str, tuple[str, str, float]]:
    by_title = {e.title: e.id for e in graph.entities}
    return {r.id: (by_title[r.source], by_title[r.target], r.weight) for r in graph.relationships}


def test_touched_entities_are_the_new_ones_and_the_ends_of_changed_relationships() -> None:
    from indexer.communities import cluster_graph, touched_entities

    before = _cliques({"A": 4, "B": 4, "C": 4})
    previous, _ = cluster_graph(before, max_cluster_size=4)
    after = _cliques({"A": 4, "B": 4, "C": 4}, extra=[("A1", "NEW", 1.0)])
    title = {e.id: e.title for e in after.entities}
    assert {title[i] for i in touched_entities(after, previous, _edges_of(before))} == {"A1", "NEW"}
    edges = _edges_of(before)
    rid = next(r.id for r in before.relationships if {r.source, r.target} == {"B1", "B2"})
    reweighted = {**edges, rid: (*edges[rid][:2], 5.0)}  # the previous build had another weight there
    gone = next(r.id for r in before.relationships if {r.source, r.target} == {"C2", "C3"})
    added = {k: v for k, v in edges.items() if k != gone}  # the previous build lacked one relationship
    ids = {e.title: e.id for e in before.entities}
    removed = {**edges, "a-removed-one": (ids["C0"], ids["B3"], 1.0)}  # ...or had one the update lacks
    same = _cliques({"A": 4, "B": 4, "C": 4})
    assert touched_entities(same, previous, edges) == set()
    assert {title[i] for i in touched_entities(same, previous, reweighted)} == {"B1", "B2"}
    assert {title[i] for i in touched_entities(same, previous, added)} == {"C2", "C3"}
    assert {title[i] for i in touched_entities(same, previous, removed)} == {"C0", "B3"}


def test_untouched_communities_are_kept_without_reclustering_and_touched_ones_are_recomputed(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import indexer.communities as cm

    groups = {"A": 4, "B": 4, "C": 4, "D": 4}
    before = _cliques(groups)
    previous, _ = cm.cluster_graph(before, max_cluster_size=4)
    seen: list[set[str]] = []
    real = cm._leiden

    def recording(edges, start, seed):  # type: ignore[no-untyped-def]
        seen.append({n for a, b, _w in edges for n in (a, b)})
        return real(edges, start, seed)

    monkeypatch.setattr(cm, "_leiden", recording)
    after = _cliques(groups, extra=[("B1", "NEW", 3.0)])
    rows, kept = cm.cluster_graph(after, max_cluster_size=4, previous=previous, previous_edges=_edges_of(before))
    title = {e.id: e.title for e in after.entities}
    position = {e.title: str(i) for i, e in enumerate(after.entities)}
    by_members = {frozenset(title[e] for e in c.entity_ids): c for c in previous}
    unchanged = [c for c in rows if not {title[e] for e in c.entity_ids} & {"B0", "B1", "B2", "B3", "NEW"}]
    assert unchanged and kept == len(unchanged)
    for c in unchanged:  # same entities, same number, and Leiden never saw them
        old = by_members[frozenset(title[e] for e in c.entity_ids)]
        assert (c.community, c.id) == (old.community, old.id)
        assert not any(position[title[e]] in nodes for e in c.entity_ids for nodes in seen)
    touched = next(c for c in rows if "NEW" in {title[e] for e in c.entity_ids})
    assert touched.community not in {c.community for c in previous}  # recomputed, a new number
    assert sorted(e for c in rows if c.level == 0 for e in c.entity_ids) == sorted(e.id for e in after.entities)

    # without the previous relationships nothing is frozen: Leiden runs over the whole graph again
    seen.clear()
    cm.cluster_graph(after, max_cluster_size=4, previous=previous)
    assert seen[0] == set(position.values())


def _graph_tables(out: Path) -> tuple[dict[str, tuple], dict[frozenset[str], tuple]]:  # type: ignore[type-arg]
    """Entities by title and relationships by their pair of titles (an edge is oriented from the entity that
    came first, and an update's row order is the previous build's): everything but the row order."""
    ents = pd.read_parquet(out / "entities.parquet")
    rels = pd.read_parquet(out / "relationships.parquet")
    return (
        {r.title: (r.id, r.type, r.description, tuple(r.text_unit_ids), r.frequency, r.degree) for r in ents.itertuples()},
        {frozenset((r.source, r.target)): (r.id, r.description, r.weight, tuple(r.text_unit_ids), r.combined_degree)
         for r in rels.itertuples()},
    )


def test_an_update_has_the_entities_and_relationships_of_a_full_build(tmp_path: Path) -> None:
    docs = [_group_doc(g, i) for g in range(4) for i in range(3)] + [_doc(i) for i in range(4)]
    out = tmp_path / "index"
    build_index_from_documents(docs[:-2], out, progress=False)
    build_index_from_documents(docs, out, progress=False)  # two documents added
    build_index_from_documents(docs, tmp_path / "full", progress=False)
    assert _graph_tables(out) == _graph_tables(tmp_path / "full")
    build_index_from_documents(docs[1:], out, progress=False)  # and one deleted
    build_index_from_documents(docs[1:], tmp_path / "full-1", progress=False)
    assert _graph_tables(out) == _graph_tables(tmp_path / "full-1")


def _members(out: Path) -> list[tuple[bytes, list[str]]]:
    import json

    state = out / "graphroute"
    listing = json.loads((state / "extractions.members.json").read_text())
    data = (state / "extractions.json.gz").read_bytes()
    assert listing["size"] == len(data)
    return [(data[o : o + n], ids) for o, n, ids in listing["members"]]


def test_unchanged_documents_extractions_are_copied_compressed(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import indexer.state as st

    monkeypatch.setattr(st, "MEMBER_MIN_BYTES", 0)  # one member per document, however small
    docs = [_doc(i) for i in range(4)]
    out = tmp_path / "index"
    build_index_from_documents(docs, out, progress=False)
    before = _members(out)
    assert len(before) == 4
    # the encoder is never asked for a kept chunk: its member's bytes are copied
    encoded: list[str] = []
    real = st._compact
    monkeypatch.setattr(st, "_compact", lambda ext: encoded.append("x") or real(ext))
    update = build_index_from_documents([*docs, _doc(4)], out, progress=False)
    after = _members(out)
    assert after[:4] == before and len(after) == 5 and update.new_chunks == 1 and len(encoded) == 1
    stored = [cid for cid, _line in st.iter_extraction_lines(out / "graphroute" / "extractions.json.gz", update.extraction)]
    assert stored == [cid for _data, ids in after for cid in ids]

    # deleting a document drops its member, keeps the others' bytes, and gives a full build's graph
    build_index_from_documents([*docs[:1], *docs[2:], _doc(4)], out, progress=False)
    assert _members(out) == [before[0], *before[2:], after[4]]
    build_index_from_documents([*docs[:1], *docs[2:], _doc(4)], tmp_path / "full", progress=False)
    assert _graph_tables(out) == _graph_tables(tmp_path / "full")


def test_extractions_without_a_valid_member_list_are_copied_line_by_line(tmp_path: Path) -> None:
    docs = [_doc(i) for i in range(4)]
    out = tmp_path / "index"
    build_index_from_documents(docs, out, progress=False)
    listing = out / "graphroute" / "extractions.members.json"
    listing.unlink()  # as an older build left it
    update = build_index_from_documents([*docs, _doc(4)], out, progress=False)
    assert update.new_chunks == 1 and listing.exists()
    listing.write_text(listing.read_text().replace('"size":', '"size":1'))  # stale: describes another file
    update = build_index_from_documents([*docs, _doc(4), _doc(5)], out, progress=False)
    assert update.new_chunks == 1
    build_index_from_documents([*docs, _doc(4), _doc(5)], tmp_path / "full", progress=False)
    assert _graph_tables(out) == _graph_tables(tmp_path / "full")


def test_a_member_list_that_does_not_match_its_file_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import json

    import pytest

    import indexer.state as st
    from indexer.config import IndexerError

    monkeypatch.setattr(st, "MEMBER_MIN_BYTES", 0)
    docs = [_doc(i) for i in range(3)]
    out = tmp_path / "index"
    build_index_from_documents(docs, out, progress=False)
    path = out / "graphroute" / "extractions.members.json"
    listing = json.loads(path.read_text())
    listing["members"][0][2], listing["members"][1][2] = listing["members"][1][2], listing["members"][0][2]
    path.write_text(json.dumps(listing))
    tables = {p.name: p.read_bytes() for p in out.glob("*.parquet")}
    with pytest.raises(IndexerError, match="member list does not match"):
        build_index_from_documents([*docs, _doc(3)], out, progress=False)
    assert {p.name: p.read_bytes() for p in out.glob("*.parquet")} == tables  # the previous index is intact


def test_reclustering_above_an_untouched_community_keeps_it_whole() -> None:
    """Leiden over a changed parent may spread the entities of a sub-community the change did not reach over
    several clusters; they are moved together into the cluster holding most of them, so the level below can keep
    that sub-community. A touched sub-community is left as Leiden placed it."""
    from indexer.communities import CommunityRow, Partition, _Refiner

    graph = _cliques({"A": 3, "B": 3})
    ids = {e.title: e.id for e in graph.entities}
    pos = {e.title: i for i, e in enumerate(graph.entities)}
    previous = [
        CommunityRow(0, 0, -1, [1, 2], [ids[t] for t in ("A0", "A1", "A2", "B0", "B1", "B2")]),
        CommunityRow(1, 1, 0, [], [ids[t] for t in ("A0", "A1", "A2")]),
        CommunityRow(2, 1, 0, [], [ids[t] for t in ("B0", "B1", "B2")]),
    ]
    refiner = _Refiner(graph, [], previous, Partition(), {ids["B2"]}, max_cluster_size=2, seed=1)
    spread = {pos["A0"]: 7, pos["A1"]: 7, pos["A2"]: 8, pos["B0"]: 8, pos["B1"]: 7, pos["B2"]: 8}
    membership = dict(spread)
    refiner._keep_whole(membership, 1)
    assert [membership[pos[t]] for t in ("A0", "A1", "A2")] == [7, 7, 7]  # untouched: whole, in its majority cluster
    assert [membership[pos[t]] for t in ("B0", "B1", "B2")] == [spread[pos[t]] for t in ("B0", "B1", "B2")]


def test_copying_stored_extractions_pauses_and_restores_the_collector(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import gc

    from indexer.previous_build import PreviousBuild

    docs = [_doc(i) for i in range(3)]
    out = tmp_path / "index"
    build_index_from_documents(docs, out, progress=False)
    states: list[bool] = []
    real = PreviousBuild.copy_extractions

    def spy(self, *args):  # type: ignore[no-untyped-def]
        states.append(gc.isenabled())
        return real(self, *args)

    monkeypatch.setattr(PreviousBuild, "copy_extractions", spy)
    assert gc.isenabled()
    build_index_from_documents([*docs, _doc(3)], out, progress=False)
    assert states == [False] and gc.isenabled()
