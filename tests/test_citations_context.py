"""Citation validity: a cited id must exist in the index AND have been in the context the model was given."""

from __future__ import annotations

from typing import Any

from fixture_paths import CAROL
from test_engines_support import load, loopback_model, script, srv

from engines import BasicSearch, GlobalSearch
from engines.citations import context_ids, resolve_citations

__all__ = ["srv"]


def test_context_ids_reads_every_citable_table_and_skips_others() -> None:
    text = ("-----Conversation History-----\nturn|content\nuser|hi\n\n"
            "-----Entities-----\nid|entity|description\n3|SCROOGE|\"a miser,\nold\"\n7|MARLEY|ghost\n\n"
            "-----Sources-----\nid|text\n12|Marley was dead\n")
    assert context_ids(text) == {("Entities", "3"), ("Entities", "7"), ("Sources", "12")}


def test_real_id_outside_the_context_is_not_resolved() -> None:
    index = load(CAROL)
    unit, entity = index.text_units[0], index.entities[0]
    text = f"A [Data: Sources ({unit.short_id}); Entities ({entity.short_id}); Entities (99999999)]"
    by_key = {(c.kind, c.id): c for c in resolve_citations(index, text, {("Sources", unit.short_id)})}
    assert by_key[("Sources", unit.short_id)].resolved and by_key[("Sources", unit.short_id)].in_context
    outside = by_key[("Entities", entity.short_id)]
    assert outside.exists and outside.in_context is False and not outside.resolved and not outside.document_ids
    invented = by_key[("Entities", "99999999")]
    assert not invented.exists and not invented.resolved


async def test_basic_answer_citing_entities_it_never_supplied_is_flagged(srv: Any) -> None:
    index = load(CAROL)
    entity = index.entities[0]
    # The loopback model cites the first source it was given and an entity basic search never supplies.
    script(srv, "basic_answer", lambda body: f"Scrooge [Data: Sources ({_first_source_id(body)}); Entities ({entity.short_id})]")
    result = await BasicSearch(index, loopback_model(srv)).search("What does Scrooge say about Christmas?")
    by_kind = {c.kind: c for c in result.citations}
    assert by_kind["Sources"].resolved and by_kind["Sources"].in_context
    assert not by_kind["Entities"].resolved and by_kind["Entities"].exists
    assert [c.kind for c in result.unresolved_citations] == ["Entities"]
    assert set(result.text_unit_ids) == set(by_kind["Sources"].text_unit_ids)


async def test_offline_global_answer_cites_only_reports_it_was_given() -> None:
    result = await GlobalSearch(load(CAROL)).search("What are the main themes of the story?")
    assert result.citations and not result.unresolved_citations
    assert all(c.in_context for c in result.citations)


def _first_source_id(body: dict[str, Any]) -> str:
    system = next(m["content"] for m in body["messages"] if m["role"] == "system")
    return sorted(context_ids(system))[0][1]


async def test_local_search_carries_the_ids_it_showed_instead_of_parsing_them(srv: Any) -> None:
    from engines import LocalSearch
    from engines.citations import context_ids_of_messages, tables_context_ids

    index = load(CAROL)
    seen: list[list[tuple[str, str]]] = []
    script(srv, "local_answer", lambda body: seen.append(context_ids_of_messages(body["messages"])) or "Scrooge.")
    engine = LocalSearch(index, loopback_model(srv))
    for question in ("Who is Bob Cratchit?", "What does Scrooge see with the Ghost of Christmas Yet to Come?"):
        result = await engine.search(question)
        ctx = engine.builder.build(question, None)
        # what the model was sent, parsed, is what the builder's records say, in the same order
        assert seen[-1] == tables_context_ids(ctx.tables) == result.context_ids
        assert {kind for kind, _ in seen[-1]} >= {"Entities", "Relationships", "Sources"}
    history = engine.builder.build("And his son?", [{"role": "user", "content": "Who is Bob Cratchit?"}])
    assert "-----Conversation History-----" in history.text  # a table that is not citable
    assert tables_context_ids(history.tables) == context_ids_of_messages([{"role": "system", "content": history.text}])
