"""Typed model-layer failures with messages a user can act on.

Engines catch `ModelError` to degrade gracefully; every subclass says what failed and,
where it helps, which endpoint/model/config key is involved. SDK tracebacks never escape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engines.models.base import Completion, Usage


class ModelError(RuntimeError):
    """Base of every model-layer failure. `stage`/`task` say where it happened when known."""

    def __init__(self, message: str, *, stage: str | None = None, task: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.stage = stage
        self.task = task
        # The Usage spent before the failure, set by the engine or router that raises it on.
        self.usage: Usage | None = None

    def __str__(self) -> str:
        where = [f"{k}={v}" for k, v in (("stage", self.stage), ("task", self.task)) if v]
        return f"{self.message} ({', '.join(where)})" if where else self.message


class ModelConfigError(ModelError):
    """A model setting is missing or invalid; `key` is the dotted config key (e.g. models.chat.timeout_s)."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class ModelUnavailableError(ModelError):
    """The endpoint could not be reached (connection refused, DNS, TLS)."""

    def __init__(self, message: str, *, base_url: str, model: str, **kw: str | None) -> None:
        super().__init__(message, **kw)
        self.base_url = base_url
        self.model = model


class ModelTimeoutError(ModelError):
    """The call (including retries) ran past its per-call timeout or total deadline."""


class RateLimitError(ModelError):
    """The provider kept answering 429 until attempts or the deadline ran out."""


class ModelResponseError(ModelError):
    """The provider answered with an error (5xx after retries, non-retryable 4xx) or an unusable body."""

    def __init__(
        self, message: str, *, status_code: int | None = None, retryable: bool = False, **kw: str | None
    ) -> None:
        super().__init__(message, **kw)
        self.status_code = status_code
        self.retryable = retryable  # e.g. a garbled body: worth another attempt


class StructuredOutputError(ModelError):
    """The model's reply could not be parsed/validated as the requested JSON schema, even after one retry.

    `.completions` holds every call made (so usage is never lost); `.last_error` the final validation error.
    """

    def __init__(
        self,
        message: str,
        *,
        completions: list[Completion],
        last_error: str,
        schema_name: str = "",
        **kw: str | None,
    ) -> None:
        super().__init__(message, **kw)
        self.completions = list(completions)
        self.last_error = last_error
        self.schema_name = schema_name
