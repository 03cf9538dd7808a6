"""A question that fans out over several indexes and is routed to global search: one global search over the
reports of all of them (`engines.global_over_indexes`: one map over their pre-ranked reports, ONE reduce)
instead of a whole global search per index, each with its own maps and reduce.

The call budget holds across it: at most `max_llm_calls - 1` map calls (the reduce is the last call), fewer while
the estimate is over the cost limit; when not even one map call and the reduce fit, `global_over_indexes` returns
None and the caller fans out index by index (which steps down within each index's share). Citations name their
index (`IndexCitation`); with a scope, each index is cut to it first and an index holding nothing is left out.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from engines.global_over_indexes import SEPARATOR
from router.answer import Answer
from router.answer_loop import PlanStep, check_fit
from router.budget import Budget
from router.index_citations import indexed

if TYPE_CHECKING:
    from engines.estimate import CostEstimate
    from engines.global_over_indexes import GlobalOverIndexes
    from engines.global_search import GlobalSearch
    from engines.plan import HistoryLike
    from router.answer_loop import Admit
    from router.classifier import RouteDecision
    from router.index_routing import IndexChoice
    from router.scoped import ScopableRouter
    from shared_context.scope import Scope

ROUTED = "global_prerank"  # a routed question: each index's reports pre-ranked, the router's global configuration


async def global_over_indexes(question: str, history: HistoryLike, budget: Budget | None, choice: IndexChoice,
                              decision: RouteDecision, routers: Mapping[str, ScopableRouter], scope: Scope | None,
                              admit: Admit | None, engine_name: str = ROUTED) -> Answer | None:
    """The answer of one global search over `routers`' indexes, or None when the budget leaves no room for it.
    `engine_name`: each index's global engine whose batches are mapped ("global" when the caller forced global
    search: every report, as on one index)."""
    from engines.global_search import GlobalSearch

    started = time.perf_counter()
    parts, notes = await asyncio.to_thread(_parts, routers, scope, engine_name)
    if not parts or not all(isinstance(p, GlobalSearch) for p in parts.values()):
        return None
    engines: dict[str, GlobalSearch] = {n: p for n, p in parts.items() if isinstance(p, GlobalSearch)}
    fitted = await asyncio.to_thread(_within_budget, engines, question, budget)
    if fitted is None:
        return None
    engine, est = fitted
    if admit is not None:
        await admit(PlanStep("global", est.llm_calls, est.cost, est.seconds_guess, True))
    result = await engine.search(question, history, deadline_s=None if budget is None else budget.deadline_s)
    citations = [indexed(c, name) for name, c in engine.cited_by_index(result)]
    units = list(dict.fromkeys(u for c in citations for u in c.text_unit_ids))
    docs = list(dict.fromkeys(d for c in citations for d in c.document_ids))
    # the indexes whose reports a map call read: a tight call budget may leave the later ones out
    read = {ident.rpartition(SEPARATOR)[0] for kind, ident in result.context_ids if kind == "Reports"}
    names = [n for n in engines if n in read] or list(engines)
    unread = [n for n in engines if n not in names]
    batches = result.details.get("batches", [])
    result = replace(result, citations=list(citations), text_unit_ids=units, document_ids=docs,
                     details={**result.details, "indexes": names})
    degraded = [f"{d.stage}: {d.reason}" for d in result.degraded]
    if unread:
        degraded.append(f"not read, the call budget left no room: {', '.join(unread)}")
    how = (f"one global search over the reports of {', '.join(names)}: {len(batches)} map call(s) over their "
           f"pre-ranked reports, one reduce")
    route = replace(decision, index=names, reasons=[*choice.reasons, how, *decision.reasons],
                    method=f"{decision.method}+fanout")
    return Answer(question=question, standalone_question=question, text=result.response, route=route,
                  engine="global", usage=result.usage, model=result.model, offline=result.offline,
                  seconds=time.perf_counter() - started, result=result,
                  plan=[f"global over {', '.join(names)}: ~{est.llm_calls} calls, ~${est.cost:.4f}, "
                        f"~{est.seconds_guess:.1f}s"],
                  degraded=degraded, notes=notes)


def _parts(routers: Mapping[str, ScopableRouter], scope: Scope | None, engine_name: str
           ) -> tuple[dict[str, object], list[str]]:
    """Each index's global engine `engine_name` (over its cut to `scope`; an index it leaves empty is dropped)."""
    from router.scoped import scoped_router

    parts: dict[str, object] = {}
    notes: list[str] = []
    for name, router in routers.items():
        if scope is None:
            parts[name] = router.engine(engine_name)
            continue
        inner, note = scoped_router(router, scope)
        notes.append(f"index {name}: {note}")
        if inner is not None:
            parts[name] = inner.engine(engine_name)
    return parts, notes


def _within_budget(parts: Mapping[str, GlobalSearch], question: str, budget: Budget | None
                   ) -> tuple[GlobalOverIndexes, CostEstimate] | None:
    """The search with as many map calls as the budget allows (None: not even one, with the reduce)."""
    from engines.global_over_indexes import GlobalOverIndexes

    cap = None if budget is None or budget.max_llm_calls is None else budget.max_llm_calls - 1
    while cap is None or cap >= 1:
        engine = GlobalOverIndexes(parts, max_map_calls=cap)
        est = engine.estimate(question)
        if budget is None or not check_fit(est, budget):
            return engine, est
        maps = est.llm_calls - 1
        cap = min(cap, maps) - 1 if cap is not None else maps - 1
    return None
