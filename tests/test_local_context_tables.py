"""Table rendering, the budgeted section builder and the conversation-history table."""

from __future__ import annotations

import csv
import io

import pytest

from shared_context.history import build_history_section, qa_turns, recent_user_turns
from shared_context.tables import (
    ReportRecord,
    SectionBuilder,
    SourceRecord,
    columns,
    render_row,
    render_table,
)
from shared_context.tokens import get_tokenizer

TOK = get_tokenizer()


@pytest.mark.parametrize(
    "cells",
    [
        ["1", "plain", "text"],
        ["2", "has | pipe", 'has "quotes"'],
        ["3", "multi\nline", "last"],
        ["4", "", "trailing space "],
        [5, 1.0, 0.123456],
    ],
)
def test_render_row_matches_csv_quote_minimal(cells: list[object]) -> None:
    buf = io.StringIO()
    expected_cells = [c if not isinstance(c, float) else {1.0: "1.0", 0.123456: "0.1235"}[c] for c in cells]
    csv.writer(buf, delimiter="|", quotechar='"', quoting=csv.QUOTE_MINIMAL, lineterminator="\n").writerow(
        expected_cells
    )
    assert render_row(cells) + "\n" == buf.getvalue()


def test_carriage_returns_are_quoted_and_round_trip() -> None:
    # Python's csv writer leaves a lone "\r" unquoted, which its own reader then rejects; we quote it.
    line = render_row(["1", "carriage\rreturn"])
    assert line == '1|"carriage\rreturn"'
    assert next(csv.reader(io.StringIO(line + "\n"), delimiter="|")) == ["1", "carriage\rreturn"]


def test_render_table_format_and_empty_table() -> None:
    assert render_table("Entities", ["id", "entity"], []) == ""
    text = render_table("Entities", ["id", "entity"], [["1", "A"], ["2", "B|C"]])
    assert text == '-----Entities-----\nid|entity\n1|A\n2|"B|C"'


def test_section_builder_never_exceeds_budget_with_quoted_rows() -> None:
    # quoting (the "..." and doubled quotes) costs tokens GraphRAG never counted (bug 18)
    rows = [[str(i), 'He said "hello" | twice\nand "again"' * 5] for i in range(50)]
    for budget in (30, 100, 333, 1000):
        builder: SectionBuilder[SourceRecord] = SectionBuilder("Sources", columns("id", "text"), TOK, budget)
        for row in rows:
            builder.add(SourceRecord(row[0], row[1]))
        section = builder.finish()
        assert section.tokens == TOK.count(section.text) <= budget
        if section.text:
            parsed = list(csv.reader(io.StringIO(section.text.split("\n", 1)[1]), delimiter="|"))
            assert parsed[1:] == rows[: len(parsed) - 1]
            assert [r.id for r in section.rows] == [r[0] for r in parsed[1:]]


def test_section_builder_truncates_a_single_oversize_record() -> None:
    builder: SectionBuilder[ReportRecord] = SectionBuilder("Reports", columns("id", "title", "content"), TOK, 60)
    long_report = ReportRecord("7", "Title", "word " * 500)
    assert not builder.add(long_report)
    assert builder.add_truncated(long_report, "content")
    section = builder.finish()
    assert section.tokens <= 60 and section.text.startswith(
        "-----Reports-----\nid|title|content\n7|Title|word"
    )
    shown = section.rows[0]
    assert shown.truncated is True and shown.content.endswith(" …") and len(shown.content) < len(long_report.content)
    assert section.text.endswith(render_row(["7", "Title", shown.content]))  # the record is what the row shows


def test_section_shrink_marks_dropped_records() -> None:
    builder: SectionBuilder[SourceRecord] = SectionBuilder("Sources", columns("id", "text"), TOK, 500)
    for i in range(10):
        builder.add(SourceRecord(str(i), "some text here"))
    section = builder.finish()
    before = section.tokens
    section.shrink(10)
    assert section.tokens <= before - 10
    assert section.tokens == TOK.count(section.text)
    # the dropped rows are the last ones, now the first candidates (not shown)
    assert [r.id for r in section.rows + section.candidates] == [str(i) for i in range(10)]
    assert section.candidates and len(section.rows) == section.text.count("\n") - 1


HISTORY = [
    {"role": "assistant", "content": "leading answer is dropped"},
    {"role": "user", "content": "q1"},
    {"role": "assistant", "content": "a1"},
    {"role": "system", "content": "ignored"},
    {"role": "user", "content": "q2"},
    {"role": "assistant", "content": "a2"},
    {"role": "assistant", "content": "a2 more"},
    {"role": "user", "content": "q3"},
]


def test_qa_turns_and_newest_user_turns() -> None:
    turns = qa_turns(HISTORY)
    assert [t.question for t in turns] == ["q1", "q2", "q3"]
    assert turns[1].answers == ["a2", "a2 more"]
    assert recent_user_turns(HISTORY, 2) == ["q3", "q2"]
    assert recent_user_turns(HISTORY, 0) == []


def test_history_table_newest_turns_within_budget() -> None:
    section = build_history_section(HISTORY, TOK, budget=1000, max_turns=2, user_turns_only=False)
    rows = list(csv.reader(io.StringIO(section.text.split("\n", 1)[1]), delimiter="|"))
    assert rows == [["turn", "content"], ["user", "q2"], ["assistant", "a2\na2 more"], ["user", "q3"]]
    one_row = TOK.count("-----Conversation History-----\nturn|content\n") + TOK.count("user|q3\n")
    tight = build_history_section(HISTORY, TOK, budget=one_row)
    assert tight.tokens <= tight.budget
    assert [r.content for r in tight.rows] == ["q3"]  # the newest turn survives, not the oldest
    assert build_history_section(None, TOK, budget=100).text == ""


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ("just a string", "list"),
        ([{"role": "user"}], "'role' and 'content'"),
        ([{"role": "bot", "content": "x"}], "role 'bot'"),
        ([{"role": "user", "content": 3}], "must be a string"),
    ],
)
def test_history_validation(history: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        qa_turns(history)  # type: ignore[arg-type]
