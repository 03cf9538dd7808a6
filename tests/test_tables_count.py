"""`SectionBuilder.finish` counts a section from its rows' own counts: it must equal counting the text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared_context.tables import (
    ClaimRecord,
    Column,
    SectionBuilder,
    join_sections,
    joined_tokens,
    render_row,
)
from shared_context.tokens import get_tokenizer

ENCODINGS = ["o200k_base", "cl100k_base"]

# Pieces chosen to sit at row boundaries: line ends, leading/trailing spaces and tabs, "/", punctuation
# runs, digits, contractions, CJK, marks, emoji and quoted newlines inside cells.
FRAGMENTS = ["a", "Scrooge", " ", "  ", "\t", "\n", "\r\n", "/", "//", ".", "...", ",", "!?", '"', "|", "'s",
             "123", "4567", " 89", "雅各", "é", "e\u0301", "🎄", "\u00a0", "\u3000", "—", "-----", "x\n ", " \n"]

cell = st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join)
# the rows of one section have as many cells as its columns (1 to 3)
rows_of_a_section = st.integers(1, 3).flatmap(lambda n: st.lists(st.lists(cell, min_size=n, max_size=n), min_size=1,
                                                                  max_size=5))
_FIELDS = ("id", "subject", "object")


def _record(cells: list[str]) -> ClaimRecord:
    """A record whose first len(cells) columns (`_columns`) render `cells`."""
    padded = [*cells, "", ""][:3]
    return ClaimRecord(padded[0], padded[1], padded[2], "", "", "", "")


def _columns(n: int) -> tuple[Column, ...]:
    return tuple(Column(f"c{i}", _FIELDS[i]) for i in range(n))


def _build(encoding: str, rows: list[list[str]], budget: int = 10_000) -> tuple[SectionBuilder[ClaimRecord], object]:
    tok = get_tokenizer(encoding)
    builder: SectionBuilder[ClaimRecord] = SectionBuilder("Sources", _columns(len(rows[0])), tok, budget)
    for cells in rows:
        line = render_row(cells)
        assert line == builder.render(_record(cells))
        builder.add_line(line, tok.count(line + "\n"), _record(cells))
    return builder, tok


@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(max_examples=150, deadline=None, derandomize=True)
@given(rows=rows_of_a_section)
def test_finish_count_equals_counting_the_text(encoding: str, rows: list[list[str]]) -> None:
    builder, tok = _build(encoding, rows)
    section = builder.finish()
    assert section.tokens == tok.count(section.text)  # type: ignore[attr-defined]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(
    "rows",
    [
        [["1", "ends with a full stop."], ["2", "/starts with a slash"]],
        [["1", "trailing spaces   "], ["2", "x"]],
        [["1", "a"], ["2", "punctuation at the end!!!"]],
        [["1", 'quoted "cell" at the end'], ["2", "multi\nline\n/cell"]],
        [["1", "digits 1234"], ["22", "雅各·马利"]],
        [["", "empty first cell"], ["3", "x"]],
        [["1", "tab at end\t"], ["2", "word and space followed by tab \tz"]],
    ],
)
def test_finish_count_on_awkward_rows(encoding: str, rows: list[list[str]]) -> None:
    builder, tok = _build(encoding, rows)
    section = builder.finish()
    assert section.tokens == tok.count(section.text)  # type: ignore[attr-defined]


def test_finish_trims_to_the_budget_with_exact_counts() -> None:
    tok = get_tokenizer()
    rows = [[str(i), "Marley was dead, to begin with. " * (i + 1)] for i in range(6)]
    full = _build("o200k_base", rows)[0].finish()
    for budget in range(full.tokens - 40, full.tokens + 1, 7):
        builder, _ = _build("o200k_base", rows, budget=10_000)
        builder.budget = budget
        section = builder.finish()
        assert section.tokens == tok.count(section.text) <= budget
        assert len(section.rows) == section.text.count("\n") - 1


class LongestCount:
    """A tokenizer that counts as the real one and remembers the longest text it was asked to count."""

    def __init__(self) -> None:
        self.real = get_tokenizer()
        self.encoding_name = self.real.encoding_name
        self.longest = 0

    def count(self, text: str) -> int:
        self.longest = max(self.longest, len(text))
        return self.real.count(text)


def test_finish_does_not_re_encode_the_whole_section() -> None:
    """The point of the row counts: a large section is not tokenised again when it is finished."""
    real = get_tokenizer()

    rows = [[str(i), "The ghost of Christmas Past, " * 40] for i in range(10)]
    spy = LongestCount()
    builder: SectionBuilder[ClaimRecord] = SectionBuilder("Sources", _columns(2), spy, 100_000)  # type: ignore[arg-type]
    for cells in rows:
        line = render_row(cells)
        builder.add_line(line, real.count(line + "\n"), _record(cells))
    section = builder.finish()
    assert section.tokens == real.count(section.text)
    assert spy.longest < 100  # only the last row's final piece and the header


@pytest.mark.parametrize("encoding", ENCODINGS)
@settings(max_examples=150, deadline=None, derandomize=True)
@given(sections=st.lists(rows_of_a_section, min_size=1, max_size=4))
def test_joined_tokens_equals_counting_the_joined_text(encoding: str, sections: list[list[list[str]]]) -> None:
    """`joined_tokens` adds only what each join between two sections changes, from the end of the left
    section's last row: the same as counting the joined text."""
    built = [_build(encoding, rows)[0].finish() for rows in sections]
    tok = get_tokenizer(encoding)
    assert joined_tokens(tok, built) == tok.count(join_sections([s.text for s in built]))


def test_joined_tokens_encodes_only_the_ends_of_long_last_rows() -> None:
    real = get_tokenizer()

    long_row = [["1", "The ghost of Christmas Past, " * 40 + 'and "Marley" |']]
    built = [_build("o200k_base", rows)[0].finish() for rows in (long_row, long_row, [["2", "x"]])]
    expected = real.count(join_sections([s.text for s in built]))
    spy = LongestCount()
    assert joined_tokens(spy, built) == expected  # type: ignore[arg-type]
    assert spy.longest < 100
