"""Excerpt rows of the Sources table are counted from per-index counts of their stretches between block
boundaries (`shared_context.local_rows.excerpt_row_tokens`): always the count of the rendered row, and the
contexts are the same as when every row is encoded whole."""

from __future__ import annotations

import random

import pytest
from fixture_paths import CAROL

from shared_context.local_rows import excerpt_row_tokens, join_spans
from shared_context.tables import render_row
from shared_context.tokens import get_tokenizer

AWKWARD = [
    'He said, "No!" | and then\n/ went home.  Two  spaces\tand a tab.\n\n"Quoted" start of a line.',
    "Numbers 12345 67 and 8,901.\r\nCRLF line\r\n  indented line / slash /\n/leading slash\n\u00a0nbsp \u3000 wide",
    "\u201cCurly quotes\u201d \u2014 dash\u2026 ellipsis. 雅各·马利 was dead! Is he? Yes.\n\n\n   Spaces before.",
    "trailing spaces   \n   \nx\x1fy \x1c z 'tis 'll don't. ''' \"\"\" end",
]


class _Index:
    """What `excerpt_row_tokens` reads of an index: its tokenizer (and it keeps a per-index cache)."""

    def __init__(self, encoding: str) -> None:
        self.tokenizer = get_tokenizer(encoding)


def _random_spans(rng: random.Random, n: int, starts: list[int]) -> list[tuple[int, int]]:
    """Spans made of whole blocks (`starts` + the end), in text order, as `select_excerpts` gives them."""
    bounds = [*starts, n]
    blocks = sorted(rng.sample(range(len(bounds) - 1), rng.randint(1, len(bounds) - 1)))
    spans: list[tuple[int, int]] = []
    for b in blocks:
        if spans and spans[-1][1] == bounds[b]:
            spans[-1] = (spans[-1][0], bounds[b + 1])
        else:
            spans.append((bounds[b], bounds[b + 1]))
    return spans


def _check(index: _Index, unit: int, unit_id: str, text: str, starts: list[int], spans: list[tuple[int, int]]) -> bool:
    shown = join_spans(text, spans)
    id_cell, line = render_row([unit_id]), render_row([unit_id, shown])
    n = excerpt_row_tokens(index, unit, id_cell, text, spans, starts, line[len(id_cell) + 1:] != shown, 10_000)
    if n is None:  # a part is only whitespace: the caller counts the row itself
        return False
    assert n == index.tokenizer.count(line + "\n"), (unit_id, spans, shown)
    return True


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_counts_equal_counting_the_row_for_any_blocks_and_spans(encoding: str) -> None:
    rng = random.Random(7)
    index = _Index(encoding)
    counted = 0
    for round_ in range(60):  # the same stretches again and again: cached counts are read back
        for unit, text in enumerate(AWKWARD):
            starts = [0, *sorted(rng.sample(range(1, len(text)), rng.randint(1, 12)))]
            starts = sorted(set(starts))
            counted += _check(index, unit + 10 * (round_ % 3), f"{unit}|{round_ % 3}" if unit == 1 else str(unit),
                              text, starts, _random_spans(rng, len(text), starts))
    assert counted > 150


def test_counts_equal_counting_the_row_on_every_carol_unit() -> None:
    from shared_context import load_index
    from shared_context.passages import block_table

    index = load_index(CAROL)
    table = block_table(index, 100)
    rng = random.Random(3)
    for unit in range(len(index.text_units)):
        text, unit_id = index.text_units[unit].text, index.text_units[unit].short_id
        starts = [int(c) for c in table.start[int(table.unit_ptr[unit]) : int(table.unit_ptr[unit + 1])]]
        for _ in range(3):
            _check(index, unit, unit_id, text, starts, _random_spans(rng, len(text), starts))  # type: ignore[arg-type]


def test_contexts_are_those_of_encoding_every_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same text, counts and records as a builder that encodes each excerpt row whole."""
    import shared_context.local_context as lc
    import shared_context.local_rows as local_rows
    from shared_context import load_index

    index = load_index(CAROL)
    ranked = sorted(range(len(index.entities)), key=lambda i: -len(index.entity_relationships[i]))
    questions = [f"Who is {index.entities[i].title.title()}?" for i in ranked[:25]]
    questions += ["What happens on Christmas Eve in the counting-house?", "Why does the ghost wear a chain?"]
    builder = lc.LocalContextBuilder(index)
    ours = [builder.build(q) for q in questions]
    assert any(r.truncated for ctx in ours for r in ctx.tables.sources.rows)  # type: ignore[union-attr]
    monkeypatch.setattr(local_rows, "excerpt_row_tokens", lambda *args: None)  # every row counted whole
    for q, ctx in zip(questions, ours, strict=True):
        theirs = lc.LocalContextBuilder(index).build(q)
        assert (ctx.text, ctx.tokens) == (theirs.text, theirs.tokens)
        assert ctx.tokens == index.tokenizer.count(ctx.text)
        assert ctx.records == theirs.records
