"""The local context's Reports section: the community reports of the linked entities' communities."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shared_context.linking import LinkedEntity
from shared_context.local_budget import LocalContextParams
from shared_context.local_rows import report_line
from shared_context.row_estimates import may_fit, row_estimates
from shared_context.tables import Column, ReportRecord, Section, SectionBuilder, columns

if TYPE_CHECKING:
    from shared_context.index import Index
    from shared_context.records import CommunityReport

__all__ = ["report_columns", "reports_section"]


def report_columns(p: LocalContextParams) -> tuple[Column, ...]:
    return columns("id", "title", "content", *(["rank"] if p.include_community_rank else []))


def reports_section(
    index: Index, linked: Sequence[LinkedEntity], budget: int, p: LocalContextParams
) -> Section[ReportRecord]:
    """Reports of the communities holding the most linked entities, the full text where it fits, else the
    summary, else (for the first report only) the text cut to fit."""
    builder: SectionBuilder[ReportRecord] = SectionBuilder("Reports", report_columns(p), index.tokenizer, budget)
    matches: dict[int, int] = {}
    for e in linked:
        for community in index.entity_communities[e.position]:
            if community in index.report_pos:
                matches[community] = matches.get(community, 0) + 1
    candidates = []
    for community, count in matches.items():
        report = index.community_reports[index.report_pos[community]]
        if report.rank is not None and report.rank >= p.min_community_rank:
            candidates.append((count, report))
    # (matches, level, rank) descending: among communities holding as many selected entities, the
    # deepest is the most specific, so it beats its ancestors; rank breaks the remaining ties.
    candidates.sort(key=lambda cr: (-cr[0], -cr[1].level, -(cr[1].rank or 0.0), cr[1].community))
    rejected: list[ReportRecord] = []
    est = row_estimates(index)
    for count, report in candidates:
        pos = index.report_pos[report.community]

        def record(content: str, report: CommunityReport = report, count: int = count, pos: int = pos) -> ReportRecord:
            return ReportRecord(report.short_id, report.title, content, report.rank, report.level, count,
                                position=pos)

        added = False
        for use_summary in (True,) if p.use_community_summary else (False, True):
            content = report.summary if use_summary else report.full_content
            if not content or not may_fit(
                builder, int((est.summary if use_summary else est.report)[pos])
            ):
                continue
            line, n = report_line(index, pos, use_summary, p)
            if builder.add_line(line, n, record(content)):
                added = True
                break
        default_content = report.summary if p.use_community_summary else report.full_content
        if not added and not len(builder):
            added = builder.add_truncated(record(default_content), "content")
        if not added:
            rejected.append(record(default_content))
    section = builder.finish()
    if p.return_candidate_context:
        section.candidates.extend(rejected)
    return section
