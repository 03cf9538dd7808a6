"""The model protocols every engine calls: one chat model, one embedder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypedDict, TypeGuard, runtime_checkable

import numpy as np
from pydantic import BaseModel

if TYPE_CHECKING:
    from engines.models.task_context import TaskContext


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
