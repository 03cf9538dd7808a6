"""Engine failures: each names the stage that failed and why."""

from __future__ import annotations


class EngineError(RuntimeError):
    """Nothing usable came out of a stage (e.g. every map batch failed).

    Partial failures never raise: they are recorded as `Degradation`s on the result.
    """

    def __init__(self, message: str, *, stage: str, engine: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.stage = stage
        self.engine = engine

    def __str__(self) -> str:
        who = f"{self.engine} search, " if self.engine else ""
        return f"{who}stage {self.stage}: {self.message}"
