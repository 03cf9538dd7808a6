"""Engines take their context builder from the caller (default: built from the config)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engines import DriftSearch, GlobalSearch, LocalSearch
from router import Budget, Router
from shared_context import CommunityContextBuilder, CommunityContextParams, LocalContextBuilder, load_index
from shared_context.local_context import LocalContextParams


@pytest.fixture(scope="module")
def dulce(dulce_path: Path):
    return load_index(dulce_path)


class RecordingBuilder(LocalContextBuilder):
    def __init__(self, index, params) -> None:
        super().__init__(index, params)
        self.queries: list[str] = []

    def build(self, query, *args, **kwargs):
        self.queries.append(query)
        return super().build(query, *args, **kwargs)


def test_local_search_uses_the_builder_it_is_given(dulce) -> None:
    builder = RecordingBuilder(dulce, LocalContextParams(max_context_tokens=1500))
    engine = LocalSearch(dulce, builder=builder)
    assert engine.builder is builder
    result = asyncio.run(engine.search("Who is Alex Mercer?"))
    assert builder.queries == ["Who is Alex Mercer?"]
    assert dulce.tokenizer.count(result.context_text) <= 1500  # the custom builder's budget, not the config's
    assert isinstance(LocalSearch(dulce).builder, LocalContextBuilder)  # default from the config


def test_drift_and_global_take_builders_too(dulce) -> None:
    follow = RecordingBuilder(dulce, LocalContextParams(max_context_tokens=1000))
    assert DriftSearch(dulce, builder=follow).builder is follow
    community = CommunityContextBuilder(dulce, CommunityContextParams(max_context_tokens=2000))
    assert GlobalSearch(dulce, builder=community).builder is community


def test_the_pre_ranking_engine_is_built_once_per_call_cap(dulce) -> None:
    router = Router(dulce)
    budget = Budget(max_llm_calls=6)
    engines = router.lifecycle
    assert engines.prerank_engine(budget) is engines.prerank_engine(budget)
    assert engines.prerank_engine(Budget(max_llm_calls=9)) is not engines.prerank_engine(budget)
