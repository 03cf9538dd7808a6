"""Answer length presets (`graphroute ask --length short|medium|long`).

A preset sets every engine's `response_type` (the words the answer prompts pass to the model) and global
search's reduce word limit. The response types state their size as "at most N key points", words a real
model follows and the offline extractive reduce reads (`engines/models/offline_reduce.py`), so the same
setting bounds the answer whichever model writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engines.config import GraphrouteConfig


@dataclass(frozen=True)
class AnswerLength:
    response_type: str
    reduce_max_length: int  # words of global search's final answer (in the reduce prompt)


LENGTHS: dict[str, AnswerLength] = {
    "short": AnswerLength("a short answer of at most 3 key points, one or two sentences each", 150),
    "medium": AnswerLength("a concise answer of at most 8 key points, in a few short paragraphs or a list", 500),
    "long": AnswerLength("a detailed answer of at most 25 key points, in multiple paragraphs", 2000),
}
DEFAULT_LENGTH = "medium"


def apply_length(config: GraphrouteConfig, length: str) -> GraphrouteConfig:
    """`config` with every engine's answer length set to the preset `length` (ValueError naming the choices)."""
    if length not in LENGTHS:
        raise ValueError(f"unknown answer length {length!r} (choose from {', '.join(LENGTHS)})")
    preset = LENGTHS[length]
    rt = {"response_type": preset.response_type}
    return config.model_copy(update={
        "local": config.local.model_copy(update=rt),
        "basic": config.basic.model_copy(update=rt),
        "drift": config.drift.model_copy(update=rt),
        "global_search": config.global_search.model_copy(
            update=rt | {"reduce_max_length": preset.reduce_max_length}),
    })
