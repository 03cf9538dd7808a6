"""GraphRAG's relationship_ranking_attribute: relationships of the local context ranked by combined degree
("rank", the default) or by weight, out-network ones by how many selected entities they link first."""

from __future__ import annotations

import numpy as np
import pytest

from engines.config import ConfigError, config_from_mapping
from shared_context.index import Index
from shared_context.local_context import LocalContextBuilder, LocalContextParams, select_relationships


def _most_connected(index: Index, n: int) -> list[int]:
    degrees = [len(index.entity_relationships[i]) for i in range(len(index.entities))]
    return [int(i) for i in np.argsort(degrees, kind="stable")[::-1][:n]]


@pytest.mark.parametrize("ranking", ["rank", "weight"])
def test_the_ranking_attribute_orders_both_networks(carol: Index, ranking: str) -> None:
    entities = _most_connected(carol, 3)
    in_net, out_net = select_relationships(carol, entities, 10, ranking)
    assert in_net and len(out_net) == 30

    def key(pos: int) -> tuple[float, float]:
        r = carol.relationships[pos]
        return (r.combined_degree, r.weight) if ranking == "rank" else (r.weight, r.combined_degree)

    assert [key(p) for p in in_net] == sorted((key(p) for p in in_net), reverse=True)
    selected = {carol.entities[e].title for e in entities}

    def links(pos: int) -> int:
        r = carol.relationships[pos]
        outside = r.target if r.source in selected else r.source
        return len({e for e in selected for p in carol.entity_relationships[carol.entity_by_title[e]]
                    if outside in (carol.relationships[p].source, carol.relationships[p].target)})

    # relationships to a title with no entity row share one "outside" end in the selection; left out here
    ranked = [(links(p), *key(p)) for p in out_net if (carol.relationship_endpoints[p] >= 0).all()]
    assert len(ranked) > 20 and ranked == sorted(ranked, reverse=True)


def test_weight_ranking_changes_the_local_context(carol: Index) -> None:
    question = "What does Scrooge think of Christmas, Bob Cratchit and Fred?"
    by_rank = LocalContextBuilder(carol, LocalContextParams()).build(question)
    by_weight = LocalContextBuilder(carol, LocalContextParams(relationship_ranking_attribute="weight")).build(question)
    rank_ids = [r["id"] for r in by_rank.section("Relationships").records]
    weight_ids = [r["id"] for r in by_weight.section("Relationships").records]
    assert rank_ids and weight_ids and rank_ids != weight_ids
    with pytest.raises(ValueError, match="'rank' or 'weight'"):
        select_relationships(carol, [0], 10, "degree")


def test_the_setting_is_checked_where_it_is_configured() -> None:
    config = config_from_mapping({"local": {"relationship_ranking_attribute": "weight"}}, {})
    assert config.local.relationship_ranking_attribute == "weight"
    assert config.drift.local_search.relationship_ranking_attribute == "rank"
    with pytest.raises(ConfigError, match=r"local\.relationship_ranking_attribute: must be one of 'rank' or 'weight' \(got 'degree'\)"):
        config_from_mapping({"local": {"relationship_ranking_attribute": "degree"}}, {})
