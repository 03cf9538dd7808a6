"""Search engines over a GraphRAG index: local, global, DRIFT, basic, and question generation.

    from engines import LocalSearch, load_config
    result = await LocalSearch(index).search("Who is Scrooge?")
    result.response, result.citations, result.usage.total.llm_calls
"""

from __future__ import annotations

from engines.basic import BasicPrompt, BasicSearch
from engines.citations import Citation
from engines.config import GraphrouteConfig, load_config
from engines.drift import DriftSearch
from engines.errors import EngineError
from engines.estimate import CostEstimate
from engines.events import AnswerDelta, ContextReady, Final, Progress
from engines.global_search import GlobalSearch
from engines.local import LocalPrompt, LocalSearch
from engines.questions import GeneratedQuestion, QuestionGenerator, QuestionResult
from engines.result import Degradation, SearchResult

__all__ = [
    "AnswerDelta",
    "BasicPrompt",
    "BasicSearch",
    "Citation",
    "ContextReady",
    "CostEstimate",
    "Degradation",
    "DriftSearch",
    "EngineError",
    "Final",
    "GeneratedQuestion",
    "GlobalSearch",
    "GraphrouteConfig",
    "LocalPrompt",
    "LocalSearch",
    "Progress",
    "QuestionGenerator",
    "QuestionResult",
    "SearchResult",
    "load_config",
]
