"""Unit tests of the indexer's parts: chunking, sentence splitting, offline extraction, graph finalisation, communities."""

from __future__ import annotations

import itertools

from indexer.chunking import chunk_documents
from indexer.communities import detect_communities
from indexer.extract_offline import OfflineExtractor, normalise_title, split_sentences
from indexer.graph import EntityRow, RelationshipRow, entity_uuid, finalise_graph
from indexer.reader import SourceDocument, sha512_hex
from indexer.reports import build_full_content, offline_reports
from shared_context.tokens import get_tokenizer


def test_chunks_are_exact_overlapping_slices_even_in_chinese() -> None:
    # numbered sentences: identical chunk texts would be kept once (see the next test)
    text = "".join(f"北风能源合作社在宁波签署了第{i}份协议。" for i in range(40)) + "".join(
        f" Amara Osei leads the Tidewater Turbine Programme, phase {i}." for i in range(30)
    )
    doc = SourceDocument(title="a.md", text=text)
    chunks = chunk_documents([doc], chunk_size=64, overlap=16, encoding_name="o200k_base")
    assert len(chunks) > 5
    tok = get_tokenizer("o200k_base")
    for c in chunks:
        assert text[c.char_start : c.char_end] == c.text
        assert "\ufffd" not in c.text
        assert c.id == sha512_hex(c.text) and c.document_id == doc.id
        assert c.n_tokens <= 64 and abs(tok.count(c.text) - c.n_tokens) <= 2
    # consecutive chunks overlap and together cover the whole text
    for a, b in itertools.pairwise(chunks):
        assert b.char_start < a.char_end
    assert chunks[0].char_start == 0 and chunks[-1].char_end == len(text)


def test_identical_chunk_text_is_kept_once() -> None:
    docs = [SourceDocument(title="a", text="same words here. " * 5), SourceDocument(title="b", text="other. " + "x" * 3)]
    chunks = chunk_documents([*docs, SourceDocument(title="c", text="same words here. " * 5 + " ")], chunk_size=200,
                             overlap=0, encoding_name="o200k_base")
    assert len({c.id for c in chunks}) == len(chunks)


def test_sentence_split_respects_abbreviations_and_chinese() -> None:
    text = "Dr. Amara Osei met J. R. Smith at St. Brigid's. She left.\n\n北风合作社成立了。李文表示同意！End"
    assert split_sentences(text) == [
        "Dr. Amara Osei met J. R. Smith at St. Brigid's.",
        "She left.",
        "北风合作社成立了。",
        "李文表示同意！",
        "End",
    ]


def test_normalise_title() -> None:
    assert normalise_title("  the  Harrowmere   Valley's ") == "HARROWMERE VALLEY"
    assert normalise_title("Osei’s") == "OSEI"
    assert normalise_title("宁波") == "宁波"


def test_offline_extractor_names_types_events_and_pairs() -> None:
    text = (
        "Dr. Amara Osei leads the Tidewater Turbine Programme at the Northwind Energy Cooperative in Harlow Bay. "
        "However, the 2021 flood damaged the yard near the River Esk. \"We will rebuild,\" said Osei. "
        "NWEC signed an accord with the Saltbridge Fishermen's Association. 张伟在宁波与上海电气公司签署协议。"
    )
    ext = OfflineExtractor().extract(text)
    m = ext.mentions
    assert {"AMARA OSEI", "TIDEWATER TURBINE PROGRAMME", "NORTHWIND ENERGY COOPERATIVE", "HARLOW BAY", "RIVER ESK",
            "2021 FLOOD", "OSEI", "NWEC", "SALTBRIDGE FISHERMEN'S ASSOCIATION", "张伟", "宁波", "上海电气公司"} <= set(m)
    assert "HOWEVER" not in m and "DR" not in m and "WE" not in m

    def top(key: str) -> str:
        return max(m[key].type_votes.items(), key=lambda kv: kv[1])[0]

    assert top("AMARA OSEI") == "PERSON" and top("OSEI") == "PERSON"
    assert top("NORTHWIND ENERGY COOPERATIVE") == "ORGANIZATION" and top("HARLOW BAY") == "GEO"
    assert top("2021 FLOOD") == "EVENT" and top("上海电气公司") == "ORGANIZATION" and top("宁波") == "GEO"
    assert ("AMARA OSEI", "TIDEWATER TURBINE PROGRAMME") in ext.pairs
    assert ext.pairs[("AMARA OSEI", "TIDEWATER TURBINE PROGRAMME")].sentence.startswith("Dr. Amara Osei leads")
    assert tuple(sorted(("张伟", "宁波"))) in ext.pairs


def test_finalise_graph_orders_stably_and_computes_degrees() -> None:
    def ents() -> list[EntityRow]:
        return [EntityRow(t, "PERSON", "", ["u1"], 1) for t in ("C", "A", "B")]

    rels = [RelationshipRow("A", "B", "", 2.0, ["u1"]), RelationshipRow("C", "A", "", 1.0, ["u1"])]
    g = finalise_graph(ents(), rels)
    assert [e.title for e in g.entities] == ["C", "A", "B"]
    assert [(e.title, e.degree) for e in g.entities] == [("C", 1), ("A", 2), ("B", 1)]
    assert g.entities[1].id == entity_uuid("A")
    assert {(r.source, r.target, r.combined_degree) for r in g.relationships} == {("A", "B", 3), ("C", "A", 3)}
    # a later build keeps the previous order and appends new rows
    g2 = finalise_graph(
        [EntityRow("D", "GEO", "", ["u2"], 1), *ents()],
        [RelationshipRow("B", "A", "", 1.0, ["u1"])],
        previous_entity_titles=["C", "A", "B"],
        previous_relationship_pairs=[("A", "B")],
    )
    assert [(e.title, e.human_readable_id) for e in g2.entities] == [("C", 0), ("A", 1), ("B", 2), ("D", 3)]
    assert g2.relationships[0].id == g.relationships[0].id


def test_communities_cover_isolated_entities_and_reports_hash_content() -> None:
    names = [f"N{i}" for i in range(14)]
    entities = [EntityRow(n, "CONCEPT", f"{n} is a node.", ["u1"], 1) for n in [*names, "LONE"]]
    rels = [RelationshipRow(a, b, f"{a} links {b}.", 1.0, ["u1"]) for a, b in itertools.pairwise(names)]
    rels += [RelationshipRow(names[0], names[7], "chord", 3.0, ["u1"])]
    g = finalise_graph(entities, rels)
    comms = detect_communities(g, max_cluster_size=4)
    level0 = [c for c in comms if c.level == 0]
    assert sorted(e for c in level0 for e in c.entity_ids) == sorted(e.id for e in g.entities)
    lone = next(c for c in level0 if c.entity_ids == [entity_uuid("LONE")])
    assert lone.relationship_ids == [] and lone.text_unit_ids == ["u1"]
    assert max(c.size for c in comms if not c.children) <= 4
    assert any(c.level > 0 for c in comms)  # clusters above max_cluster_size were split
    reports = offline_reports(comms, g)
    assert len({r.id for r in reports}) == len(reports) == len(comms)
    for r in reports:
        assert r.full_content == build_full_content(r.title, r.summary, r.findings)


def test_uuid5_text_is_uuid5() -> None:
    import uuid

    from indexer.graph import uuid5_text

    ns = uuid.UUID("6f0d3f4e-5b8a-4c59-9a55-2f1c0e7d9b11")
    for name in ("", "entity\x1fSCROOGE", "relationship\x1fA\x1fB", "第30期", "CAFÉ \u2028 x" * 40):
        assert uuid5_text(ns, name) == str(uuid.uuid5(ns, name))
