"""The checks a question and its history pass once, before any linking or model call.

A question must be a visible, valid Unicode string within `MAX_QUESTION_TOKENS`; only its first
`LINK_TOKENS` are used for entity linking. History is a list of earlier questions or role/content messages,
bounded per message (`MAX_TURN_TOKENS`) and in total (the oldest dropped, with a note). Bad input is a
`ValueError` naming the problem.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engines.models.base import Message
from engines.plan import QueryPlan

if TYPE_CHECKING:
    from shared_context.index import Index
    from shared_context.tokens import Tokenizer

__all__ = [
    "LINK_TOKENS",
    "MAX_HISTORY_MESSAGES",
    "MAX_HISTORY_TOKENS",
    "MAX_QUESTION_TOKENS",
    "MAX_TURN_TOKENS",
    "HistoryLike",
    "check_question",
    "limit_history",
    "normalise_history",
    "plan_question",
]

# Questions longer than this are refused; longer than LINK_TOKENS are cut for entity linking only.
MAX_QUESTION_TOKENS = 8_000
LINK_TOKENS = 1_000
# History bounds, checked before any linking: one message, the number of messages and their total kept.
MAX_TURN_TOKENS = 4_000
MAX_HISTORY_MESSAGES = 50
MAX_HISTORY_TOKENS = 16_000

HistoryLike = Sequence[Message | str | Mapping[str, Any]] | None


def normalise_history(history: HistoryLike) -> list[Message]:
    """Accept a list of strings (earlier user questions) or of role/content messages; anything else is a
    ValueError naming the item (a bare string would otherwise be read one character per turn)."""
    if history is None:
        return []
    if isinstance(history, str | bytes) or not isinstance(history, Sequence):
        raise ValueError(
            f"history must be a list of earlier questions or {{'role', 'content'}} messages, "
            f"got {type(history).__name__}"
        )
    out: list[Message] = []
    for i, item in enumerate(history):
        if isinstance(item, str):
            out.append({"role": "user", "content": _valid_text(item, f"history item {i}")})
        elif isinstance(item, Mapping) and "role" in item and "content" in item:
            role = item["role"]
            if role not in ("user", "assistant", "system"):
                raise ValueError(f"history item {i} has unknown role {role!r} (use 'user', 'assistant' or 'system')")
            content = item["content"]
            if not isinstance(content, str):  # None would become the text "None"
                raise ValueError(f"history item {i} content must be a string, got {type(content).__name__}")
            out.append({"role": role, "content": _valid_text(content, f"history item {i}")})
        else:
            raise ValueError(f"history item {i} must be a string or a {{'role', 'content'}} message")
    return out


def limit_history(turns: list[Message], tokenizer: Tokenizer) -> tuple[list[Message], str | None]:
    """Bound the history before any linking: one oversized message is a ValueError naming it; beyond
    MAX_HISTORY_MESSAGES messages or MAX_HISTORY_TOKENS tokens the oldest are dropped (with a note)."""
    sizes = []
    for i, turn in enumerate(turns):
        text = turn["content"]
        # A cheap bound first: a token is rarely under 1/16 of a character, so huge texts are refused
        # without paying to tokenise them.
        tokens = MAX_TURN_TOKENS + 1 if len(text) > 16 * MAX_TURN_TOKENS else tokenizer.count(text)
        if tokens > MAX_TURN_TOKENS:
            size = f"{tokens:,} tokens" if len(text) <= 16 * MAX_TURN_TOKENS else f"{len(text):,} characters"
            raise ValueError(
                f"history item {i} is too long: {size} (the limit is {MAX_TURN_TOKENS:,} tokens per message)"
            )
        sizes.append(tokens)
    kept, total = 0, 0
    for tokens in reversed(sizes):
        if kept == MAX_HISTORY_MESSAGES or total + tokens > MAX_HISTORY_TOKENS:
            break
        kept, total = kept + 1, total + tokens
    if kept == len(turns):
        return turns, None
    return turns[len(turns) - kept :], (
        f"only the newest {kept} of {len(turns)} history messages were used (limits: {MAX_HISTORY_MESSAGES} "
        f"messages, {MAX_HISTORY_TOKENS:,} tokens)"
    )


def _valid_text(text: str, what: str) -> str:
    """`text`, or a ValueError when it holds a lone surrogate (not Unicode text; it cannot be sent)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise ValueError(
            f"{what} is not valid Unicode text: lone surrogate U+{ord(text[err.start]):04X} at position {err.start}"
        ) from None
    return text


_INVISIBLE = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp"})


def _has_visible(text: str) -> bool:
    return any(unicodedata.category(ch) not in _INVISIBLE for ch in text)


def plan_question(question: str, index: Index) -> QueryPlan:
    """The question checked once (ValueError on bad input), as the `QueryPlan` the pipeline hands on."""
    link_text, note = check_question(question, index)
    return QueryPlan(question.strip(), link_text, note)


def check_question(question: str, index: Index) -> tuple[str, str | None]:
    """(question to use for linking, degradation note or None); raises ValueError on bad input."""
    if not isinstance(question, str):
        raise ValueError(f"question must be a string, got {type(question).__name__}")
    if not question.strip():
        raise ValueError("question is empty")
    if len(question) > 16 * MAX_QUESTION_TOKENS:  # refused before paying to tokenise it
        raise ValueError(f"question is too long: {len(question):,} characters (the limit is "
                         f"{MAX_QUESTION_TOKENS} tokens)")
    _valid_text(question, "question")
    if not _has_visible(question):
        raise ValueError("question is empty: it has only invisible characters (control, zero-width or bidi marks)")
    tokens = index.tokenizer.count(question)
    if tokens > MAX_QUESTION_TOKENS:
        raise ValueError(f"question is too long: {tokens} tokens (the limit is {MAX_QUESTION_TOKENS})")
    if tokens > LINK_TOKENS:
        return index.tokenizer.truncate(question, LINK_TOKENS), (
            f"question has {tokens} tokens; only its first {LINK_TOKENS} were used to find entities"
        )
    return question.strip(), None
