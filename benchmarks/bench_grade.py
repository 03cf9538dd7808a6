"""`route-bench --grade`: grade each answer against the query set's gold answers and evidence.

The measures live in `benchmarks/grading.py`; this module wires them into a benchmark run: the offline
grade is computed as each row is made (after its clock stopped), and the LLM judge runs in its own pass
after all measuring is done, so judge calls never touch the engines' latency, calls or cost (they are
reported on their own).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.bench_queries import Query
from benchmarks.bench_runner import Grader
from benchmarks.grading import Judge, context_records, offline_grade
from engines.citations import record_text


def make_grader(index: Any, keep_judge_input: bool) -> Grader:
    """Offline grade of an engine result; with `keep_judge_input`, also what the judge needs later."""

    def grade(query: Query, result: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
        out = offline_grade(index, result, query.answer, query.evidence)
        if not keep_judge_input:
            return out, None
        cited = [(c.kind, c.id, text) for c in result.citations
                 if c.resolved and (text := record_text(index, c.kind, c.id)) is not None]
        return out, {"answer": result.response, "cited": cited,
                     "context": context_records(index, result.context_ids)}

    return grade


async def judge_rows(judge: Judge, rows: Sequence[dict[str, Any]], queries: Sequence[Query], *,
                     concurrency: int, on_done: Callable[[dict[str, Any]], None] | None = None) -> None:
    """Add `grade["judge"]` to every row that kept a judge input (the input is dropped afterwards)."""
    by_id = {q.id: q for q in queries}
    sem = asyncio.Semaphore(concurrency)

    async def one(row: dict[str, Any]) -> None:
        data = row.pop("_judge_input")
        query = by_id[row["query_id"]]
        async with sem:
            grade = await judge.grade(query.question, data["answer"], gold_answer=query.answer,
                                      evidence=query.evidence, cited=data["cited"], context=data["context"])
        row["grade"]["judge"] = grade.to_dict()
        if on_done is not None:
            on_done(row)

    await asyncio.gather(*(one(r) for r in rows if "_judge_input" in r))


def drop_judge_inputs(rows: Sequence[dict[str, Any]]) -> None:
    for row in rows:
        row.pop("_judge_input", None)
