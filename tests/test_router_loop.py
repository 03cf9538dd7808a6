"""The sync Router runs on one long-lived loop: one HTTP client per endpoint, reused connections, closed by close()."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from router import Router


@pytest.fixture(scope="module")
def carol_index(carol_path: Path) -> Any:
    from shared_context import load_index

    return load_index(carol_path)


@pytest.fixture()
def srv() -> Iterator[Any]:
    from testing.model_server import LoopbackServer

    with LoopbackServer(default_reply="Bob Cratchit is Scrooge's clerk.") as server:
        yield server


def _remote_config(base_url: str) -> Any:
    from engines.config import GraphrouteConfig
    from engines.models.config import models_config_from_mapping

    models = models_config_from_mapping({"chat": {"base_url": base_url, "api_key": "test", "model": "gpt-4.1"},
                                          "embedding": {"provider": "offline"}}, env={})
    return GraphrouteConfig(models=models)


def _open_sockets_to(port: int) -> int:
    return sum(1 for c in psutil.Process().net_connections(kind="tcp")
               if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED)


def test_hundred_sync_asks_use_one_connection_pool(carol_index: Any, srv: Any) -> None:
    port = int(srv.base_url.split(":")[2].split("/")[0])
    with Router(carol_index, config=_remote_config(srv.base_url)) as router:
        for _ in range(100):
            answer = router.ask("Who is Bob Cratchit?", mode="basic")
        assert "Cratchit" in answer.text
        assert len(srv.chat_requests) == 100
        # Before: one client (and one new connection) per ask, the old ones left open.
        assert srv.connections == 1
        assert _open_sockets_to(port) == 1
        pool = router.models.chat("answer")._clients
        assert len(pool._clients) == 1
    assert _open_sockets_to(port) == 0  # close() shut the client and its connection
    with pytest.raises(RuntimeError, match="closed"):
        router.ask("Who is Bob Cratchit?")


def test_async_callers_close_their_own_loops_client(carol_index: Any, srv: Any) -> None:
    port = int(srv.base_url.split(":")[2].split("/")[0])

    async def main() -> None:
        async with Router(carol_index, config=_remote_config(srv.base_url)) as router:
            answers = await asyncio.gather(*(router.aask("Who is Bob Cratchit?", mode="basic") for _ in range(4)))
            assert all("Cratchit" in a.text for a in answers)
        assert _open_sockets_to(port) == 0

    asyncio.run(main())


def test_sync_api_inside_a_running_loop(carol_index: Any) -> None:
    """Jupyter-style: `ask` from a thread that already runs a loop goes to the Router's own loop."""

    async def main() -> str:
        with Router(carol_index) as router:
            return router.ask("Who is Bob Cratchit?").engine

    assert asyncio.run(main()) == "local"


def test_cpu_steps_run_off_the_event_loop(carol_index: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Linking (the embedder's transform), classification and context building must not block the loop,
    or concurrent questions stall each other's model waits."""
    seen: dict[str, list[bool]] = {}

    def spy(name: str, fn: Any) -> Any:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            try:
                asyncio.get_running_loop()
                on_loop = True
            except RuntimeError:
                on_loop = False
            seen.setdefault(name, []).append(on_loop)
            return fn(*args, **kwargs)
        return wrapped

    with Router(carol_index) as router:
        engine = router.engine("local")
        monkeypatch.setattr(engine.builder, "build", spy("build", engine.builder.build))
        embedder = router.models.embedder
        monkeypatch.setattr(embedder, "transform", spy("embed", embedder.transform))
        import router.classifier as classifier_module

        monkeypatch.setattr(classifier_module, "classify", spy("classify", classifier_module.classify))
        answer = router.ask("Who is Bob Cratchit?")  # auto: classified, then local search
    assert answer.engine == "local"
    assert seen.get("build") == [False] and seen.get("classify") == [False]
    assert seen.get("embed") and not any(seen["embed"])


def test_a_forced_local_question_takes_one_worker_thread_hop(carol_index: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each hop to a worker thread is a GIL hand-over and a loop wake-up under load: a forced local question
    with the offline embedder embeds and builds in one (it took four: classify, plan, embed, build)."""
    hops: list[str] = []
    to_thread = asyncio.to_thread

    async def counting(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(fn, "__name__", repr(fn)))
        return await to_thread(fn, *args, **kwargs)

    with Router(carol_index) as router:
        router.ask("Who is Bob Cratchit?", mode="local")  # the first question builds the engine
        monkeypatch.setattr(asyncio, "to_thread", counting)
        answer = router.ask("Who is Fezziwig?", mode="local")
    assert hops == ["_embed_and_build"]
    assert answer.usage.stages["entity_link"].embedding_calls == 1  # the question was still embedded
    assert answer.usage.stages["build_context"].seconds > 0


def test_an_answer_nobody_watches_being_written_is_not_streamed(carol_index: Any, srv: Any) -> None:
    """`ask` only returns the result: one plain chat call, no SSE to decode. `astream` still streams, and so
    does `ask` under a deadline (a cut keeps the text written so far)."""
    from router import Budget
    from router.router import Done

    async def streamed() -> str:
        deltas = [ev async for ev in router.astream("Who is Bob Cratchit?", mode="local")]
        return next(ev.answer.text for ev in deltas if isinstance(ev, Done))

    with Router(carol_index, config=_remote_config(srv.base_url)) as router:
        plain = router.ask("Who is Bob Cratchit?", mode="local")
        assert router.run(streamed()) == plain.text == "Bob Cratchit is Scrooge's clerk."
        router.ask("Who is Bob Cratchit?", mode="local", budget=Budget(deadline_s=60))
    assert [bool(r.body.get("stream")) for r in srv.chat_requests] == [False, True, True]
    assert plain.usage.stages["answer"].llm_calls == 1 and plain.usage.stages["answer"].prompt_tokens > 0
