"""What a question becomes before any linking or model call: the checks it and its history pass once, and
the frozen `Question` it is handed on as.

A question must be a visible, valid Unicode string within `MAX_QUESTION_TOKENS`; only its first
`LINK_TOKENS` are used for entity linking. History is a list of earlier questions or role/content messages,
bounded per message (`MAX_TURN_TOKENS`) and in total (the oldest dropped, with a note). Bad input is a
`ValueError` naming the problem.

`prepare_question` is the one place these checks run: the router calls it once per question (its
`RoutedQuestion` is a `Question`), an engine used on its own calls it for a question string. A `Question` is
immutable: what is shared per question is computed once by its owner and handed on as a new value, never
filled in. The router links the question once before classifying (`with_linking`: the lexical pass, the
vector-independent half of linking, and the lexical linking itself); an estimate returns the context it built
(`CostEstimate.prebuilt`) and the router hands it on (`with_context`). An engine reuses them only where it
would compute exactly the same thing: the lexical linking for the same `k` with no query vector and no
history, a prebuilt context for the same engine and text with no history and no query vector; with a query
vector it links on the question's lexical pass, so the text is analysed once.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
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
    "Prebuilt",
    "Question",
    "check_question",
    "limit_history",
    "normalise_history",
    "prepare_question",
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


@dataclass(frozen=True)
class Prebuilt:
    """A context an estimate built for `engine` from `text` (no history, no query vector)."""

    engine: str
    text: str
    context: LocalContext


@dataclass(frozen=True, kw_only=True)
class Question:
    """A question checked once, with its bounded history and deadline; what the estimate and the engine read.

    `text` is what the engines answer (a follow-up's standalone form when the router rewrote it); `link_text`
    is `text` as used for linking (cut to `LINK_TOKENS`, `link_note` says so). `deadline` is a
    `time.perf_counter()` instant, `deadline_s` the seconds it was set to (named when it passes)."""

    text: str
    link_text: str
    link_note: str | None = None
    history: tuple[Message, ...] = ()
    history_note: str | None = None
    deadline: float | None = None
    deadline_s: float | None = None
    lexical: LexicalPass | None = None  # the vector-independent half of linking `link_text`
    link: LinkResult | None = None  # the lexical linking of `link_text` to `link_k` entities
    link_k: int = 0
    prebuilt: Prebuilt | None = None

    def with_linking(self, index: Index, k: int = 10) -> Question:
        """This question with its lexical pass and its lexical linking to `k` entities, computed now."""
        from shared_context.linking import lexical_pass, link_entities

        lexical = self.lexical if self.lexical is not None else lexical_pass(index, self.link_text)
        link = link_entities(index, self.link_text, k=k, analysed=lexical)
        return replace(self, lexical=lexical, link=link, link_k=k)

    def with_context(self, prebuilt: Prebuilt | None) -> Question:
        """This question with a context an estimate built for it (unchanged when there is none)."""
        return self if prebuilt is None or prebuilt.text != self.link_text else replace(self, prebuilt=prebuilt)

    def linked(self, index: Index, k: int = 10, query_vector: np.ndarray | None = None) -> LinkResult:
        """Linking of `link_text` (no history): the kept linking when it is exactly this one, else computed on
        the kept lexical pass (nothing is stored)."""
        from shared_context.linking import link_entities

        if query_vector is None and self.link is not None and k == self.link_k:
            return self.link
        return link_entities(index, self.link_text, query_vector=query_vector, k=k, analysed=self.lexical)

    def linker(self, index: Index) -> Callable[[str], LinkResult]:
        """`text -> LinkResult` that reuses this question's linking when `text` is its own."""
        from shared_context.linking import link_entities

        def link(text: str) -> LinkResult:
            return self.linked(index) if text == self.link_text else link_entities(index, text)

        return link

    def context_for(self, engine: str, text: str) -> LocalContext | None:
        """The context an estimate built for `engine` from the same `text` with no history, else None."""
        kept = self.prebuilt
        if kept is None or self.history or kept.engine != engine or kept.text != text:
            return None
        return kept.context


def prepare_question(question: str, index: Index, history: HistoryLike = None, *,
                     deadline_s: float | None = None, started: float | None = None) -> Question:
    """The question and its history checked once (ValueError on bad input), with the deadline `deadline_s`
    seconds after `started` (a `time.perf_counter()` instant, default now)."""
    import time

    link_text, note = check_question(question, index)
    turns, history_note = limit_history(normalise_history(history), index.tokenizer)
    deadline = None
    if deadline_s is not None:
        deadline = (time.perf_counter() if started is None else started) + deadline_s
    return Question(text=question.strip(), link_text=link_text, link_note=note, history=tuple(turns),
                    history_note=history_note, deadline=deadline, deadline_s=deadline_s)
