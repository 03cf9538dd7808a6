"""Re-export: the schemas of structured model outputs live in `engines.models.schemas` (the model layer
parses them, and it must not import the engines)."""

from engines.models.schemas import (
    AnswerVerdict,
    ContextVerdict,
    FaithfulnessVerdict,
    FollowupResponse,
    MapPoint,
    MapResponse,
    PrimerResponse,
    QuestionList,
    RateResponse,
    RewriteResponse,
    RouteResponse,
    SentenceSupport,
)

__all__ = [
    "AnswerVerdict",
    "ContextVerdict",
    "FaithfulnessVerdict",
    "FollowupResponse",
    "MapPoint",
    "MapResponse",
    "PrimerResponse",
    "QuestionList",
    "RateResponse",
    "RewriteResponse",
    "RouteResponse",
    "SentenceSupport",
]
