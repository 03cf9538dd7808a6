"""Prompt formatters: a built context and the question rendered into the messages the model is sent.

An engine's second step (`engines.engine.PromptFormatter`): the builder's typed context stays apart from
how it is shown to the model, so a caller can change the prompt without touching how the context is chosen
(`LocalSearch(..., formatter=...)`, `BasicSearch(..., formatter=...)`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from engines import prompts

if TYPE_CHECKING:
    from engines.models.base import Message
    from engines.prompts import PromptTemplate
    from shared_context.basic_context import BasicContext
    from shared_context.local_context import LocalContext

__all__ = ["BasicPrompt", "LocalPrompt"]


def _question_after(system: str, question: str) -> list[Message]:
    # every built-in prompt keeps the data in the system message and the question as the last user message
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


@dataclass(frozen=True)
class LocalPrompt:
    """Local search's prompt: its template (the configured one, else the built-in) filled with the tables."""

    template: PromptTemplate | None = None
    response_type: str = "multiple paragraphs"

    def render(self, context: LocalContext, question: str) -> list[Message]:
        system = prompts.template(self.template, "local").fill(
            citation_rules=prompts.CITATION_RULES, response_type=self.response_type, context_data=context.text)
        return _question_after(system, question)


@dataclass(frozen=True)
class BasicPrompt:
    """Basic search's prompt: its template filled with the Sources table."""

    template: PromptTemplate | None = None
    response_type: str = "multiple paragraphs"

    def render(self, context: BasicContext, question: str) -> list[Message]:
        system = prompts.template(self.template, "basic").fill(response_type=self.response_type,
                                                                 context_data=context.text)
        return _question_after(system, question)
