"""Prometheus text-format metrics: requests, latency histogram, and calls/tokens/cost per engine and route.

Hand-written (a few counters and one histogram) rather than a client library: the exposition format is
small and stable, and the labels are bounded (path templates, engines, routes), never user text.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Collection
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engines.models.base import JSON, JSONObject
    from router.answer import Answer

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# The counters keyed by (index, engine used, route).
_ANSWER_TABLES = ("questions", "calls", "prompt_tokens", "output_tokens", "cost")


def _rows(snap: JSONObject, key: str, width: int) -> list[list[JSON]]:
    """A snapshot table's rows of `width` values (a malformed row, from a damaged file, is skipped)."""
    value = snap.get(key)
    return [r for r in value if isinstance(r, list) and len(r) == width] if isinstance(value, list) else []


def _number(value: JSON) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def _labels(**labels: str) -> str:
    parts = [f'{k}="{str(v).replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
             for k, v in labels.items()]
    return "{" + ",".join(parts) + "}"


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)  # (method, path, status)
        self.latency_counts: dict[str, list[int]] = {}  # path -> per-bucket counts (+Inf last)
        self.latency_sum: dict[str, float] = defaultdict(float)
        self.questions: dict[tuple[str, str, str], int] = defaultdict(int)  # (index, engine, route)
        self.calls: dict[tuple[str, str, str], int] = defaultdict(int)
        self.prompt_tokens: dict[tuple[str, str, str], int] = defaultdict(int)
        self.output_tokens: dict[tuple[str, str, str], int] = defaultdict(int)
        self.cost: dict[tuple[str, str, str], float] = defaultdict(float)
        self.in_flight = 0

    def observe_request(self, method: str, path: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(method, path, status)] += 1
            counts = self.latency_counts.setdefault(path, [0] * (len(BUCKETS) + 1))
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    counts[i] += 1
            counts[-1] += 1
            self.latency_sum[path] += seconds

    def observe_answer(self, index: str, answer: Answer) -> None:
        key = (index, str(answer.engine), str(answer.route.engine))
        total = answer.usage.total
        with self._lock:
            self.questions[key] += 1
            self.calls[key] += total.llm_calls
            self.prompt_tokens[key] += total.prompt_tokens
            self.output_tokens[key] += total.output_tokens
            self.cost[key] += total.cost

    # ---- snapshots: how a worker of a multi-worker server publishes its counts (`shared_metrics`) ----------
    def snapshot(self) -> JSONObject:
        """Every counter as plain JSON values (tuple keys become lists)."""
        with self._lock:
            return {
                "requests": [[*k, n] for k, n in self.requests.items()],
                "latency_counts": {p: list(c) for p, c in self.latency_counts.items()},
                "latency_sum": dict(self.latency_sum),
                **{name: [[*k, v] for k, v in getattr(self, name).items()] for name in _ANSWER_TABLES},
            }

    def absorb(self, snap: JSONObject) -> None:
        """Add a snapshot's counts to these (totals over workers; a restarted worker resuming its own)."""
        latency_counts, latency_sum = snap.get("latency_counts"), snap.get("latency_sum")
        with self._lock:
            for method, path, status, n in _rows(snap, "requests", 4):
                self.requests[(str(method), str(path), int(_number(status)))] += int(_number(n))
            for path, counts in (latency_counts.items() if isinstance(latency_counts, dict) else ()):
                mine = self.latency_counts.setdefault(path, [0] * (len(BUCKETS) + 1))
                for i, n in enumerate(counts[:len(mine)] if isinstance(counts, list) else ()):
                    mine[i] += int(_number(n))
            for path, seconds in (latency_sum.items() if isinstance(latency_sum, dict) else ()):
                self.latency_sum[path] += _number(seconds)
            for name in _ANSWER_TABLES:
                table = getattr(self, name)
                for index, engine, route, value in _rows(snap, name, 4):
                    table[(str(index), str(engine), str(route))] += value if isinstance(value, int | float) else 0

    def render(self, indexes: Collection[str] | None = None) -> str:
        """The Prometheus text; `indexes`: only the answer counters of these indexes (a key's own, when keys
        are bound to indexes; a fanned-out label "a+b" when all its indexes are among them)."""
        out: list[str] = []
        with self._lock:
            out += ["# HELP graphroute_http_requests_total HTTP requests by method, path template and status.",
                    "# TYPE graphroute_http_requests_total counter"]
            for (method, path, status), n in sorted(self.requests.items()):
                out.append(f"graphroute_http_requests_total{_labels(method=method, path=path, status=str(status))} {n}")
            out += ["# HELP graphroute_http_request_seconds Time to the end of the response.",
                    "# TYPE graphroute_http_request_seconds histogram"]
            for path, counts in sorted(self.latency_counts.items()):
                for bound, n in zip((*map(str, BUCKETS), "+Inf"), counts, strict=True):
                    out.append(f"graphroute_http_request_seconds_bucket{_labels(path=path, le=bound)} {n}")
                out.append(f"graphroute_http_request_seconds_sum{_labels(path=path)} {self.latency_sum[path]:.6f}")
                out.append(f"graphroute_http_request_seconds_count{_labels(path=path)} {counts[-1]}")
            out += ["# HELP graphroute_http_requests_in_flight Requests being served now.",
                    "# TYPE graphroute_http_requests_in_flight gauge",
                    f"graphroute_http_requests_in_flight {self.in_flight}"]
            for name, help_text, table, fmt in (
                ("graphroute_questions_total", "Answered questions by index, engine used and route.", self.questions, "{}"),
                ("graphroute_llm_calls_total", "Model calls by index, engine used and route.", self.calls, "{}"),
                ("graphroute_prompt_tokens_total", "Prompt tokens by index, engine used and route.", self.prompt_tokens, "{}"),
                ("graphroute_output_tokens_total", "Output tokens by index, engine used and route.", self.output_tokens, "{}"),
                ("graphroute_cost_usd_total", "Model cost in US dollars by index, engine used and route.", self.cost, "{:.8f}"),
            ):
                out += [f"# HELP {name} {help_text}", f"# TYPE {name} counter"]
                for (index, engine, route), value in sorted(table.items()):
                    if indexes is not None and not set(index.split("+")) <= set(indexes):
                        continue
                    out.append(f"{name}{_labels(index=index, engine=engine, route=route)} {fmt.format(value)}")
        return "\n".join(out) + "\n"
