"""The contract of a model call: the chat and embedding protocols, what a call returns (`Completion`,
`EmbeddingResult`; a reply's visible text without the reasoning blocks some models write first, and the mark a
reply carries when its context does not answer the question), and the usage it is accounted as per stage
(`Usage`: every number a user pays for, recorded where it happens; the model layer and the indexer record usage
too, so it lives here rather than in the engines).

The insufficient-context mark (`INSUFFICIENT_MARKER`): GraphRAG's answer prompts only ask the model to say so in
words, which software cannot read reliably in every language. The local and basic prompts also ask for the mark
on a line of its own; the engines take it out of the answer (and out of its stream, where it may arrive split
over several deltas) and record it as `SearchResult.insufficient`, which the router escalates on. A custom
prompt without the instruction never gets the mark, so then only an empty answer escalates. The offline model
writes it from how much of the question's content the context covers. It lives in the model layer because the
offline model writes it.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Protocol,
    TypeAlias,
    TypedDict,
    TypeGuard,
    runtime_checkable,
)

import numpy as np
from pydantic import BaseModel

if TYPE_CHECKING:
    from engines.models.task_context import TaskContext


# A JSON value as `json.loads` gives it (model replies, response bodies, request payloads).
JSON: TypeAlias = "dict[str, JSON] | list[JSON] | str | int | float | bool | None"
JSONObject: TypeAlias = "dict[str, JSON]"


class Message(TypedDict):
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int
    output_tokens: int
    model: str
    seconds: float
    usage_estimated: bool = False  # counted with tiktoken because the provider reported none
    cached: bool = False
    cost: float = 0.0


@dataclass(frozen=True)
class EmbeddingResult:
    vectors: np.ndarray  # float32, shape (n, dim)
    prompt_tokens: int
    model: str
    seconds: float
    usage_estimated: bool = False
    cost: float = 0.0


@runtime_checkable
class ChatModel(Protocol):
    """A chat model. `context` is the typed data the messages render (`task_context.TaskContext`): a model
    that writes from the prompt ignores it, the offline extractive model reads only it."""

    name: str
    offline: bool

    async def complete(
        self,
        messages: list[Message],
        *,
        task: str = "answer",
        json_schema: type[BaseModel] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        context: TaskContext | None = None,
    ) -> Completion: ...

    def stream(
        self,
        messages: list[Message],
        *,
        task: str = "answer",
        max_tokens: int | None = None,
        temperature: float | None = None,
        context: TaskContext | None = None,
    ) -> AsyncIterator[str | Completion]:
        """Yield text deltas, then exactly one final `Completion` with the full text and usage."""
        ...


@runtime_checkable
class HoldsClients(Protocol):
    """A model (chat or embedding) that keeps HTTP clients per event loop: `aopen` makes this loop's before
    the first call would (`graphroute serve` does it on its loop before it listens), `aclose` closes them."""

    async def aopen(self) -> None: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int
    offline: bool

    async def embed(self, texts: list[str]) -> EmbeddingResult: ...


@runtime_checkable
class LocalEmbedder(Embedder, Protocol):
    """An embedder computing on this machine's CPU, with no network call: `embed_sync` runs in the caller's
    thread, so an engine can embed a question and build its context in one worker-thread hop."""

    def embed_sync(self, texts: list[str]) -> EmbeddingResult: ...


_LOCAL_BY_CLASS: dict[type, bool] = {}


def is_local_embedder(embedder: object) -> TypeGuard[LocalEmbedder]:
    """`isinstance(embedder, LocalEmbedder)`, decided once per class: a runtime-checkable Protocol's
    isinstance looks up every protocol member on each call, and every local question asked it twice."""
    kind = type(embedder)
    local = _LOCAL_BY_CLASS.get(kind)
    if local is None:
        local = _LOCAL_BY_CLASS[kind] = isinstance(embedder, LocalEmbedder)
    return local


# ---------------------------------------------------------------------------- usage

STAGES = (
    "rewrite",
    "classify",
    "entity_link",
    "build_context",
    "rate",
    "map",
    "reduce",
    "primer",
    "followups",
    "answer",
)


@dataclass
class StageUsage:
    llm_calls: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    cached_calls: int = 0
    cost: float = 0.0
    seconds: float = 0.0
    estimated: bool = False  # True when any count came from tiktoken rather than the provider
    embedding_calls: int = 0
    embedding_tokens: int = 0

    def __iadd__(self, other: StageUsage) -> StageUsage:
        self.llm_calls += other.llm_calls
        self.prompt_tokens += other.prompt_tokens
        self.output_tokens += other.output_tokens
        self.cached_calls += other.cached_calls
        self.cost += other.cost
        self.seconds += other.seconds
        self.estimated = self.estimated or other.estimated
        self.embedding_calls += other.embedding_calls
        self.embedding_tokens += other.embedding_tokens
        return self

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    def to_dict(self) -> JSONObject:
        # Every field is a number or a bool: a shallow copy is `asdict`'s result without its recursive walk
        # (about 0.35 ms per answer's usage, paid by every service response).
        return dict(self.__dict__)


@dataclass
class Usage:
    """Ordered per-stage usage; `.total` is always the sum of the stages."""

    stages: dict[str, StageUsage] = field(default_factory=dict)

    def stage(self, name: str) -> StageUsage:
        if name not in self.stages:
            self.stages[name] = StageUsage()
        return self.stages[name]

    def add_completion(self, stage: str, completion: Completion) -> None:
        s = self.stage(stage)
        s.llm_calls += 1
        s.prompt_tokens += completion.prompt_tokens
        s.output_tokens += completion.output_tokens
        s.cached_calls += 1 if completion.cached else 0
        s.cost += completion.cost
        s.estimated = s.estimated or completion.usage_estimated

    def add_embedding(self, stage: str, result: EmbeddingResult) -> None:
        s = self.stage(stage)
        s.embedding_calls += 1
        s.embedding_tokens += result.prompt_tokens
        s.cost += result.cost

    def add_seconds(self, stage: str, seconds: float) -> None:
        self.stage(stage).seconds += seconds

    def merge(self, other: Usage) -> None:
        for name, s in other.stages.items():
            self.stage(name).__iadd__(s)

    @property
    def total(self) -> StageUsage:
        t = StageUsage()
        for s in self.stages.values():
            t += s
        return t

    def to_dict(self) -> JSONObject:
        return {"stages": {k: v.to_dict() for k, v in self.stages.items()}, "total": self.total.to_dict()}


# ---------------------------------------------------------------------------- a reply's visible text

# Reasoning blocks some models write before their answer (`<think>...</think>`): never part of the answer.
_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.S | re.I)
THINK_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.I)
_THINK_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.I)


def drop_closed_reasoning(text: str) -> str:
    """Remove closed `<think>` blocks; a lone closing tag ends reasoning whose opening tag was dropped."""
    text = _THINK_BLOCK.sub("", text)
    close = list(_THINK_CLOSE.finditer(text))
    return text[close[-1].end() :] if close else text


def strip_reasoning(text: str) -> str:
    """Prose without reasoning blocks: closed blocks go, a lone closing tag ends the reasoning before it,
    and an unclosed opening tag starts reasoning that runs to the end (the model never answered)."""
    text = drop_closed_reasoning(text)
    opened = THINK_OPEN.search(text)
    if opened:
        text = text[: opened.start()]
    return text.strip()


def leading_reasoning_done(text: str) -> tuple[str, bool]:
    """For a streamed answer: (visible text, True) once `text` is known not to open with a reasoning block
    or its block is closed; ("", False) while it may still be reasoning (or a tag is half received)."""
    body = text.lstrip()
    if not body:
        return "", False
    opened = THINK_OPEN.match(body)
    if opened:
        close = re.compile(rf"</{opened.group(1)}>", re.I).search(body, opened.end())
        return (body[close.end() :].lstrip(), True) if close else ("", False)
    lowered = body.lower()
    if any(tag.startswith(lowered) for tag in ("<think>", "<thinking>", "<reasoning>")):
        return "", False  # "<th" may become "<think>"
    return text, True


# The insufficient-context mark (see the module docstring).
INSUFFICIENT_MARKER = "[[CONTEXT_INSUFFICIENT]]"

# What the built-in answer prompts add to their "say so plainly" rule (worded for the model, not for users).
INSUFFICIENT_INSTRUCTION = (
    f"In that case, and only then, end the answer with the line {INSUFFICIENT_MARKER} exactly as written: software "
    "reads it to look further."
)


def asks_for_marker(system_prompt: str) -> bool:
    """Whether a prompt asks the model to mark an insufficient context (a custom prompt may not)."""
    return INSUFFICIENT_MARKER in system_prompt


def split_marker(text: str) -> tuple[str, bool]:
    """The answer without the mark, and whether the mark was there (anywhere: models do not always end with it)."""
    if INSUFFICIENT_MARKER not in text:
        return text, False
    return text.replace(INSUFFICIENT_MARKER, "").rstrip(), True


class MarkerFilter:
    """Takes the mark out of a streamed answer, whatever the deltas it is split over.

    Text that could be the start of the mark is held back until it either completes the mark (dropped) or
    cannot (passed on); everything else goes out at once, so a stream without the mark is delayed by nothing.
    """

    def __init__(self) -> None:
        self._held = ""
        self.found = False

    def feed(self, piece: str) -> str:
        text = self._held + piece
        if INSUFFICIENT_MARKER in text:
            self.found = True
            text = text.replace(INSUFFICIENT_MARKER, "")
        keep = _partial_tail(text)
        self._held = text[len(text) - keep:] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """What is still held back when the stream ends (a start of the mark that never completed)."""
        out, self._held = self._held, ""
        return out


def _partial_tail(text: str) -> int:
    """Length of the longest end of `text` that is a proper start of the mark."""
    for n in range(min(len(text), len(INSUFFICIENT_MARKER) - 1), 0, -1):
        if INSUFFICIENT_MARKER.startswith(text[-n:]):
            return n
    return 0
