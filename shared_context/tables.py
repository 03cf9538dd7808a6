"""The context tables of a prompt: typed records, the table format, token-budgeted sections and `ContextTables`.

Records (`HistoryRecord`, `ReportRecord`, `EntityRecord`, `RelationshipRecord`, `ClaimRecord`, `SourceRecord`):
one class per table, each with the citation id its row starts with. A record holds what the model is shown (a
cut report or an excerpt of a unit is the shown text, with `truncated` and the `excerpts` offsets saying so) and
where it comes from (`position`: its row in the index's table, -1 when it was not read from an index); the
records know nothing of the text format.

The table format (ARCHITECTURE.md, "Context table format"): a section is `-----{Name}-----` followed by a
`|`-delimited CSV table (QUOTE_MINIMAL, `\\n` line ends, header first). Sections carry no trailing newline so
that joining them with `"\\n\\n"` leaves exactly one blank line between them. A section with no rows is the
empty string (never a bare header or `[]`).

Sections: `SectionBuilder` adds typed records as rendered rows under a budget, `Section` is the result (the
records shown, the candidates not shown, the exact token count). A section's `Column`s say how a record becomes
a row: each column has the label the header shows and the record field its cell reads. Rendering a section from
its records (`Section.text`) gives the text the builder counted; the builder hands its rendered lines on so that
rendering a built section renders nothing again (`tests/test_context_render.py` checks both give the same
text). Budgets are counted on the *rendered* rows, i.e. after CSV quoting (GraphRAG counts the unquoted row and
then writes quoted text, so its sections overshoot — bug 18). `SectionBuilder.finish` re-counts the final text
with the tokenizer and drops rows from the end until it fits, so a section never exceeds its budget. Exact
counts of joined rows and sections are `tokens.joined_tokens` and its helpers (re-exported here for existing
callers).

Per-index side caches (`per_index_cache`): what the builders derive from a read-only `Index` for queries (rendered
rows and their counts, BM25 matrices) lives beside it in a weak table, never on it.

`ContextTables`: the typed data of one prompt, one optional section per table, in the order the prompt shows
them, and its rendering (the sections joined by one blank line, empty ones left out). Every builder's context
carries one: a local context's six tables, a global map batch's history and reports, a DRIFT primer fold's
reports, basic search's sources. The model gets it beside the rendered messages, so an offline model reads the
records instead of parsing the prompt.

Citations: a model cites the rows it was shown as `[Data: Sources (1, 2); Reports (5, +more)]`, each table's name
and the ids its rows start with; `CITATION_RE` finds one such reference (its inside is group 1) and
`CITATION_PART_RE` each `Name (ids)` inside it (the name, the comma-separated ids). Every reader of references
uses these two.
"""

from __future__ import annotations

import dataclasses
import math
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, TypeVar, cast

import numpy as np

from shared_context.tokens import Tokenizer, head_tokens, joined_tokens, line_end_tokens

__all__ = [
    "CITATION_PART_RE",
    "CITATION_RE",
    "AnySection",
    "ClaimRecord",
    "Column",
    "ContextRecord",
    "ContextTables",
    "EntityRecord",
    "HistoryRecord",
    "RelationshipRecord",
    "ReportRecord",
    "Section",
    "SectionBuilder",
    "SourceRecord",
    "columns",
    "format_value",
    "join_sections",
    "joined_tokens",
    "per_index_cache",
    "record_dict",
    "render_row",
    "render_table",
    "section_title",
]


# Records

@dataclass(frozen=True, slots=True)
class HistoryRecord:
    """One message of the conversation so far (`id` "turn-N" names its question-answer turn)."""

    id: str
    role: str  # "user" | "assistant"
    content: str
    turn: int  # 1-based question-answer turn


@dataclass(frozen=True, slots=True)
class ReportRecord:
    """A community report; `id` is its community number as text."""

    id: str
    title: str
    content: str  # the full text, or the summary, or the cut text shown (`truncated`)
    rank: float | None = None
    level: int | None = None
    matches: int = 0  # local context: how many linked entities the community holds
    weight: float | None = None  # global search: GraphRAG's occurrence weight, normalised per call
    truncated: bool = False
    position: int = -1


@dataclass(frozen=True, slots=True)
class EntityRecord:
    id: str
    title: str
    description: str
    rank: int | float | None = None  # GraphRAG's entity rank: the number of relationships (degree)
    type: str = ""  # not a column of the table; what the index says the entity is
    position: int = -1


@dataclass(frozen=True, slots=True)
class RelationshipRecord:
    id: str
    source: str  # entity titles, as GraphRAG names the ends
    target: str
    description: str
    weight: float | None = None
    position: int = -1


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    id: str
    subject: str
    object: str
    status: str
    start_date: str
    end_date: str
    description: str
    type: str = ""  # not a column of the table: the claim's category
    position: int = -1


@dataclass(frozen=True, slots=True)
class SourceRecord:
    """A text unit shown as Sources: whole, or the `excerpts` (character offsets in the unit's text) joined
    by "…" when `truncated`."""

    id: str
    text: str  # what is shown
    entity: str = ""  # the linked entity it was picked for ("" when picked for the question's words)
    reasons: tuple[str, ...] = ()  # "entity", "lexical", "vector": why the hybrid Sources picked it
    score: float | None = None  # the fused rank score of the hybrid Sources
    similarity: float | None = None  # basic search: similarity to the question
    truncated: bool = False
    excerpts: tuple[tuple[int, int], ...] = ()
    position: int = -1


ContextRecord = HistoryRecord | ReportRecord | EntityRecord | RelationshipRecord | ClaimRecord | SourceRecord


def record_dict(record: ContextRecord, in_context: bool) -> dict[str, object]:
    """The record as JSON-ready fields (what `SearchResult.context_records` carries), with `in_context`."""
    out: dict[str, object] = asdict(record)
    if isinstance(record, SourceRecord):
        out["reasons"] = list(record.reasons)
        out["excerpts"] = [list(span) for span in record.excerpts]
    out["in_context"] = in_context
    return out


# The table format

CITATION_RE = re.compile(r"\[Data:\s*([^\[\]]*)\]", re.IGNORECASE)
CITATION_PART_RE = re.compile(r"([A-Za-z][A-Za-z ]*?)\s*\(([^()]*)\)")
_NEEDS_QUOTES = re.compile(r'[|"\n\r]')


def format_value(value: object) -> str:
    """Cell text: None -> "", floats without noise (1.0 -> "1.0", 0.123456 -> "0.1235")."""
    kind = value.__class__
    if kind is str:  # most cells: ids, titles, descriptions, texts
        return cast(str, value)
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


def render_row(cells: Sequence[object]) -> str:
    """One CSV line (without the line terminator)."""
    return "|".join(_quote(format_value(c)) for c in cells)


def section_title(name: str) -> str:
    return f"-----{name}-----"


def render_table(name: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A whole section; "" when there are no rows."""
    if not rows:
        return ""
    lines = [section_title(name), render_row(header), *(render_row(r) for r in rows)]
    return "\n".join(lines)


def join_sections(texts: Sequence[str]) -> str:
    return "\n\n".join(t for t in texts if t)


# Token-budgeted sections

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


# The tables of one prompt

AnySection = (
    Section[HistoryRecord]
    | Section[ReportRecord]
    | Section[EntityRecord]
    | Section[RelationshipRecord]
    | Section[ClaimRecord]
    | Section[SourceRecord]
)


@dataclass
class ContextTables:
    """The context tables of one prompt (None: the prompt has no such table)."""

    history: Section[HistoryRecord] | None = None
    reports: Section[ReportRecord] | None = None
    entities: Section[EntityRecord] | None = None
    relationships: Section[RelationshipRecord] | None = None
    claims: Section[ClaimRecord] | None = None
    sources: Section[SourceRecord] | None = None

    def sections(self) -> list[AnySection]:
        """The sections present, in prompt order."""
        found: list[AnySection | None] = [
            self.history, self.reports, self.entities, self.relationships, self.claims, self.sources,
        ]
        return [s for s in found if s is not None]

    def section(self, name: str) -> AnySection | None:
        return next((s for s in self.sections() if s.name == name), None)

    def render(self) -> str:
        """The prompt's data text: every section with rows, joined by one blank line."""
        return join_sections([s.text for s in self.sections()])

    def shown_ids(self) -> list[tuple[str, str]]:
        """(section name, id) of every row shown, in prompt order."""
        return [(s.name, r.id) for s in self.sections() for r in s.rows]

    def to_dict(self) -> dict[str, list[dict[str, object]]]:
        """Each section's records as JSON-ready fields: rows shown first (`in_context` true), then candidates."""
        out: dict[str, list[dict[str, object]]] = {}
        for s in self.sections():
            records = [record_dict(r, True) for r in s.rows] + [record_dict(r, False) for r in s.candidates]
            if records:
                out[s.name] = records
        return out


# Per-index side caches: one weak table of named values per index (see the module docstring).
T = TypeVar("T")
_caches: weakref.WeakKeyDictionary[object, dict[str, Any]] = weakref.WeakKeyDictionary()
_cache_lock = threading.Lock()


def per_index_cache(index: object, name: str, build: Callable[[], T]) -> T:
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
