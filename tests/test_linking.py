"""Entity linking: exact/alias phrases, BM25 (English and Chinese), embeddings, include/exclude, k."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.linking import exact_tokens, lexical_scores, lexical_terms, link_entities
from shared_context.records import CommunityReport, Entity, Relationship, TextUnit
from shared_context.search_backend import VectorTable


def _index(entities: list[tuple[str, str]], rels: list[tuple[str, str]] = (), **kw: object) -> Index:
    ents = [Entity(id=f"e{i}", short_id=str(i), title=t, description=d) for i, (t, d) in enumerate(entities)]
    relationships = [
        Relationship(id=f"r{i}", short_id=str(i), source=s, target=t, description=f"{s} and {t}")
        for i, (s, t) in enumerate(rels)
    ]
    units = [TextUnit(id="t0", short_id="0", text="some text")]
    return index_from_records(entities=ents, relationships=relationships, text_units=units, **kw)  # type: ignore[arg-type]



def test_tokenisation_stems_plurals_possessives_and_splits_cjk() -> None:
    assert exact_tokens("Scrooge's nephews") == ["scrooge", "nephew"]
    assert exact_tokens("the Cratchits' house") == ["the", "cratchit", "house"]
    assert exact_tokens("林黛玉 and 贾宝玉") == ["林", "黛", "玉", "and", "贾", "宝", "玉"]
    assert lexical_terms("林黛玉") == ["林黛", "黛玉"]
    assert "the" not in lexical_terms("the ghost")


def test_exact_title_beats_lexical_and_respects_k(carol: Index) -> None:
    result = link_entities(carol, "What does Bob Cratchit earn?", k=3)
    assert len(result.entities) == 3
    assert result.entities[0].title == "BOB CRATCHIT"
    assert result.entities[0].exact and result.entities[0].score >= 0.5
    assert result.mode == "exact+lexical"
    scores = [e.score for e in result.entities]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_possessive_and_case_insensitive_whole_word(carol: Index) -> None:
    titles = link_entities(carol, "why is scrooge's heart cold?", k=10).titles
    assert "SCROOGE" in titles
    # whole-word: "Fredrick" must not exact-match FRED
    result = link_entities(carol, "Fredrick", k=10)
    assert not any(e.exact and e.title == "FRED" for e in result.entities)


def test_k_is_respected_even_with_many_matches(carol: Index) -> None:
    for k in (1, 5, 10):
        assert len(link_entities(carol, "Christmas ghost spirit Scrooge Cratchit Marley", k=k).entities) == k


def test_include_is_prepended_deduplicated_and_exclude_applies_everywhere(carol: Index) -> None:
    result = link_entities(carol, "Bob Cratchit", k=4, include=["BOB CRATCHIT", "fred"], exclude=["TINY TIM"])
    titles = result.titles
    assert titles[:2] == ["BOB CRATCHIT", "FRED"]
    assert titles.count("BOB CRATCHIT") == 1
    assert "TINY TIM" not in titles
    assert len(titles) == 4
    excluded = link_entities(carol, "Bob Cratchit", k=4, include=["BOB CRATCHIT"], exclude=["BOB CRATCHIT"])
    assert "BOB CRATCHIT" not in excluded.titles
    missing = link_entities(carol, "Bob", include=["NOBODY AT ALL"])
    assert any("NOBODY AT ALL" in n for n in missing.notes)


def test_empty_query_falls_back_to_degree(carol: Index) -> None:
    result = link_entities(carol, "", k=5)
    degrees = [e.entity.degree for e in result.entities]
    assert len(degrees) == 5 and degrees == sorted(degrees, reverse=True)
    assert degrees[0] == max(e.degree for e in carol.entities)


def test_history_turns_extend_the_query(carol: Index) -> None:
    plain = link_entities(carol, "What happened to him?", k=5)
    assert "JACOB MARLEY" not in plain.titles
    with_history = link_entities(
        carol, "What happened to him?", history_turns=["Tell me about Jacob Marley"], k=5
    )
    assert "JACOB MARLEY" in with_history.titles


def test_unknown_names_flag_names_missing_from_the_index(carol: Index) -> None:
    result = link_entities(carol, "Did Gandalf ever meet Ebenezer Scrooge?")
    assert result.unknown_names == ["Gandalf"]
    assert link_entities(carol, "Who is Tiny Tim?").unknown_names == []
    # sentence-initial capitals are grammar, not names; quoted and multi-word spans are still reported
    assert link_entities(carol, "Overall, what are the main themes?").unknown_names == []
    assert link_entities(carol, "According to the book, who is Harry Potter?").unknown_names == [
        "Harry Potter"
    ]
    assert link_entities(carol, 'Is "The Hobbit" mentioned?').unknown_names == ["The Hobbit"]


def test_chinese_titles_and_descriptions_link_without_spaces() -> None:
    index = _index(
        [
            ("林黛玉", "贾府的表小姐，多愁善感，擅长作诗"),
            ("贾宝玉", "荣国府的公子，衔玉而生"),
            ("薛宝钗", "薛家的小姐，端庄稳重"),
            ("大观园", "贾府为元春省亲修建的园林"),
        ],
        [("林黛玉", "贾宝玉"), ("贾宝玉", "薛宝钗")],
    )
    result = link_entities(index, "林黛玉和贾宝玉是什么关系？", k=2)
    assert set(result.titles) == {"林黛玉", "贾宝玉"}
    assert all(e.exact for e in result.entities)
    lexical = link_entities(index, "谁擅长作诗", k=1)
    assert lexical.titles == ["林黛玉"] and not lexical.entities[0].exact


def test_embedding_signal_used_only_with_matching_dimension() -> None:
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(3, 8)).astype(np.float32)
    table = VectorTable.build("entity_description", [0, 1, 2], matrix, source="test", model="m")
    index = _index([("ALPHA", "first"), ("BETA", "second"), ("GAMMA", "third")], vectors=[table])
    result = link_entities(index, "nothing lexical here", query_vector=matrix[2], k=1)
    assert result.mode == "exact+lexical+embedding"
    assert result.titles == ["GAMMA"] and result.entities[0].semantic == pytest.approx(1.0)
    mismatch = link_entities(index, "ALPHA", query_vector=np.ones(4, dtype=np.float32), k=1)
    assert mismatch.mode == "exact+lexical"
    assert any("cannot call" in n and "dim 8" in n for n in mismatch.notes)
    assert mismatch.titles == ["ALPHA"]


def test_lexical_scores_for_reports_and_text_units() -> None:
    ents = [Entity(id="e0", short_id="0", title="A")]
    units = [
        TextUnit(id="t0", short_id="0", text="The lighthouse keeper lit the lamp."),
        TextUnit(id="t1", short_id="1", text="Bread and butter."),
    ]
    reports = [
        CommunityReport(
            id="r0", community=0, level=0, title="Harbour", full_content="Boats and the lighthouse"
        ),
        CommunityReport(id="r1", community=1, level=0, title="Bakery", full_content="Bread"),
    ]
    index = index_from_records(entities=ents, relationships=[], text_units=units, community_reports=reports)
    assert np.argmax(lexical_scores(index, "text_units", "lighthouse lamps")) == 0
    assert np.argmax(lexical_scores(index, "reports", "bread")) == 1
    with pytest.raises(ValueError, match="unknown table"):
        lexical_scores(index, "documents", "x")  # type: ignore[arg-type]


def test_linking_is_deterministic_and_does_not_touch_records(carol: Index) -> None:
    before = [(e.title, e.description, e.degree) for e in carol.entities[:50]]
    a = link_entities(carol, "Marley's ghost and the chains", k=10)
    b = link_entities(carol, "Marley's ghost and the chains", k=10)
    assert [(e.position, e.score) for e in a.entities] == [(e.position, e.score) for e in b.entities]
    assert [(e.title, e.description, e.degree) for e in carol.entities[:50]] == before


def test_linked_entity_reads_its_record_only_when_asked(carol_path: Path) -> None:
    import dataclasses
    import pickle

    from shared_context import LocalContextBuilder, load_index
    from shared_context.linking import LinkedEntity
    from shared_context.records import RecordTable

    index = load_index(carol_path)  # its own copy: no other test has made records of it
    assert isinstance(index.entities, RecordTable)
    made = index.entities._made
    result = link_entities(index, "Marley's ghost and Bob Cratchit", k=10)
    ctx = LocalContextBuilder(index).build("Marley's ghost and Bob Cratchit")
    assert ctx.text and len(result.entities) == 10
    # neither linking nor building the context made a whole entity record (every column of its row)
    assert not made.keys() & {e.position for e in result.entities}
    first = result.entities[0]
    assert first.entity is index.entities[first.position] and first.title == first.entity.title
    assert first.entity is first.entity
    # behaves as the frozen dataclass it was: equality over every field, repr, no assignment, pickling
    twin = LinkedEntity(first.position, index.entities[first.position], first.score, first.exact,
                        first.lexical, first.semantic, first.included)
    assert twin == first and repr(twin) == repr(first) and twin != result.entities[1]
    assert repr(first).startswith(f"LinkedEntity(position={first.position}, entity=Entity(")
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.score = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        hash(first)
    lazy = result.entities[1]
    assert pickle.loads(pickle.dumps(lazy)) == lazy
    with pytest.raises(ValueError):
        LinkedEntity(0, None, 1.0, True, 0.0, 0.0)
