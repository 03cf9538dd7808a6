"""Context tables: rendering (the format in ARCHITECTURE.md), token budgets and per-index side caches.

A section is `-----{Name}-----` followed by a `|`-delimited CSV table (QUOTE_MINIMAL, `\\n` line ends,
header first). Sections carry no trailing newline so that joining them with `"\\n\\n"` leaves exactly one
blank line between them. A section with no rows is the empty string (never a bare header or `[]`).

Budgets are counted on the *rendered* rows, i.e. after CSV quoting (GraphRAG counts the unquoted row and
then writes quoted text, so its sections overshoot — bug 18). `SectionBuilder.finish` re-counts the final
text with the tokenizer and drops rows from the end until it fits, so a section never exceeds its budget.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from shared_context.tokens import Tokenizer

__all__ = [
    "ContextSection",
    "SectionBuilder",
    "format_value",
    "join_sections",
    "per_index_cache",
    "render_row",
    "render_table",
    "section_title",
]

_NEEDS_QUOTES = re.compile(r'[|"\n\r]')

T = TypeVar("T")


def format_value(value: Any) -> str:
    """Cell text: None -> "", floats without noise (1.0 -> "1.0", 0.123456 -> "0.1235")."""
    kind = value.__class__
    if kind is str:  # most cells: ids, titles, descriptions, texts
        return value  # type: ignore[no-any-return]
    if kind is int:  # not bool (a subclass, `str(True)` either way)
        return str(value)
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float | np.floating):
        if not math.isfinite(value):  # NaN or inf: no meaningful figure (and int(inf) would raise)
            return ""
        value = float(value)
        rounded = round(value, 4)
        return str(int(rounded)) + ".0" if rounded == int(rounded) else str(rounded)
    return str(value)


def _quote(cell: str) -> str:
    # csv.QUOTE_MINIMAL with delimiter "|" and quotechar '"' (checked in the tests); a lone "\r" is
    # quoted too, because Python's csv reader rejects it unquoted.
    if _NEEDS_QUOTES.search(cell):
        return '"' + cell.replace('"', '""') + '"'
    return cell


def render_row(cells: Sequence[Any]) -> str:
    """One CSV line (without the line terminator)."""
    return "|".join(_quote(format_value(c)) for c in cells)


def section_title(name: str) -> str:
    return f"-----{name}-----"


def render_table(name: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A whole section; "" when there are no rows."""
    if not rows:
        return ""
    lines = [section_title(name), render_row(header), *(render_row(r) for r in rows)]
    return "\n".join(lines)


def join_sections(texts: Sequence[str]) -> str:
    return "\n\n".join(t for t in texts if t)


def joined_tokens(tokenizer: Tokenizer, sections: Sequence[ContextSection]) -> int:
    """Exact token count of `join_sections` of already counted sections, without re-encoding them.

    tiktoken's pre-tokeniser never lets a piece run across a line break into the next line's text
    (newlines end a piece, or trail a punctuation piece), so the count of the joined text is the sum of
    the section counts plus, at each join, what encoding the two lines around the join together adds
    or saves. The tests compare this with counting the whole text.
    """
    parts = [s for s in sections if s.text]
    total = sum(s.tokens for s in parts)
    for left, right in itertools.pairwise(parts):
        # only the last line's final piece(s) can merge with what follows (see `_stable_tail`); a last line
        # with no such start that begins with whitespace or "/" may itself merge with the line before
        last = left.text.rsplit("\n", 1)[-1]
        tail = _stable_tail(last)
        if tail == last and (not last or last[0].isspace() or last[0] == "/"):
            tail = left.text
        head = right.text.split("\n", 1)[0]
        total += tokenizer.count(tail + "\n\n" + head) - tokenizer.count(tail) - tokenizer.count(head)
    return total


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
        self.head_tokens = _head_tokens(tokenizer, self._head + "\n")
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
        return self.head_tokens + sum(self._line_tokens) - _line_end_tokens(self.tokenizer, self.lines[-1])


def _stable_tail(line: str) -> str:
    """The end of `line` from its last space that is followed by a non-space character (all of it when
    there is none).

    Such a space always starts a piece (it can only be the optional first character of a word or
    punctuation piece, or a lone-space piece), so the text before it is split the same way whatever
    follows: count(line + x) - count(line) == count(tail + x) - count(tail) for any x.
    """
    cut = len(line) - 1
    while True:
        cut = line.rfind(" ", 0, cut)
        if cut < 0 or not line[cut + 1].isspace():
            break
    return line[max(cut, 0):]


def _line_end_tokens(tokenizer: Tokenizer, line: str) -> int:
    """count(line + "\\n") - count(line), encoding only the line's last piece(s) (`_stable_tail`)."""
    tail = _stable_tail(line)
    return tokenizer.count(tail + "\n") - tokenizer.count(tail)


_head_cache: dict[tuple[str, str], int] = {}


def _head_tokens(tokenizer: Tokenizer, head: str) -> int:
    """Token count of a section title + header (a handful of distinct strings per process)."""
    key = (tokenizer.encoding_name, head)
    n = _head_cache.get(key)
    if n is None:
        n = tokenizer.count(head)
        if len(_head_cache) < 4096:
            _head_cache[key] = n
    return n


# ---------------------------------------------------------------------------- per-index side caches

_caches: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


def per_index_cache(index: Any, name: str, build: Callable[[], T]) -> T:
    """Return `build()` computed once per index (kept beside it, never stored on it).

    The Index is read-only, so derived query structures (BM25 matrices, row token counts) live in a
    weak side table and disappear with the index.
    """
    with _cache_lock:
        slot = _caches.get(index)
        if slot is None:
            slot = {}
            _caches[index] = slot
        if name in slot:
            return slot[name]  # type: ignore[no-any-return]
    value = build()
    with _cache_lock:
        return slot.setdefault(name, value)  # type: ignore[no-any-return]
