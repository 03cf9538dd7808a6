"""The model layer: protocols, the OpenAI-compatible backend, offline models, retries, limits, cache.

Public names are imported lazily so `import engines.models` stays cheap (no openai/sklearn import).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ChatModel": "engines.models.base",
    "Completion": "engines.models.base",
    "Embedder": "engines.models.base",
    "EmbeddingResult": "engines.models.base",
    "Message": "engines.models.base",
    "ModelsConfig": "engines.models.config",
    "ModelEndpoint": "engines.models.config",
    "PriceTable": "engines.models.config",
    "load_models_config": "engines.models.config",
    "models_config_from_mapping": "engines.models.config",
    "Models": "engines.models.factory",
    "build_chat_model": "engines.models.factory",
    "build_embedder": "engines.models.factory",
    "complete_json": "engines.models.structured",
    "repair_json_text": "engines.models.structured",
    "OpenAIChatModel": "engines.models.openai_backend",
    "OpenAIEmbedder": "engines.models.openai_backend",
    "OfflineEmbedder": "engines.models.embedding_offline",
    "ModelCallCache": "engines.models.cache",
    "LoopbackServer": "engines.models.testserver",
    "ModelError": "engines.models.errors",
    "StructuredOutputError": "engines.models.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'engines.models' has no attribute {name!r}")
