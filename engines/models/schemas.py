"""Pydantic schemas of every structured model output (shared by engines and the offline model)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Schema(BaseModel):
    # Validators are built on first use, not when `import router` defines the classes (import time).
    model_config = ConfigDict(defer_build=True)


class MapPoint(_Schema):
    description: str
    score: int = Field(ge=0, le=100)


class MapResponse(_Schema):
    points: list[MapPoint] = Field(default_factory=list)


class RateResponse(_Schema):
    reason: str = ""
    rating: int = Field(ge=0, le=5)


class PrimerResponse(_Schema):
    intermediate_answer: str
    score: int = Field(ge=0, le=100)
    follow_up_queries: list[str] = Field(default_factory=list)


class FollowupResponse(_Schema):
    response: str
    score: int = Field(ge=0, le=100)
    follow_up_queries: list[str] = Field(default_factory=list)


class QuestionList(_Schema):
    questions: list[str] = Field(default_factory=list)


class RewriteResponse(_Schema):
    question: str


class RouteResponse(_Schema):
    engine: Literal["local", "global", "drift"]
    reason: str = ""


# ---- grading (benchmarks/grading.py): the LLM judge's replies

class AnswerVerdict(_Schema):
    verdict: Literal["correct", "partially", "incorrect"]
    reason: str = ""


class SentenceSupport(_Schema):
    id: int
    supported: bool


class FaithfulnessVerdict(_Schema):
    sentences: list[SentenceSupport] = Field(default_factory=list)


class ContextVerdict(_Schema):
    evidence_found: list[int] = Field(default_factory=list)
    relevant_records: list[int] = Field(default_factory=list)
