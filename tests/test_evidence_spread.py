"""Where a question's evidence sits decides DRIFT against local (`router.evidence_spread`), and where an index holds
no evidence for a question, escalation spends nothing (`router.escalation.term_coverage` / `has_evidence`).

Measured on a small offline index built here from five news articles written for the tests
(`tests/data/routing_corpus/harbour`); the questions were written for these tests too.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from router.classifier import ONE_SOURCE, classify
from router.escalation import has_evidence, term_coverage
from router.evidence_spread import CONCENTRATED_SHARE, one_source
from router.index_probe import Probe, probe, summarise_links
from shared_context.index import Index

CORPUS = Path(__file__).resolve().parent / "data" / "routing_corpus" / "harbour"
# Rosa Lindqvist appears in one article only; Alice Moreau and Bruno Tanaka in different ones.
ONE_PERSON = "How is Rosa Lindqvist connected to Bluewake Lines and to the detour that raised its fuel costs?"
TWO_ARTICLES = "How did Alice Moreau's strike lead to Bruno Tanaka's hiring freeze at Osterfeld Steelworks?"
NAMES_ONE_ARTICLE = "How does the port strike article connect Alice Moreau with Henrik Solberg?"
NONSENSE = ("Purple giraffes compute the velocity of Tuesday's melodies?",
            "Which marmalade taught the lighthouse to juggle pianos?")


@pytest.fixture(scope="module")
def harbour(tmp_path_factory: pytest.TempPathFactory) -> Index:
    from indexer import build_index
    from shared_context import load_index

    out = tmp_path_factory.mktemp("harbour") / "index"
    build_index(CORPUS, out, progress=False)
    return load_index(out)


def _probe(index: Index, question: str) -> Probe:
    from shared_context.linking import link_entities

    entities = index.entities
    return probe(index, question, summarise_links(link_entities(index, question), lambda p: str(entities[p].title)))


def test_the_named_things_tell_where_the_evidence_sits(harbour: Index) -> None:
    one, two = _probe(harbour, ONE_PERSON), _probe(harbour, TWO_ARTICLES)
    assert one.groups == 5 and one.named_best_group_share >= CONCENTRATED_SHARE
    assert two.named_best_group_share < CONCENTRATED_SHARE
    # passages spread by general words, but what the question names lives in one document: local
    spread = replace(one, unit_best_group_share=0.3)
    assert one_source(spread)
    assert not one_source(replace(spread, named_best_group_share=0.5))
    assert not one_source(replace(two, unit_best_group_share=0.3))


def test_a_question_naming_one_document_stays_local_unless_it_asks_about_the_collection(harbour: Index) -> None:
    found = _probe(harbour, NAMES_ONE_ARTICLE)
    assert found.documents == ("port_strike",) and found.unit_best_group_share < CONCENTRATED_SHARE
    assert one_source(found) and not one_source(found, corpus_wide=True)
    decision = classify(NAMES_ONE_ARTICLE, harbour)
    assert decision.engine == "local" and decision.method == ONE_SOURCE
    assert "names one document, port_strike" in decision.reasons[0]


def test_a_question_spanning_articles_still_gets_drift(harbour: Index) -> None:
    decision = classify(TWO_ARTICLES, harbour)
    assert decision.engine == "drift", decision.reasons


@pytest.mark.parametrize("question", NONSENSE)
def test_words_found_anywhere_are_no_evidence_unless_they_meet_in_a_passage(harbour: Index, question: str) -> None:
    coverage = term_coverage(harbour, question)
    found, why = has_evidence(classify(question, harbour), coverage)
    assert coverage < 1.0 and not found and "holds no evidence" in why
    assert term_coverage(harbour, ONE_PERSON) == 1.0
    assert has_evidence(classify(ONE_PERSON, harbour), 1.0)[0]


# A DRIFT wording with a corpus-wide scope word ("throughout") that names nothing of the harbour articles.
NAMES_NOTHING_SCOPED = ("In the GARDEN MANUAL, what is the relationship between the roots and water in carrying "
                        "minerals throughout the plant?")


def test_a_question_naming_nothing_never_goes_to_drift_whatever_its_scope_words(harbour: Index) -> None:
    from router.classifier import NAMES_NOTHING, NOT_COVERED
    from router.features import extract

    assert classify(NAMES_NOTHING_SCOPED).engine == "drift" and "scope" in extract(NAMES_NOTHING_SCOPED).cues
    decision = classify(NAMES_NOTHING_SCOPED, harbour)
    assert decision.engine != "drift" and decision.method in (NOT_COVERED, NAMES_NOTHING), decision.reasons
    assert decision.probabilities["drift"] == 0.0


def test_a_second_opinion_cannot_send_to_drift_what_the_index_rules_out() -> None:
    from router.classifier import RouteDecision
    from router.commitment import after_second_opinion

    spread = {"document_groups": 5.0, "specific_entities": 2.0, "named_documents": 0.0,
              "unit_best_group_share": 0.3, "named_best_group_share": 0.5}
    asked = RouteDecision("local", 0.5, {"local": 0.5, "global": 0.2, "drift": 0.3}, [], signals=spread)
    voted = replace(asked, engine="drift", method="model+llm")
    assert after_second_opinion(asked, voted).engine == "drift"  # two names in different documents: DRIFT's case
    for ruled_out, why in (({"specific_entities": 0.0}, "names nothing in the index"),
                           ({"named_best_group_share": 0.8}, "evidence sits in one document"),
                           ({"document_groups": 1.0}, "holds one document")):
        measured = replace(asked, signals=spread | ruled_out)
        kept = after_second_opinion(measured, replace(voted, signals=measured.signals))
        assert kept.engine == "local" and why in kept.reasons[-1], kept.reasons
