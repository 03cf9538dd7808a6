"""Prometheus metrics of `graphroute serve`: requests, latency histogram, and calls/tokens/cost per index,
engine and route, exposed by `prometheus_client` (which escapes every label value it writes).

No label value is the caller's text: the method is one of the HTTP methods (else "other"), the path is a
route template (`guard.path_template`; unknown paths are "other"), the status is the one the server sent,
and the index, engine and route of an answer are names the server itself holds. So the exposition's size
is bounded whatever requests arrive. A multi-worker server counts in `prometheus_client`'s multiprocess
files instead (`shared_metrics.SharedMetrics`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric
    from prometheus_client.registry import CollectorRegistry

    from router.answer import Answer

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
OTHER = "other"
_ANSWER_LABELS = ("index", "engine", "route")


def method_label(method: str) -> str:
    """The request method as a label: a standard method, else "other" (a server accepts any token)."""
    return method if method in METHODS else OTHER


class InFlightCollector:
    """The in-flight gauge, read when `/metrics` is rendered (a workers' server reads the shared counts)."""

    def __init__(self, metrics: Metrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import GaugeMetricFamily

        yield GaugeMetricFamily("graphroute_http_requests_in_flight", "Requests being served now.",
                                value=self._metrics.current_in_flight())


class Metrics:
    """One process's counters, in a registry of its own (several services may share a process: tests)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        """`registry`: where the counters register; a fresh one by default. The multiprocess subclass's
        counters write to files whichever registry holds them."""
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = registry if registry is not None else CollectorRegistry()
        reg = self.registry
        self.requests = Counter("graphroute_http_requests", "HTTP requests by method, path template and status.",
                                ("method", "path", "status"), registry=reg)
        self.latency = Histogram("graphroute_http_request_seconds", "Time to the end of the response.", ("path",),
                                 buckets=BUCKETS, registry=reg)
        self.questions = Counter("graphroute_questions", "Answered questions by index, engine used and route.",
                                 _ANSWER_LABELS, registry=reg)
        self.calls = Counter("graphroute_llm_calls", "Model calls by index, engine used and route.",
                             _ANSWER_LABELS, registry=reg)
        self.prompt_tokens = Counter("graphroute_prompt_tokens", "Prompt tokens by index, engine used and route.",
                                     _ANSWER_LABELS, registry=reg)
        self.output_tokens = Counter("graphroute_output_tokens", "Output tokens by index, engine used and route.",
                                     _ANSWER_LABELS, registry=reg)
        self.cost = Counter("graphroute_cost_usd", "Model cost in US dollars by index, engine used and route.",
                            _ANSWER_LABELS, registry=reg)
        self.in_flight = 0  # set by the guard as requests enter and leave

    def current_in_flight(self) -> int:
        return self.in_flight

    def observe_request(self, method: str, path: str, status: int, seconds: float) -> None:
        """`path` is a template (`guard.path_template`), never the request's own path."""
        self.requests.labels(method_label(method), path, str(status)).inc()
        self.latency.labels(path).observe(seconds)

    def observe_answer(self, index: str, answer: Answer) -> None:
        labels = (index, str(answer.engine), str(answer.route.engine))
        total = answer.usage.total
        self.questions.labels(*labels).inc()
        self.calls.labels(*labels).inc(total.llm_calls)
        self.prompt_tokens.labels(*labels).inc(total.prompt_tokens)
        self.output_tokens.labels(*labels).inc(total.output_tokens)
        self.cost.labels(*labels).inc(total.cost)

    def exposition_registry(self) -> CollectorRegistry:
        """The registry `/metrics` renders: this process's counters and the in-flight gauge."""
        from prometheus_client import CollectorRegistry

        out = CollectorRegistry(auto_describe=False)
        out.register(_Forward(self.registry))
        out.register(InFlightCollector(self))
        return out

    def render(self) -> str:
        from prometheus_client import generate_latest

        return generate_latest(self.exposition_registry()).decode()


class _Forward:
    """Another registry's metrics, collected into the one `/metrics` renders."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        yield from self._registry.collect()
