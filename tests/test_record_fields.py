"""`field_of`: one field of a row without making its record, always the value `records[i].<field>` has."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from shared_context.records import RecordTable, field_of


@dataclass
class _Row:
    id: str
    text: str
    weight: float = 0.0
    tags: list[str] = field(default_factory=list)


def _table() -> RecordTable[_Row]:
    return RecordTable(_Row, pa.table({
        "id": ["a", "b", "c", "d"], "text": ["one", None, "naïve", "林"], "weight": [1.0, 2.5, 0.0, -1.0],
        "tags": [["x"], [], ["y", "z"], ["w"]],
    }))


def test_fields_read_the_column_and_follow_made_and_repaired_records() -> None:
    table = _table()
    readers = {name: field_of(table, name) for name in ("id", "text", "weight", "tags")}
    fresh = _table()
    assert all(readers[n](i) == getattr(fresh[i], n) for n in readers for i in range(len(fresh)))
    assert not table._made  # nothing was made to read the fields
    table[2].text = "changed in place"  # a record made and changed (as a load-time repair may do)
    table.with_column("weight", [9.0, 8.0, 7.0, 6.0])
    assert readers["text"](2) == "changed in place" and readers["weight"](1) == 8.0 == table[1].weight


def test_fields_of_a_plain_list_read_the_records() -> None:
    rows = [_Row("a", "one"), _Row("b", "two", 2.0)]
    assert [field_of(rows, "text")(i) for i in range(2)] == ["one", "two"]
    assert field_of(rows, "weight")(1) == 2.0
