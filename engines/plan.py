"""What a question becomes before any linking or model call: the checks it and its history pass once, and
the `QueryPlan` it is handed on as.

A question must be a visible, valid Unicode string within `MAX_QUESTION_TOKENS`; only its first
`LINK_TOKENS` are used for entity linking. History is a list of earlier questions or role/content messages,
bounded per message (`MAX_TURN_TOKENS`) and in total (the oldest dropped, with a note). Bad input is a
`ValueError` naming the problem.

The router makes the plan (`plan_question`: the question is checked once), the classifier links entities
through it, an estimate keeps the context it built in it, and the engine that answers takes it instead of
checking, linking and building again. Linking and a built context are reused only where the engine would
compute exactly the same thing: lexical linking of the same text with the same `k` (no query vector, no
history), and a context built for the same text with no history and no query vector. With a query vector
the engine links again, but on the plan's `LexicalPass` (the vector-independent half: exact names, lexical
terms and BM25), so the text is analysed once and only the vector's scores are added.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engines.models.base import Message

if TYPE_CHECKING:
    import numpy as np

    from shared_context.index import Index
    from shared_context.linking import LexicalPass, LinkResult
    from shared_context.local_context import LocalContext
    from shared_context.tokens import Tokenizer

__all__ = [
    "LINK_TOKENS",
    "MAX_HISTORY_MESSAGES",
    "MAX_HISTORY_TOKENS",
    "MAX_QUESTION_TOKENS",
    "MAX_TURN_TOKENS",
    "HistoryLike",
    "QueryPlan",
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

HistoryLike = Sequence[Message | str | Mapping[str, object]] | None


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


@dataclass
class QueryPlan:
    question: str  # stripped
    link_text: str  # the question as used for linking (cut to the linking limit)
    note: str | None = None  # why the linking text differs from the question, if it does
    links: dict[int, LinkResult] = field(default_factory=dict)  # k -> lexical linking of link_text
    contexts: dict[str, tuple[str, LocalContext]] = field(default_factory=dict)  # engine -> (text, context built for it)
    analysed: LexicalPass | None = None  # the vector-independent half of linking link_text

    def lexical(self, index: Index) -> LexicalPass:
        """Exact names, lexical terms and BM25 strengths of `link_text`, computed once."""
        if self.analysed is None:
            from shared_context.linking import lexical_pass

            self.analysed = lexical_pass(index, self.link_text)
        return self.analysed

    def link(self, index: Index, k: int = 10, query_vector: np.ndarray | None = None) -> LinkResult:
        """Linking of `link_text` (no history): without a vector computed once per `k`; with one, the
        vector's scores merged into this plan's lexical pass."""
        from shared_context.linking import link_entities

        if query_vector is not None:
            return link_entities(index, self.link_text, query_vector=query_vector, k=k, analysed=self.lexical(index))
        if k not in self.links:
            self.links[k] = link_entities(index, self.link_text, k=k, analysed=self.lexical(index))
        return self.links[k]

    def linker(self, index: Index) -> Callable[[str], LinkResult]:
        """`text -> LinkResult` that reuses this plan's linking when `text` is the plan's own."""
        from shared_context.linking import link_entities

        def link(text: str) -> LinkResult:
            return self.link(index) if text == self.link_text else link_entities(index, text)

        return link

    def keep_context(self, engine: str, text: str, context: LocalContext) -> None:
        self.contexts[engine] = (text, context)

    def context_for(self, engine: str, text: str) -> LocalContext | None:
        """The context an estimate built for `engine` from the same `text`, else None."""
        kept = self.contexts.get(engine)
        return kept[1] if kept is not None and kept[0] == text else None
