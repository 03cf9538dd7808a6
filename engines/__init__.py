"""Search engines over a GraphRAG index: local, global, DRIFT, basic, and question generation.

    from engines import LocalSearch, load_config
    result = await LocalSearch(index).search("Who is Scrooge?")
    result.response, result.citations, result.usage.total.llm_calls

Imports are lazy so `import engines` (and `engines.models`) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LocalSearch": "engines.local",
    "GlobalSearch": "engines.global_search",
    "DriftSearch": "engines.drift",
    "BasicSearch": "engines.basic",
    "QuestionGenerator": "engines.questions",
    "QuestionResult": "engines.questions",
    "GeneratedQuestion": "engines.questions",
    "SearchResult": "engines.result",
    "Degradation": "engines.result",
    "Citation": "engines.citations",
    "CostEstimate": "engines.estimate",
    "EngineError": "engines.errors",
    "GraphrouteConfig": "engines.config",
    "load_config": "engines.config",
    "Progress": "engines.events",
    "ContextReady": "engines.events",
    "AnswerDelta": "engines.events",
    "Final": "engines.events",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'engines' has no attribute {name!r}")
