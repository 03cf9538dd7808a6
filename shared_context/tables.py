"""Token-budgeted context sections: `SectionBuilder` adds typed records as rendered rows under a budget,
`Section` is the result (the records shown, the candidates not shown, the exact token count).

A section's `Column`s say how a record becomes a row: each column has the label the header shows and the
record field its cell reads. Rendering a section from its records (`Section.text`) gives the text the
builder counted; the builder hands its rendered lines on so that rendering a built section renders nothing
again (`tests/test_context_render.py` checks both give the same text).

Budgets are counted on the *rendered* rows, i.e. after CSV quoting (GraphRAG counts the unquoted row and
then writes quoted text, so its sections overshoot — bug 18). `SectionBuilder.finish` re-counts the final
text with the tokenizer and drops rows from the end until it fits, so a section never exceeds its budget.
The table format itself is `table_format.py`; exact counts of joined rows and sections `section_tokens.py`;
the per-index side caches `index_cache.py` (all three re-exported here for existing callers).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from shared_context.context_records import ContextRecord
from shared_context.index_cache import per_index_cache
from shared_context.section_tokens import head_tokens, joined_tokens, line_end_tokens
from shared_context.table_format import format_value, join_sections, render_row, render_table, section_title
from shared_context.tokens import Tokenizer

__all__ = [
    "Column",
    "Section",
    "SectionBuilder",
    "columns",
    "format_value",
    "join_sections",
    "joined_tokens",
    "per_index_cache",
    "render_row",
    "render_table",
    "section_title",
]

R = TypeVar("R", bound=ContextRecord)


@dataclass(frozen=True, slots=True)
class Column:
    """A table column: the `label` its header shows and the record `field` its cells read."""

    label: str
    field: str


def columns(*fields: str) -> tuple[Column, ...]:
    """Columns whose labels are their field names."""
    return tuple(Column(f, f) for f in fields)


@dataclass(eq=False)
class Section(Generic[R]):
    """One context table: the records shown (`rows`, in table order), those considered but not shown
    (`candidates`, with GraphRAG's `return_candidate_context`), and the exact token count of its text (0 when
    it was only counted as part of a larger text, as a global map batch's Reports are)."""

    name: str
    columns: tuple[Column, ...]
    rows: list[R] = field(default_factory=list)
    candidates: list[R] = field(default_factory=list)
    tokens: int = 0
    budget: int = 0
    # the builder's rendered rows (one per row): rendering a built section joins them instead of again
    lines: list[str] | None = field(default=None, repr=False)
    builder: SectionBuilder[R] | None = field(default=None, repr=False)

    @property
    def header(self) -> list[str]:
        return [c.label for c in self.columns]

    def cells(self, record: R) -> list[object]:
        return [getattr(record, c.field) for c in self.columns]

    @property
    def text(self) -> str:
        """The rendered table ("" when no row is shown): the title line, the header, one row per record."""
        if not self.rows:
            return ""
        lines = self.lines if self.lines is not None and len(self.lines) == len(self.rows) else [
            render_row(self.cells(r)) for r in self.rows
        ]
        return section_title(self.name) + "\n" + render_row(self.header) + "\n" + "\n".join(lines)

    def shrink(self, tokens: int) -> None:
        """Free at least `tokens` by dropping rows from the end (they become the first candidates)."""
        if self.builder is None or not self.rows:
            return
        self.builder.budget = max(self.tokens - tokens, 0)
        kept = self.builder.finish()
        dropped = self.rows[len(kept.rows) :]
        self.rows, self.lines, self.tokens = kept.rows, kept.lines, kept.tokens
        self.candidates[:0] = dropped


class SectionBuilder(Generic[R]):
    """Adds records as rows greedily under a token budget, counting each rendered (quoted) row.

    `add` returns False when a row does not fit; callers may keep trying smaller rows. The running
    count adds `tokens(row + "\\n")` per row, which is how BPE splits at line ends in practice; `finish`
    then counts the real text and trims from the end in the rare case the estimate was short.
    """

    def __init__(self, name: str, cols: Sequence[Column], tokenizer: Tokenizer, budget: int) -> None:
        self.name = name
        self.columns = tuple(cols)
        self.tokenizer = tokenizer
        self.budget = max(int(budget), 0)
        self._head = section_title(name) + "\n" + render_row([c.label for c in self.columns])
        self.head_tokens = head_tokens(tokenizer, self._head + "\n")
        self.lines: list[str] = []
        self._line_tokens: list[int] = []  # count(line + "\n") of each row, as added
        self.rows: list[R] = []
        self.used = self.head_tokens

    @property
    def remaining(self) -> int:
        return self.budget - self.used

    def row_tokens(self, line: str) -> int:
        return self.tokenizer.count(line + "\n")

    def render(self, record: R) -> str:
        """The record's row, as the section renders it."""
        return render_row([getattr(record, c.field) for c in self.columns])

    def add_line(self, line: str, tokens: int, record: R) -> bool:
        """Add a record whose row is already rendered (`line` must be `render(record)`) and whose exact
        token count with its line end, `count(line + "\\n")`, is known (`finish` relies on it)."""
        if self.used + tokens > self.budget:
            return False
        self.lines.append(line)
        self._line_tokens.append(tokens)
        self.rows.append(record)
        self.used += tokens
        return True

    def add(self, record: R) -> bool:
        line = self.render(record)
        return self.add_line(line, self.row_tokens(line), record)

    def add_truncated(self, record: R, field_name: str, *, suffix: str = " …") -> bool:
        """Add the record with its `field_name` text cut so the row fits the remaining budget, marked
        `truncated` (the record type must have that field).

        Used for a single record larger than the whole section (e.g. a report's full text): better a
        truncated record than an empty section. Returns False when not even the other cells fit.
        """
        original = format_value(getattr(record, field_name))
        base = self.row_tokens(self.render(_replaced(record, {field_name: ""})))
        room = self.remaining - base - self.tokenizer.count(suffix) - 2  # 2: quotes the cut text may need
        if room <= 0:
            return False
        cut = self.tokenizer.truncate(original, room)
        while cut:
            shown = _replaced(record, {field_name: cut + suffix, "truncated": True})
            if self.add(shown):
                return True
            # quoting/merging made it a little longer than estimated: shave and retry
            cut = self.tokenizer.truncate(cut, max(self.tokenizer.count(cut) - 8, 0))
        return False

    def __len__(self) -> int:
        return len(self.lines)

    def text(self) -> str:
        if not self.lines:
            return ""
        return self._head + "\n" + "\n".join(self.lines)

    def finish(self) -> Section[R]:
        """Render, take the exact count and trim rows from the end until the section fits."""
        tokens = self.text_tokens()
        while self.lines and tokens > self.budget:
            self.lines.pop()
            self.rows.pop()
            self._line_tokens.pop()
            tokens = self.text_tokens()
        self.used = tokens
        return Section(self.name, self.columns, list(self.rows), [], tokens, self.budget, list(self.lines),
                       builder=self)

    def text_tokens(self) -> int:
        """Exact token count of `text()`, from the rows' own counts where that is provably the same.

        tiktoken splits text into pieces by a regex and encodes each piece alone. A piece can only run
        from one line into the next across the newline when the next line starts with whitespace or "/"
        (`\\s*[\\r\\n]+`, `\\s+` and punctuation's trailing `[\\r\\n/]*`); otherwise the count of the joined
        text is the sum of `count(line + "\\n")` over its lines, less what the last line's missing line end
        is worth. Anything else is counted in full. The tests compare both on awkward rows.
        """
        if not self.lines:
            return 0
        if any(not line[:1] or line[0].isspace() or line[0] == "/" for line in self.lines):
            return self.tokenizer.count(self.text())
        return self.head_tokens + sum(self._line_tokens) - line_end_tokens(self.tokenizer, self.lines[-1])


def _replaced(record: R, changes: dict[str, object]) -> R:
    """`record` with some fields changed, named at run time (a record whose text is cut)."""
    return dataclasses.replace(record, **changes)  # type: ignore[arg-type]
