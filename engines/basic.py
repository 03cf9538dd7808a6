"""Basic search: the text units that best match the question (`[basic] mode`), under the token budget."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from engines import prompts
from engines.base import BaseEngine, ConfigLike
from engines.config import BasicSearchConfig
from engines.estimate import CostEstimate, estimate_basic, question_text
from engines.events import ContextReady
from engines.models.base import Embedder, Message
from engines.models.factory import ModelLike
from engines.models.task_context import TaskContext
from engines.result import SearchResult
from engines.run import QueryRun, vector_for
from shared_context.basic_context import BasicContext, question_basic_context, top_text_units

if TYPE_CHECKING:
    from engines.plan import Question
    from engines.prompts import PromptTemplate
    from engines.steps import PromptFormatter
    from shared_context.index import Index


@dataclass(frozen=True)
class BasicPrompt:
    """Basic search's default `PromptFormatter`: its template filled with the Sources table."""

    template: PromptTemplate | None = None
    response_type: str = "multiple paragraphs"
    # the system prompt around its context slot, filled once (only the context differs per question)
    _around: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        around = prompts.template(self.template, "basic").around("context_data", response_type=self.response_type)
        object.__setattr__(self, "_around", around)

    def render(self, context: BasicContext, question: str) -> list[Message]:
        system = context.text.join(self._around)
        return [{"role": "system", "content": system}, {"role": "user", "content": question}]


class BasicSearch(BaseEngine):
    """Three steps: `context` (the best text units under the budget), `formatter.render(context, question)`,
    then the answer generated from those messages."""

    name = "basic"
    config: BasicSearchConfig
    section_name = "basic"
    section_type = BasicSearchConfig

    def __init__(self, index: Index, model: ModelLike = None, *, embedder: Embedder | None = None,
                 config: ConfigLike = None, formatter: PromptFormatter[BasicContext] | None = None) -> None:
        """`formatter`: the prompt the context is rendered into (default: the configured or built-in one)."""
        super().__init__(index, model, embedder=embedder, config=config)
        self.formatter = formatter if formatter is not None else BasicPrompt(self.config.prompt,
                                                                             self.config.response_type)

    def estimate(self, question: str | Question) -> CostEstimate:
        return estimate_basic(self, question, self.context(question_text(question)).tokens)

    def context(self, question: str, query_vector: np.ndarray | None = None) -> BasicContext:
        c = self.config
        return question_basic_context(self.index, question, c.max_context_tokens, mode=c.mode,
                                      query_vector=query_vector, k=c.k, excerpt_tokens=c.excerpt_tokens,
                                      rrf_k=c.rrf_k)

    async def _run(self, run: QueryRun, question: str, history: list[Message]) -> SearchResult:
        link_text = run.link_text
        qv = None
        if vector_for(self.index, "text_unit_text", run.models):
            with run.timed("entity_link"):
                vectors = await run.embed("entity_link", [link_text])
            qv = None if vectors is None else vectors[0]
        with run.timed("build_context"):
            ctx = await asyncio.to_thread(self.context, link_text, qv)
        await run.emit(ContextReady("build_context", ctx.tokens))
        shown = 0 if ctx.tables.sources is None else len(ctx.tables.sources.rows)
        run.details.update(retrieval=ctx.method, hits=shown, skipped_over_budget=ctx.skipped)
        if ctx.notes:
            run.details["retrieval_notes"] = ctx.notes
        messages = self.formatter.render(ctx, question)
        with run.timed("answer"):
            completion = await run.stream_answer(
                "answer", "basic_answer", messages,
                max_tokens=self.config.max_answer_tokens, temperature=self.config.temperature,
                context=TaskContext(question, ctx.tables, response_type=self.config.response_type),
            )
        # Nearest vectors always exist, so "found nothing" means no text unit shares a word with the question.
        lexical_hit = bool((await asyncio.to_thread(top_text_units, self.index, link_text, 1))[0])
        return run.finish(
            self.index,
            response=completion.text,
            context_text=ctx.text,
            context_records=dict(ctx.tables.to_dict()),
            empty=not ctx.text or not lexical_hit,
            empty_reason="no text unit shares a word with the question" if ctx.text else "the context is empty",
        )
