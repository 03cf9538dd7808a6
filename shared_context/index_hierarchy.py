"""Community hierarchy repair at load, and the communities and reports per level.

Older schemas did not store parent/children links (v0/v1), or stored one side only; they are derived
here whatever the version, and a report without its own links takes its community's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from shared_context.index import Adjacency
from shared_context.index_links import LoadTables
from shared_context.records import values_of

__all__ = ["Levels", "derive_hierarchy", "levels_of"]


@dataclass(frozen=True)
class Levels:
    communities_by_level: dict[int, list[int]]  # community numbers per level
    reports_by_level: dict[int, list[int]]  # report positions per level
    levels: list[int]


def derive_hierarchy(t: LoadTables, community_pos: dict[int, int], entity_pos: Callable[[], dict[str, int]],
                     entity_communities: Adjacency) -> None:
    """Fill parent/children links that older schemas did not store.

    No links at all (v0/v1): each community's parent is the community one level up holding most
    of its entities (`entity_pos` is asked for only then). Only one side stored: the other side is its inverse.
    """
    communities = t.communities
    if not communities:
        return
    has_parent = any(p != -1 for p in values_of(communities, "parent"))
    has_children = any(values_of(communities, "children"))
    if has_parent and has_children:
        return
    file = t.notes.file("communities")
    if not has_parent and has_children:
        for comm in communities:
            for child in comm.children:
                if child in community_pos:
                    communities[community_pos[child]].parent = comm.community
        t.notes.add(f"{file}: no 'parent' column; parents derived from 'children'")
        return
    if not has_parent:
        levels = sorted({c.level for c in communities})
        if len(levels) < 2:
            return
        _parents_from_membership(t, levels, entity_pos(), entity_communities)
        t.notes.add(f"{file}: no parent/children columns; hierarchy derived from entity membership")
    else:
        t.notes.add(f"{file}: no 'children' column; children derived from 'parent'")
    for comm in communities:
        if comm.parent in community_pos:
            communities[community_pos[comm.parent]].children.append(comm.community)
    for comm in communities:
        comm.children.sort()


def _parents_from_membership(t: LoadTables, levels: list[int], entity_pos: dict[str, int],
                             entity_communities: Adjacency) -> None:
    level_of = {c.community: c.level for c in t.communities}
    entity_comm_at = [{level_of[c]: c for c in comms} for comms in entity_communities]
    for comm in t.communities:
        if comm.level == levels[0]:
            continue
        up = levels[levels.index(comm.level) - 1]
        votes = Counter(entity_comm_at[entity_pos[e]].get(up, -1) for e in comm.entity_ids if e in entity_pos)
        votes.pop(-1, None)
        if votes:  # most shared members wins; ties go to the smaller community number
            comm.parent = min(votes.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def levels_of(t: LoadTables, community_pos: dict[int, int]) -> Levels:
    """Communities and reports per level; a report with no links of its own takes its community's."""
    # read column-wise: a RecordList then makes only the records a step changes
    communities_by_level: dict[int, list[int]] = {}
    levels = values_of(t.communities, "level", int)
    for level, number in sorted(zip(levels, values_of(t.communities, "community", int), strict=True)):
        communities_by_level.setdefault(level, []).append(number)

    reports = t.community_reports
    numbers = values_of(reports, "community", int)
    unknown = [n for n in numbers if n not in community_pos]
    if t.communities and unknown:
        t.notes.add(
            f"{t.notes.file('community_reports')}: column 'community': {len(unknown)} reports name no community "
            f"in {t.notes.file('communities')} (e.g. {unknown[0]})"
        )
    reports_by_level: dict[int, list[int]] = {}
    columns = (values_of(reports, "parent", int), values_of(reports, "children", list), values_of(reports, "level", int))
    for pos, (number, parent, children, level) in enumerate(zip(numbers, *columns, strict=True)):
        c_pos = community_pos.get(number)
        if c_pos is not None and parent == -1 and not children:
            community, report = t.communities[c_pos], reports[pos]
            report.parent, report.children = community.parent, list(community.children)
        reports_by_level.setdefault(level, []).append(pos)
    reports_by_level = dict(sorted(reports_by_level.items()))
    all_levels = sorted(set(communities_by_level) | set(reports_by_level))
    if not t.community_reports:
        t.notes.add("no community reports: global search and DRIFT primers have nothing to read")
    return Levels(communities_by_level, reports_by_level, all_levels)
