"""Global search's context parameters: GraphRAG's (effective defaults) plus level, pre-ranking and batch caps."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CommunityContextParams"]


class CommunityContextParams(BaseModel):
    """GraphRAG's global-search context parameters (effective defaults) plus level and pre-ranking knobs."""

    # defer_build: validators are built on first use, not when `import router` defines the class (import time)
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    max_context_tokens: int = Field(default=12_000, ge=1)  # per batch
    community_level: int | None = None  # None: every level; L: level L only (see include_lower_levels)
    include_lower_levels: bool = False  # with community_level=L, use levels 0..L like GraphRAG
    use_community_summary: bool = False
    include_community_rank: bool = True
    include_community_weight: bool = True
    community_weight_name: str = "occurrence weight"
    normalize_community_weight: bool = True
    min_community_rank: float = 0
    shuffle_data: bool = True
    random_state: int = 86
    conversation_history_max_turns: int = Field(default=5, ge=0)
    conversation_history_user_turns_only: bool = True
    conversation_history_prop: float = Field(default=0.25, ge=0.0, le=1.0)
    prerank: bool = False
    max_reports: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)  # report rows only, headers excluded
    max_batches: int | None = Field(default=None, ge=1)  # hard cap on map calls; later batches dropped
