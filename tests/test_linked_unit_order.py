"""The hybrid Sources' linked units ordered by the question (`[local] hybrid_linked_order`): a named entity's
passages about the question come before its other passages, and nothing moves when the question's words are in
none of them."""

from __future__ import annotations

import pytest

from engines.config import ConfigError, config_from_mapping
from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.local_context import LocalContextBuilder
from shared_context.records import Entity, TextUnit
from shared_context.text_unit_selection import question_units, select_text_units

FILLER = "plain words about the weather and the market town " * 12


def _index(name_in_text: bool = True) -> Index:
    """ALPHA is linked to units 0-9; only units 7-9 tell of the lighthouse keeper. Unit 10 is linked to nothing
    and tells of the harbour master."""
    who = "Alpha" if name_in_text else "Someone"
    units = [TextUnit(id=f"t{j}", short_id=str(j), text=f"{who} walked to the fair, day {j}. {FILLER}")
             for j in range(7)]
    units += [TextUnit(id=f"t{j}", short_id=str(j), text=f"{who} the lighthouse keeper saw a ship, night {j}. {FILLER}")
              for j in range(7, 10)]
    units.append(TextUnit(id="t10", short_id="10", text=f"The harbour master counted the boats. {FILLER}"))
    entities = [Entity(id="a", short_id="0", title="ALPHA", description="a person",
                       text_unit_ids=[f"t{j}" for j in range(10)])]
    return index_from_records(entities=entities, relationships=[], text_units=units)


def _order(index: Index, question: str, linked_order: str) -> list[int]:
    lexical = question_units(index, question).lexical
    chosen = select_text_units(index, [0], strategy="hybrid", scores=[1.0], lexical=lexical,
                               linked_order=linked_order)  # type: ignore[arg-type]
    return [c.unit for c in chosen]


def test_the_named_entitys_passages_about_the_question_come_first() -> None:
    index = _index()
    question = "What did Alpha the lighthouse keeper see?"
    by_question = _order(index, question, "question")
    by_coverage = _order(index, question, "coverage")
    assert by_question[:3] == [7, 8, 9]
    assert by_coverage[0] == 0  # ordered by coverage alone, the entity's first unit leads
    assert sorted(by_question) == sorted(by_coverage)  # the same candidates, in another order


def test_nothing_moves_when_the_question_words_are_in_none_of_the_linked_units() -> None:
    index = _index(name_in_text=False)
    question = "What did Alpha think of the harbour master?"  # links ALPHA by title; its words are in unit 10 only
    assert _order(index, question, "question") == _order(index, question, "coverage")


def test_a_tight_sources_budget_shows_the_passages_about_the_question() -> None:
    index = _index()
    question = "What did Alpha the lighthouse keeper see?"
    params = {"excerpt_tokens": 0, "max_context_tokens": 700}
    shown = LocalContextBuilder(index, params).build(question).text_unit_ids
    assert shown[:3] == ["7", "8", "9"] and len(shown) < 10  # the budget holds only some of the entity's units
    old = LocalContextBuilder(index, params | {"hybrid_linked_order": "coverage"}).build(question).text_unit_ids
    assert old[0] == "0"


def test_the_setting_is_read_from_local_and_checked() -> None:
    cfg = config_from_mapping({"local": {"hybrid_linked_order": "coverage"}})
    assert cfg.local.hybrid_linked_order == "coverage"
    assert config_from_mapping({}).local.hybrid_linked_order == "question"
    with pytest.raises(ConfigError, match="hybrid_linked_order"):
        config_from_mapping({"local": {"hybrid_linked_order": "random"}})
