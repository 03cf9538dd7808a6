"""DRIFT search: a global primer over the most similar reports, then rounds of local follow-ups.

Pipeline per query (all state in a fresh `_DriftState`; nothing is kept on the engine — GraphRAG bug 10):
1. HyDE: a hypothetical answer shaped like a template report. The template is the report most similar
   to the question (lexical), or, when nothing matches, one picked by a seeded SHA-256 of the question —
   deterministic, unlike GraphRAG's `secrets.choice` (bug 9).
2. The top-k reports by similarity to the expanded query (vectors when the index and embedder match,
   else lexical), split into contiguous folds; one primer call per fold (bounded concurrency).
3. Follow-ups ranked by score (fold score, then their order), de-duplicated on normalised text, never
   shuffled (bug 9). `n_depth` rounds of at most `k_followups` each, answered with ONE local context
   builder whose budget keeps room for entities and relationships (bug 8); new follow-ups inherit their
   parent's score. Concurrency is really bounded by `config.concurrency` (bug 11).
4. The batched reduce of global search (`engines/reduce.py`) over analyst blocks (not a Python list
   repr — bug 10), best first: one call when the findings fit `reduce_max_tokens`, otherwise batches that
   are reduced and merged again, so no finding is dropped (GraphRAG truncates).
Calls: 1 + folds + n_depth·k + 1 when the findings fit one reduce batch; more reduce calls otherwise.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from engines import prompts
from engines.base import BaseEngine, ConfigLike
from engines.config import DriftSearchConfig
from engines.errors import EngineError
from engines.estimate import CostEstimate, estimate_drift
from engines.events import ContextReady
from engines.local import link_vector, local_builder
from engines.models.base import Embedder, Message
from engines.models.errors import ModelError
from engines.models.factory import ModelLike
from engines.models.task_context import TaskContext
from engines.reduce import Point, ReduceSettings, batched_reduce, sort_points
from engines.result import SearchResult
from engines.run import QueryRun, gather_bounded, reraise_bugs, vector_for
from engines.schemas import FollowupResponse, PrimerResponse
from shared_context.boilerplate_marks import boilerplate_weights
from shared_context.report_fold import reports_fold
from shared_context.search_backend import vector_table

if TYPE_CHECKING:
    from engines.models.base import Completion
    from engines.plan import Question
    from engines.steps import LocalContextSource
    from shared_context.index import Index

_TEMPLATE_TOKENS = 1500
_WS = re.compile(r"\s+")


def normalise_query(text: str) -> str:
    return _WS.sub(" ", text.strip().lower()).rstrip(" ?.!")


@dataclass
class Node:
    id: int
    query: str
    depth: int
    parent: int | None
    priority: float  # the score this follow-up inherits from whoever proposed it
    answer: str | None = None
    score: float | None = None
    status: str = "pending"  # pending | answered | failed
    context_tokens: int = 0

    def to_dict(self) -> dict[str, object]:
        excerpt = (self.answer or "")[:300]
        return {"id": self.id, "query": self.query, "depth": self.depth, "parent": self.parent,
                "priority": self.priority, "score": self.score, "status": self.status, "answer_excerpt": excerpt,
                "context_tokens": self.context_tokens}


@dataclass
class _DriftState:
    """Everything one DRIFT query accumulates."""

    nodes: list[Node] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    primer_points: list[Point] = field(default_factory=list)

    def add_followups(self, queries: list[str], depth: int, parent: int | None, priority: float) -> int:
        added = 0
        for q in queries:
            key = normalise_query(q)
            if not key or key in self.seen:
                continue
            self.seen.add(key)
            self.nodes.append(Node(len(self.nodes), q.strip(), depth, parent, priority))
            added += 1
        return added

    def next_round(self, k: int) -> list[Node]:
        """The k best pending follow-ups: highest inherited score first, then creation order."""
        pending = [n for n in self.nodes if n.status == "pending"]
        return sorted(pending, key=lambda n: (-n.priority, n.id))[:k]


def pick_template(index: Index, question: str, seed: int) -> int | None:
    """Position of the template report for HyDE (deterministic)."""
    if not index.community_reports:
        return None
    from shared_context.linking import lexical_scores

    scores = np.asarray(lexical_scores(index, "reports", question), dtype=np.float64)
    if scores.size and float(scores.max()) > 0:
        return int(np.argmax(scores))
    digest = hashlib.sha256(f"{seed}:{question}".encode()).digest()
    return int.from_bytes(digest[:8], "little") % len(index.community_reports)


class DriftSearch(BaseEngine):
    name = "drift"
    config: DriftSearchConfig
    builder: LocalContextSource
    section_name = "drift"
    section_type = DriftSearchConfig

    def __init__(self, index: Index, model: ModelLike = None, *, embedder: Embedder | None = None,
                 config: ConfigLike = None,
                 builder: LocalContextSource | None = None) -> None:
        """`builder`: the follow-ups' local context builder (default: from `[drift.local_search]`)."""
        super().__init__(index, model, embedder=embedder, config=config)
        # stateless; shared by all follow-ups
        self.builder = builder if builder is not None else local_builder(index, self.config.local_context())

    def estimate(self, question: str | Question) -> CostEstimate:
        return estimate_drift(self, question)

    # ------------------------------------------------------------------ pipeline

    async def _run(self, run: QueryRun, question: str, history: list[Message]) -> SearchResult:
        link_text = run.link_text
        state = _DriftState()
        cfg = self.config
        calls_before = 0
        context_text = ""
        top: list[tuple[int, float]] = []
        if self.index.community_reports:
            with run.timed("primer"):
                expanded = await self._hyde(run, question)
                top = await self._top_reports(run, link_text, expanded)
                context_text = await self._primer(run, question, top, state)
        else:
            run.degrade("primer", "the index has no community reports; follow-ups start from the question")
            state.add_followups([question], 1, None, 0.0)
        calls_before = run.usage.total.llm_calls
        run.details["calls"] = {"hyde_and_primer": calls_before}
        with run.timed("followups"):
            for depth in range(1, cfg.n_depth + 1):
                batch = state.next_round(cfg.k_followups)
                if not batch:
                    break
                if run.should_wrap_up():  # keep time for the reduce of what was found so far
                    run.degrade("followups", f"stopped before depth {depth} to answer within the deadline")
                    break
                await self._round(run, question, history, state, batch, depth)
        run.details["calls"]["followups"] = run.usage.total.llm_calls - calls_before
        answered = [n for n in state.nodes if n.status == "answered"]
        run.details["tree"] = [n.to_dict() for n in state.nodes]
        run.details["followups_answered"] = len(answered)
        run.details["followups_pending"] = sum(1 for n in state.nodes if n.status == "pending")
        points = list(state.primer_points) + [
            Point(float(n.score or 0), n.answer or "", n.id + 1) for n in answered if (n.answer or "").strip()
        ]
        if not points:
            raise EngineError("neither the primer nor any follow-up produced an answer", stage="followups",
                              engine=run.engine)
        empty = all(p.score <= 0 for p in points)
        with run.timed("reduce"):
            final = await self._reduce(run, question, points)
        run.details["calls"]["reduce"] = run.details["reduce"]["calls"]
        records = {
            "Reports": [{"id": self.index.community_reports[p].short_id, "similarity": round(s, 4), "in_context": True}
                        for p, s in top],
            "FollowUps": [n.to_dict() for n in state.nodes],
        }
        return run.finish(self.index, response=final.text, context_text=context_text, context_records=records,
                          empty=empty)

    async def _hyde(self, run: QueryRun, question: str) -> str:
        pos = pick_template(self.index, question, self.config.seed)
        if pos is None:
            return question
        report = self.index.community_reports[pos]
        template = self.index.tokenizer.truncate(report.full_content or report.summary, _TEMPLATE_TOKENS)
        run.details["hyde_template"] = report.short_id
        messages: list[Message] = [
            {"role": "system", "content": prompts.template(self.config.hyde_prompt, "drift_hyde").fill(
                template=template)},
            {"role": "user", "content": question},
        ]
        await run.progress("primer", "writing a hypothetical answer (HyDE)", 1, 1)
        try:
            completion = await run.complete("primer", "drift_hyde", messages, temperature=self.config.temperature,
                                            context=TaskContext(question, template=template))
        except ModelError as err:
            run.degrade("primer", f"HyDE expansion failed, the question alone is used: {err}")
            return question
        return completion.text.strip() or question

    async def _top_reports(self, run: QueryRun, question: str, expanded: str) -> list[tuple[int, float]]:
        """(report position, similarity) of the top-k reports, best first."""
        k = self.config.primer_top_k_reports
        if vector_for(self.index, "community_full_content", run.models):
            vectors = await run.embed("primer", [expanded])
            table = vector_table(self.index, "community_full_content")
            if vectors is not None and table is not None:
                run.details["report_similarity"] = "vector"
                weights = boilerplate_weights(self.index)  # licence reports rank low
                if weights is None:
                    return list(table.search(vectors[0], k))
                return weights.down_ranked(table.search(vectors[0], 2 * k), weights.reports, k)
        from shared_context.linking import lexical_scores

        run.details["report_similarity"] = "lexical"
        scores = np.asarray(lexical_scores(self.index, "reports", question + "\n" + expanded), dtype=np.float64)
        weights = boilerplate_weights(self.index)
        if weights is not None:
            scores = scores * weights.reports
        ranks = np.asarray([r.rank for r in self.index.community_reports], dtype=np.float64)
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], -ranks[i], i))[:k]
        return [(i, float(scores[i])) for i in order]

    async def _primer(self, run: QueryRun, question: str, top: list[tuple[int, float]], state: _DriftState) -> str:
        folds = [list(f) for f in np.array_split(np.arange(len(top)), min(self.config.primer_folds, len(top))) if len(f)]
        budget = self.config.local_search.max_context_tokens
        tables = [reports_fold(self.index, [top[i][0] for i in f], budget) for f in folds]
        texts = [t.render() for t in tables]
        await run.emit(ContextReady("primer", sum(self.index.tokenizer.count(t) for t in texts)))
        n = len(tables)
        done = 0

        primer = prompts.template(self.config.primer_prompt, "drift_primer")

        async def one(fold: int) -> PrimerResponse:
            nonlocal done
            table = texts[fold]
            system = primer.fill(context_data=table, community_reports=table, query=question)
            messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": question}]
            parsed = await run.complete_json("primer", "drift_primer", messages, PrimerResponse,
                                             temperature=self.config.temperature,
                                             context=TaskContext(question, tables[fold]))
            run.add_finding(float(parsed.score), parsed.intermediate_answer)
            done += 1
            await run.progress("primer", f"primer fold {done}/{n}", done, n)
            return parsed

        results = await gather_bounded(self.config.concurrency, one, list(range(n)))
        reraise_bugs(results)
        ok: list[tuple[int, PrimerResponse]] = []
        for i, r in enumerate(results):
            if isinstance(r, BaseException):
                run.degrade("primer", f"fold {i + 1}/{n}: {r}")
            else:
                ok.append((i, r))
        if not ok and n:
            first = results[0]  # the router tells a down endpoint by the chained cause
            raise EngineError(f"all {n} primer folds failed; first error: {first}", stage="primer",
                              engine=run.engine) from (first if isinstance(first, BaseException) else None)
        run.details["primer"] = [{"fold": i + 1, "score": r.score, "follow_ups": list(r.follow_up_queries)}
                                 for i, r in ok]
        # Follow-ups of better-scored folds first; within a fold, in the model's order.
        for _, r in sorted(ok, key=lambda x: (-x[1].score, x[0])):
            state.add_followups(list(r.follow_up_queries), 1, None, float(r.score))
        for i, r in ok:
            if r.intermediate_answer.strip():
                state.primer_points.append(Point(float(r.score), r.intermediate_answer, i + 1))
        return "\n\n".join(texts)

    async def _round(
        self, run: QueryRun, question: str, history: list[Message], state: _DriftState, batch: list[Node], depth: int
    ) -> None:
        n = len(batch)
        done = 0

        followup = prompts.template(self.config.followup_prompt, "drift_followup")

        async def one(node: Node) -> FollowupResponse:
            nonlocal done
            qv = await link_vector(run, self.index, node.query, timed=False)
            # In a worker thread: the build is pure, and tokenising releases the GIL, so the other
            # follow-ups' HTTP calls progress while this context is assembled.
            ctx = await asyncio.to_thread(self.builder.build, node.query, history or None, query_vector=qv)
            node.context_tokens = ctx.tokens
            system = followup.fill(
                global_query=question, k_followups=str(self.config.k_followups),
                followups=str(self.config.k_followups), response_type=self.config.response_type,
                context_data=ctx.text,
            )
            messages: list[Message] = [{"role": "system", "content": system},
                                       {"role": "user", "content": node.query}]
            context = TaskContext(node.query, ctx.tables, response_type=self.config.response_type,
                                  overall_question=question, max_followups=self.config.k_followups)
            parsed = await run.complete_json("followups", "drift_followup", messages, FollowupResponse,
                                             temperature=self.config.temperature, context=context)
            run.add_finding(float(parsed.score), parsed.response)
            done += 1
            await run.progress("followups", f"DRIFT depth {depth} follow-up {done}/{n}", done, n)
            return parsed

        results = await gather_bounded(self.config.concurrency, one, batch)
        reraise_bugs(results)
        for j, (node, r) in enumerate(zip(batch, results, strict=True)):
            if isinstance(r, BaseException):
                node.status = "failed"
                run.degrade("followups", f"depth {depth} follow-up {j + 1}/{n} ({node.query!r}): {r}")
                continue
            node.status, node.answer, node.score = "answered", r.response, float(r.score)
            state.add_followups(list(r.follow_up_queries)[: self.config.k_followups], depth + 1, node.id,
                                float(r.score))
        if all(isinstance(r, BaseException) for r in results):
            run.details.setdefault("failed_rounds", []).append(depth)

    async def _reduce(self, run: QueryRun, question: str, points: list[Point]) -> Completion:
        """Global search's batched reduce: findings beyond one `reduce_max_tokens` batch are reduced in
        batches and merged again, so none is dropped (details["reduce"] counts calls and levels)."""
        # analysts numbered best first, as the reduce prompt reads them
        numbered = [Point(p.score, p.text, i + 1, (i,)) for i, p in enumerate(sort_points(points))]
        settings = ReduceSettings(
            task="drift_reduce",
            template=prompts.template(self.config.reduce_prompt, "drift_reduce"),
            data_max_tokens=self.config.reduce_max_tokens,
            response_type=self.config.response_type,
            concurrency=self.config.concurrency,
            temperature=self.config.temperature,
        )
        return await batched_reduce(run, question, numbered, self.index.tokenizer, settings)
