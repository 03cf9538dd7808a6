"""The models one engine calls: the chat model per stage, the embedder and prices, resolved by type.

An engine accepts one `ChatModel` for every stage, the configured `Models` bundle, or None (the bundle the
configuration describes: offline by default).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from engines.models.base import ChatModel, Embedder
from engines.models.factory import Models
from shared_context.search_backend import vector_table

if TYPE_CHECKING:
    from engines.config import GraphrouteConfig
    from engines.models.config import PriceTable
    from shared_context.index import Index

__all__ = ["ModelLike", "ModelSet", "vector_for"]

# What engines accept as `model`: one chat model for every stage, the configured bundle, or None (from config).
ModelLike: TypeAlias = "ChatModel | Models | None"


class ModelSet:
    """The chat model per stage, the embedder and prices, whatever form the caller gave them in."""

    def __init__(
        self,
        index: Index,
        model: ModelLike = None,
        embedder: Embedder | None = None,
        graphroute_config: GraphrouteConfig | None = None,
    ) -> None:
        self._bundle: Models | None = None
        self._single: ChatModel | None = None
        self.prices: PriceTable | None = None
        self.embedder: Embedder | None = embedder
        if model is None:
            model = _default_models(index, graphroute_config)
        if isinstance(model, Models):
            self._bundle = model
            self.embedder = embedder if embedder is not None else model.embedder
            self.prices = model.config.prices
        elif isinstance(model, ChatModel):
            self._single = model
        else:
            raise TypeError(
                f"model must be a ChatModel, an engines.models.factory.Models bundle or None, got {type(model).__name__}"
            )

    def chat(self, stage: str) -> ChatModel:
        if self._bundle is not None:
            return self._bundle.chat(stage)
        assert self._single is not None
        return self._single

    @property
    def offline(self) -> bool:
        return bool(self.chat("answer").offline)

    def cost(self, stage: str, prompt_tokens: int, output_tokens: int) -> float:
        """Price of a hypothetical call (for estimates); 0 for offline or unknown models."""
        model = self.chat(stage)
        if model.offline or self.prices is None:
            return 0.0
        return float(self.prices.cost(model.name, prompt_tokens, output_tokens))  # unknown model: 0, warned once


def _default_models(index: Index, graphroute_config: GraphrouteConfig | None) -> Models:
    """The configured model stack (offline by default: extractive chat model + TF-IDF embedder)."""
    from engines.config import GraphrouteConfig

    return Models.from_config((graphroute_config or GraphrouteConfig()).models, index=index)


def vector_for(index: Index, table: str, models: ModelSet) -> bool:
    """True when the index has vectors for `table` that the configured embedder can query."""
    vt = vector_table(index, table)
    emb = models.embedder
    return vt is not None and emb is not None and len(vt) > 0 and vt.dim == emb.dim
