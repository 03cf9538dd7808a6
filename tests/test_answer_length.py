"""Answer length presets: every engine's response type and global's reduce length; the offline reduce obeys."""

from __future__ import annotations

import pytest
from fixture_paths import CAROL
from test_engines_support import load

from engines import DriftSearch, GlobalSearch
from engines.answer_length import LENGTHS, apply_length
from engines.config import GraphrouteConfig
from engines.models.offline_reduce import DEFAULT_MAX_POINTS, max_points, word_limit_tokens


def test_presets_set_every_engine_and_reject_unknown_names() -> None:
    cfg = apply_length(GraphrouteConfig(), "short")
    short = LENGTHS["short"]
    assert {cfg.local.response_type, cfg.basic.response_type, cfg.drift.response_type,
            cfg.global_search.response_type} == {short.response_type}
    assert cfg.global_search.reduce_max_length == short.reduce_max_length
    with pytest.raises(ValueError, match="choose from short, medium, long"):
        apply_length(GraphrouteConfig(), "tiny")


def test_offline_reduce_reads_the_size_from_its_context() -> None:
    assert max_points(LENGTHS["short"].response_type) == 3
    assert max_points("multiple paragraphs") == DEFAULT_MAX_POINTS
    assert word_limit_tokens(150) == 200
    assert word_limit_tokens(None) is None


@pytest.mark.parametrize("engine", [GlobalSearch, DriftSearch])
async def test_offline_global_and_drift_answers_follow_the_length(engine: type) -> None:
    index = load(CAROL)
    bullets = {}
    for length in ("short", "medium", None):
        cfg = GraphrouteConfig() if length is None else apply_length(GraphrouteConfig(), length)
        section = cfg.global_search if engine is GlobalSearch else cfg.drift
        result = await engine(index, config=section).search("What are the main themes of the story?")
        bullets[length] = sum(1 for line in result.response.splitlines() if line.startswith("- "))
    assert 1 <= bullets["short"] <= 3 < bullets["medium"] <= 8 and bullets["medium"] <= bullets[None] <= DEFAULT_MAX_POINTS
    if engine is GlobalSearch:  # the Carol reports name more themes than a medium answer holds
        assert bullets[None] > 8
