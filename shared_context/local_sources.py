"""The local context's Sources section: which text units are shown, whole or as question-relevant excerpts.

Candidates are tried in the strategy's order (`text_unit_strategy`, see `text_unit_selection.py`) and added
whole wherever they fit (a unit too big for the room left is skipped, a smaller later one may still fit).
With `hybrid`, the candidates also include the units most similar to the question (its `question_units`) and
each record says why it is there (`reasons`). By default `hybrid` then shows excerpts (`excerpt_tokens`,
`passages.py`): the question-relevant windows of the best candidates, so the budget holds many units'
evidence instead of a few whole 1,200-token units; a unit shown in part is marked `truncated` with its
`excerpts` offsets, a unit whose every block was chosen is shown whole. With `excerpt_tokens = 0` whole units
go in, and the room left after them goes to the best unit that did not fit, cut to the window of it that
shares the most question terms (`text_unit_selection.best_window`), marked the same way (only when at least
`_MIN_TRIMMED_UNIT_TOKENS` are left).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from shared_context.linking import LinkResult
from shared_context.local_budget import LocalContextParams
from shared_context.local_rows import (
    cached_row,
    excerpt_line,
    fields,
    join_spans,
    may_fit,
    row_estimates,
    unit_row_overhead,
)
from shared_context.passages import Excerpt, excerpt_blocks, select_excerpts
from shared_context.tables import Section, SectionBuilder, SourceRecord, columns
from shared_context.text_unit_selection import (
    DEFAULT_WINDOW_TOKENS,
    NO_ENTITY,
    QuestionUnits,
    UnitCandidate,
    best_window,
    question_units,
    select_text_units,
)

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["SOURCE_COLUMNS", "sources_section"]

SOURCE_COLUMNS = columns("id", "text")

# A trimmed unit is only added when at least this much room is left: shorter cuts carry little text.
_MIN_TRIMMED_UNIT_TOKENS = 120
# Excerpt mode scores the blocks of this many of the best candidate units: several times what any Sources
# budget shows, so the budget decides, while a query tokenises (once per index, cached) a bounded set.
# With the second pass filling the budget, 80 reached more evidence than 60 for the local context and basic
# search on the tuning half of the GraphRAG-Bench novel and medical dev questions, and as much or more on the
# confirming half (benchmarks/evidence_recall.py --half tune|confirm).
_EXCERPT_CANDIDATES = 80


def sources_section(
    index: Index,
    link: LinkResult,
    budget: int,
    p: LocalContextParams,
    query_vector: np.ndarray | None = None,
    notes: list[str] | None = None,
) -> Section[SourceRecord]:
    builder: SectionBuilder[SourceRecord] = SectionBuilder("Sources", SOURCE_COLUMNS, index.tokenizer, budget)
    positions = [e.position for e in link.entities]
    est = row_estimates(index)
    hybrid = p.text_unit_strategy == "hybrid"
    question = (
        question_units(index, link.query_text, query_vector, window_tokens=p.excerpt_tokens or DEFAULT_WINDOW_TOKENS)
        if hybrid and budget > 0
        else QuestionUnits([], [])
    )
    if notes is not None:
        notes.extend(question.notes)

    f = fields(index)

    def unit_line(u: int) -> tuple[str, int]:
        return cached_row(index, "unit", u, (), lambda: [f.unit_id(u), f.unit_text(u)])

    candidates = select_text_units(
        index,
        positions,
        strategy=p.text_unit_strategy,
        scores=[e.score for e in link.entities],
        budget=max(budget - builder.head_tokens, 0),
        unit_cost=lambda u: int(est.unit[u]),
        per_entity_cap=p.per_entity_cap,
        min_units_per_entity=p.min_units_per_entity,
        lexical=question.lexical,
        vector=question.vector,
        question_weight=p.hybrid_question_weight,
        rrf_k=p.hybrid_rrf_k,
        linked_order=p.hybrid_linked_order,
    )
    if hybrid and p.excerpt_tokens > 0 and budget > 0:
        return excerpt_sources(index, builder, candidates, link.query_text, p)
    rejected: list[SourceRecord] = []
    for cand in candidates:
        unit_id, text = f.unit_id(cand.unit), f.unit_text(cand.unit)
        record = SourceRecord(
            unit_id,
            text,
            f.entity_title(cand.entity) if cand.entity != NO_ENTITY else "",
            tuple(cand.reasons) if hybrid else (),
            cand.score if hybrid else None,
            position=cand.unit,
        )
        if builder.remaining <= 0:
            rejected.append(record)
            continue
        if may_fit(builder, int(est.unit[cand.unit])):
            line, n = unit_line(cand.unit)
            if builder.add_line(line, n, record):
                continue
        if not len(builder) and builder.add_truncated(record, "text"):
            continue
        rejected.append(record)
    # Whole units went in wherever they fit; the room left goes to the best unit that did not fit,
    # cut to its most question-like part and marked truncated (only when the room holds a passage).
    if (
        hybrid
        and rejected
        and builder.remaining >= _MIN_TRIMMED_UNIT_TOKENS
        and _add_excerpt(index, builder, rejected[0], link.query_text)
    ):
        rejected.pop(0)
    section = builder.finish()
    if p.return_candidate_context:
        shown = {r.position for r in section.rows}
        section.candidates.extend(r for r in rejected if r.position not in shown)
    return section


def excerpt_sources(
    index: Index,
    builder: SectionBuilder[SourceRecord],
    candidates: Sequence[UnitCandidate],
    query: str,
    p: LocalContextParams,
) -> Section[SourceRecord]:
    """Sources as question-relevant excerpts of the candidates (`passages.py`): whole units where all
    their blocks were chosen, else the chosen spans joined by "…", marked `truncated` with `excerpts`
    (character offsets in the unit's text)."""
    cands = {c.unit: c for c in candidates[:_EXCERPT_CANDIDATES]}
    # a little headroom: block counts are exact, the quoting of a joined row is estimated
    room = builder.remaining - max(builder.remaining // 50, 4)
    excerpts = select_excerpts(
        index,
        list(cands),
        query,
        room,
        excerpt_tokens=p.excerpt_tokens,
        weight=p.excerpt_weight,
        rrf_k=p.hybrid_rrf_k,
        row_overhead=lambda u: unit_row_overhead(index, u),
    )
    blocks = excerpt_blocks(index, p.excerpt_tokens)  # the table select_excerpts cut the spans from

    def starts(unit: int) -> list[int]:
        lo, hi = int(blocks.unit_ptr[unit]), int(blocks.unit_ptr[unit + 1])
        return [int(c) for c in blocks.start[lo:hi]]

    shown_units: set[int] = set()
    _add_excerpts(index, builder, excerpts, cands, starts, shown_units)
    # the headroom and short estimates leave room unused: a second pass offers it to the candidates not shown
    left = builder.remaining - max(builder.remaining // 50, 4)
    rest = [u for u in cands if u not in shown_units]
    if left >= p.excerpt_tokens // 4 and rest:
        more = select_excerpts(index, rest, query, left, excerpt_tokens=p.excerpt_tokens, weight=p.excerpt_weight,
                               rrf_k=p.hybrid_rrf_k, row_overhead=lambda u: unit_row_overhead(index, u))
        _add_excerpts(index, builder, more, cands, starts, shown_units)
    if not len(builder) and candidates:  # not even one block fits: GraphRAG's trimmed first unit
        first = candidates[0]
        builder.add_truncated(_candidate_record(index, first), "text")
    section = builder.finish()
    if p.return_candidate_context:
        in_context = {r.position for r in section.rows}
        section.candidates.extend(_candidate_record(index, c) for c in candidates if c.unit not in in_context)
    return section


def _add_excerpts(
    index: Index,
    builder: SectionBuilder[SourceRecord],
    excerpts: Sequence[Excerpt],
    cands: dict[int, UnitCandidate],
    starts: Callable[[int], list[int]],
    shown_units: set[int],
) -> None:
    """Add each excerpt's row (whole unit or joined spans); a row longer than estimated loses its last spans."""
    f = fields(index)
    for ex in excerpts:
        unit_id, text, cand = f.unit_id(ex.unit), f.unit_text(ex.unit), cands[ex.unit]
        entity = f.entity_title(cand.entity) if cand.entity != NO_ENTITY else ""
        spans = list(ex.spans)
        while spans:
            whole = ex.whole and spans == ex.spans
            shown = text if whole else join_spans(text, spans)
            record = SourceRecord(unit_id, shown, entity, tuple(cand.reasons), cand.score, truncated=not whole,
                                  excerpts=() if whole else tuple((int(a), int(b)) for a, b in spans),
                                  position=ex.unit)
            # a whole unit is the Sources row of whole-unit mode: its rendering and count are cached
            row = (cached_row(index, "unit", ex.unit, (), [unit_id, text]) if whole
                   else excerpt_line(index, ex.unit, unit_id, text, spans, shown, starts(ex.unit)))
            if builder.add_line(*row, record):
                shown_units.add(ex.unit)
                break
            spans.pop()  # the estimate was short: drop the row's last span and retry


def _candidate_record(index: Index, cand: UnitCandidate) -> SourceRecord:
    """A candidate unit's record, whole (the entity it was picked for is not shown in excerpt mode)."""
    f = fields(index)
    return SourceRecord(f.unit_id(cand.unit), f.unit_text(cand.unit), "", tuple(cand.reasons), cand.score,
                        position=cand.unit)


def _add_excerpt(index: Index, builder: SectionBuilder[SourceRecord], record: SourceRecord, query: str) -> bool:
    """Add the part of a unit the question is about, cut to the room left, marked `truncated` with
    its `excerpt` character offsets in the unit's text."""
    pos = record.position
    text = fields(index).unit_text(pos)
    tok = index.tokenizer
    room = builder.remaining - tok.count(f"{record.id}|… …\n") - 2
    # The unit's own characters per token (its exact count is known from the index's load).
    chars = int(room * len(text) / max(int(index.text_unit_tokens[pos]), 1))
    for _ in range(8):
        if chars < 40:
            return False
        start, end = best_window(text, query, chars)
        cut = text[start:end]
        shown = ("… " if start > 0 else "") + cut + (" …" if end < len(text) else "")
        if builder.add(dataclasses.replace(record, text=shown, truncated=True, excerpts=((start, end),))):
            return True
        chars = int(chars * 0.9)  # quoting or merges made it longer than estimated
    return False
