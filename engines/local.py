"""Local search: the entity-centred context of `LocalContextBuilder` + one cited answer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from engines import prompts
from engines.base import BaseEngine, ConfigLike, make_params
from engines.config import LocalContextSettings, LocalSearchConfig
from engines.estimate import CostEstimate, estimate_local
from engines.events import ContextReady
from engines.models.base import Embedder, Message
from engines.models.factory import ModelLike
from engines.models.task_context import TaskContext
from engines.result import SearchResult
from engines.run import QueryRun, vector_for

if TYPE_CHECKING:
    from engines.plan import Question
    from engines.prompts import PromptTemplate
    from engines.steps import LocalContextSource, PromptFormatter
    from shared_context.index import Index
    from shared_context.local_context import LocalContext, LocalContextBuilder


def local_builder(index: Index, settings: LocalContextSettings) -> LocalContextBuilder:
    """The default local context builder for `settings` (engines take any builder with the same `build`)."""
    from shared_context.local_context import LocalContextBuilder, LocalContextParams

    return LocalContextBuilder(index, make_params(LocalContextParams, settings.builder_fields()))


def context_records(ctx: LocalContext) -> dict[str, list[dict[str, object]]]:
    """The context's records as JSON-ready fields, per section (`SearchResult.context_records`)."""
    return {name: list(records) for name, records in ctx.tables.to_dict().items()}


def wants_link_vector(run: QueryRun, index: Index) -> bool:
    """The index has entity or text-unit vectors for this embedder (one question embedding serves both)."""
    return vector_for(index, "entity_description", run.models) or vector_for(index, "text_unit_text", run.models)


async def link_vector(
    run: QueryRun, index: Index, text: str, stage: str = "entity_link", *, timed: bool = True
) -> np.ndarray | None:
    """The query vector for entity linking and the hybrid Sources' unit search, when the index has entity
    or text-unit vectors for this embedder (one embedding serves both).

    `timed=False` inside an already timed stage (DRIFT follow-ups), so seconds are not counted twice.
    """
    if not wants_link_vector(run, index):
        return None
    if timed:
        with run.timed(stage):
            vectors = await run.embed(stage, [text])
    else:
        vectors = await run.embed(stage, [text])
    return None if vectors is None else vectors[0]


@dataclass(frozen=True)
class LocalPrompt:
    """Local search's default `PromptFormatter`: its template (the configured one, else the built-in) filled with the
    tables; data in the system message, the question as the last user message (as every built-in prompt)."""

    template: PromptTemplate | None = None
    response_type: str = "multiple paragraphs"
    # the system prompt around its context slot, filled once (only the context differs per question)
    _around: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        around = prompts.template(self.template, "local").around(
            "context_data", citation_rules=prompts.CITATION_RULES, response_type=self.response_type)
        object.__setattr__(self, "_around", around)

    def render(self, context: LocalContext, question: str) -> list[Message]:
        system = context.text.join(self._around)
        return [{"role": "system", "content": system}, {"role": "user", "content": question}]


class LocalSearch(BaseEngine):
    """Three steps: `context = builder.build(...)`, `messages = formatter.render(context, question)`, then
    the answer generated from `messages`."""

    name = "local"
    config: LocalSearchConfig
    builder: LocalContextSource
    section_name = "local"
    section_type = LocalSearchConfig

    def __init__(self, index: Index, model: ModelLike = None, *, embedder: Embedder | None = None,
                 config: ConfigLike = None, builder: LocalContextSource | None = None,
                 formatter: PromptFormatter[LocalContext] | None = None) -> None:
        """`builder`: the context builder (default: `LocalContextBuilder` from the config); `formatter`: the
        prompt it is rendered into (default: the configured or built-in local prompt)."""
        super().__init__(index, model, embedder=embedder, config=config)
        self.builder = builder if builder is not None else local_builder(index, self.config)
        self.formatter = formatter if formatter is not None else LocalPrompt(self.config.prompt,
                                                                             self.config.response_type)
        # whether the index has vectors this engine's embedder can query: neither changes, so asked once
        self._wants_vector: bool | None = None

    def _link_vector_wanted(self, run: QueryRun) -> bool:
        if self._wants_vector is None:
            self._wants_vector = wants_link_vector(run, self.index)
        return self._wants_vector

    def estimate(self, question: str | Question) -> CostEstimate:
        """No model call; for a checked `Question`, the context built here comes back with the estimate
        (`CostEstimate.prebuilt`), for the router to hand on to the answer."""
        return estimate_local(self, question)

    def _context(self, run: QueryRun, link_text: str, history: list[Message], qv: np.ndarray | None) -> LocalContext:
        """Step 1, the context: the question's prebuilt one when it is exactly this context, else built,
        linking on the question's lexical pass."""
        asked = run.asked
        if history or link_text != asked.link_text:
            return self.builder.build(link_text, history or None, query_vector=qv)
        kept = asked.context_for(self.name, link_text) if qv is None else None
        if kept is not None:
            run.details["context_reused"] = True
            return kept
        return self.builder.build(link_text, None, query_vector=qv, linker=lambda k: asked.linked(self.index, k, qv))

    def _embed_and_build(self, run: QueryRun, link_text: str, history: list[Message]) -> LocalContext:
        """The question's vector (a `LocalEmbedder`'s, computed here) and the context, in one thread hop."""
        qv = None
        if self._link_vector_wanted(run):
            with run.timed("entity_link"):
                vectors = run.embed_sync("entity_link", [link_text])
            qv = None if vectors is None else vectors[0]
        with run.timed("build_context"):
            return self._context(run, link_text, history, qv)

    async def _build(self, run: QueryRun, history: list[Message]) -> LocalContext:
        link_text = run.link_text
        # Off the loop: embedding here, linking and building are CPU work; other questions' model waits go on
        # meanwhile. With an embedder that computes here, both steps share one worker-thread hop.
        if run.embeds_locally:
            return await asyncio.to_thread(self._embed_and_build, run, link_text, history)
        qv = await link_vector(run, self.index, link_text) if self._link_vector_wanted(run) else None
        with run.timed("build_context"):
            return await asyncio.to_thread(self._context, run, link_text, history, qv)

    async def _run(self, run: QueryRun, question: str, history: list[Message]) -> SearchResult:
        ctx = await self._build(run, history)
        await run.emit(ContextReady("build_context", ctx.tokens))
        run.details["linked_entities"] = [
            {"id": e.entity.short_id, "title": e.entity.title, "score": round(float(e.score), 4)} for e in ctx.entities
        ]
        run.details["link_mode"] = ctx.link.mode
        run.details["link_notes"] = list(ctx.link.notes)
        messages = self.formatter.render(ctx, question)
        with run.timed("answer"):
            completion = await run.stream_answer(
                "answer", "local_answer", messages,
                max_tokens=self.config.max_answer_tokens, temperature=self.config.temperature,
                context=TaskContext(question, ctx.tables, response_type=self.config.response_type),
            )
        # "Found nothing": no entity matched by name or words. Embeddings always return *some* nearest
        # entities (gibberish scores ~0.4 cosine with the offline embedder), so they do not count here.
        matched = [e for e in ctx.entities if e.exact or e.lexical > 0]
        run.details["matched_entities"] = len(matched)
        empty = not matched or not ctx.text.strip()
        return run.finish(
            self.index,
            response=completion.text,
            context_text=ctx.text,
            context_records=context_records(ctx),
            empty=empty,
            empty_reason=("no entity of the index matches the question by name or words" if not matched
                          else "the context is empty") if empty else "",
        )
