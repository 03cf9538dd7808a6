"""The lexical ranking of text units by their best window, and the local context's default split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shared_context.basic_context import question_basic_context
from shared_context.bm25 import BM25
from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.linking import lexical_top
from shared_context.local_context import LocalContextBuilder
from shared_context.passages import best_window_order, excerpt_blocks
from shared_context.records import Community, CommunityReport, Entity, Relationship, TextUnit
from shared_context.text_unit_selection import question_units

FILLER = "The river ran past the mill and the orchard in the long summer evenings. "
SCATTERED = (
    "A lantern hung by the door. " + FILLER * 6 + "The keeper went to town. " + FILLER * 6
    + "Someone spoke of a lantern again. " + FILLER * 6 + "The keeper slept. " + FILLER * 6
    + "The harbour was quiet. " + FILLER * 6 + "Another lantern. " + FILLER * 6 + "The harbour froze. "
)
FOCUSED = FILLER * 30 + "The keeper hung the lantern above the harbour at dusk. " + FILLER * 30


def _index() -> Index:
    texts = [SCATTERED, FOCUSED, FILLER * 20, "Nothing here but a short note about bread."]
    units = [TextUnit(id=f"t{j}", short_id=str(j), text=t) for j, t in enumerate(texts)]
    entities = [
        Entity(id="k", short_id="0", title="KEEPER", description="the lighthouse keeper", text_unit_ids=["t0", "t1"]),
        Entity(id="h", short_id="1", title="HARBOUR", description="the harbour", text_unit_ids=["t0", "t1"]),
    ]
    rels = [Relationship(id="r0", short_id="0", source="KEEPER", target="HARBOUR",
                         description="the keeper watches the harbour", text_unit_ids=["t1"])]
    community = Community(id="c0", community=0, level=0, entity_ids=["k", "h"])
    report = CommunityReport(id="r0", community=0, level=0, title="The harbour", summary="the keeper and the harbour",
                             full_content="The keeper and the harbour. " * 20, rank=5.0)
    return index_from_records(entities=entities, relationships=rels, text_units=units, communities=[community],
                              community_reports=[report])


QUESTION = "Where did the keeper hang his lantern in the harbour?"


def test_a_unit_with_a_passage_about_the_question_outranks_scattered_mentions() -> None:
    index = _index()
    unit_order = lexical_top(index, "text_units", QUESTION, 10)[0].tolist()
    assert unit_order[0] == 0  # whole-unit BM25: the scattered unit holds the question's words more often
    assert best_window_order(index, unit_order, QUESTION, 200)[:2] == [1, 0]
    assert question_units(index, QUESTION).lexical[:2] == [1, 0]
    # basic search takes the same ranking: the focused passage is shown first
    basic = question_basic_context(index, QUESTION, 400)
    sources = basic.tables.sources
    assert sources is not None and sources.rows[0].id == "1"
    assert "hung the lantern above the harbour" in sources.rows[0].text


def test_best_window_order_scores_with_index_wide_idf_and_keeps_order_on_ties() -> None:
    index = _index()
    table = excerpt_blocks(index, 200)
    # the document frequencies over all blocks are what a block-by-block count gives
    every_block = [b for u in range(len(index.text_units)) for b in table.blocks(u)]
    for term in ("lantern", "keeper", "river"):
        term_id = table.vocab.get(term)
        assert term_id is not None
        assert int(table.term_df[term_id]) == sum(1 for b in every_block if term in b.counts) > 0
    # no question term anywhere: the given order is kept, duplicates dropped
    assert best_window_order(index, [3, 2, 3, 0], "zebra quokka", 200) == [3, 2, 0]
    # units without any question term go after those with one, in their given order
    assert best_window_order(index, [3, 2, 1], QUESTION, 200) == [1, 3, 2]
    assert best_window_order(index, [], QUESTION, 200) == []


def test_frequency_scores_take_the_idf_of_a_larger_collection() -> None:
    tf = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    lengths = np.array([10, 10, 13])
    n, df = 40, np.array([2, 30])
    got = BM25.frequency_scores(tf, lengths, collection=(n, df))
    # BM25 by hand: the collection's idf, the scored documents' own length normalisation
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    norm = 1.2 * (1 - 0.75 + 0.75 * lengths / lengths.mean())
    want = (idf * tf * 2.2 / (tf + norm[:, None])).sum(axis=1)
    assert got == pytest.approx(want)
    # without it the idf is the scored documents' own (each term in 2 of 3): the twice-repeated common term
    # wins; with the collection's idf the rare term does
    own = BM25.frequency_scores(tf, lengths)
    assert own[1] > own[0] and got[0] > got[1]


def test_default_local_context_shows_no_reports_and_keeps_graph_rows() -> None:
    index = _index()
    builder = LocalContextBuilder(index)
    relation = builder.build("How is the KEEPER related to the HARBOUR?", max_context_tokens=4000)
    assert relation.need == "relation"
    assert relation.section("Reports") is None or not relation.section("Reports").rows  # type: ignore[union-attr]
    assert relation.section("Relationships") is not None and relation.section("Entities") is not None
    # GraphRAG's community_prop brings the reports back; the default Sources share yields to it
    with_reports = builder.build("How is the KEEPER related to the HARBOUR?", max_context_tokens=4000,
                                 community_prop=0.3)
    reports = with_reports.section("Reports")
    assert reports is not None and len(reports.rows) == 1
    assert with_reports.params.sources_share(1.0) == pytest.approx(0.7)
    assert with_reports.tokens <= 4000
    # set explicitly, a Sources share that does not fit beside the reports is refused by name
    with pytest.raises(ValueError, match="text_unit_prop"):
        LocalContextBuilder(index, {"community_prop": 0.3, "text_unit_prop": 0.8})


def test_reports_share_set_in_graphroute_toml_leaves_the_default_sources_share_room(tmp_path: Path) -> None:
    from engines.config import load_config
    from engines.local import local_builder

    cfg_file = tmp_path / "graphroute.toml"
    cfg_file.write_text("[local]\ncommunity_prop = 0.3\n")
    cfg = load_config(cfg_file, env={})
    builder = local_builder(_index(), cfg.local)
    assert builder.params.community_prop == 0.3
    assert builder.params.sources_share(1.0) == pytest.approx(0.7)
    ctx = builder.build("How is the KEEPER related to the HARBOUR?", max_context_tokens=4000)
    reports = ctx.section("Reports")
    assert reports is not None and len(reports.rows) == 1
