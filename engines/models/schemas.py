"""Pydantic schemas of every structured model output (shared by engines and the offline model)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class MapPoint(BaseModel):
    description: str
    score: int = Field(ge=0, le=100)


class MapResponse(BaseModel):
    points: list[MapPoint] = Field(default_factory=list)


class RateResponse(BaseModel):
    reason: str = ""
    rating: int = Field(ge=0, le=5)


class PrimerResponse(BaseModel):
    intermediate_answer: str
    score: int = Field(ge=0, le=100)
    follow_up_queries: list[str] = Field(default_factory=list)


class FollowupResponse(BaseModel):
    response: str
    score: int = Field(ge=0, le=100)
    follow_up_queries: list[str] = Field(default_factory=list)


class QuestionList(BaseModel):
    questions: list[str] = Field(default_factory=list)


class RewriteResponse(BaseModel):
    question: str


class RouteResponse(BaseModel):
    engine: Literal["local", "global", "drift"]
    reason: str = ""


# ---- grading (engines/grading.py): the LLM judge's replies

class AnswerVerdict(BaseModel):
    verdict: Literal["correct", "partially", "incorrect"]
    reason: str = ""


class SentenceSupport(BaseModel):
    id: int
    supported: bool


class FaithfulnessVerdict(BaseModel):
    sentences: list[SentenceSupport] = Field(default_factory=list)


class ContextVerdict(BaseModel):
    evidence_found: list[int] = Field(default_factory=list)
    relevant_records: list[int] = Field(default_factory=list)
