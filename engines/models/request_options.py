"""A caller's own settings for the answer a question ends with: the OpenAI-compatible service passes a client's
`max_tokens`, `temperature`, `top_p`, `seed` and penalties through to the model call that writes the final
answer (the answer, reduce or DRIFT reduce task), never to the calls that gather what it is built from.

They travel in a context variable set for the request (`use_answer_options`): asyncio tasks copy their
parent's context, so every call the question's engines make sees them, and other requests never do. A model
backend reads them with `answer_options(task)`.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

# The tasks whose output is the answer a caller receives (engines' prompt contract: ARCHITECTURE "Tasks").
ANSWER_TASKS = frozenset({"local_answer", "basic_answer", "global_reduce", "drift_reduce"})


@dataclass(frozen=True)
class AnswerOptions:
    max_tokens: int | None = None  # the answer's cap (the smaller of this and the engine's own)
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None

    def sampling(self) -> dict[str, float | int]:
        """The sampling fields that are set, as request-body fields (temperature aside)."""
        fields = {"top_p": self.top_p, "seed": self.seed, "presence_penalty": self.presence_penalty,
                  "frequency_penalty": self.frequency_penalty}
        return {k: v for k, v in fields.items() if v is not None}


_CURRENT: ContextVar[AnswerOptions | None] = ContextVar("graphroute_answer_options", default=None)


def use_answer_options(options: AnswerOptions | None) -> None:
    """Set the options for the rest of this task (a request's own task) and the tasks it starts."""
    _CURRENT.set(options)


def answer_options(task: str) -> AnswerOptions | None:
    """The caller's options when `task` writes the final answer, else None."""
    return _CURRENT.get() if task in ANSWER_TASKS else None


def capped(engine_cap: int | None, options: AnswerOptions | None) -> int | None:
    """The smaller of the engine's own answer cap and the caller's."""
    caller = options.max_tokens if options is not None else None
    if caller is None:
        return engine_cap
    return caller if engine_cap is None else min(engine_cap, caller)
