"""The protocols of an engine's steps: `context = builder.build(...)`, `messages = formatter.render(context,
question)`, then generating from `messages` (see `engines.engine`). Each is exactly the call the engines make."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeAlias, TypeVar

if TYPE_CHECKING:
    import numpy as np

    from engines.models.base import Message
    from shared_context.community_context import CommunityContext
    from shared_context.linking import LinkResult
    from shared_context.local_context import LocalContext

__all__ = ["CommunityContextSource", "ContextBuilder", "LocalContextSource", "PromptFormatter"]

C_contra = TypeVar("C_contra", contravariant=True)
# Earlier turns as a builder reads them (role/content mappings)
Turns: TypeAlias = "Sequence[Mapping[str, object]] | None"


class LocalContextSource(Protocol):
    """Builds the local (entity-centred) context of a question: pure and deterministic, no model call.

    `linker(k)` links `query` to its `k` best entities on a lexical pass the caller already made (the
    router's checked `Question`); a builder that links by other means may ignore it."""

    def build(
        self, query: str, history: Turns = None, /, *, query_vector: np.ndarray | None = None,
        linker: Callable[[int], LinkResult] | None = None,
    ) -> LocalContext: ...


class CommunityContextSource(Protocol):
    """Builds global search's map batches of community reports: pure and deterministic, no model call."""

    def build(
        self, query: str = "", /, *, query_vector: np.ndarray | None = None, history: Turns = None,
        communities: Sequence[int] | None = None,
    ) -> CommunityContext: ...


# What an engine holds as its builder (None: it builds no context object of its own)
ContextBuilder: TypeAlias = "LocalContextSource | CommunityContextSource"


class PromptFormatter(Protocol[C_contra]):
    """Renders a built context and the question into the messages the model is sent."""

    def render(self, context: C_contra, question: str, /) -> list[Message]: ...
