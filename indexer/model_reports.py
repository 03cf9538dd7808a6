"""Model-written community reports (JSON title/summary/findings/rating/rating_explanation).

The context is the community's entities and relationships rendered as the project's context tables
(`-----Entities-----` + `|`-separated CSV), cut to `report_max_input_tokens`. A community whose report
cannot be obtained (model error, invalid JSON after the corrective retry) gets the offline extractive
report instead, and the build's warnings say so.
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, Field

from engines.models.base import ChatModel, Message, Usage
from engines.models.errors import ModelError, StructuredOutputError
from engines.models.structured import complete_json
from indexer import prompts
from indexer.communities import CommunityRow
from indexer.config import IndexerConfig
from indexer.graph import Graph
from indexer.reports import ReportRow, community_ranks, dedupe_report_ids, finish_report, offline_report
from shared_context.tokens import get_tokenizer


class Finding(BaseModel):
    summary: str
    explanation: str


class CommunityReportJson(BaseModel):
    title: str
    summary: str
    findings: list[Finding] = Field(default_factory=list)
    rating: float = 0.0
    rating_explanation: str = ""


def _table(name: str, header: list[str], rows: list[list[Any]], budget: int, encoding: str) -> tuple[str, int]:
    """Render rows until the token budget is used; returns (text, tokens used)."""
    tok = get_tokenizer(encoding)
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter="|", quotechar='"', quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
    writer.writerow(header)
    text = f"-----{name}-----\n" + buf.getvalue()
    used = tok.count(text)
    for row in rows:
        buf = io.StringIO()
        csv.writer(buf, delimiter="|", quotechar='"', quoting=csv.QUOTE_MINIMAL, lineterminator="\n").writerow(row)
        line = buf.getvalue()
        cost = tok.count(line)
        if used + cost > budget:
            break
        text += line
        used += cost
    return text, used


def community_context(community: CommunityRow, graph: Graph, config: IndexerConfig) -> str:
    by_id = {e.id: e for e in graph.entities}
    rel_by_id = {r.id: r for r in graph.relationships}
    members = sorted((by_id[i] for i in community.entity_ids), key=lambda e: (-e.degree, e.human_readable_id))
    rels = sorted((rel_by_id[i] for i in community.relationship_ids), key=lambda r: (-r.combined_degree, -r.weight))
    budget = config.report_max_input_tokens
    ents_text, used = _table(
        "Entities",
        ["id", "entity", "type", "description", "degree"],
        [[e.human_readable_id, e.title, e.type, e.description, e.degree] for e in members],
        budget // 2,
        config.encoding,
    )
    rels_text, _ = _table(
        "Relationships",
        ["id", "source", "target", "description", "combined_degree"],
        [[r.human_readable_id, r.source, r.target, r.description, r.combined_degree] for r in rels],
        budget - used,
        config.encoding,
    )
    return ents_text + ("\n\n" + rels_text if rels else "")


@dataclass
class StoredReports:
    """Model reports of a build keyed by `report_key` (stored so the next update can reuse them)."""

    reports: dict[str, ReportRow] = field(default_factory=dict)


def report_key(model: ChatModel, context: str) -> str:
    """What a model report depends on: the model and the community's context (not its community number)."""
    return hashlib.sha256(f"{model.name}\x1f{prompts.REPORT_SYSTEM}\x1f{context}".encode()).hexdigest()


async def model_reports(
    communities: list[CommunityRow],
    graph: Graph,
    model: ChatModel,
    config: IndexerConfig,
    usage: Usage,
    *,
    on_done: Callable[[], Any] | None = None,
    warnings: list[str] | None = None,
    reuse: dict[str, ReportRow] | None = None,
    written: dict[str, ReportRow] | None = None,
) -> list[ReportRow]:
    """One report per community from the model; a community whose context is unchanged since the build
    that stored `reuse` gets its stored report without a call. Successful reports are put in `written`
    (failures fall back to the offline report and are retried next time)."""
    ranks = community_ranks(communities, graph)
    entity_by_id = {e.id: e for e in graph.entities}
    rel_by_id = {r.id: r for r in graph.relationships}
    hrid_by_title = {e.title: e.human_readable_id for e in graph.entities}
    units_total = len({u for e in graph.entities for u in e.text_unit_ids})
    sem = asyncio.Semaphore(config.model_concurrency)

    async def one(c: CommunityRow) -> ReportRow:
        context = community_context(c, graph, config)
        key = report_key(model, context)
        if reuse and key in reuse:
            old = reuse[key]
            report = replace(old, community=c.community, level=c.level, parent=c.parent, children=list(c.children), size=c.size)
            if written is not None:
                written[key] = report
            if on_done is not None:
                on_done()
            return report
        messages: list[Message] = [
            {"role": "system", "content": prompts.REPORT_SYSTEM.format(context=context)},
            {"role": "user", "content": prompts.REPORT_USER.format(community=c.community)},
        ]
        try:
            async with sem:
                parsed, completions = await complete_json(model, messages, CommunityReportJson, task="community_report", temperature=0.0)
            for comp in completions:
                usage.add_completion("reports", comp)
            report = ReportRow(
                community=c.community,
                level=c.level,
                parent=c.parent,
                children=list(c.children),
                title=parsed.title.strip(),
                summary=parsed.summary.strip(),
                findings=[{"summary": f.summary.strip(), "explanation": f.explanation.strip()} for f in parsed.findings],
                rank=float(min(10.0, max(0.0, parsed.rating))),
                rating_explanation=parsed.rating_explanation.strip(),
                size=c.size,
            )
            finished = finish_report(report, raw_json=completions[-1].text)
            if written is not None:
                written[key] = finished
            return finished
        except ModelError as exc:
            if isinstance(exc, StructuredOutputError):
                for comp in exc.completions:
                    usage.add_completion("reports", comp)
            if warnings is not None:
                warnings.append(f"report for community {c.community} fell back to the offline report: {exc}")
            return offline_report(c, ranks[c.community], entity_by_id=entity_by_id, rel_by_id=rel_by_id,
                                  hrid_by_title=hrid_by_title, units_total=units_total)
        finally:
            if on_done is not None:
                on_done()

    reports = await asyncio.gather(*(one(c) for c in communities))
    return dedupe_report_ids(list(reports))
