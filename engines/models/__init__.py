"""The model layer: protocols, the OpenAI-compatible backend, offline models, retries, limits, cache.

Public names are imported lazily so `import engines.models` stays cheap (no openai/sklearn import).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real types for mypy; at run time the names load on first use (below)
    from engines.models.base import ChatModel as ChatModel
    from engines.models.base import Completion as Completion
    from engines.models.base import Embedder as Embedder
    from engines.models.base import EmbeddingResult as EmbeddingResult
    from engines.models.base import Message as Message
    from engines.models.cache import ModelCallCache as ModelCallCache
    from engines.models.config import ModelEndpoint as ModelEndpoint
    from engines.models.config import ModelsConfig as ModelsConfig
    from engines.models.config import PriceTable as PriceTable
    from engines.models.config import load_models_config as load_models_config
    from engines.models.config import models_config_from_mapping as models_config_from_mapping
    from engines.models.embedding_offline import OfflineEmbedder as OfflineEmbedder
    from engines.models.errors import ModelError as ModelError
    from engines.models.errors import StructuredOutputError as StructuredOutputError
    from engines.models.factory import Models as Models
    from engines.models.factory import build_chat_model as build_chat_model
    from engines.models.factory import build_embedder as build_embedder
    from engines.models.openai_backend import OpenAIChatModel as OpenAIChatModel
    from engines.models.openai_backend import OpenAIEmbedder as OpenAIEmbedder
    from engines.models.structured import complete_json as complete_json
    from engines.models.structured import repair_json_text as repair_json_text
    from engines.models.testserver import LoopbackServer as LoopbackServer

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
