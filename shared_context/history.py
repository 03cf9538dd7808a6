"""Conversation history: QA turns, the newest user turns for entity linking, and the history table.

GraphRAG keeps the OLDEST `max_turns` turns in the table while linking with the newest (bug 5) and lets
the history eat the whole budget. Here both use the newest turns, and the table has its own budget:
turns are added newest first until the budget is full, then shown oldest-to-newest so the table reads
like the conversation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from shared_context.tables import Column, HistoryRecord, Section, SectionBuilder, render_row
from shared_context.tokens import Tokenizer

__all__ = ["HISTORY_COLUMNS", "HISTORY_SECTION", "QATurn", "build_history_section", "qa_turns", "recent_user_turns"]

HISTORY_SECTION = "Conversation History"
_ROLES = ("user", "assistant", "system")
# the table shows `turn|content`: a message's role and text (GraphRAG's column names)
HISTORY_COLUMNS = (Column("turn", "role"), Column("content", "content"))


@dataclass
class QATurn:
    question: str
    answers: list[str] = field(default_factory=list)


def _validate(history: Sequence[Mapping[str, object]] | None) -> list[tuple[str, str]]:
    if history is None:
        return []
    if isinstance(history, (str, bytes)) or not isinstance(history, Sequence):
        raise ValueError("conversation history must be a list of {'role', 'content'} messages")
    out: list[tuple[str, str]] = []
    for i, msg in enumerate(history):
        if not isinstance(msg, Mapping) or "role" not in msg or "content" not in msg:
            raise ValueError(f"conversation history message {i} must be a mapping with 'role' and 'content'")
        role, content = msg["role"], msg["content"]
        if not isinstance(role, str) or role not in _ROLES:
            raise ValueError(f"conversation history message {i} has role {role!r}; expected one of {_ROLES}")
        if not isinstance(content, str):
            raise ValueError(f"conversation history message {i} content must be a string")
        out.append((role, content))
    return out


def qa_turns(history: Sequence[Mapping[str, object]] | None) -> list[QATurn]:
    """Group messages into QA turns, oldest first: a user message opens a turn, the assistant messages
    after it are its answers; leading assistant messages and system messages are dropped (as GraphRAG)."""
    turns: list[QATurn] = []
    for role, content in _validate(history):
        if role == "user":
            turns.append(QATurn(content))
        elif role == "assistant" and turns:
            turns[-1].answers.append(content)
    return turns


def recent_user_turns(history: Sequence[Mapping[str, object]] | None, max_turns: int) -> list[str]:
    """The newest `max_turns` user questions, newest first (what GraphRAG appends to the query)."""
    if max_turns <= 0:
        return []
    return [t.question for t in reversed(qa_turns(history))][:max_turns]


def build_history_section(
    history: Sequence[Mapping[str, object]] | None,
    tokenizer: Tokenizer,
    *,
    budget: int,
    max_turns: int = 5,
    user_turns_only: bool = True,
) -> Section[HistoryRecord]:
    """The `Conversation History` table (`turn|content`) of the newest turns that fit `budget`."""
    all_turns = qa_turns(history)
    turns = all_turns[-max_turns:] if max_turns > 0 else []
    first_number = len(all_turns) - len(turns) + 1
    builder: SectionBuilder[HistoryRecord] = SectionBuilder(HISTORY_SECTION, HISTORY_COLUMNS, tokenizer, budget)
    kept: list[list[tuple[str, str, int]]] = []
    for number, turn in reversed(list(enumerate(turns, start=first_number))):
        rows = [("user", turn.question)]
        if not user_turns_only and turn.answers:
            rows.append(("assistant", "\n".join(turn.answers)))
        cost = sum(builder.row_tokens(render_row([role, text])) for role, text in rows)
        if builder.used + cost > builder.budget:
            break
        builder.used += cost
        kept.append([(role, text, number) for role, text in rows])
    # Render oldest first; reset the running count so add() re-checks each row against the budget.
    builder.used = builder.head_tokens
    for kept_rows in reversed(kept):
        for role, text, number in kept_rows:
            builder.add(HistoryRecord(f"turn-{number}", role, text, number))
    return builder.finish()
