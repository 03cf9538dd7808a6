"""Several indexes behind one router: the probe picks the index, several covering indexes fan out, none costs
at most one call, a named index skips routing. Over the Christmas Carol index and two indexes built here."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from multi_index_support import build_coop, build_garden

from router import Router
from router.budget import Budget
from router.fanout import IndexCitation, MultiRouter, UnknownIndexError
from router.index_routing import Coverage, choose


@pytest.fixture(scope="module")
def multi(carol_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiRouter]:
    root = tmp_path_factory.mktemp("indexes")
    paths = {"carol": carol_path, "coop": build_coop(root / "coop"), "garden": build_garden(root / "garden")}
    with Router.from_indexes(paths) as m:
        yield m


def test_a_question_about_one_index_goes_there(multi: MultiRouter) -> None:
    for question, expected in [("Who is Bob Cratchit?", "carol"),
                               ("Who leads the Saltbridge Battery Project?", "coop"),
                               ("When did Amos Quaile found the seed bank?", "garden")]:
        choice = multi.choose(question)
        assert (choice.outcome, choice.names) == ("one", (expected,)), choice.reasons
        answer = multi.ask(question)
        assert answer.route.index == expected and answer.to_dict()["route"]["index"] == expected  # type: ignore[index]
        assert any(r.startswith(f"routed to index {expected}") for r in answer.route.reasons)
        assert answer.citations and all(c.resolved for c in answer.citations)


def test_a_question_two_indexes_cover_fans_out_and_citations_name_both(multi: MultiRouter) -> None:
    question = "What did Ebenezer Scrooge and Elin Hargreaves each do?"
    answer = multi.ask(question)
    assert sorted(answer.route.index or []) == ["carol", "coop"], answer.route.reasons
    cited = {c.index for c in answer.citations if isinstance(c, IndexCitation)}
    assert cited == {"carol", "coop"}
    assert all(isinstance(c, IndexCitation) for c in answer.citations)
    assert all(c["index"] in ("carol", "coop") for c in answer.to_dict()["citations"])  # type: ignore[index,union-attr]
    assert "From index carol" in answer.text and "From index coop" in answer.text
    fanned = answer.result.details["fanout"] if answer.result else {}
    assert answer.usage.total.llm_calls == sum(v["calls"] for v in fanned.values()) >= 2


def test_fan_out_divides_the_call_budget(multi: MultiRouter) -> None:
    question = "What did Ebenezer Scrooge and Elin Hargreaves each do?"
    one_call = multi.ask(question, budget=Budget(max_llm_calls=1))
    assert one_call.usage.total.llm_calls <= 1
    assert any("budget left no room" in d for d in one_call.degraded)
    two = multi.ask(question, budget=Budget(max_llm_calls=2))
    assert two.usage.total.llm_calls <= 2 and sorted(two.route.index or []) == ["carol", "coop"]


def test_a_question_no_index_covers_costs_at_most_one_call(multi: MultiRouter) -> None:
    question = "How is a quadrupole mass spectrometer calibrated with perfluorotributylamine?"
    choice = multi.choose(question)
    assert choice.outcome == "none" and len(choice.names) == 1
    answer = multi.ask(question)
    assert answer.usage.total.llm_calls <= 1 and not answer.escalations
    assert answer.text.startswith("No index clearly covers this question")
    assert answer.route.index == choice.names[0]
    assert "no index covers the question" in answer.route.reasons[0]


def test_a_named_index_skips_index_routing(multi: MultiRouter) -> None:
    answer = multi.ask("Who is Bob Cratchit?", index="coop")
    assert answer.route.index == "coop"
    assert answer.route.reasons[0] == "index coop named by the caller (no index routing)"
    with pytest.raises(UnknownIndexError, match=r"unknown index 'nope'$"):
        multi.ask("Who is Bob Cratchit?", index="nope")


def test_routing_considers_only_the_allowed_indexes(multi: MultiRouter) -> None:
    choice = multi.choose("Who is Bob Cratchit?", indexes=["coop", "garden"])
    assert "carol" not in choice.names and all(c.name != "carol" for c in choice.coverages)
    assert all("carol" not in r for r in choice.reasons)
    with pytest.raises(UnknownIndexError):
        multi.ask("Who is Bob Cratchit?", index="carol", indexes=["coop"])
    with pytest.raises(UnknownIndexError, match="no index is available"):
        multi.ask("Who is Bob Cratchit?", indexes=[])


async def test_route_names_the_index_without_a_model_call(multi: MultiRouter) -> None:
    decision, plan = await multi.aroute("Who is Bob Cratchit?")
    assert decision.index == "carol" and plan.chosen == decision.engine == "local"
    fanned, _ = await multi.aroute("What did Ebenezer Scrooge and Elin Hargreaves each do?")
    assert sorted(fanned.index or []) == ["carol", "coop"]
    none, plan = await multi.aroute("How is a quadrupole mass spectrometer calibrated with perfluorotributylamine?")
    assert "no index covers the question" in none.reasons[0] and all(s.llm_calls <= 1 for s in plan.steps if s.fits)


def test_choose_rules() -> None:
    def cov(name: str, *, specific: tuple[str, ...] = (), vocab: float = 0.0, passage: float = 0.0,
            shares: tuple[float, ...] = ()) -> Coverage:
        return Coverage(name, specific, (), 3, vocab, passage, 0.0, shares)

    one = choose([cov("a", specific=("X",)), cov("b", vocab=1.0, passage=1.0, shares=(0.1, 0.1, 0.1))])
    assert (one.outcome, one.names) == ("one", ("a",))
    both = choose([cov("a", specific=("X",)), cov("b", specific=("Y",))])
    assert both.outcome == "several" and set(both.names) == {"a", "b"} and both.index == ["a", "b"]
    words = choose([cov("a", vocab=1.0, passage=1.0, shares=(0.2, 0.2, 0.0)),
                    cov("b", vocab=0.7, passage=0.7, shares=(0.0, 0.01, 0.3))])
    assert words.outcome in ("one", "several") and words.names[0] == "a"
    none = choose([cov("a", vocab=0.3, passage=0.3, shares=(0.1, 0.0, 0.0)), cov("b")])
    assert (none.outcome, none.names) == ("none", ("a",))
    with pytest.raises(ValueError):
        choose([])


def test_a_lower_case_one_word_title_is_a_name_only_with_the_question_s_words() -> None:
    """"mass" names MASS in a novel, but a question most of whose words that index lacks is not about it."""
    weak = Coverage("a", ("MASS",), (), 5, 0.2, 0.2, weak=("MASS",))
    assert not weak.strong and choose([weak, Coverage("b", terms=5)]).outcome == "none"
    supported = Coverage("a", ("MASS",), (), 5, 0.8, 0.6, weak=("MASS",))
    assert supported.strong and choose([supported, Coverage("b", terms=5)]).names == ("a",)
    written = Coverage("a", ("DELVE",), (), 2, 0.5, 0.5)  # written capitalised: not weak
    assert written.strong


def test_rare_words_missing_keep_common_ones_from_covering() -> None:
    """Most words present but the rare ones (weighted by rarity over all indexes) absent: no cover."""
    common = Coverage("a", (), (), 5, 0.6, 0.6, unit_shares=(0.5, 0.4, 0.0, 0.0, 0.3), passage_terms=(True, True,
                                                                                                     False, False, True))
    other = Coverage("b", (), (), 5, 0.2, 0.2, unit_shares=(0.3, 0.0, 0.0, 0.0, 0.0), passage_terms=(True,) + (False,) * 4)
    choice = choose([common, other])
    assert choice.outcome == "none" and choice.coverages[0].weighted_share < 0.5
    rare_there = Coverage("a", (), (), 5, 0.6, 0.6, unit_shares=(0.0, 0.0, 0.02, 0.05, 0.01),
                          passage_terms=(False, False, True, True, True))
    assert choose([rare_there, other]).names == ("a",)


def test_a_name_the_index_s_text_holds_is_known_to_it(multi: MultiRouter) -> None:
    """"Ebenezer" is no entity title of the Carol index (SCROOGE is), but its text writes it: the question is
    about that index, not about a name no index knows."""
    choice = multi.choose("Where did the boy Ebenezer spend his lonely holidays as a schoolboy?")
    assert (choice.outcome, choice.names) == ("one", ("carol",)), choice.reasons


def test_a_lower_case_title_whose_index_holds_little_else_is_no_name(multi: MultiRouter) -> None:
    """"chapel" is a title of the Carol index, but its passages hold almost nothing else of the question."""
    choice = multi.choose("who painted the ceiling of the sistine chapel")
    assert choice.outcome == "none", choice.reasons


def _words_cov(name: str, shares: tuple[float, ...], passage: tuple[bool, ...], *, specific: tuple[str, ...] = (),
               words: tuple[str, ...] = ("jacob", "mother", "music", "shape")) -> Coverage:
    found = sum(s > 0 for s in shares) / len(shares)
    return Coverage(name, specific, (), len(shares), found, sum(passage) / len(shares), unit_shares=shares,
                    passage_terms=passage, words=words)


def test_a_one_word_name_another_index_also_writes_counts_only_for_the_index_leading_on_the_words() -> None:
    """"Jacob" is a title in one index (Jacob Marley) and a word of the other's text (Jacob Collier): the
    question's other words decide."""
    marley = _words_cov("a", (0.01, 0.02, 0.01, 0.01), (True, True, False, True), specific=("JACOB",))
    collier = _words_cov("b", (0.2, 0.05, 0.3, 0.02), (True, True, True, True))
    choice = choose([marley, collier])
    assert (choice.outcome, choice.names) == ("one", ("b",)), choice.reasons
    assert next(c for c in choice.coverages if c.name == "a").shared == ("JACOB",)
    # the same name in an index no other index's text shares it with is a name
    alone = _words_cov("b", (0.0, 0.05, 0.3, 0.02), (False, True, True, True))
    assert choose([marley, alone]).names == ("a",)


def test_full_names_in_two_indexes_fan_out_whatever_their_scores() -> None:
    two = Coverage("a", ("ELSIE INGLIS", "EDINBURGH"), (), 4, 0.5, 0.5)
    one = Coverage("b", ("JACOB COLLIER",), (), 4, 0.25, 0.25)
    assert two.score - one.score > 0.3  # further apart than named indexes may be when a name is one word
    choice = choose([two, one])
    assert choice.outcome == "several" and set(choice.names) == {"a", "b"}


def test_without_names_a_second_index_is_asked_only_when_it_adds_words() -> None:
    lead = _words_cov("a", (0.2, 0.1, 0.3, 0.05), (True, True, True, True))
    same = _words_cov("b", (0.15, 0.1, 0.25, 0.05), (True, True, True, True))
    assert choose([lead, same]).outcome == "one"
    lead = _words_cov("a", (0.2, 0.1, 0.3, 0.0), (True, True, True, False))
    adds = _words_cov("b", (0.1, 0.0, 0.2, 0.3), (True, False, True, True))
    choice = choose([lead, adds])
    assert choice.outcome == "several" and set(choice.names) == {"a", "b"}, choice.reasons


def test_a_name_no_index_knows_does_not_veto_an_index_whose_passage_holds_the_rest() -> None:
    held = Coverage("a", (), (), 5, 0.8, 0.8, unit_shares=(0.0, 0.3, 0.2, 0.4, 0.1),
                    passage_terms=(False, True, True, True, True), unknown_names=("cfo",))
    other = Coverage("b", (), (), 5, 0.2, 0.2, unit_shares=(0.0, 0.01, 0.0, 0.0, 0.0),
                     passage_terms=(False, True, False, False, False), unknown_names=("cfo",))
    assert choose([held, other]).names == ("a",)
    thin = Coverage("a", (), (), 5, 0.6, 0.4, unit_shares=(0.0, 0.3, 0.2, 0.0, 0.1),
                    passage_terms=(False, True, True, False, False), unknown_names=("douro",))
    assert choose([thin, other]).outcome == "none"


def test_an_index_far_ahead_on_the_rare_words_covers_a_long_question_spread_over_its_passages() -> None:
    """A long question (a note to write from a scenario) holds most of its words in one index, but no passage holds
    half of them: the index that explains its rare words far better than any other covers it while one passage
    holds a good part of them; an index that leads only narrowly, or whose passages hold almost nothing together,
    does not."""
    words = ("w1", "w2", "w3", "w4", "w5")
    shares = (0.02, 0.03, 0.01, 0.02, 0.04)
    far = _words_cov("a", shares, (True, True, False, False, False), words=words)  # two words in one passage
    faint = _words_cov("b", (0.001, 0.0, 0.0, 0.002, 0.0), (True, False, False, False, False), words=words)
    choice = choose([far, faint])
    assert (choice.outcome, choice.names) == ("one", ("a",)), choice.reasons
    assert next(c for c in choice.coverages if c.name == "a").clear_lead
    close = _words_cov("b", (0.02, 0.03, 0.0, 0.02, 0.04), (True, True, False, False, False), words=words)
    assert choose([far, close]).outcome == "none"
    scattered = _words_cov("a", shares, (True, False, False, False, False), words=words)
    assert choose([scattered, faint]).outcome == "none"


def test_a_name_beside_more_names_the_index_does_not_know_is_a_bystander() -> None:
    """"New York" is a name in a novel, but a question that also names three things no index knows is not
    about it: unless one of its passages holds most of the question, it is no name of that index."""
    bystander = Coverage("a", ("NEW YORK",), (), 4, 0.75, 0.25, unit_shares=(0.01, 0.0, 0.2, 0.1),
                         passage_terms=(True, False, False, True), words=("york", "verdugo", "league", "article"),
                         unknown_names=("alex verdugo", "sporting news", "yardbarker"))
    other = Coverage("b", (), (), 4, 0.5, 0.25, unit_shares=(0.0, 0.0, 0.2, 0.1), passage_terms=(False, False, True, False),
                     words=("york", "verdugo", "league", "article"),
                     unknown_names=("alex verdugo", "sporting news", "yardbarker", "new york"))
    assert choose([bystander, other]).outcome == "none"
    asked = replace(bystander, unknown_names=("yardbarker",))  # one name it lacks: its own name still counts
    assert choose([asked, other]).names == ("a",)
    # names the other index knows make a question about both indexes, however many there are
    known = replace(other, specific=("ALEX VERDUGO", "SPORTING NEWS", "YARDBARKER"), unknown_names=("new york",))
    both = choose([bystander, known])
    assert both.outcome == "several" and set(both.names) == {"a", "b"}, both.reasons


def test_a_title_among_names_no_index_knows_does_not_route_the_question(multi: MultiRouter) -> None:
    """Built indexes: LONDON is a title of the Carol index, but the question is about three things none holds."""
    choice = multi.choose("Did the Quixbyte Gazette report that Zorvan Kellitt and Marisol Quendry met in London?")
    assert choice.outcome == "none", choice.reasons
