"""Community reports: the record GraphRAG writes, and the offline extractive writer.

`full_content` is built exactly like GraphRAG's report extractor (`# title`, summary, then
`## finding summary` + explanation per finding, joined by blank lines) and the report id is the
sha512 hex of it. Offline reports are extractive: the title names the top entities, the summary and
findings quote the strongest relationships and the entities' source sentences, and findings cite
their records with GraphRAG's `[Data: Entities (..); Relationships (..)]` so answers can cite them.
The summary also names the community's themes: its concept and event entities (short phrases, no document
names or numbers) with the most weight on the community's own relationships, leaving out those that occur in
most of the corpus's text units (a word every part of the corpus uses says nothing about one community).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, field

from indexer.communities import CommunityRow
from indexer.graph import EntityRow, Graph, RelationshipRow
from shared_context.text import split_sentences

MAX_FINDINGS = 6
MAX_CITED = 5
MAX_THEMES = 3
MAX_THEME_WORDS = 4
_CODE = re.compile(r"[^\W\d_][\w-]*\d|\d[\w-]*[^\W\d_]")  # a word mixing letters and digits: EP-53, V2, Q4
THEME_TYPES = frozenset({"CONCEPT", "EVENT"})
GENERIC_UNIT_SHARE = 0.25  # a concept in more than this share of all text units is not one community's theme


@dataclass
class ReportRow:
    community: int
    level: int
    parent: int
    children: list[int]
    title: str
    summary: str
    findings: list[dict[str, str]]
    rank: float
    rating_explanation: str
    size: int
    full_content: str = ""
    full_content_json: str = ""
    id: str = ""
    extra: dict[str, str] = field(default_factory=dict)


def build_full_content(title: str, summary: str, findings: list[dict[str, str]]) -> str:
    sections = "\n\n".join(f"## {f['summary']}\n\n{f['explanation']}" for f in findings)
    return f"# {title}\n\n{summary}\n\n{sections}"


def finish_report(report: ReportRow, raw_json: str | None = None) -> ReportRow:
    """Fill `full_content`, `full_content_json` and the sha512 id."""
    report.full_content = build_full_content(report.title, report.summary, report.findings)
    report.full_content_json = raw_json or json.dumps(
        {
            "title": report.title,
            "summary": report.summary,
            "findings": report.findings,
            "rating": report.rank,
            "rating_explanation": report.rating_explanation,
        },
        indent=4,
        ensure_ascii=False,
    )
    report.id = hashlib.sha512(report.full_content.encode("utf-8")).hexdigest()
    return report


def _cite(entity_ids: list[int], relationship_ids: list[int]) -> str:
    parts = []
    for name, ids in (("Entities", entity_ids), ("Relationships", relationship_ids)):
        if ids:
            shown = ", ".join(str(i) for i in ids[:MAX_CITED]) + (", +more" if len(ids) > MAX_CITED else "")
            parts.append(f"{name} ({shown})")
    return f" [Data: {'; '.join(parts)}]" if parts else ""


def _first_sentence(text: str, limit: int = 400) -> str:
    """The description's first sentence (abbreviation-aware), cut at `limit` characters."""
    sentences = split_sentences(text)
    first = sentences[0] if sentences else text
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def _join_names(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def community_ranks(communities: list[CommunityRow], graph: Graph) -> dict[int, float]:
    """0–10 impact rank from size and the members' total degree, log-scaled against the largest community."""
    degree = {e.id: e.degree for e in graph.entities}
    sizes = {c.community: c.size for c in communities}
    degs = {c.community: sum(degree.get(e, 0) for e in c.entity_ids) for c in communities}
    max_size = max(sizes.values(), default=1) or 1
    max_deg = max(degs.values(), default=1) or 1
    return {
        c.community: round(
            10.0 * (0.5 * math.log1p(sizes[c.community]) / math.log1p(max_size) + 0.5 * math.log1p(degs[c.community]) / math.log1p(max_deg)),
            1,
        )
        for c in communities
    }


def offline_report(
    community: CommunityRow,
    rank: float,
    *,
    entity_by_id: dict[str, EntityRow],
    rel_by_id: dict[str, RelationshipRow],
    hrid_by_title: dict[str, int],
    units_total: int = 0,
) -> ReportRow:
    members = sorted((entity_by_id[i] for i in community.entity_ids), key=lambda e: (-e.degree, -e.frequency, e.human_readable_id))
    rels = sorted((rel_by_id[i] for i in community.relationship_ids), key=lambda r: (-r.weight, -r.combined_degree, r.human_readable_id))
    top = [e.title for e in members[:3]]
    title = _join_names(top) if len(members) <= 3 else f"{_join_names(top)} and related entities"
    types: dict[str, int] = {}
    for e in members:
        types[e.type] = types.get(e.type, 0) + 1
    type_text = ", ".join(f"{n} {t.lower()}" for t, n in sorted(types.items(), key=lambda kv: (-kv[1], kv[0])))
    lead = members[0]
    summary_parts = [
        f"This level-{community.level} community of {community.size} entit{'y' if community.size == 1 else 'ies'} "
        f"({type_text}) centres on {lead.title}."
    ]
    if lead.description:
        summary_parts.append(_first_sentence(lead.description))
    themes = community_themes(members, rels, units_total)
    if themes:
        summary_parts.append(f"Its main theme{'s are' if len(themes) > 1 else ' is'} {_join_names(themes)}.")
    if rels:
        strongest = ", ".join(f"{r.source} and {r.target} ({r.weight:g})" for r in rels[:3])
        summary_parts.append(f"Its strongest ties are between {strongest}.")
    summary = " ".join(summary_parts) + _cite([e.human_readable_id for e in members], [r.human_readable_id for r in rels])

    findings: list[dict[str, str]] = []
    used: set[str] = set()
    for r in rels[: MAX_FINDINGS - 1]:
        findings.append(
            {
                "summary": f"{r.source} and {r.target}",
                "explanation": (r.description or f"{r.source} is linked to {r.target}.")
                + f" They are mentioned together with weight {r.weight:g} in {len(r.text_unit_ids)} text unit"
                + ("s." if len(r.text_unit_ids) != 1 else ".")
                + _cite([hrid_by_title[r.source], hrid_by_title[r.target]], [r.human_readable_id]),
            }
        )
        used.update((r.source, r.target))
    for e in members:
        if len(findings) >= MAX_FINDINGS:
            break
        if e.title in used and findings:
            continue
        findings.append(
            {
                "summary": f"{e.title} ({e.type.lower()})",
                "explanation": (e.description or f"{e.title} is mentioned in {e.frequency} text units.")
                + _cite([e.human_readable_id], []),
            }
        )
        used.add(e.title)
    total_degree = sum(e.degree for e in members)
    explanation = (
        f"Rank {rank:g} of 10 reflects {community.size} member entities, {len(rels)} internal relationships "
        f"and a combined degree of {total_degree}."
    )
    return finish_report(
        ReportRow(
            community=community.community,
            level=community.level,
            parent=community.parent,
            children=list(community.children),
            title=title,
            summary=summary,
            findings=findings,
            rank=rank,
            rating_explanation=explanation,
            size=community.size,
        )
    )


def community_themes(members: list[EntityRow], rels: list[RelationshipRow], units_total: int) -> list[str]:
    """Up to `MAX_THEMES` concept or event titles, by their weight on the community's own relationships; none
    that occurs in more than `GENERIC_UNIT_SHARE` of the text units (when there are enough units to tell)."""
    weight: dict[str, float] = {}
    for r in rels:
        for end in (r.source, r.target):
            weight[end] = weight.get(end, 0.0) + r.weight
    limit = GENERIC_UNIT_SHARE * units_total if units_total >= 20 else math.inf
    ranked = sorted((e for e in members if e.type in THEME_TYPES and weight.get(e.title, 0.0) > 0
                     and e.frequency <= limit and _theme_like(e.title)),
                    key=lambda e: (-weight[e.title], -e.frequency, e.human_readable_id))
    return [e.title for e in ranked[:MAX_THEMES]]


def _theme_like(title: str) -> bool:
    """A theme is a short phrase, not a document's name or number ("EP-53 BEHIND THE TECH PODCAST", "EP39"): at
    most `MAX_THEME_WORDS` words, none mixing letters and digits, and more than two letters unless all capitals
    of an acronym of two ("AI")."""
    words = title.split()
    if not words or len(words) > MAX_THEME_WORDS or any(_CODE.search(w) for w in words):
        return False
    return len(title) > 2 or title.isupper()


def offline_reports(communities: list[CommunityRow], graph: Graph) -> list[ReportRow]:
    ranks = community_ranks(communities, graph)
    entity_by_id = {e.id: e for e in graph.entities}
    rel_by_id = {r.id: r for r in graph.relationships}
    hrid_by_title = {e.title: e.human_readable_id for e in graph.entities}
    units_total = len({u for e in graph.entities for u in e.text_unit_ids})
    reports = [
        offline_report(c, ranks[c.community], entity_by_id=entity_by_id, rel_by_id=rel_by_id,
                       hrid_by_title=hrid_by_title, units_total=units_total)
        for c in communities
    ]
    return dedupe_report_ids(reports)


def dedupe_report_ids(reports: list[ReportRow]) -> list[ReportRow]:
    """Report ids are content hashes; two identical reports would collide, so the later one names its community."""
    seen: set[str] = set()
    for r in reports:
        if r.id in seen:
            r.summary += f" (Community {r.community}.)"
            finish_report(r)
        seen.add(r.id)
    return reports
