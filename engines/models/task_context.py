"""`TaskContext`: the typed data of one model call, handed to the model beside its rendered messages.

Engines render their prompts from templates (which a user may replace) and pass the data those prompts
show as typed values here: the context tables of a builder, the analyst findings of a reduce, the
template report of DRIFT's HyDE, and the scalar inputs. A model that writes text from the prompt (the
OpenAI-compatible backend) ignores it; the offline extractive model reads only this, never the prompt's
text, so it answers the same whatever the prompt's wording.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared_context.tables import ContextTables

__all__ = ["Finding", "TaskContext"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One analyst block of a reduce: a map point, a DRIFT answer or a partial answer, with its score."""

    number: int
    score: float
    text: str


@dataclass(frozen=True)
class TaskContext:
    """What a model call is about (the fields a task does not use stay empty)."""

    question: str  # the user's question (a DRIFT follow-up's own question), as the last user message says it
    tables: ContextTables = field(default_factory=ContextTables)
    findings: tuple[Finding, ...] = ()  # reduce: best first
    template: str = ""  # DRIFT HyDE: the report whose shape the hypothetical answer takes
    response_type: str = ""  # the answer's length and format, e.g. "multiple paragraphs"
    overall_question: str = ""  # DRIFT follow-up: the question the exploration serves
    max_followups: int | None = None  # DRIFT follow-up: how many new questions it may propose
    question_count: int | None = None  # question generation: how many questions to suggest
    word_limit: int | None = None  # reduce: the answer's length limit in words
