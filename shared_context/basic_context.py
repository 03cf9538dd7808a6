"""Basic search's context: one Sources table of the text units that best match the question.

Three rankings (`[basic] mode`):
- `hybrid` (the default): BM25 over the units' text (the project's one BM25) and the cosine of the question's
  vector with the units' vectors, fused by reciprocal rank (`text_unit_selection.fuse_rankings`), then shown as
  question-relevant excerpts (`local_sources.excerpt_sources`, the local context's Sources machinery) until the
  budget is full. Lexical matches reach the context even where the embedder is weak, and units that share no
  word with the question still come in through the vectors.
- `lexical`: the BM25 ranking alone, shown the same way.
- `vector`: GraphRAG's basic search: the `k` nearest units by vector, whole, best first.

Pure and deterministic: ties go to the lower unit position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import numpy as np

from shared_context.local_budget import LocalContextParams
from shared_context.local_sources import SOURCE_COLUMNS, excerpt_sources
from shared_context.search_backend import vector_search
from shared_context.tables import ContextTables, SectionBuilder, SourceRecord
from shared_context.text_unit_selection import DEFAULT_WINDOW_TOKENS, fuse_rankings, question_units

if TYPE_CHECKING:
    from shared_context.index import Index

__all__ = ["BasicContext", "BasicMode", "basic_context", "question_basic_context", "top_text_units"]

BasicMode = Literal["hybrid", "vector", "lexical"]


@dataclass
class BasicContext:
    tables: ContextTables  # one Sources section
    tokens: int  # of the rendered text
    skipped: int  # hits that did not fit the budget
    method: str = "vector"  # the ranking that chose the units: "hybrid", "lexical" or "vector"
    notes: list[str] = field(default_factory=list)  # why a ranking was not used

    @cached_property
    def text(self) -> str:
        return self.tables.render()


def top_text_units(
    index: Index, question: str, k: int, query_vector: np.ndarray | None = None
) -> tuple[list[tuple[int, float]], str]:
    """(text unit position, similarity) best first, and the method used ("vector" or "lexical")."""
    search = vector_search(index, "text_unit_text") if query_vector is not None else None
    if search is not None and query_vector is not None:
        return search.search(query_vector, k), "vector"
    from shared_context.linking import lexical_top

    positions, scores = lexical_top(index, "text_units", question, k)
    return [(int(p), float(s)) for p, s in zip(positions.tolist(), scores.tolist(), strict=True)], "lexical"


def basic_context(index: Index, hits: Sequence[tuple[int, float]], budget: int) -> BasicContext:
    """The Sources table of `hits` ((unit position, similarity), best first) in that order, whole units; a unit
    that does not fit is skipped, and a later, shorter one may still go in."""
    builder: SectionBuilder[SourceRecord] = SectionBuilder("Sources", SOURCE_COLUMNS, index.tokenizer, budget)
    skipped = 0
    for pos, sim in hits:
        unit = index.text_units[pos]
        if not builder.add(SourceRecord(unit.short_id, unit.text, similarity=round(sim, 4), position=pos)):
            skipped += 1
    section = builder.finish()
    return BasicContext(ContextTables(sources=section), section.tokens, skipped)


def question_basic_context(
    index: Index,
    question: str,
    budget: int,
    *,
    mode: BasicMode = "hybrid",
    query_vector: np.ndarray | None = None,
    k: int = 10,
    excerpt_tokens: int = 200,
    rrf_k: int = 60,
) -> BasicContext:
    """Basic search's context for `question` within `budget` tokens, ranked by `mode` (module docstring).
    `k` bounds the units of `vector` mode; `excerpt_tokens` = 0 shows whole units in the fused order."""
    if mode not in ("hybrid", "vector", "lexical"):
        raise ValueError(f"unknown basic search mode {mode!r}; expected hybrid, vector or lexical")
    if mode == "vector":
        hits, method = top_text_units(index, question, k, query_vector)
        notes = [] if method == "vector" else ["no usable query vector: units found lexically"]
        return _with(basic_context(index, hits, budget), method, notes)
    ranked = question_units(index, question, query_vector if mode == "hybrid" else None,
                            window_tokens=excerpt_tokens or DEFAULT_WINDOW_TOKENS)
    notes = list(ranked.notes) if mode == "hybrid" else []
    candidates = fuse_rankings([], ranked.lexical, ranked.vector if mode == "hybrid" else [], 1.0, rrf_k)
    method = "hybrid" if mode == "hybrid" and ranked.vector else "lexical"
    if excerpt_tokens <= 0:
        return _with(basic_context(index, [(c.unit, c.score) for c in candidates], budget), method, notes)
    builder: SectionBuilder[SourceRecord] = SectionBuilder("Sources", SOURCE_COLUMNS, index.tokenizer, budget)
    params = LocalContextParams(excerpt_tokens=excerpt_tokens, hybrid_rrf_k=rrf_k)
    section = excerpt_sources(index, builder, candidates, question, params)
    shown = {r.position for r in section.rows}
    skipped = sum(1 for c in candidates if c.unit not in shown)
    return BasicContext(ContextTables(sources=section), section.tokens, skipped, method, notes)


def _with(ctx: BasicContext, method: str, notes: list[str]) -> BasicContext:
    ctx.method, ctx.notes = method, notes
    return ctx
