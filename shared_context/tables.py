"""Token-budgeted context sections: `SectionBuilder` adds rendered rows under a budget, `ContextSection`
is the result.

Budgets are counted on the *rendered* rows, i.e. after CSV quoting (GraphRAG counts the unquoted row and
then writes quoted text, so its sections overshoot — bug 18). `SectionBuilder.finish` re-counts the final
text with the tokenizer and drops rows from the end until it fits, so a section never exceeds its budget.
The table format itself is `table_format.py`; exact counts of joined rows and sections `section_tokens.py`;
the per-index side caches `index_cache.py` (all three re-exported here for existing callers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from shared_context.index_cache import per_index_cache
from shared_context.section_tokens import head_tokens, joined_tokens, line_end_tokens
from shared_context.table_format import format_value, join_sections, render_row, render_table, section_title
from shared_context.tokens import Tokenizer

__all__ = [
    "ContextSection",
    "SectionBuilder",
    "format_value",
    "join_sections",
    "joined_tokens",
    "per_index_cache",
    "render_row",
    "render_table",
    "section_title",
]


@dataclass
class ContextSection:
    """One rendered table plus the records behind it (in-context rows first, then candidates)."""

    name: str
    text: str
    tokens: int
    budget: int
    records: list[dict[str, Any]] = field(default_factory=list)
    builder: SectionBuilder | None = field(default=None, repr=False, compare=False)

    @property
    def in_context(self) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("in_context")]

    def shrink(self, tokens: int) -> None:
        """Free at least `tokens` by dropping rows from the end (their records become in_context=False)."""
        if self.builder is None or not self.text:
            return
        self.builder.budget = max(self.tokens - tokens, 0)
        kept = self.builder.finish()
        dropped = self.in_context[len(kept.records) :]
        for record in dropped:
            record["in_context"] = False
        self.text, self.tokens = kept.text, kept.tokens


class SectionBuilder:
    """Adds rows greedily under a token budget, counting each rendered (quoted) row.

    `add` returns False when a row does not fit; callers may keep trying smaller rows. The running
    count adds `tokens(row + "\\n")` per row, which is how BPE splits at line ends in practice; `finish`
    then counts the real text and trims from the end in the rare case the estimate was short.
    """

    def __init__(self, name: str, header: Sequence[str], tokenizer: Tokenizer, budget: int) -> None:
        self.name = name
        self.header = list(header)
        self.tokenizer = tokenizer
        self.budget = max(int(budget), 0)
        self._head = section_title(name) + "\n" + render_row(self.header)
        self.head_tokens = head_tokens(tokenizer, self._head + "\n")
        self.lines: list[str] = []
        self._line_tokens: list[int] = []  # count(line + "\n") of each row, as added
        self.records: list[dict[str, Any]] = []
        self.used = self.head_tokens

    @property
    def remaining(self) -> int:
        return self.budget - self.used

    def row_tokens(self, line: str) -> int:
        return self.tokenizer.count(line + "\n")

    def add_line(self, line: str, tokens: int, record: dict[str, Any] | None = None) -> bool:
        """Add an already rendered row whose exact token count with its line end, `count(line + "\\n")`,
        is known (`finish` relies on it)."""
        if self.used + tokens > self.budget:
            return False
        self.lines.append(line)
        self._line_tokens.append(tokens)
        self.records.append(dict(record or {}, in_context=True))
        self.used += tokens
        return True

    def add(self, cells: Sequence[Any], record: dict[str, Any] | None = None) -> bool:
        line = render_row(cells)
        return self.add_line(line, self.row_tokens(line), record)

    def add_truncated(
        self,
        cells: Sequence[Any],
        field_index: int,
        record: dict[str, Any] | None = None,
        *,
        suffix: str = " …",
    ) -> bool:
        """Add a row whose `field_index` cell is cut so the row fits the remaining budget.

        Used for a single record larger than the whole section (e.g. a report's full text): better a
        truncated record than an empty section. Returns False when not even the other cells fit.
        """
        cells = list(cells)
        original = format_value(cells[field_index])
        cells[field_index] = ""
        base = self.row_tokens(render_row(cells))
        room = self.remaining - base - self.tokenizer.count(suffix) - 2  # 2: quotes the cut text may need
        if room <= 0:
            return False
        cut = self.tokenizer.truncate(original, room)
        while cut:
            cells[field_index] = cut + suffix
            if self.add(cells, dict(record or {}, truncated=True)):
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

    def finish(self) -> ContextSection:
        """Render, take the exact count and trim rows from the end until the section fits."""
        tokens = self.text_tokens()
        while self.lines and tokens > self.budget:
            self.lines.pop()
            self.records.pop()
            self._line_tokens.pop()
            tokens = self.text_tokens()
        self.used = tokens
        return ContextSection(self.name, self.text(), tokens, self.budget, list(self.records), builder=self)

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
