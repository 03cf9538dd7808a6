"""Global search with pre-ranking is capped by default: the most relevant 10 % of report tokens (>= one batch)."""

from __future__ import annotations

from pathlib import Path

from engines import GlobalSearch
from engines.config import GlobalSearchConfig
from engines.models.offline import OfflineChatModel
from shared_context import load_index

Q = "What are the main themes of the story?"


def test_prerank_reads_a_tenth_of_the_reports_by_default(carol_path: Path) -> None:
    index = load_index(carol_path)
    model = OfflineChatModel()
    static = GlobalSearch(index, model)
    ranked = GlobalSearch(index, model, config=GlobalSearchConfig(prerank=True))
    unbounded = GlobalSearch(index, model, config=GlobalSearchConfig(prerank=True, prerank_share=None))

    static_tokens = sum(b.tokens for b in static.builder.build(Q))
    ranked_batches = ranked.builder.build(Q)
    cap = max(GlobalSearchConfig().max_context_tokens, int(index.report_tokens.sum() * 0.1))
    assert sum(b.tokens for b in ranked_batches) <= cap
    assert sum(b.tokens for b in ranked_batches) <= 0.11 * static_tokens
    assert ranked.estimate(Q).llm_calls < static.estimate(Q).llm_calls
    # without a share the ranking only reorders: as many batches as static global
    assert len(unbounded.builder.build(Q)) == len(static.builder.build(Q))
