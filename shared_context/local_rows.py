"""The local context's rendered rows (the table format of `tables.py`) and the per-index caches
behind them: a row depends only on its record and the column options, never on the question, so its
line and exact token count are kept per index (bounded by `ROW_CACHE_LIMIT`).

Fields are read from the large tables' columns (`field_of`), so showing a row makes no record for it.

Before a row is counted its size is estimated (`row_estimates`, from the token counts precomputed at load: no
tokenising): the estimates choose the relationship/claim prefix, and `may_fit` skips rows that cannot fit.
Deterministic, so results never depend on what is cached.

Token counts of the excerpt rows of Sources (`excerpt_row_tokens`): exact, without encoding each row whole.

An excerpt row (`local_sources.excerpt_sources`) is `id|… part … part …`, CSV-quoted when a part holds
`"`, `|` or a line end; each part is a span of whole blocks of one unit's text (`passages.block_table`), stripped.
tiktoken cuts text into pieces with a regex and encodes each piece alone, and two kinds of place always
start a piece, whatever comes before or after them:

- a space followed by a character that is not whitespace (the space can only be the optional first
  character of a word or punctuation piece, or a lone-space piece);
- the character after a line end when it is neither whitespace nor "/" (a line-end piece stops at the last
  line end of its run, and only a punctuation piece's trailing `[\\r\\n/]*` runs on past one).

Cut at such places, the text before a cut is split the same way whatever follows, and the text after it
whatever precedes, so the row's count is the sum of its chunks' counts. The chunks are the "…" separators,
the parts' first and last stretches (with the row's id cell, quotes and line end where they touch them) and
the stretches between block boundaries. A block boundary at a sentence end is such a place (or one
character before it), so the stretches recur from question to question: each is counted once per index
and kept (at most `limit` entries). `tests/test_local_context_excerpts.py` compares with counting the row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from shared_context.records import field_of, text_lengths_at, text_lengths_of
from shared_context.tables import (
    ClaimRecord,
    Column,
    EntityRecord,
    RelationshipRecord,
    columns,
    per_index_cache,
    render_row,
)

if TYPE_CHECKING:
    from shared_context.index import Index
    from shared_context.local_budget import LocalContextParams

__all__ = [
    "CLAIM_COLUMNS",
    "ROW_CACHE_LIMIT",
    "Fields",
    "RelationshipEstimates",
    "RowEstimates",
    "cached_row",
    "claim_line",
    "claim_record",
    "entity_cells",
    "entity_columns",
    "entity_record",
    "entity_values",
    "excerpt_line",
    "excerpt_row_tokens",
    "fields",
    "join_spans",
    "may_fit",
    "rel_columns",
    "rel_line",
    "rel_record",
    "remember",
    "report_line",
    "row_estimates",
    "unit_row_overhead",
    "warm_unit_chunks",
]

# GraphRAG's claim table: `id|entity|object_id|status|start_date|end_date|description`
CLAIM_COLUMNS = (Column("id", "id"), Column("entity", "subject"), Column("object_id", "object"),
                 *columns("status", "start_date", "end_date", "description"))

# Entries per per-index row cache (rendered rows, row fields, per-entity relationship arrays): past it a
# row is still rendered, just not kept. Without a bound a long-running service on a large index would keep
# every row any question ever touched; Python strings cost far more than the mapped Arrow columns they
# come from. Read as `local_rows.ROW_CACHE_LIMIT` at each use (tests lower it).
ROW_CACHE_LIMIT = 500_000
K = TypeVar("K")
V = TypeVar("V")


def remember(cache: dict[K, V], key: K, value: V) -> V:
    """`cache[key] = value` while the cache is under `ROW_CACHE_LIMIT`; `value` either way."""
    if len(cache) < ROW_CACHE_LIMIT:
        cache[key] = value
    return value


def cached_row(index: Any, kind: str, pos: int, variant: tuple[Any, ...], cells: Any) -> tuple[str, int]:
    """Rendered row and its token count (with line end), cached per index: rows only depend on the
    record and the column options, never on the query."""
    cache: dict[tuple[Any, ...], tuple[str, int]] = per_index_cache(index, "local.rows", dict)
    key = (kind, pos, *variant)
    hit = cache.get(key)
    if hit is None:
        line = render_row(cells() if callable(cells) else cells)
        hit = remember(cache, key, (line, index.tokenizer.count(line + "\n")))
    return hit


FieldReader = Callable[[int], Any]  # row position -> one field's value (`field_of`)


@dataclass(frozen=True)
class Fields:
    """Readers of the fields a context shows from the large tables' rows (`field_of`), so no record is
    made for a row: a text unit's record builds its id lists too, at many times the cost of its fields."""

    unit_id: FieldReader
    unit_text: FieldReader
    entity_id: FieldReader
    entity_title: FieldReader
    entity_description: FieldReader
    entity_degree: FieldReader
    entity_type: FieldReader
    rel_id: FieldReader
    rel_source: FieldReader
    rel_target: FieldReader
    rel_description: FieldReader
    rel_weight: FieldReader


def fields(index: Any) -> Fields:
    def build() -> Fields:
        units, entities, rels = index.text_units, index.entities, index.relationships
        return Fields(
            field_of(units, "short_id"), field_of(units, "text"),
            *(field_of(entities, name) for name in ("short_id", "title", "description", "degree", "type")),
            *(field_of(rels, name) for name in ("short_id", "source", "target", "description", "weight")),
        )

    return per_index_cache(index, "local.fields", build)


def unit_row_overhead(index: Any, unit: int) -> int:
    """Tokens a Sources row costs beyond its text (id cell, separator, line end, 2 for quoting), cached
    per index: a question asks it for each of its candidate units."""
    cache: dict[int, int] = per_index_cache(index, "local.unit_row_overhead", dict)
    n = cache.get(unit)
    if n is None:
        n = remember(cache, unit, index.tokenizer.count(f"{fields(index).unit_id(unit)}|\n") + 2)
    return n


def join_spans(text: str, spans: Sequence[tuple[int, int]]) -> str:
    """The spans of `text` joined by "…", with "…" where the text goes on before or after."""
    parts = [text[a:b].strip() for a, b in spans]
    head = "… " if spans[0][0] > 0 else ""
    tail = " …" if spans[-1][1] < len(text) else ""
    return head + " … ".join(parts) + tail


def excerpt_line(index: Any, unit: int, unit_id: str, text: str, spans: Sequence[tuple[int, int]], shown: str,
                 block_starts: Sequence[int]) -> tuple[str, int]:
    """An excerpt row (`shown` = `join_spans(text, spans)`) and its exact count with its line end, from
    per-index counts of the stretches between its unit's block boundaries (`passages`)."""
    id_cell = render_row([unit_id])
    line = render_row([unit_id, shown])
    n = excerpt_row_tokens(index, unit, id_cell, text, spans, block_starts,
                           line[len(id_cell) + 1 :] != shown, ROW_CACHE_LIMIT)
    return line, index.tokenizer.count(line + "\n") if n is None else n


# ---------------------------------------------------------------------------- entities, relationships, claims


def entity_values(index: Any, pos: int) -> tuple[Any, ...]:
    """(short_id, title, description, degree, type) of an entity, kept per index as its rendered row is: a
    later question about it then reads no column (its row cells and record both come from these)."""
    cache: dict[int, tuple[Any, ...]] = per_index_cache(index, "local.entity_values", dict)
    values = cache.get(pos)
    if values is None:
        f = fields(index)
        values = remember(cache, pos, (f.entity_id(pos), f.entity_title(pos), f.entity_description(pos),
                                       f.entity_degree(pos), f.entity_type(pos)))
    return values


def entity_columns(p: LocalContextParams) -> tuple[Column, ...]:
    """`id|entity|description` and the rank column under its GraphRAG name (`rank_description`)."""
    rank = (Column(p.rank_description, "rank"),) if p.include_entity_rank else ()
    return (Column("id", "id"), Column("entity", "title"), Column("description", "description"), *rank)


def rel_columns(p: LocalContextParams) -> tuple[Column, ...]:
    return columns("id", "source", "target", "description", *(["weight"] if p.include_relationship_weight else []))


def entity_cells(index: Any, pos: int, p: LocalContextParams, values: tuple[Any, ...] | None = None) -> list[Any]:
    short_id, title, description, degree, _type = values if values is not None else entity_values(index, pos)
    return [short_id, title, description] + ([degree] if p.include_entity_rank else [])


def entity_record(index: Any, pos: int, values: tuple[Any, ...] | None = None) -> EntityRecord:
    short_id, title, description, degree, kind = values if values is not None else entity_values(index, pos)
    return EntityRecord(short_id, title, description, degree, kind or "", position=pos)


def rel_line(index: Any, pos: int, p: LocalContextParams, record: RelationshipRecord | None = None) -> tuple[str, int]:
    """The relationship's row and count (cached), its cells from `record` when the caller holds it."""

    def cells() -> list[Any]:
        rec = record if record is not None else rel_record(index, pos)
        weight = [rec.weight] if p.include_relationship_weight else []
        return [rec.id, rec.source, rec.target, rec.description, *weight]

    return cached_row(index, "rel", pos, (p.include_relationship_weight,), cells)


def rel_record(index: Any, pos: int) -> RelationshipRecord:
    # the fields are kept per index (as `entity_values`): a later question reads no column
    cache: dict[int, tuple[Any, ...]] = per_index_cache(index, "local.rel_values", dict)
    values = cache.get(pos)
    if values is None:
        f = fields(index)
        values = remember(cache, pos, (f.rel_id(pos), f.rel_source(pos), f.rel_target(pos),
                                       f.rel_description(pos), f.rel_weight(pos)))
    short_id, source, target, description, weight = values
    return RelationshipRecord(short_id, source, target, description, weight, position=pos)


def claim_line(index: Any, pos: int) -> tuple[str, int]:
    c = index.claims[pos]
    return cached_row(
        index,
        "claim",
        pos,
        (),
        [c.short_id, c.subject, c.object, c.status, c.start_date, c.end_date, c.description],
    )


def claim_record(index: Any, pos: int) -> ClaimRecord:
    c = index.claims[pos]
    return ClaimRecord(c.short_id, c.subject, c.object, c.status, c.start_date, c.end_date, c.description,
                       type=c.type, position=pos)


def report_line(index: Any, pos: int, use_summary: bool, p: LocalContextParams) -> tuple[str, int]:
    r = index.community_reports[pos]
    content = r.summary if use_summary else r.full_content
    rank_cells = [r.rank] if p.include_community_rank else []
    return cached_row(index, "report", pos, (use_summary, p.include_community_rank),
                      lambda: [r.short_id, r.title, content, *rank_cells])


# Token estimates of rows, made before a row is counted.

# Up to this many relationships their row estimates are one array made at the first question (tens of ms at
# 500k): a plain array indexes with no per-call work, where the rows-asked-for path costs ~1.5 ms a question.
WHOLE_TABLE_ESTIMATE_ROWS = 1_000_000


@dataclass
class RowEstimates:
    """Upper-ish token estimates of rendered rows from the counts precomputed at load (no tokenising):
    used to choose the relationship/claim prefix and to skip rows that cannot fit before counting them
    exactly. Deterministic, so results never depend on what is cached."""

    rel: np.ndarray | RelationshipEstimates
    claim: np.ndarray
    unit: np.ndarray
    report: np.ndarray
    summary: np.ndarray


class RelationshipEstimates:
    """`estimates.rel[rows]`, computed for the rows asked for (gathered in Arrow) and kept: a whole-table
    array read three text columns of every relationship (5M at 1M entities, most of a first question)
    for the few thousand rows a question weighs."""

    def __init__(self, index: Index) -> None:
        self._index = index
        self._known = np.zeros(len(index.relationships), dtype=np.int64)  # 0: not yet computed (all >= 8)

    @staticmethod
    def of(index: Index, rows: np.ndarray | None = None) -> np.ndarray:
        """The estimates of `rows` (every row when None): token count + 8 + a third of the source, target
        and id lengths."""
        rels, names = index.relationships, ("source", "target", "short_id")
        if rows is None:
            chars = sum(text_lengths_of(rels, name) for name in names)
            return np.asarray(index.relationship_tokens, dtype=np.int64) + 8 + chars // 3
        chars = sum(text_lengths_at(rels, name, rows) for name in names)
        return np.asarray(index.relationship_tokens[rows], dtype=np.int64) + 8 + chars // 3

    def __getitem__(self, rows: int | Sequence[int]) -> Any:
        if isinstance(rows, int | np.integer) and self._known[rows]:  # one row seen before: the common call
            return self._known[rows]
        at = np.asarray(rows, dtype=np.int64)
        missing = np.unique(at[self._known[at] == 0]) if at.size else at
        if missing.size:
            self._known[missing] = self.of(self._index, missing)
        return self._known[at]


def row_estimates(index: Index) -> RowEstimates:
    def build() -> RowEstimates:
        claims, reports = index.claims, index.community_reports
        return RowEstimates(
            rel=RelationshipEstimates.of(index)
            if len(index.relationships) <= WHOLE_TABLE_ESTIMATE_ROWS
            else RelationshipEstimates(index),
            # lengths read column-wise (`text_lengths_of`: code points, as len()), so no record is made
            claim=np.asarray(index.claim_tokens, dtype=np.int64)
            + 12
            + sum(text_lengths_of(claims, f) for f in ("subject", "object", "status", "start_date", "end_date")) // 3,
            unit=np.asarray(index.text_unit_tokens, dtype=np.int64) + 4,
            report=np.asarray(index.report_tokens, dtype=np.int64) + 6 + text_lengths_of(reports, "title") // 3,
            summary=np.asarray(index.report_summary_tokens, dtype=np.int64) + 6 + text_lengths_of(reports, "title") // 3,
        )

    return per_index_cache(index, "local.estimates", build)


class Budgeted(Protocol):
    """What `may_fit` reads of a `tables.SectionBuilder`."""

    used: int
    budget: int


def may_fit(builder: Budgeted, estimate: int) -> bool:
    """False when a row estimated at `estimate` tokens surely cannot fit (estimates may be ~20 % high)."""
    return builder.used + int(estimate * 0.8) - 2 <= builder.budget


# ---------------------------------------------------------------------------- excerpt rows' token counts

_NONE, _SPACE, _ID = 0, 1, 2  # what a chunk starts with before its text: nothing, " ", the row's id cell


def _piece_start(text: str, cut: int) -> int | None:
    """A position at or just before `cut` (0 < cut < len(text)) where a piece always starts, or None."""
    after = text[cut]
    if after.isspace():  # str.isspace covers every character the tokenizer's \s does (and a few more)
        return None
    before = text[cut - 1]
    if before == " ":
        return cut - 1
    if before in "\r\n" and after != "/":
        return cut
    return None


def excerpt_row_tokens(
    index: Index,
    unit: int,
    id_cell: str,
    text: str,
    spans: Sequence[tuple[int, int]],
    block_starts: Sequence[int],
    quoted: bool,
    limit: int,
) -> int | None:
    """`count(line + "\\n")` of the row `render_row([id, _join_spans(text, spans)])` whose rendered id cell
    is `id_cell` and whose text cell is `quoted`; `block_starts`: the unit's block start offsets. None when a
    part is empty after stripping (the caller then counts the row itself)."""
    tok = index.tokenizer
    cache: dict[tuple[int, ...], int] = per_index_cache(index, "local.excerpt_chunks", dict)
    q = int(quoted)
    prefix = id_cell + "|" + ('"' if quoted else "")
    suffix = ('"' if quoted else "") + "\n"

    def counted(key: tuple[int, ...], make: Callable[[], str]) -> int:
        n = cache.get(key)
        if n is None:
            n = tok.count(make())
            if len(cache) < limit:
                cache[key] = n
        return n

    def chunk(x: int, y: int, lead: int, trail: bool) -> str:
        body = text[x:y].replace('"', '""') if quoted else text[x:y]
        return ("" if lead == _NONE else " " if lead == _SPACE else prefix) + body + (suffix if trail else "")

    head = spans[0][0] > 0
    tail = spans[-1][1] < len(text)
    total = counted((unit, -1, -1, _ID, 0, q), lambda: prefix + "…") if head else 0
    last_part = len(spans) - 1
    for i, (a, b) in enumerate(spans):
        seg = text[a:b]
        start, end = a + len(seg) - len(seg.lstrip()), a + len(seg.rstrip())
        if start >= end:
            return None
        cuts = [start]
        for c in block_starts:
            if start < c < end:
                g = _piece_start(text, c)
                if g is not None and g > cuts[-1]:
                    cuts.append(g)
        cuts.append(end)
        for j in range(len(cuts) - 1):
            x, y = cuts[j], cuts[j + 1]
            lead = (_SPACE if i or head else _ID) if j == 0 else _NONE
            trail = i == last_part and j == len(cuts) - 2 and not tail
            total += counted((unit, x, y, lead, int(trail), q), partial(chunk, x, y, lead, trail))
        if i < last_part:
            total += counted((-1, 0, 0, 0, 0, q), lambda: " …")
    if tail:
        total += counted((-1, 1, 0, 0, 0, q), lambda: " …" + suffix)
    return total


def warm_unit_chunks(index: Index, unit: int, id_cell: str, text: str, starts: Sequence[int], ends: Sequence[int],
                     quoted: bool, limit: int) -> None:
    """Count ahead (into the per-index cache) the chunks of every excerpt row of one unit whose text cell is
    `quoted`: each run of consecutive blocks counted as a one-part row. A part's chunks depend only on its
    span, never on the rest of its row: its lead is the id cell exactly when it starts the text (else " "),
    its trail the line end exactly when it ends the text, and its inner cuts are the block boundaries
    inside it. So a question's excerpt rows then find every chunk counted (with the unit's usual quoting)."""
    for k in range(len(starts)):
        for m in range(k, len(starts)):
            excerpt_row_tokens(index, unit, id_cell, text, [(starts[k], ends[m])], starts, quoted, limit)
