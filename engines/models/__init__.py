"""The model layer: protocols, configuration, the factory, retries, limits, cache and structured output.

The backends live in their own modules and are built by `Models` / `build_chat_model` / `build_embedder`:
`engines.models.openai_backend` (imports `openai`) and `engines.models.offline` are not imported here, so
`import engines.models` stays cheap. The loopback model server tests and benchmarks run against lives outside
the product (`testing.model_server`).
"""

from __future__ import annotations

from engines.models.base import (
    ChatModel,
    Completion,
    Embedder,
    EmbeddingResult,
    HoldsClients,
    Message,
)
from engines.models.cache import ModelCallCache
from engines.models.config import (
    ModelEndpoint,
    ModelsConfig,
    PriceTable,
    load_models_config,
    models_config_from_mapping,
)
from engines.models.embedding_offline import OfflineEmbedder
from engines.models.errors import ModelError, StructuredOutputError
from engines.models.factory import Models, build_chat_model, build_embedder
from engines.models.structured import complete_json, repair_json_text

__all__ = [
    "ChatModel",
    "Completion",
    "Embedder",
    "EmbeddingResult",
    "HoldsClients",
    "Message",
    "ModelCallCache",
    "ModelEndpoint",
    "ModelError",
    "Models",
    "ModelsConfig",
    "OfflineEmbedder",
    "PriceTable",
    "StructuredOutputError",
    "build_chat_model",
    "build_embedder",
    "complete_json",
    "load_models_config",
    "models_config_from_mapping",
    "repair_json_text",
]
