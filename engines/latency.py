"""Observed model latency per endpoint, learnt from every call an engine makes; estimates read it."""

from __future__ import annotations

import math
import threading
from collections import deque


class LatencyTracker:
    """Observed call latency per endpoint (base URL + model): seconds ~ overhead + output tokens / rate,
    fitted by least squares over the most recent calls. Until an endpoint has answered, there is no
    figure and estimates fall back to the constants above, flagged as guesses."""

    def __init__(self, window: int = 64) -> None:
        self._lock = threading.Lock()
        self._calls: dict[str, deque[tuple[float, float]]] = {}
        self._window = window

    def observe(self, key: str, seconds: float, output_tokens: int) -> None:
        if not (math.isfinite(seconds) and seconds >= 0):
            return
        with self._lock:
            self._calls.setdefault(key, deque(maxlen=self._window)).append((float(output_tokens), seconds))

    def predict(self, key: str, output_tokens: float) -> float | None:
        """Seconds for one call writing `output_tokens`, or None when the endpoint was never observed."""
        with self._lock:
            calls = list(self._calls.get(key, ()))
        if not calls:
            return None
        n = len(calls)
        mean_out = sum(o for o, _ in calls) / n
        mean_s = sum(s for _, s in calls) / n
        spread = sum((o - mean_out) ** 2 for o, _ in calls)
        if n < 3 or spread < 1.0:  # one output size seen: overhead and speed cannot be told apart, and the
            return mean_s  # calls seen are better evidence than the typical output size asked about
        per_token = max(0.0, sum((o - mean_out) * (s - mean_s) for o, s in calls) / spread)
        overhead = max(0.0, mean_s - per_token * mean_out)
        return overhead + per_token * output_tokens

    def clear(self) -> None:
        with self._lock:
            self._calls.clear()


# Process-wide: every engine records what its endpoints took, every estimate reads it.
LATENCY = LatencyTracker()


def latency_key(model: object) -> str:
    return f"{getattr(model, 'base_url', '') or ''}|{getattr(model, 'name', '')}"
