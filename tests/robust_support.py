"""Helpers for the robustness tests: a Router whose chat model is the loopback server, answering like the
offline model unless a test scripts faults for a task."""

from __future__ import annotations

import functools
from typing import Any

from fixture_paths import CAROL

from engines.prompts import TASK_MARKERS

# System-message markers of every model task, the router's own two included.
MARKERS = {**TASK_MARKERS, "rewrite": r"You rewrite the user's latest message", "route": r"Engines: local, global, drift"}


@functools.cache
def carol() -> Any:
    from shared_context import load_index

    return load_index(CAROL)


@functools.cache
def carol_embedder() -> Any:
    """The offline embedder fitted on the Christmas Carol index, shared by every router of these tests."""
    from engines.models.config import ModelsConfig
    from engines.models.factory import build_embedder

    return build_embedder(ModelsConfig(), carol())


def responder() -> Any:
    from benchmarks.bench_mock import OfflineResponder

    return OfflineResponder()


def loopback_router(server: Any, *, concurrency: int = 16, timeout_s: float = 20.0, retries: int = 0,
                    warm: tuple[str, ...] = ("local", "basic", "global", "drift"), **router_settings: Any) -> Any:
    """A Router over the Christmas Carol index whose every stage calls `server` (close with `aclose`).

    The `warm` engines are built and their context builders run once, so timings measure the question,
    not one-off set-up."""
    from pydantic import SecretStr

    from benchmarks.bench_mock import RelayedModels
    from engines.config import GraphrouteConfig, RouterConfig
    from engines.models.config import ModelEndpoint, ModelsConfig
    from engines.models.limiter import LimiterRegistry
    from router import Router

    endpoint = ModelEndpoint(provider="openai", base_url=server.base_url, api_key=SecretStr("test"),
                             model="gpt-4.1-mini", timeout_s=timeout_s, max_retries=retries,
                             total_deadline_s=max(timeout_s, 1.0) * (retries + 1), concurrency=concurrency)
    config = GraphrouteConfig(models=ModelsConfig(chat=endpoint), router=RouterConfig(**router_settings))
    # the server's offline replies read the typed contexts the engines hand the client (`bench_mock.RELAY`)
    models = RelayedModels(config.models, index=carol(), embedder=carol_embedder(), limiter_registry=LimiterRegistry())
    router = Router(carol(), config=config, models=models)
    for name in warm:
        router.engine(name).estimate("Who is Scrooge?")
    return router


def script_fault(server: Any, task: str, fault: Any) -> None:
    server.add_rule(None, system=MARKERS[task], fault=fault, reply="unused")


def script_reply(server: Any, task: str, reply: Any) -> None:
    server.add_rule(None, system=MARKERS[task], reply=reply)
