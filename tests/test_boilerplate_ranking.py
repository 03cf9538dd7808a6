"""Query time on a GraphRAG index that contains an edition's licence and front matter (Christmas Carol):
those text units, the entities only they support and the reports built mostly from them rank below the
story (`shared_context.boilerplate_marks`), and `[search] down_rank_boilerplate = false` turns that off."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from engines.questions import QuestionGenerator, corpus_wide_questions
from shared_context.boilerplate_marks import FLOOR_WEIGHT, boilerplate_shares, boilerplate_weights
from shared_context.index import Index
from shared_context.linking import link_entities
from shared_context.search_backend import SearchParams, configure_search
from shared_context.text_unit_selection import select_text_units


@pytest.fixture(autouse=True)
def _default_search(carol: Index) -> Iterator[None]:
    configure_search(carol, SearchParams())
    yield
    configure_search(carol, SearchParams())


def _off(index: Index) -> None:
    configure_search(index, SearchParams(down_rank_boilerplate=False))


def test_shares_of_the_carol_index(carol: Index) -> None:
    shares = boilerplate_shares(carol)
    marked = np.flatnonzero(shares.units >= 0.5).tolist()
    n = len(carol.text_units)
    # the licence header, title page and contents at the start; the licence at the end; nothing between
    assert marked[:1] == [0] and marked[-4:] == [n - 4, n - 3, n - 2, n - 1]
    assert not shares.units[3 : n - 5].any()
    # the story's people are not boilerplate, whatever unit they share with front matter
    for title in ("SCROOGE", "BOB CRATCHIT", "TINY TIM", "JACOB MARLEY"):
        assert shares.entities[carol.entity_by_title[title]] == 0.0, title
    licence_only = np.flatnonzero(shares.entities == 1.0)
    assert len(licence_only) > 30
    for pos in licence_only.tolist():  # every unit that supports them is boilerplate at least in part
        assert all(shares.units[u] > 0 for u in carol.entity_text_units[pos])
    weights = boilerplate_weights(carol)
    assert weights is not None
    assert weights.entities[licence_only].max() == pytest.approx(FLOOR_WEIGHT)
    assert weights.units.min() == pytest.approx(FLOOR_WEIGHT) and weights.units.max() == 1.0


def test_degree_fallback_puts_licence_entities_last(carol: Index) -> None:
    shares = boilerplate_shares(carol)
    top = [e.position for e in link_entities(carol, "", k=10).entities]
    assert not any(shares.entities[p] == 1.0 for p in top)
    _off(carol)
    top_off = [e.position for e in link_entities(carol, "", k=10).entities]
    assert any(shares.entities[p] == 1.0 for p in top_off)  # by degree alone, a licence entity is in the top 10


def test_a_named_licence_entity_is_still_found(carol: Index) -> None:
    shares = boilerplate_shares(carol)
    pos = int(np.flatnonzero(shares.entities == 1.0)[0])
    title = carol.entities[pos].title
    linked = link_entities(carol, f"What is {title.title()}?", k=5).entities
    assert linked[0].position == pos and linked[0].exact


def test_text_units_ranked_below_the_story(carol: Index) -> None:
    n = len(carol.text_units)
    licence, story = n - 1, n // 2
    # reached only by similarity, the licence goes below the story whatever its rank
    ranked = select_text_units(carol, [], strategy="hybrid", lexical=[], vector=[licence, story])
    assert [c.unit for c in ranked] == [story, licence]
    # the question's own words picked both: their order stands (a question about the edition finds it) ...
    ranked = select_text_units(carol, [], strategy="hybrid", lexical=[licence, story], vector=[])
    assert [c.unit for c in ranked] == [licence, story]
    # ... but what similarity adds to a licence unit is still down-weighted
    ranked = select_text_units(carol, [], strategy="hybrid", lexical=[licence, story], vector=[licence, story])
    assert [c.unit for c in ranked] == [story, licence]
    _off(carol)
    ranked = select_text_units(carol, [], strategy="hybrid", lexical=[], vector=[licence, story])
    assert [c.unit for c in ranked] == [licence, story]


def test_corpus_wide_questions_skip_licence_reports(carol: Index) -> None:
    weights = boilerplate_weights(carol)
    assert weights is not None
    title_of = {r.title: pos for pos, r in enumerate(carol.community_reports)}

    def licence_questions(questions: list[str]) -> list[str]:
        return [q for q in questions for t, pos in title_of.items() if t in q and weights.mostly_boilerplate_report(pos)]

    assert licence_questions(corpus_wide_questions(carol, 6)) == []
    _off(carol)
    assert licence_questions(corpus_wide_questions(carol, 6)) != []


def test_generated_questions_name_no_licence_entity(carol: Index) -> None:
    shares = boilerplate_shares(carol)
    licence_names = [carol.entities[p].title.lower() for p in np.flatnonzero(shares.entities == 1.0).tolist()]
    generator = QuestionGenerator(carol)
    import asyncio

    result = asyncio.run(generator.generate(n=6))
    assert len(result.questions) >= 4
    for q in result.questions:
        assert not any(name in q.text.lower() for name in licence_names if len(name) > 6), q.text
