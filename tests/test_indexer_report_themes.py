"""The themes an offline community report names (`indexer.reports.community_themes`), on rows written here."""

from __future__ import annotations

from indexer.graph import EntityRow, RelationshipRow
from indexer.reports import community_themes


def _entity(title: str, type_: str, frequency: int, hrid: int) -> EntityRow:
    return EntityRow(title=title, type=type_, description="", text_unit_ids=[], frequency=frequency,
                     human_readable_id=hrid)


def _rel(source: str, target: str, weight: float) -> RelationshipRow:
    return RelationshipRow(source=source, target=target, description="", weight=weight, text_unit_ids=[])


MEMBERS = [
    _entity("ADA MORROW", "PERSON", 30, 0),
    _entity("TIDAL POWER", "CONCEPT", 12, 1),
    _entity("HARBOUR STRIKE", "EVENT", 5, 2),
    _entity("TURBINE BLADES", "CONCEPT", 8, 3),
    _entity("THING", "CONCEPT", 90, 4),  # in most of the 100 units: the corpus's word, not this community's
    _entity("GRID COST", "CONCEPT", 3, 5),
]
RELS = [
    _rel("ADA MORROW", "TIDAL POWER", 9), _rel("TIDAL POWER", "TURBINE BLADES", 4),
    _rel("ADA MORROW", "HARBOUR STRIKE", 6), _rel("THING", "ADA MORROW", 20), _rel("GRID COST", "ADA MORROW", 1),
]


def test_themes_are_concepts_and_events_by_their_weight_in_the_community() -> None:
    assert community_themes(MEMBERS, RELS, units_total=100) == ["TIDAL POWER", "HARBOUR STRIKE", "TURBINE BLADES"]


def test_a_concept_found_all_over_the_corpus_is_a_theme_only_when_the_corpus_is_too_small_to_tell() -> None:
    assert "THING" not in community_themes(MEMBERS, RELS, units_total=100)
    assert community_themes(MEMBERS, RELS, units_total=10)[0] == "THING"


def test_an_offline_report_summary_names_its_themes() -> None:
    from indexer.communities import CommunityRow
    from indexer.reports import offline_report

    members = {f"e{e.human_readable_id}": e for e in MEMBERS}
    for key, e in members.items():
        e.id = key
    rels = {f"r{i}": r for i, r in enumerate(RELS)}
    community = CommunityRow(community=0, level=0, parent=-1, children=[], entity_ids=list(members),
                             relationship_ids=list(rels), text_unit_ids=[])
    report = offline_report(community, 7.0, entity_by_id=members, rel_by_id=rels,
                            hrid_by_title={e.title: e.human_readable_id for e in MEMBERS}, units_total=100)
    assert "Its main themes are TIDAL POWER, HARBOUR STRIKE and TURBINE BLADES." in report.summary


def test_a_document_name_or_number_is_not_a_theme() -> None:
    members = [*MEMBERS, _entity("EP-12 HARBOUR TALKS PODCAST", "CONCEPT", 6, 6),
               _entity("THE LONG HISTORY OF HARBOUR TRADE", "CONCEPT", 4, 7)]
    rels = [*RELS, _rel("ADA MORROW", "EP-12 HARBOUR TALKS PODCAST", 30),
            _rel("ADA MORROW", "THE LONG HISTORY OF HARBOUR TRADE", 25)]
    themes = community_themes(members, rels, units_total=100)
    assert "EP-12 HARBOUR TALKS PODCAST" not in themes and "THE LONG HISTORY OF HARBOUR TRADE" not in themes
    assert themes[0] == "TIDAL POWER"
