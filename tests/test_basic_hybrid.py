"""Hybrid basic search: BM25 and vector rankings fused, shown as excerpts until the budget is full."""

from __future__ import annotations

import numpy as np
import pytest
from fixture_paths import CAROL

from engines.basic import BasicSearch
from engines.config import BasicSearchConfig, ConfigError, config_from_mapping
from shared_context import load_index
from shared_context.basic_context import question_basic_context
from shared_context.index import Index
from shared_context.linking import lexical_top
from shared_context.search_backend import vector_table


@pytest.fixture(scope="module")
def index() -> Index:
    return load_index(CAROL)


def _shown(ctx: object) -> set[int]:
    sources = ctx.tables.sources  # type: ignore[attr-defined]
    return set() if sources is None else {r.position for r in sources.rows}


def _a_vector_only_unit(index: Index, question: str) -> tuple[int, np.ndarray]:
    """A unit that shares no word with `question`, and a query vector that points straight at it."""
    lexical = set(lexical_top(index, "text_units", question, len(index.text_units))[0].tolist())
    table = vector_table(index, "text_unit_text")
    assert table is not None
    unit = next(p for p in range(len(index.text_units)) if p not in lexical)
    row = int(np.flatnonzero(np.asarray(table.positions) == unit)[0])
    return unit, np.asarray(table.matrix[row], dtype=np.float32)


def test_hybrid_shows_what_each_ranking_alone_misses(index: Index) -> None:
    question = "Fezziwig ball warehouse"
    unit, vec = _a_vector_only_unit(index, question)  # BM25 cannot reach it; the vector points at it
    best_lexical = int(lexical_top(index, "text_units", question, 1)[0][0])
    budget = 8000
    hybrid = question_basic_context(index, question, budget, mode="hybrid", query_vector=vec)
    vector = question_basic_context(index, question, budget, mode="vector", query_vector=vec, k=3)
    lexical = question_basic_context(index, question, budget, mode="lexical", query_vector=vec)
    assert hybrid.method == "hybrid" and vector.method == "vector" and lexical.method == "lexical"
    assert {unit, best_lexical} <= _shown(hybrid)  # both the vector's and BM25's best
    assert best_lexical in _shown(lexical) and unit not in _shown(lexical)  # BM25 cannot see the vector's unit
    assert unit in _shown(vector)
    vector_wide = question_basic_context(index, question, budget, mode="vector", query_vector=vec, k=1)
    assert best_lexical not in _shown(vector_wide)  # the vector's one best unit is not BM25's


@pytest.mark.parametrize("budget", [800, 2500, 6000])
def test_the_fused_ranking_fills_the_budget(index: Index, budget: int) -> None:
    ctx = question_basic_context(index, "What did Scrooge see with the Ghost of Christmas Yet to Come?", budget)
    assert ctx.tokens == index.tokenizer.count(ctx.text) <= budget
    assert ctx.tokens >= 0.9 * budget  # excerpts keep filling what whole units would leave empty


def test_whole_units_in_fused_order_when_excerpts_are_off(index: Index) -> None:
    ctx = question_basic_context(index, "Marley's ghost and the chains", 4000, excerpt_tokens=0)
    rows = ctx.tables.sources.rows if ctx.tables.sources is not None else []
    assert rows and not any(r.truncated for r in rows)
    assert ctx.tokens <= 4000


def test_without_a_vector_hybrid_says_it_ranked_lexically(index: Index) -> None:
    ctx = question_basic_context(index, "Marley's ghost", 2000, mode="hybrid", query_vector=None)
    assert ctx.method == "lexical" and any("no query vector" in n for n in ctx.notes)


async def test_basic_search_defaults_to_hybrid(index: Index) -> None:
    result = await BasicSearch(index).search("Who is Bob Cratchit's youngest son?")
    assert result.details["retrieval"] == "hybrid"
    assert "Tim" in result.context_text and result.citations


def test_mode_is_validated() -> None:
    assert BasicSearchConfig().mode == "hybrid"
    with pytest.raises(ConfigError, match=r"basic\.mode"):
        config_from_mapping({"basic": {"mode": "semantic"}}, env={})
    with pytest.raises(ValueError, match="unknown basic search mode"):
        question_basic_context(load_index(CAROL), "x y", 100, mode="dense")  # type: ignore[arg-type]
