"""Batched reduce: merge scored points into one answer without dropping any for lack of room.

GraphRAG sorts the points, appends them until `max_data_tokens` and silently drops the rest. Here the
points are sorted by score (stable, so ties keep batch order) and split into batches that each fit the
budget. One batch → one (streamed) reduce call. Several → each batch is reduced to a partial answer,
and the partial answers (scored by their best point, so order is kept) are reduced again, recursively,
until one batch remains. Every non-zero point therefore reaches a reduce call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from engines import prompts
from engines.errors import EngineError
from engines.models.base import Completion, Message
from engines.models.task_context import Finding, TaskContext
from engines.run import QueryRun, gather_bounded, reraise_bugs

if TYPE_CHECKING:
    from engines.prompts import PromptTemplate
    from shared_context.tokens import Tokenizer

# Tokens of the "\n\n" separator between analyst blocks (an upper bound; BPE may merge it).
_SEPARATOR_TOKENS = 2



class ReduceInfo(TypedDict, total=False):
    """How a reduce went (`SearchResult.details["reduce"]`): points in, levels and calls, what was cut."""

    points_in: int
    levels: int
    calls: int
    batches_per_level: list[int]
    points_truncated: int
    points_lost: int
    points_reduced: int
    partials_truncated: int

@dataclass(frozen=True)
class Point:
    score: float
    text: str
    analyst: int  # 1-based batch (map) number, or partial-answer number at higher levels
    ids: tuple[int, ...] = ()  # indices of the original points this one carries (for accounting)


@dataclass
class ReduceSettings:
    task: str  # "global_reduce" | "drift_reduce"
    template: PromptTemplate  # the global or DRIFT reduce prompt
    data_max_tokens: int
    response_type: str
    max_length: int = 2000
    word_limit: int | None = None  # the answer's limit in words when the prompt states one (global search)
    general_knowledge: str | None = None  # the instruction when allowed (prompts.reduce_system)
    concurrency: int = 8
    max_levels: int = 6
    temperature: float | None = 0.0
    fields: dict[str, str] = field(default_factory=dict)  # extra template slots


def sort_points(points: list[Point]) -> list[Point]:
    return sorted(points, key=lambda p: -p.score)  # stable: ties keep their order


def _block(p: Point, number: int) -> str:
    return prompts.analyst_block(number, p.score, p.text)


def fit_point(p: Point, tokenizer: Tokenizer, budget: int) -> tuple[Point, bool]:
    """A point whose block alone exceeds the budget is cut to fit (True when cut)."""
    tokens = tokenizer.count(_block(p, p.analyst))
    if tokens <= budget:
        return p, False
    overhead = tokens - tokenizer.count(p.text.strip())
    keep = max(budget - overhead - 4, 1)
    return Point(p.score, tokenizer.truncate(p.text, keep) + " …", p.analyst, p.ids), True


def partition(points: list[Point], tokenizer: Tokenizer, budget: int) -> list[list[Point]]:
    """Consecutive batches (in score order) whose rendered blocks each fit `budget`."""
    batches: list[list[Point]] = []
    current: list[Point] = []
    used = 0
    for p in points:
        cost = tokenizer.count(_block(p, p.analyst)) + _SEPARATOR_TOKENS
        if current and used + cost > budget:
            batches.append(current)
            current, used = [], 0
        current.append(p)
        used += cost
    if current:
        batches.append(current)
    return batches


def render(points: list[Point]) -> str:
    return "\n\n".join(_block(p, p.analyst) for p in points)


def _messages(settings: ReduceSettings, question: str, data: str) -> list[Message]:
    system = prompts.reduce_system(
        settings.template,
        settings.general_knowledge,
        report_data=data,
        context_data=data,  # GraphRAG's DRIFT reduce prompt names the findings {context_data}
        response_type=settings.response_type,
        max_length=str(settings.max_length),
        **settings.fields,
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


def reduce_context(settings: ReduceSettings, question: str, points: list[Point]) -> TaskContext:
    """The typed data of a reduce call: its analyst findings in the order the prompt numbers them."""
    findings = tuple(Finding(p.analyst, p.score, p.text.strip()) for p in points)
    return TaskContext(question, findings=findings, response_type=settings.response_type,
                       word_limit=settings.word_limit)


async def batched_reduce(
    run: QueryRun, question: str, points: list[Point], tokenizer: Tokenizer, settings: ReduceSettings
) -> Completion:
    """Reduce `points` (any number) to one answer; the last call streams its deltas."""
    info: ReduceInfo = {"points_in": len(points), "levels": 0, "calls": 0, "batches_per_level": [],
                            "points_truncated": 0, "points_lost": 0}
    run.details["reduce"] = info
    budget = settings.data_max_tokens
    items = []
    for p in sort_points(points):
        fitted, cut = fit_point(p, tokenizer, budget)
        items.append(fitted)
        info["points_truncated"] += int(cut)
    level = 0
    while True:
        level += 1
        batches = partition(items, tokenizer, budget)
        info["levels"] = level
        info["batches_per_level"].append(len(batches))
        if len(batches) == 1:
            info["calls"] += 1
            await run.progress("reduce", f"final reduce of {len(batches[0])} points", 1, 1)
            final = await run.stream_answer(
                "reduce", settings.task, _messages(settings, question, render(batches[0])),
                temperature=settings.temperature, context=reduce_context(settings, question, batches[0]),
            )
            if level == 1:
                info["points_reduced"] = len(batches[0])
            return final
        if level >= settings.max_levels:
            raise EngineError(f"reduce did not converge after {level} levels", stage="reduce", engine=run.engine)
        items = await _reduce_level(run, question, batches, tokenizer, settings, level, info)


async def _reduce_level(
    run: QueryRun,
    question: str,
    batches: list[list[Point]],
    tokenizer: Tokenizer,
    settings: ReduceSettings,
    level: int,
    info: ReduceInfo,
) -> list[Point]:
    """Reduce each batch to a partial answer; partial answers keep the best score of their batch."""
    # Cap each partial so that at least two always fit one budget: the next level has fewer items.
    partial_tokens = max(64, settings.data_max_tokens // 2 - 32)
    n = len(batches)
    done = 0

    async def one(batch: list[Point]) -> Completion:
        nonlocal done
        completion = await run.complete(
            "reduce", settings.task, _messages(settings, question, render(batch)),
            max_tokens=partial_tokens, temperature=settings.temperature,
            context=reduce_context(settings, question, batch),
        )
        done += 1
        await run.progress("reduce", f"reduce level {level} batch {done}/{n}", done, n)
        return completion

    results = await gather_bounded(settings.concurrency, one, batches)
    reraise_bugs(results)
    info["calls"] += n
    if level == 1:
        info["points_reduced"] = sum(len(b) for b in batches)
    partials: list[Point] = []
    for i, (batch, res) in enumerate(zip(batches, results, strict=True)):
        if isinstance(res, BaseException):
            lost = sum(max(len(p.ids), 1) for p in batch)
            info["points_lost"] += lost
            run.degrade("reduce", f"reduce level {level} batch {i + 1}/{n} failed ({lost} points missing): {res}")
            continue
        ids = tuple(x for p in batch for x in p.ids)
        text = res.text
        if tokenizer.count(text) > partial_tokens:  # a server that ignores max_tokens must not stall the merge
            text = tokenizer.truncate(text, partial_tokens) + " …"
            info["partials_truncated"] = info.get("partials_truncated", 0) + 1
        fitted, _ = fit_point(
            Point(max(p.score for p in batch), text, len(partials) + 1, ids), tokenizer, settings.data_max_tokens
        )
        partials.append(fitted)
    if not partials:
        raise EngineError(f"all {n} reduce batches failed at level {level}", stage="reduce", engine=run.engine)
    return partials
