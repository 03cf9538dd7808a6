"""Engine failures: each names the stage that failed and why, and carries the usage spent before it."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engines.models.base import Usage


class EngineError(RuntimeError):
    """Nothing usable came out of a stage (e.g. every map batch failed).

    Partial failures never raise: they are recorded as `Degradation`s on the result. `usage` is the
    `engines.models.base.Usage` spent before the failure (filled in by the engine or the router), so the
    caller's accounting never loses calls that did happen.
    """

    def __init__(self, message: str, *, stage: str, engine: str | None = None, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.stage = stage
        self.engine = engine
        self.usage = usage

    def __str__(self) -> str:
        who = f"{self.engine} search, " if self.engine else ""
        return f"{who}stage {self.stage}: {self.message}"


class DeadlineExceeded(EngineError):
    """The question's deadline passed before any usable answer existed.

    When a partial answer exists the router returns it marked degraded instead of raising this.
    """

    def __init__(self, deadline_s: float, *, stage: str, engine: str | None = None, usage: Usage | None = None) -> None:
        super().__init__(
            f"the deadline of {deadline_s:g} s passed before an answer was ready", stage=stage, engine=engine,
            usage=usage,
        )
        self.deadline_s = deadline_s


def attach_usage(err: BaseException, usage: Usage | None) -> BaseException:
    """Give `err` the usage spent so far (model-layer errors too) unless it already carries some."""
    if getattr(err, "usage", None) is None:
        with contextlib.suppress(AttributeError):  # an exception type with __slots__: nothing to attach to
            err.usage = usage  # type: ignore[attr-defined]
    return err
