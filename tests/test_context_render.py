"""Typed contexts and their rendering: a built context rendered from its records alone is the text the builder
counted, and the ids the typed tables show are those a reader of the rendered text finds."""

from __future__ import annotations

import dataclasses

import pytest
from fixture_paths import FIXTURES

from engines.citations import context_id_list, tables_context_ids
from shared_context.community_context import CommunityContextBuilder
from shared_context.index import Index
from shared_context.local_context import LocalContextBuilder
from shared_context.tables import (
    Column,
    ContextTables,
    EntityRecord,
    ReportRecord,
    Section,
    SourceRecord,
    columns,
)

HISTORY = [{"role": "user", "content": 'Who is "the | one"?\nSecond line'}, {"role": "assistant", "content": "x"}]
PARAMS = [{}, {"excerpt_tokens": 0}, {"max_context_tokens": 600},
          {"include_community_rank": True, "use_community_summary": True, "include_entity_rank": False}]


def _load(name: str) -> Index:
    path = FIXTURES / name
    from shared_context import load_index

    return load_index(path)


def _from_records(tables: ContextTables) -> ContextTables:
    """The same tables without the rows the builder rendered: rendering them renders every record."""
    return ContextTables(**{f.name: None if getattr(tables, f.name) is None
                            else dataclasses.replace(getattr(tables, f.name), lines=None)
                            for f in dataclasses.fields(tables)})


@pytest.mark.parametrize("name", ["christmas_carol_graphrag_index", "operation_dulce"])
def test_contexts_render_from_their_records_to_the_counted_text(name: str) -> None:
    index = _load(name)
    ranked = sorted(range(len(index.entities)), key=lambda i: -len(index.entity_relationships[i]))[:12]
    questions = [f"Who is {index.entities[i].title}?" for i in ranked] + ["What are the main themes?"]
    for params in PARAMS:
        builder = LocalContextBuilder(index, params)
        for n, question in enumerate(questions):
            ctx = builder.build(question, HISTORY if n % 4 == 0 else None)
            assert _from_records(ctx.tables).render() == ctx.text
            assert ctx.tokens == index.tokenizer.count(ctx.text)
            assert tables_context_ids(ctx.tables) == context_id_list(ctx.text)
    for params in ({}, {"max_context_tokens": 700}, {"use_community_summary": True, "include_community_weight": False}):
        for batch in CommunityContextBuilder(index, params).build("themes", history=HISTORY):
            assert _from_records(batch.tables).render() == batch.text
            assert tables_context_ids(batch.tables) == context_id_list(batch.text)


def test_tables_made_in_code_render_in_the_table_format() -> None:
    entities = Section("Entities", (Column("id", "id"), Column("entity", "title"), Column("description", "description"),
                                    Column("number of relationships", "rank")),
                       [EntityRecord("4", "ADA", 'Keeper of the "North" light | and bell', 3)])
    reports = Section("Reports", columns("id", "title", "content"), [ReportRecord("2", "Gullrock", "A rock.")])
    empty = Section("Sources", columns("id", "text"), list[SourceRecord]())
    tables = ContextTables(reports=reports, entities=entities, sources=empty)
    assert tables.render() == (
        "-----Reports-----\nid|title|content\n2|Gullrock|A rock.\n\n"
        '-----Entities-----\nid|entity|description|number of relationships\n4|ADA|"Keeper of the ""North"" light | and bell"|3'
    )
    assert tables.shown_ids() == [("Reports", "2"), ("Entities", "4")]
    assert tables.to_dict()["Entities"][0] == {"id": "4", "title": "ADA", "description": 'Keeper of the "North" light | and bell',
                                               "rank": 3, "type": "", "position": -1, "in_context": True}
    assert "Sources" not in tables.to_dict()  # a section with no record is left out
