"""Basic search: the k text units most similar to the question, best first, under the token budget."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from engines import prompts
from engines.base import BaseEngine
from engines.config import BasicSearchConfig
from engines.estimate import CostEstimate, estimate_basic
from engines.events import ContextReady
from engines.model_set import vector_for
from engines.models.base import Message
from engines.result import SearchResult
from engines.run import QueryRun
from shared_context.vectors import vector_search

if TYPE_CHECKING:
    from engines.plan import QueryPlan
    from shared_context.index import Index


def top_text_units(index: Index, question: str, k: int, query_vector: Any = None) -> tuple[list[tuple[int, float]], str]:
    """(text unit position, similarity) best first, and the method used ("vector" or "lexical")."""
    search = vector_search(index, "text_unit_text") if query_vector is not None else None
    if search is not None:
        return search.search(query_vector, k), "vector"
    from shared_context.linking import lexical_top

    positions, scores = lexical_top(index, "text_units", question, k)
    return [(int(p), float(s)) for p, s in zip(positions.tolist(), scores.tolist(), strict=True)], "lexical"


def sources_section(index: Index, hits: list[tuple[int, float]], budget: int) -> tuple[Any, int]:
    """The Sources table of `hits` in similarity order; a unit that does not fit is skipped, not the tail."""
    from shared_context.tables import SectionBuilder

    builder = SectionBuilder("Sources", ["id", "text"], index.tokenizer, budget)
    skipped = 0
    for pos, sim in hits:
        unit = index.text_units[pos]
        if not builder.add([unit.short_id, unit.text], {"id": unit.short_id, "similarity": round(sim, 4)}):
            skipped += 1
    return builder.finish(), skipped


class BasicSearch(BaseEngine):
    name = "basic"
    config: BasicSearchConfig
    section_name = "basic"
    section_type = BasicSearchConfig

    def estimate(self, question: str, plan: QueryPlan | None = None) -> CostEstimate:
        hits, _ = top_text_units(self.index, question, self.config.k)
        section, _ = sources_section(self.index, hits, self.config.max_context_tokens)
        return estimate_basic(self, question, section.tokens)

    async def _run(self, run: QueryRun, question: str, history: list[Message]) -> SearchResult:
        link_text = run.link_text
        qv = None
        if vector_for(self.index, "text_unit_text", run.models):
            with run.timed("entity_link"):
                vectors = await run.embed("entity_link", [link_text])
            qv = None if vectors is None else vectors[0]
        with run.timed("build_context"):
            hits, method = await asyncio.to_thread(top_text_units, self.index, link_text, self.config.k, qv)
            section, skipped = await asyncio.to_thread(sources_section, self.index, hits, self.config.max_context_tokens)
        await run.emit(ContextReady("build_context", section.tokens))
        run.details.update(retrieval=method, hits=len(hits), skipped_over_budget=skipped)
        system = prompts.template(self.config.prompt, "basic").fill(
            response_type=self.config.response_type, context_data=section.text)
        messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        with run.timed("answer"):
            completion = await run.stream_answer(
                "answer", "basic_answer", messages,
                max_tokens=self.config.max_answer_tokens, temperature=self.config.temperature,
            )
        # Nearest vectors always exist, so "found nothing" means no text unit shares a word with the question.
        lexical_hit = (method == "lexical" and bool(hits)) or bool(
            (await asyncio.to_thread(top_text_units, self.index, link_text, 1))[0])
        return run.finish(
            self.index,
            response=completion.text,
            context_text=section.text,
            context_records={"Sources": list(section.records)} if section.records else {},
            empty=not section.records or not lexical_hit,
        )
