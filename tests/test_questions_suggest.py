"""`graphroute questions`: grammatical questions from the context's relationships and claims, no fragment
names, corpus-wide suggestions from top-level reports, and route labels from an injected labeller."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fixture_paths import CAROL
from test_engines_support import load

from engines import QuestionGenerator
from engines.models.offline_questions import generate_questions, is_fragment
from engines.questions import NO_LABELLER_NOTE, corpus_wide_count, corpus_wide_questions
from router.cli import main
from shared_context.tables import (
    Column,
    ContextTables,
    EntityRecord,
    RelationshipRecord,
    Section,
    SourceRecord,
    columns,
)

_ENTITY_COLUMNS = (Column("id", "id"), Column("entity", "title"), Column("description", "description"))
TABLES = ContextTables(
    entities=Section("Entities", _ENTITY_COLUMNS, [
        EntityRecord("1", "LYMPH NODES", "small organs"),
        EntityRecord("2", "KEY", "a word"),
        EntityRecord("3", "TAYLOR CRUZ", "an officer"),
    ]),
    relationships=Section("Relationships", columns("id", "source", "target", "description"), [
        RelationshipRecord("1", "LYMPH NODES", "KEY", "key findings on nodes"),
        RelationshipRecord("2", "TAYLOR CRUZ", "LYMPH NODES", "examined them"),
        RelationshipRecord("3", "LYMPH NODES", "TAYLOR CRUZ", "examined them again"),
    ]),
    sources=Section("Sources", columns("id", "text"), [SourceRecord(
        "1", "Key findings: the key role of the lymph nodes. Taylor Cruz examined them; a key result followed.")]),
)


def test_fragment_names_are_words_the_text_writes_in_lower_case() -> None:
    text = "Key findings: the key role of the nodes, a key result. Scrooge said no."
    assert is_fragment("Key", text) and is_fragment("Ai", text)
    assert not is_fragment("Scrooge", text) and not is_fragment("Lymph Nodes", text)
    assert not is_fragment("马利", "马利的鬼魂")  # two CJK characters are a whole name


def test_offline_questions_use_grammatical_templates_and_drop_fragment_pairs() -> None:
    questions = generate_questions(TABLES, "Tell me more", 6).questions
    assert questions and not any("Key" in q for q in questions)
    assert not any(q.startswith("How is ") for q in questions)
    relation = [q for q in questions if q.startswith("What is the relationship between")]
    assert relation == ["What is the relationship between Taylor Cruz and Lymph Nodes?"]  # one, not A-B and B-A


def test_corpus_wide_share_and_questions_from_top_level_reports() -> None:
    assert [corpus_wide_count(n, True) for n in (1, 3, 4, 8)] == [0, 0, 1, 2]
    assert corpus_wide_count(2, False) == 1
    index = load(CAROL)
    top = min(r.level for r in index.community_reports)
    titles = {r.title for r in index.community_reports if r.level == top}
    (question,) = corpus_wide_questions(index, 1)
    assert question.endswith("across the whole corpus?") and any(t in question for t in titles)


async def test_labels_come_from_the_injected_labeller() -> None:
    index = load(CAROL)
    seen: list[str] = []

    def labeller(q: str) -> Any:
        seen.append(q)
        return SimpleNamespace(engine="global" if "whole corpus" in q else "local", confidence=0.5)

    result = await QuestionGenerator(index, labeller=labeller).generate(["Who is Scrooge?"], n=4)
    assert len(result.questions) == 4 and seen == [q.text for q in result.questions]
    assert result.questions[-1].engine == "global" and not result.notes
    unlabelled = await QuestionGenerator(index).generate(["Who is Scrooge?"], n=2)
    assert all(q.engine is None for q in unlabelled.questions) and unlabelled.notes == [NO_LABELLER_NOTE]


def test_engines_questions_does_not_import_the_router() -> None:
    source = (Path(__file__).resolve().parents[1] / "engines" / "questions.py").read_text(encoding="utf-8")
    modules = [n.module or "" for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)]
    modules += [a.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in modules if m.split(".")[0] == "router"]


def test_cli_suggestions_include_a_global_question(carol_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["questions", "--index", str(carol_path), "--n", "5", "--history", "Who is Scrooge?", "--json"]) == 0
    questions = json.loads(capsys.readouterr().out)["questions"]
    assert len(questions) == 5 and "global" in {q["engine"] for q in questions}
