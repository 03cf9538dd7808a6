"""Multi-turn: rewrite a follow-up into a standalone question before it is classified."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from engines import prompts
from engines.models.base import ChatModel, Completion, Message
from engines.models.task_context import TaskContext
from shared_context.history import HISTORY_COLUMNS, HISTORY_SECTION
from shared_context.tables import ContextTables, HistoryRecord, Section

if TYPE_CHECKING:
    from engines.prompts import PromptTemplate

# Words that make a question depend on earlier turns (English and Chinese).
_DEPENDENT = re.compile(
    r"\b(he|she|him|her|his|hers|it|its|they|them|their|this|that|these|those|there|then|"
    r"the same|the other|what about|how about|and|also|too|why not|which one)\b|"
    r"[他她它]们?|这个|那个|这些|那些|那里|其|该",
    re.IGNORECASE,
)

REWRITE_SYSTEM = prompts.REWRITE  # the built-in prompt; `[router] rewrite_prompt` replaces it


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


def history_context(question: str, history: Sequence[Message], max_turns: int = 6) -> TaskContext:
    """The typed data of the rewrite prompt: the question and the conversation table `render_history` shows."""
    rows: list[HistoryRecord] = []
    turn = 0
    for message in list(history)[-max_turns:]:
        turn += message["role"] == "user" or not rows
        rows.append(HistoryRecord(f"turn-{turn}", message["role"], message["content"], turn))
    return TaskContext(question, ContextTables(history=Section(HISTORY_SECTION, HISTORY_COLUMNS, rows)))


async def rewrite_question(
    question: str, history: Sequence[Message], model: ChatModel, prompt: PromptTemplate | None = None
) -> tuple[str, list[Completion]]:
    """Return the standalone question and the completions spent (empty when no rewrite was needed)."""
    if not needs_rewrite(question, history):
        return question, []
    from engines.models.structured import complete_json
    from engines.schemas import RewriteResponse

    messages: list[Message] = [
        {"role": "system", "content": prompts.template(prompt, "rewrite").fill(history=render_history(history))},
        {"role": "user", "content": question},
    ]
    parsed, completions = await complete_json(model, messages, RewriteResponse, task="rewrite", max_tokens=200,
                                              context=history_context(question, history))
    standalone = str(parsed.question).strip() or question
    return standalone, completions
