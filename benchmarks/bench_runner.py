"""Run every (engine, query, repeat) of a benchmark and turn each result into one plain-dict row.

Engines and the router share one `Models` object (one HTTP client pool and limiter per endpoint), so
they are measured through exactly the same model stack. Each engine runs the whole query list before
the next engine starts, so engines never compete for the model's concurrency and skew each other's
latency; within an engine, up to `concurrency` queries are in flight.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.bench_queries import Query
from engines.models.config import PriceTable

ENGINE_NAMES = ("local", "global", "drift", "basic")
# Global search with zero-cost pre-ranking forced on (`[global_search] prerank = true`, as the README's sample
# configuration sets it), measured beside global search as configured.
PRERANKED_GLOBAL = "global-prerank"
# The trained router and the keyword router (a baseline: the keyword rules of the enterprise GraphRAG guide), each routing to one engine.
ROUTER_TARGETS = ("router", "keyword-router")
TARGET_NAMES = (*ENGINE_NAMES, PRERANKED_GLOBAL, *ROUTER_TARGETS)
ROUTER_STAGES = ("rewrite", "classify")
_INT_FIELDS = ("llm_calls", "prompt_tokens", "output_tokens", "cached_calls", "embedding_calls", "embedding_tokens")
PREVIEW_CHARS = 400


@dataclass(frozen=True)
class Pricing:
    """How `cost` is computed. `reported`: the cost the model layer recorded (real provider, price
    table). `priced_as`: tokens re-priced as if a named model served them, for the offline and mock
    backends whose own calls are free (and so that offline and mock figures are comparable)."""

    mode: str  # "reported" | "priced_as"
    chat_model: str
    embedding_model: str
    table: PriceTable
    # mock: the chat endpoint is *named* `chat_model`, so the model layer already priced each call as it
    # would for the real model (and a model-cache hit as free); keep that figure and add the embeddings.
    chat_cost_from_model_layer: bool = False

    def stage_cost(self, stage: dict[str, Any]) -> float:
        if self.mode == "reported":
            return float(stage["cost"])
        embeddings = self.table.cost(self.embedding_model, int(stage["embedding_tokens"]))
        if self.chat_cost_from_model_layer:
            return float(stage["cost"]) + embeddings
        return self.table.cost(self.chat_model, int(stage["prompt_tokens"]), int(stage["output_tokens"])) + embeddings

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode}
        if self.mode == "priced_as":
            chat = self.table.lookup(self.chat_model)
            emb = self.table.lookup(self.embedding_model)
            out |= {
                "chat_model": self.chat_model,
                "chat_usd_per_1m": {"input": chat.input, "output": chat.output} if chat else None,
                "embedding_model": self.embedding_model,
                "embedding_usd_per_1m": {"input": emb.input} if emb else None,
                "chat_cost_from_model_layer": self.chat_cost_from_model_layer,
            }
        return out


Target = Callable[[str], Awaitable[Any]]
# (query, engine result) -> (offline grade, judge input or None); see benchmarks/bench_grade.py.
Grader = Callable[[Query, Any], tuple[dict[str, Any], dict[str, Any] | None]]


@dataclass(frozen=True)
class KeywordRoute:
    engine: str
    confidence: float = 1.0
    probabilities: tuple[tuple[str, float], ...] = ()
    reasons: tuple[str, ...] = ("keyword rule of the enterprise GraphRAG guide",)
    method: str = "keyword-rules"  # which rule decided, as the router's route says
    fallbacks: tuple[str, ...] = ()  # the keyword rules hold nothing back for escalation


@dataclass
class KeywordRouted:
    """The keyword router's answer, shaped like the router's `Answer` where route-bench reads it."""

    route: KeywordRoute
    result: Any  # the chosen engine's SearchResult

    @property
    def engine(self) -> str:
        return self.route.engine

    @property
    def text(self) -> str:
        return str(self.result.response)

    @property
    def usage(self) -> Any:
        return self.result.usage

    @property
    def seconds(self) -> float:
        return float(self.result.seconds)

    @property
    def model(self) -> str:
        return str(self.result.model)

    @property
    def degraded(self) -> list[str]:
        return [f"{d.stage}: {d.reason}" for d in self.result.degraded]

    stepped_down_from: str | None = None
    escalations: tuple[Any, ...] = ()


def build_targets(index: Any, config: Any, models: Any, names: Sequence[str]) -> dict[str, Target]:
    """One async callable per requested engine name, built exactly as the Router builds its engines."""
    from engines import BasicSearch, DriftSearch, GlobalSearch, LocalSearch

    sections = {
        "local": (LocalSearch, config.local),
        "global": (GlobalSearch, config.global_search),
        "drift": (DriftSearch, config.drift),
        "basic": (BasicSearch, config.basic),
        PRERANKED_GLOBAL: (GlobalSearch, config.global_search.model_copy(update={"prerank": True})),
    }
    targets: dict[str, Target] = {}
    engines: dict[str, Any] = {}

    def engine(name: str) -> Any:
        if name not in engines:
            cls, section = sections[name]
            engines[name] = cls(index, models, config=section)
        return engines[name]

    for name in names:
        if name == "router":
            from router import Router

            targets[name] = _router_target(Router(index, config=config, models=models))
        elif name == "keyword-router":
            targets[name] = _keyword_target(engine)
        else:
            targets[name] = engine(name).search
    return targets


def _keyword_target(engine: Callable[[str], Any]) -> Target:
    from router.keyword_router import keyword_route

    async def ask(question: str) -> KeywordRouted:
        route = keyword_route(question)
        return KeywordRouted(KeywordRoute(route), await engine(route).search(question))

    return ask


def _router_target(router: Any) -> Target:
    async def ask(question: str) -> Any:
        return await router.aask(question, mode="auto")

    return ask


def usage_dict(usage: Any, pricing: Pricing) -> dict[str, Any]:
    """Per-stage usage with `cost` priced per `pricing` (the model layer's figure kept as `cost_reported`)."""
    stages: dict[str, dict[str, Any]] = {}
    for name, stage in usage.stages.items():
        d = stage.to_dict()
        d["cost_reported"] = d["cost"]
        d["cost"] = pricing.stage_cost(d)
        stages[name] = d
    total = usage.total.to_dict()
    total["cost_reported"] = total["cost"]
    total["cost"] = sum(s["cost"] for s in stages.values())
    return {"stages": stages, "total": total}


def result_row(engine: str, query: Query, repeat: int, seconds: float, result: Any, pricing: Pricing) -> dict[str, Any]:
    """A row for a successful run of an engine (`SearchResult`) or a router (`Answer` / `KeywordRouted`)."""
    usage = usage_dict(result.usage, pricing)
    total = usage["total"]
    is_router = engine in ROUTER_TARGETS
    text = result.text if is_router else result.response
    row: dict[str, Any] = {
        "engine": engine,
        "query_id": query.id,
        "question": query.question,
        "label": query.label,
        "alt": query.alt,
        "question_type": query.question_type,
        "repeat": repeat,
        "ok": True,
        "error": None,
        "seconds": seconds,
        "reported_seconds": float(result.seconds),
        **{f: int(total[f]) for f in _INT_FIELDS},
        "cost": float(total["cost"]),
        "cost_reported": float(total["cost_reported"]),
        "usage_estimated": bool(total["estimated"]),
        "usage": usage,
        "model": str(result.model),
        "response_chars": len(text),
        "response_preview": text[:PREVIEW_CHARS],
    }
    if is_router:
        route = result.route
        row |= {
            "route": route.engine,
            "route_confidence": float(route.confidence),
            # which rule decided (e.g. "model+one-source", "+local-first") and what the route held back
            "route_method": str(route.method),
            "route_fallbacks": [str(e) for e in route.fallbacks],
            "route_probabilities": {str(k): float(v) for k, v in dict(route.probabilities).items()},
            "route_reasons": [str(r) for r in route.reasons],
            "engine_used": _tried_engines(result)[-1],
            "stepped_down_from": result.stepped_down_from,
            "escalations": [
                {"from": e.from_engine, "to": e.to_engine, "reason": e.reason} for e in result.escalations
            ],
            # The engines that ran, in order: the planned one, then each escalation target.
            "tried": _tried_engines(result),
            "degraded": [str(d) for d in result.degraded],
            "empty": bool(result.result.empty) if result.result is not None else False,
        }
    else:
        row |= {
            "degraded": [f"{d.stage}: {d.reason}" for d in result.degraded],
            "empty": bool(result.empty),
        }
    return row


def _tried_engines(answer: Any) -> list[str]:
    """The engines a router answer ran, as route-bench names its own runs: the trained router's global step is
    global search pre-ranked (`router.escalation`), route-bench's global-prerank."""
    first = answer.escalations[0].from_engine if answer.escalations else answer.engine
    tried = [first, *(e.to_engine for e in answer.escalations)]
    if isinstance(answer, KeywordRouted):
        return tried
    return [PRERANKED_GLOBAL if e == "global" else e for e in tried]


def failure_row(engine: str, query: Query, repeat: int, seconds: float, exc: BaseException) -> dict[str, Any]:
    return {
        "engine": engine,
        "query_id": query.id,
        "question": query.question,
        "label": query.label,
        "question_type": query.question_type,
        "repeat": repeat,
        "ok": False,
        "error": f"{type(exc).__name__}: {exc}",
        "seconds": seconds,
        **{f: 0 for f in _INT_FIELDS},
        "cost": 0.0,
        "cost_reported": 0.0,
        "usage": None,
        "degraded": [],
        "empty": False,
    }


async def run_target(
    name: str, target: Target, query: Query, repeat: int, pricing: Pricing, grader: Grader | None = None
) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        result = await target(query.question)
    except Exception as exc:  # one failed question must not end the benchmark; it becomes a failure row
        return failure_row(name, query, repeat, time.perf_counter() - started, exc)
    row = result_row(name, query, repeat, time.perf_counter() - started, result, pricing)
    if grader is not None:
        # Graded after the clock stopped: grading is not part of the engine's latency.
        engine_result = result.result if name in ROUTER_TARGETS else result
        if engine_result is not None:
            row["grade"], judge_input = grader(query, engine_result)
            if judge_input is not None:
                row["_judge_input"] = judge_input  # kept in memory for the judge pass, never written out
    return row


async def run_benchmark(
    targets: dict[str, Target],
    queries: Sequence[Query],
    *,
    repeat: int,
    concurrency: int,
    pricing: Pricing,
    seed: int,
    on_done: Callable[[dict[str, Any]], None] | None = None,
    grader: Grader | None = None,
) -> list[dict[str, Any]]:
    """Every target on every query, `repeat` times; rows come back in (repeat, target, query) order."""
    rows: list[dict[str, Any]] = []
    for rep in range(repeat):
        for name, target in targets.items():
            # Re-seed before each pass so a pass does not depend on what ran before it.
            random.seed(seed + rep)
            sem = asyncio.Semaphore(concurrency)

            async def one(
                q: Query, name: str = name, target: Target = target, rep: int = rep,
                sem: asyncio.Semaphore = sem,
            ) -> dict[str, Any]:
                async with sem:
                    row = await run_target(name, target, q, rep, pricing, grader)
                if on_done is not None:
                    on_done(row)
                return row

            rows.extend(await asyncio.gather(*(one(q) for q in queries)))
    return rows


# ---- consistency ---------------------------------------------------------------------------------


def check_row(row: dict[str, Any]) -> list[dict[str, Any]]:
    """Totals must equal the sum of the stages, field by field (calls, tokens, cost)."""
    if not row["ok"] or row["usage"] is None:
        return []
    problems = []
    stages = row["usage"]["stages"].values()
    total = row["usage"]["total"]
    for f in (*_INT_FIELDS, "cost", "cost_reported"):
        summed = sum(s[f] for s in stages)
        exact = f in _INT_FIELDS
        if (summed != total[f]) if exact else abs(summed - total[f]) > 1e-9 + 1e-9 * abs(total[f]):
            problems.append(_problem(row, f"total {f} != sum of stages", summed, total[f]))
    return problems


def check_router_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Router model calls must equal the calls of the engines it ran + its own stages (rewrite, classify).

    The engine side is checked against the standalone runs of the same engines on the same question and
    repeat, which are independent measurements; only possible when every engine the router tried was
    also benchmarked on its own and both runs succeeded.
    """
    standalone = {(r["engine"], r["query_id"], r["repeat"]): r for r in rows if r["engine"] not in ROUTER_TARGETS}
    problems = []
    for row in rows:
        if row["engine"] not in ROUTER_TARGETS or not row["ok"]:
            continue
        stages = row["usage"]["stages"]
        own = sum(stages.get(s, {}).get("llm_calls", 0) for s in ROUTER_STAGES)
        engine_part = sum(v["llm_calls"] for k, v in stages.items() if k not in ROUTER_STAGES)
        if own + engine_part != row["llm_calls"]:
            problems.append(_problem(row, "router calls != engine stages + router stages", own + engine_part,
                                     row["llm_calls"]))
        runs = [standalone.get((e, row["query_id"], row["repeat"])) for e in row["tried"]]
        if all(r is not None and r["ok"] for r in runs):
            expected = own + sum(r["llm_calls"] for r in runs if r is not None)
            if expected != row["llm_calls"]:
                problems.append(_problem(
                    row, f"router calls != calls of {'+'.join(row['tried'])} run alone + router stages",
                    expected, row["llm_calls"]))
    return problems


def _problem(row: dict[str, Any], check: str, expected: Any, actual: Any) -> dict[str, Any]:
    return {"engine": row["engine"], "query_id": row["query_id"], "repeat": row["repeat"], "check": check,
            "expected": expected, "actual": actual}
