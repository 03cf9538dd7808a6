"""Dynamic community selection: the model rates reports 0–5 from the root level down.

GraphRAG semantics kept: rate every level-0 report; a report rated >= threshold is relevant and its
children (that have reports) are rated next; with `keep_parent=False` a relevant child replaces its
parent; if a whole level yields nothing relevant, the next level is rated in full (up to `max_level`).
Fixed: ties between repeated ratings go to the HIGHER rating (GraphRAG: lowest), descent is bounded by
`max_level` (and the configured community level), and a rating that fails to parse is a recorded
degradation that keeps the report rather than a silent rating of 1.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engines import prompts
from engines.errors import EngineError
from engines.models.base import Message
from engines.models.task_context import TaskContext
from engines.run import QueryRun, gather_bounded, reraise_bugs
from engines.schemas import RateResponse

if TYPE_CHECKING:
    from engines.config import GlobalSearchConfig
    from engines.models.base import JSONObject
    from shared_context.index import Index
    from shared_context.tables import ContextTables


@dataclass
class Selection:
    communities: list[int]  # selected community numbers, in rating order
    ratings: dict[int, int] = field(default_factory=dict)
    rated: int = 0
    failed: int = 0


def report_table(index: Index, community: int, max_tokens: int = 6000) -> ContextTables:
    """One report as a `Reports` table (`id|title|content`), its content cut to `max_tokens`."""
    from shared_context.report_fold import reports_fold

    return reports_fold(index, [index.report_pos[community]], max_tokens)


def vote(ratings: list[int]) -> int:
    """The most frequent rating; ties go to the higher one (keeping a report is the cheaper mistake)."""
    counts = Counter(ratings)
    best = max(counts.values())
    return max(r for r, c in counts.items() if c == best)


def _children(index: Index, community: int) -> list[int]:
    report = index.community_reports[index.report_pos[community]]
    kids = list(report.children)
    if not kids and community in index.community_pos:
        kids = list(index.communities[index.community_pos[community]].children)
    return [c for c in kids if c in index.report_pos]


def _parent(index: Index, community: int) -> int:
    report = index.community_reports[index.report_pos[community]]
    if report.parent >= 0 or community not in index.community_pos:
        return report.parent
    return index.communities[index.community_pos[community]].parent


def _level(index: Index, community: int) -> int:
    return index.community_reports[index.report_pos[community]].level


async def select_communities(run: QueryRun, index: Index, question: str, cfg: GlobalSearchConfig) -> Selection:
    max_level = cfg.dynamic_max_level if cfg.community_level is None else min(cfg.dynamic_max_level, cfg.community_level)
    levels = sorted(index.reports_by_level)
    if not levels:
        return Selection([])
    start = levels[0]
    queue = [index.community_reports[p].community for p in index.reports_by_level[start]]
    level = start
    sel = Selection([])
    relevant: dict[int, None] = {}

    async def rate(community: int) -> int:
        table = report_table(index, community)
        system = prompts.template(cfg.rate_prompt, "rate").fill(context_data=table.render())
        messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        votes = []
        for _ in range(cfg.dynamic_num_repeats):
            parsed = await run.complete_json("rate", "rate", messages, RateResponse, temperature=cfg.temperature,
                                             context=TaskContext(question, table))
            votes.append(parsed.rating)
        return vote(votes)

    async def rate_all(batch: list[int], lvl: int) -> list[int | BaseException]:
        n = len(batch)
        done = 0

        async def job(c: int) -> int:
            nonlocal done
            result = await rate(c)
            done += 1
            await run.progress("rate", f"rating level {lvl} report {done}/{n}", done, n)
            return result

        return await gather_bounded(cfg.concurrency, job, batch)

    while queue:
        results = await rate_all(queue, level)
        reraise_bugs(results)
        nxt: list[int] = []
        for c, r in zip(queue, results, strict=True):
            sel.rated += 1
            if isinstance(r, BaseException):
                sel.failed += 1
                run.degrade("rate", f"report {c}: rating failed, report kept: {r}")
                rating = cfg.dynamic_threshold
            else:
                rating = r
            sel.ratings[c] = rating
            if rating >= cfg.dynamic_threshold:
                relevant[c] = None
                nxt += [ch for ch in _children(index, c) if _level(index, ch) <= max_level and ch not in sel.ratings]
                if not cfg.dynamic_keep_parent:
                    relevant.pop(_parent(index, c), None)
        if sel.rated and sel.failed == sel.rated and not nxt:
            raise EngineError(f"all {sel.rated} report ratings failed", stage="rate", engine=run.engine)
        queue = list(dict.fromkeys(nxt))
        level += 1
        if not queue and not relevant and level in index.reports_by_level and level <= max_level:
            queue = [index.community_reports[p].community for p in index.reports_by_level[level]]
    sel.communities = list(relevant)
    return sel


def selection_details(sel: Selection) -> JSONObject:
    return {"selected": [*sel.communities], "rated": sel.rated, "failed": sel.failed,
            "ratings": {str(k): v for k, v in sel.ratings.items()}}
