"""Offline corpus-wide answers that do not hinge on the verb: a question that names themes finds the theme
sentences whatever verb it uses ("run through", "recur", "come up", "stand out", and in Chinese), and an
empty global answer to it is a defect."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engines.models.offline_text import question_terms, theme_predicate
from indexer.pipeline import build_index
from router import Router
from shared_context.index import Index

DOCS = {
    "harbour.md": "The harbour master Tomas Reyes kept the ledger of every boat that came in. Tomas Reyes "
                  "argued with the Fishing Cooperative about the quay fees. The Fishing Cooperative repaired "
                  "the quay after the winter storm.",
    "letters.md": "These letters return again and again to isolation, duty and the sea. The themes of the "
                  "letters are isolation, duty and the sea. Mara Quill wrote to her brother Idris Quill "
                  "from the lighthouse every week. Idris Quill answered from the mill at Pellow.",
    "school.md": "The village school of Pellow taught twelve children in one room. The teacher Anna Brisk "
                 "walked from Pellow each morning. Anna Brisk wrote that duty kept her in the village.",
}
ENGLISH = [
    "What themes run through all of these documents?",
    "What themes recur across the documents?",
    "Which themes come up in these files?",
    "What themes stand out in the collection?",
    "What are the main themes?",
]
CHINESE = ["这些文件中反复出现哪些主题？", "贯穿这些文档的主题有哪些？", "这些文件里突出的主题是什么？"]


@pytest.fixture(scope="module")
def router(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Router]:
    root = tmp_path_factory.mktemp("themes")
    (root / "docs").mkdir()
    for name, text in DOCS.items():
        (root / "docs" / name).write_text(text, encoding="utf-8")
    build_index(root / "docs", root / "index", progress=False)
    with Router.from_index(root / "index", settings=False) as r:
        yield r


@pytest.mark.parametrize("question", ENGLISH)
def test_a_theme_question_finds_the_theme_sentences_whatever_its_verb(router: Router, question: str) -> None:
    answer = router.ask(question, mode="global")
    assert answer.engine == "global" and not answer.escalations, answer.escalations  # not empty
    text = answer.text.lower()
    assert "isolation" in text and "duty" in text, answer.text
    assert "does not mention" not in text


@pytest.mark.parametrize("question", CHINESE)
def test_a_chinese_theme_question_is_answered_corpus_wide(router: Router, question: str) -> None:
    assert question_terms(question)[1], theme_predicate(question)  # only what the themes do was left
    answer = router.ask(question, mode="global")
    assert answer.engine == "global" and not answer.escalations and answer.text.strip()


def test_the_routed_theme_question_answers_from_global_search(router: Router) -> None:
    answer = router.ask(ENGLISH[0])
    assert answer.engine == "global" and not answer.escalations
    assert "isolation" in answer.text.lower()


def test_the_verb_of_a_theme_question_is_no_topic() -> None:
    assert theme_predicate("What themes run through all of these documents?") == ["run"]
    assert theme_predicate("What are the themes that recur in the letters?") == ["recur"]
    assert theme_predicate("What themes are in the letters?") == []  # no verb of its own
    for question in ENGLISH:
        assert question_terms(question)[1], question  # corpus-wide
    # a theme question about a topic keeps the topic
    terms, broad = question_terms("What themes connect Mara Quill and the lighthouse?")
    assert not broad and {"mara", "quill", "lighthous"} <= set(terms), terms


@pytest.mark.parametrize("question", ["What themes run through the story?", "Which themes stand out in the book?",
                                      "这本书里反复出现的主题是什么？"])
def test_theme_questions_on_a_graphrag_index_get_a_global_answer(carol: Index, question: str) -> None:
    with Router(carol) as router:
        answer = router.ask(question, mode="global")
    assert answer.engine == "global" and not answer.escalations, answer.escalations
    assert "theme" in answer.text.lower()  # the reports' own theme sentences
