"""`TextColumn` reads a text field in place (values, iteration, byte lengths from the offsets alone), and
`RecordTable.replace_table` swaps in a stored copy of the same rows (write-then-map on a first load)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pytest

from shared_context.records import RecordTable, TextColumn, texts_of
from shared_context.search_store import content_check

TEXTS = ["", "plain", "naïve café", "林黛玉", "x" * 5000, "last"]


@dataclass
class _Row:
    id: str
    text: str


def _column() -> pa.ChunkedArray:
    return pa.chunked_array([pa.array(TEXTS[:2]), pa.array(TEXTS[2:5]), pa.array(TEXTS[5:], pa.large_string())
                             .cast(pa.string())]).slice(0)


def test_text_column_reads_values_lengths_and_chunks_in_place() -> None:
    sliced = pa.chunked_array([pa.array(["drop", *TEXTS[:3]]).slice(1), pa.array(TEXTS[3:])])
    for column in (_column(), sliced):
        texts = TextColumn(column)
        assert len(texts) == len(TEXTS) and list(texts) == TEXTS
        assert [texts[i] for i in range(len(TEXTS))] == TEXTS and texts[-1] == "last" and texts[1:3] == TEXTS[1:3]
        assert texts.byte_lengths().tolist() == [len(t.encode("utf-8")) for t in TEXTS]
        with pytest.raises(IndexError):
            texts[len(TEXTS)]


def test_content_check_of_a_column_follows_its_texts() -> None:
    table = RecordTable(_Row, pa.table({"id": [str(i) for i in range(len(TEXTS))], "text": TEXTS}))
    column = texts_of(table, "text")
    assert isinstance(column, TextColumn) and texts_of([_Row("0", "a")], "text") == ["a"]
    assert content_check(column) == content_check(TextColumn(_column()))
    changed = RecordTable(_Row, pa.table({"id": [str(i) for i in range(len(TEXTS))], "text": [*TEXTS[:-1], "lost"]}))
    assert content_check(texts_of(changed, "text")) != content_check(column)


def test_replace_table_keeps_rows_and_refuses_other_rows() -> None:
    table = RecordTable(_Row, pa.table({"id": ["a", "b"], "text": ["one", "two"]}))
    kept = table[0]
    table.replace_table(pa.table({"text": ["one", "two"], "id": ["a", "b"], "extra": [1, 2]}))
    assert table[0] is kept and table[1] == _Row("b", "two") and table.table.column_names == ["id", "text"]
    with pytest.raises(ValueError):
        table.replace_table(pa.table({"id": ["a"], "text": ["one"]}))
    with pytest.raises(ValueError):
        table.replace_table(pa.table({"id": ["a", "b"]}))


def test_row_sequence_reads_positions_and_slices_as_a_list_does() -> None:
    from shared_context.records import RowSequence

    class Squares(RowSequence[int]):
        def __len__(self) -> int:
            return 5

        def _row(self, i: int) -> int:
            assert 0 <= i < 5  # a subclass is only asked for real positions
            return i * i

    rows = Squares()
    assert rows[-1] == 16 and rows[1:4] == [1, 4, 9] and rows[::-2] == [16, 4, 0] and list(rows) == [0, 1, 4, 9, 16]
    with pytest.raises(IndexError):
        rows[5]
    with pytest.raises(IndexError):
        rows[-6]
