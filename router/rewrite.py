"""Multi-turn: rewrite a follow-up into a standalone question before it is classified."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from typing import Any

from engines.models.base import ChatModel, Completion, Message

# Words that make a question depend on earlier turns (English and Chinese).
_DEPENDENT = re.compile(
    r"\b(he|she|him|her|his|hers|it|its|they|them|their|this|that|these|those|there|then|"
    r"the same|the other|what about|how about|and|also|too|why not|which one)\b|"
    r"[他她它]们?|这个|那个|这些|那些|那里|其|该",
    re.IGNORECASE,
)

REWRITE_SYSTEM = """You rewrite the user's latest message into a standalone question.
Use the conversation below to resolve pronouns, ellipsis and references ("he", "that project",
"what about X?") so the question can be understood without the conversation. Keep the user's
language and intent; do not answer it. If it is already standalone, return it unchanged.
Return JSON: {{"question": "<standalone question>"}}

{history}
"""


def user_turns(history: Sequence[Message]) -> list[str]:
    """User turns, newest first (the order entity linking expects)."""
    return [t["content"] for t in reversed(history) if t["role"] == "user"]


def needs_rewrite(question: str, history: Sequence[Message]) -> bool:
    if not any(t["role"] == "user" for t in history):
        return False
    words = question.split()
    return bool(_DEPENDENT.search(question)) or len(words) <= 4


def render_history(history: Sequence[Message], max_turns: int = 6) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, delimiter="|", lineterminator="\n")
    writer.writerow(["turn", "content"])
    for turn in list(history)[-max_turns:]:
        writer.writerow([turn["role"], turn["content"]])
    return "-----Conversation History-----\n" + buf.getvalue()


async def rewrite_question(
    question: str, history: Sequence[Message], model: ChatModel
) -> tuple[str, list[Completion]]:
    """Return the standalone question and the completions spent (empty when no rewrite was needed)."""
    if not needs_rewrite(question, history):
        return question, []
    from engines.models.structured import complete_json
    from engines.schemas import RewriteResponse

    messages: list[Message] = [
        {"role": "system", "content": REWRITE_SYSTEM.format(history=render_history(history))},
        {"role": "user", "content": question},
    ]
    parsed: Any
    parsed, completions = await complete_json(model, messages, RewriteResponse, task="rewrite", max_tokens=200)
    standalone = str(parsed.question).strip() or question
    return standalone, completions
