"""Global search over several indexes: one map over the pre-ranked community reports of all of them, then ONE
batched reduce, instead of a whole global search (maps and a reduce) per index.

Each index's own pre-ranking engine builds its map batches (its most relevant reports first, within its share of
report tokens); the batches are interleaved (every index's best batch, then every index's second, ...) so a cap on
map calls keeps each index's best reports, and every report id shown is qualified with its index (`carol:5`), so
the points the map writes and the answer the reduce writes cite reports by index. Each index's last batch, when not full, is
packed together with the others' (one map call where a search per index would make one each), after the full ones. The map and the reduce are
`GlobalSearch`'s own steps (this is a `GlobalSearch` whose batches come from several indexes);
`cited_by_index` resolves the answer's qualified citations against the index each one names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from itertools import zip_longest
from typing import TYPE_CHECKING

from engines.citations import parse_references, resolve
from engines.global_search import GlobalSearch

if TYPE_CHECKING:
    import numpy as np

    from engines.citations import Citation
    from engines.result import SearchResult
    from engines.steps import Turns
    from shared_context.community_context import CommunityContext
    from shared_context.report_batches import ReportBatch
    from shared_context.tokens import Tokenizer

SEPARATOR = ":"  # between an index's name and a report's community number in the ids the model is shown


class GlobalOverIndexes(GlobalSearch):
    """`GlobalSearch` whose map batches hold the reports of several indexes (`parts`: name -> that index's
    pre-ranking global engine). The first part's index, models and configuration run the map and the reduce."""

    def __init__(self, parts: Mapping[str, GlobalSearch], *, max_map_calls: int | None = None) -> None:
        if not parts:
            raise ValueError("a global search over indexes needs at least one index")
        lead = next(iter(parts.values()))
        self.parts = dict(parts)
        self.index = lead.index
        self.models = lead.models
        # Ratings would rate one index's reports only: each part selects its own reports (pre-ranked when routed).
        caps = [c for c in (lead.config.max_map_calls, max_map_calls) if c is not None]
        self.config = lead.config.model_copy(update={"dynamic_community_selection": False,
                                                      "max_map_calls": min(caps) if caps else None})
        self.builder = _InterleavedBatches(self.parts, self.config.max_context_tokens)

    def cited_by_index(self, result: SearchResult) -> list[tuple[str, Citation]]:
        """The answer's citations, each resolved in the index its id names (a citation of a report no batch
        showed, or of an index not asked, stays unresolved)."""
        shown = {(kind, ident) for kind, ident in result.context_ids}
        out: list[tuple[str, Citation]] = []
        for kind, ident in parse_references(result.response):
            name, _, local = ident.rpartition(SEPARATOR)
            part = self.parts.get(name)
            if part is None:
                out.append(("", resolve(self.index, kind, ident, shown)))  # unqualified: resolves nowhere here
                continue
            mine = {(k, i.rpartition(SEPARATOR)[2]) for k, i in shown if i.rpartition(SEPARATOR)[0] == name}
            cited = resolve(part.index, kind, local, mine)
            out.append((name, cited))
        return out


class _InterleavedBatches:
    """The parts' map batches, qualified and interleaved (a `CommunityContextSource`)."""

    def __init__(self, parts: Mapping[str, GlobalSearch], max_tokens: int) -> None:
        self.parts = parts
        self.max_tokens = max_tokens

    def build(self, query: str = "", /, *, query_vector: np.ndarray | None = None, history: Turns = None,
              communities: Sequence[int] | None = None) -> CommunityContext:
        from shared_context.community_context import CommunityContext

        per_index: list[list[ReportBatch]] = []
        notes: list[str] = []
        for i, (name, part) in enumerate(self.parts.items()):
            # the question's vector is in the first index's embedding space; the others pre-rank by words
            built = part.builder.build(query, query_vector=query_vector if i == 0 else None,
                                       history=history)
            notes.extend(f"index {name}: {note}" for note in built.notes)
            per_index.append([_qualified(name, b, part.index.tokenizer, self.max_tokens) for b in built])
        partial = [batches.pop() for batches in per_index if batches and batches[-1].tokens < self.max_tokens]
        batches = [b for rank in zip_longest(*per_index) for b in rank if b is not None]
        batches.extend(_merged(partial, self.parts, self.max_tokens))
        for number, batch in enumerate(batches, 1):
            batch.number = number
        return CommunityContext(batches, notes=notes)


def _merged(partial: list[ReportBatch], parts: Mapping[str, GlobalSearch], max_tokens: int) -> list[ReportBatch]:
    """The indexes' partly filled last batches packed into as few batches as fit `max_tokens` (first fit, in
    index order; all indexes share one tokenizer here: the first index's counts the packed text)."""
    from shared_context.report_batches import ReportBatch
    from shared_context.tables import ContextTables, Section

    tokenizer = next(iter(parts.values())).index.tokenizer
    out: list[ReportBatch] = []
    for batch in partial:
        for i, held in enumerate(out):
            mine, theirs = batch.tables.reports, held.tables.reports
            if mine is None or theirs is None:
                continue
            section = Section(theirs.name, theirs.columns, [*theirs.rows, *mine.rows])
            tables = ContextTables(history=held.tables.history, reports=section)
            tokens = tokenizer.count(tables.render())
            if tokens <= max_tokens:
                out[i] = ReportBatch(tables, tokens, [*held.communities, *batch.communities], held.number)
                break
        else:
            out.append(batch)
    return out


def qualified_id(index: str, ident: str) -> str:
    return f"{index}{SEPARATOR}{ident}"


def _qualified(name: str, batch: ReportBatch, tokenizer: Tokenizer, max_tokens: int) -> ReportBatch:
    """The batch with its report ids qualified by `name`; rows dropped from its end (the least relevant) if the
    longer ids pushed it over the batch budget."""
    from shared_context.report_batches import ReportBatch
    from shared_context.tables import ContextTables, Section

    section = batch.tables.reports
    if section is None:
        return batch
    rows = [replace(r, id=qualified_id(name, r.id)) for r in section.rows]
    while True:
        tables = ContextTables(history=batch.tables.history, reports=Section(section.name, section.columns, rows))
        tokens = tokenizer.count(tables.render())
        if tokens <= max_tokens or len(rows) <= 1:
            return ReportBatch(tables, tokens, batch.communities[: len(rows)], batch.number)
        rows = rows[:-1]
