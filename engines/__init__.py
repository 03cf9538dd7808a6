"""Search engines over a GraphRAG index: local, global, DRIFT, basic, and question generation.

    from engines import LocalSearch, load_config
    result = await LocalSearch(index).search("Who is Scrooge?")
    result.response, result.citations, result.usage.total.llm_calls

Imports are lazy so `import engines` (and `engines.models`) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real types for mypy; at run time the names load on first use (below)
    from engines.basic import BasicSearch as BasicSearch
    from engines.citations import Citation as Citation
    from engines.config import GraphrouteConfig as GraphrouteConfig
    from engines.config import load_config as load_config
    from engines.drift import DriftSearch as DriftSearch
    from engines.errors import EngineError as EngineError
    from engines.estimate import CostEstimate as CostEstimate
    from engines.events import AnswerDelta as AnswerDelta
    from engines.events import ContextReady as ContextReady
    from engines.events import Final as Final
    from engines.events import Progress as Progress
    from engines.global_search import GlobalSearch as GlobalSearch
    from engines.local import LocalSearch as LocalSearch
    from engines.questions import GeneratedQuestion as GeneratedQuestion
    from engines.questions import QuestionGenerator as QuestionGenerator
    from engines.questions import QuestionResult as QuestionResult
    from engines.result import Degradation as Degradation
    from engines.result import SearchResult as SearchResult

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
