"""Global search: map over community-report batches (0–100 scored points), then a batched reduce.

Community selection: a static level (or every report), dynamic selection by model ratings
(`dynamic_selection.py`), or zero-cost pre-ranking by similarity to the question with a budget of map
calls / tokens applied before any model call.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

from engines import prompts
from engines.base import BaseEngine, ConfigLike, make_params
from engines.config import GlobalSearchConfig
from engines.dynamic_selection import select_communities, selection_details
from engines.errors import EngineError
from engines.estimate import CostEstimate, estimate_global
from engines.events import ContextReady
from engines.models.base import Embedder, Message
from engines.models.factory import ModelLike
from engines.models.task_context import TaskContext
from engines.reduce import Point, ReduceSettings, batched_reduce
from engines.result import SearchResult
from engines.run import QueryRun, gather_bounded, reraise_bugs, vector_for
from engines.schemas import MapResponse

if TYPE_CHECKING:
    from engines.models.base import JSONObject
    from engines.plan import Question
    from engines.steps import CommunityContextSource
    from shared_context.community_context import CommunityContext
    from shared_context.index import Index
    from shared_context.report_batches import ReportBatch


def community_params(cfg: GlobalSearchConfig, total_report_tokens: int = 0) -> dict[str, object]:
    """CommunityContextParams fields; a map-call cap becomes a token budget the builder can honour.

    Pre-ranking with no explicit budget reads the most relevant `prerank_share` of all report tokens
    (at least one map batch): pre-ranking exists to cap global cost, so it is capped by default.
    """
    share_cap = None
    if cfg.prerank and cfg.prerank_share is not None and total_report_tokens:
        share_cap = max(cfg.max_context_tokens, int(total_report_tokens * cfg.prerank_share))
    explicit = [c for c in (cfg.max_context_tokens_total,
                            cfg.max_map_calls * cfg.max_context_tokens if cfg.max_map_calls else None) if c]
    caps = explicit or ([share_cap] if share_cap else [])
    return {
        "max_context_tokens": cfg.max_context_tokens,
        "community_level": cfg.community_level,
        "prerank": cfg.prerank,
        "max_tokens": min(caps) if caps else None,
        "shuffle_data": cfg.shuffle_data,
        "random_state": cfg.random_state,
    }


class GlobalSearch(BaseEngine):
    name = "global"
    config: GlobalSearchConfig
    builder: CommunityContextSource
    section_name = "global_search"
    section_type = GlobalSearchConfig

    def __init__(self, index: Index, model: ModelLike = None, *, embedder: Embedder | None = None,
                 config: ConfigLike = None,
                 builder: CommunityContextSource | None = None) -> None:
        """`builder`: the map batches' context builder (default: `CommunityContextBuilder` from the config)."""
        super().__init__(index, model, embedder=embedder, config=config)
        from shared_context import CommunityContextBuilder, CommunityContextParams

        self.builder = builder if builder is not None else CommunityContextBuilder(index, make_params(
            CommunityContextParams, community_params(self.config, int(index.report_tokens.sum()))
        ))

    def estimate(self, question: str | Question) -> CostEstimate:
        return estimate_global(self, question)

    async def build_batches(self, run: QueryRun | None, question: str, history: list[Message]) -> list[ReportBatch]:
        """The map batches (no model call unless dynamic selection is on, which rates reports)."""
        communities = None
        if run is not None and self.config.dynamic_community_selection:
            with run.timed("rate"):
                sel = await select_communities(run, self.index, question, self.config)
            run.details["dynamic_selection"] = selection_details(sel)
            communities = sel.communities
        qv = None
        if run is not None and self.config.prerank and vector_for(self.index, "community_full_content", run.models):
            with run.timed("entity_link"):
                vectors = await run.embed("entity_link", [question])
            qv = None if vectors is None else vectors[0]
        if communities is not None and not communities:
            return []
        t0 = time.perf_counter()
        def build() -> tuple[CommunityContext, list[ReportBatch]]:  # CPU work: run off the event loop
            built = self.builder.build(question, query_vector=qv, history=history or None, communities=communities)
            return built, list(built)

        built, batches = await asyncio.to_thread(build)
        if run is not None:
            run.usage.add_seconds("build_context", time.perf_counter() - t0)
            if built.notes:
                run.details["context_notes"] = list(built.notes)
        if self.config.max_map_calls is not None and len(batches) > self.config.max_map_calls:
            skipped = len(batches) - self.config.max_map_calls
            batches = batches[: self.config.max_map_calls]
            if run is not None:  # the caller's budget, not a failure: reported, not degraded
                run.details["budget_skipped_batches"] = skipped
        return batches

    async def _run(self, run: QueryRun, question: str, history: list[Message]) -> SearchResult:
        if not self.index.community_reports:
            run.degrade("build_context", "the index has no community reports")
            return run.finish(self.index, response=prompts.NO_REPORTS_ANSWER, empty=True,
                              empty_reason="the index has no community reports")
        batches = await self.build_batches(run, question, history)
        total_tokens = sum(b.tokens for b in batches)
        run.details["batches"] = [{"number": i + 1, "tokens": b.tokens, "communities": list(b.communities)}
                                  for i, b in enumerate(batches)]
        await run.emit(ContextReady("build_context", total_tokens))
        context_text = "\n\n".join(b.text for b in batches)
        records = {"Reports": [{"id": str(c), "batch": i + 1, "in_context": True}
                               for i, b in enumerate(batches) for c in b.communities]}
        if not batches:
            return run.finish(self.index, response=prompts.NO_DATA_ANSWER, context_text="", empty=True,
                              empty_reason="no community was selected")

        points = await self._map(run, question, batches)
        if not points and not self.config.allow_general_knowledge:
            return run.finish(self.index, response=prompts.NO_DATA_ANSWER, context_text=context_text,
                              context_records=records, empty=True,
                              empty_reason="no community report had a relevant point")
        if not points:  # GraphRAG semantics: with general knowledge allowed, the reduce still answers
            system = prompts.reduce_system(
                prompts.template(self.config.reduce_prompt, "global_reduce"), self._knowledge(),
                report_data=prompts.NO_FINDINGS, response_type=self.config.response_type,
                max_length=str(self.config.reduce_max_length),
            )
            messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": question}]
            with run.timed("reduce"):
                final = await run.stream_answer(
                    "reduce", "global_reduce", messages, temperature=self.config.temperature,
                    context=TaskContext(question, response_type=self.config.response_type,
                                        word_limit=self.config.reduce_max_length))
            return run.finish(self.index, response=final.text, context_text=context_text,
                              context_records=records, empty=True)
        settings = ReduceSettings(
            task="global_reduce",
            template=prompts.template(self.config.reduce_prompt, "global_reduce"),
            data_max_tokens=self.config.data_max_tokens,
            response_type=self.config.response_type,
            max_length=self.config.reduce_max_length,
            word_limit=self.config.reduce_max_length,
            general_knowledge=self._knowledge(),
            concurrency=self.config.concurrency,
            max_levels=self.config.max_reduce_levels,
            temperature=self.config.temperature,
        )
        with run.timed("reduce"):
            final = await batched_reduce(run, question, points, self.index.tokenizer, settings)
        return run.finish(self.index, response=final.text, context_text=context_text, context_records=records)

    def _knowledge(self) -> str | None:
        """The general-knowledge instruction when it is allowed, else None."""
        if not self.config.allow_general_knowledge:
            return None
        return prompts.template(self.config.knowledge_prompt, "global_knowledge").fill()

    async def _map(self, run: QueryRun, question: str, batches: list[ReportBatch]) -> list[Point]:
        n = len(batches)
        done = 0
        map_prompt = prompts.template(self.config.map_prompt, "global_map")

        async def one(batch: ReportBatch) -> MapResponse:
            nonlocal done
            system = map_prompt.fill(context_data=batch.text, max_length=str(self.config.map_max_length))
            messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": question}]
            parsed = await run.complete_json("map", "global_map", messages, MapResponse,
                                             temperature=self.config.temperature,
                                             context=TaskContext(question, batch.tables))
            for point in parsed.points:  # kept in case the deadline cuts the run before the reduce
                run.add_finding(float(point.score), point.description)
            done += 1
            await run.progress("map", f"map batch {done}/{n}", done, n)
            return parsed

        with run.timed("map"):
            results = await gather_bounded(self.config.concurrency, one, batches)
        reraise_bugs(results)
        failures = [(i, r) for i, r in enumerate(results) if isinstance(r, BaseException)]
        for i, err in failures:
            run.degrade("map", f"batch {i + 1}/{n}: {err}")
        if len(failures) == n:
            raise EngineError(f"all {n} map batches failed; first error: {failures[0][1]}", stage="map",
                              engine=run.engine) from failures[0][1]  # the router tells a down endpoint by it
        points: list[Point] = []
        below_min = 0
        points_total = 0
        responses: list[JSONObject] = []
        for i, r in enumerate(results):
            if isinstance(r, BaseException):
                responses.append({"batch": i + 1, "error": str(r)})
                continue
            responses.append({"batch": i + 1, "points": [p.model_dump() for p in r.points]})
            points_total += len(r.points)
            for p in r.points:
                if not p.description.strip() or p.score <= 0:  # GraphRAG's rule: score 0 means "no answer"
                    continue
                if p.score < self.config.min_score:
                    below_min += 1
                    continue
                points.append(Point(float(p.score), p.description, i + 1, (len(points),)))
        run.details["map_responses"] = responses
        run.details["points_total"] = points_total
        run.details["min_score"] = self.config.min_score
        run.details["points_below_min_score"] = below_min
        run.details["points_kept"] = len(points)
        return points
