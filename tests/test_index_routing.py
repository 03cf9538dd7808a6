"""Several indexes behind one router: the probe picks the index, several covering indexes fan out, none costs
at most one call, a named index skips routing. Over the Christmas Carol index and two indexes built here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from indexer import IndexerConfig, SourceDocument, build_index, build_index_from_documents
from router import Router
from router.budget import Budget
from router.fanout import IndexCitation, MultiRouter, UnknownIndexError
from router.index_routing import Coverage, choose

SAMPLE = Path(__file__).resolve().parents[1] / "indexer" / "sample_corpus"
GARDEN = [
    ("Glasshouse history", "The Verrill Glasshouse was built in 1871 by the ironmaster Odile Verrill to keep orchids "
     "and tree ferns through the winter. Its cast-iron ribs were made at the Pellow foundry. In 1954 a storm broke "
     "four hundred panes and the curator Amos Quaile rebuilt the north wing with laminated glass."),
    ("Seed bank", "The Quaile Seed Bank stores the seeds of alpine plants in jars at minus twenty degrees. Amos Quaile "
     "founded it in 1962 after collecting saxifrage and gentian seeds on the Brevard ridge. Germination is tested "
     "every ten years; a jar whose seeds fail to sprout is replaced from the living collection."),
    ("Orchid collection", "The orchid collection holds slipper orchids, moth orchids and rare epiphytes from cloud "
     "forests. Odile Verrill bought the first slipper orchids from a nursery in Ghent. Misting pumps keep the "
     "humidity above eighty percent, and the orchids flower from February to May."),
]


@pytest.fixture(scope="module")
def multi(carol_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MultiRouter]:
    root = tmp_path_factory.mktemp("indexes")
    build_index(SAMPLE, root / "coop", progress=False)
    docs = [SourceDocument(title=t, text=x) for t, x in GARDEN]
    build_index_from_documents(docs, root / "garden", config=IndexerConfig(chunk_size=300, chunk_overlap=20),
                               progress=False)
    with Router.from_indexes({"carol": carol_path, "coop": root / "coop", "garden": root / "garden"}) as m:
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


async def test_route_names_the_index_without_a_model_call(multi: MultiRouter) -> None:
    decision, plan = await multi.aroute("Who is Bob Cratchit?")
    assert decision.index == "carol" and plan.chosen == decision.engine == "local"
    fanned, _ = await multi.aroute("What did Ebenezer Scrooge and Elin Hargreaves each do?")
    assert sorted(fanned.index or []) == ["carol", "coop"]


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
