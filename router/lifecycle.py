"""A Router's lifecycle: the sync API's event loop thread, the models, the engines (built once) and the
checks of the model endpoints and of a remote embedder's vectors against the index's stored ones.

It keeps no per-question state. The sync API (`Router.ask`, `run`) runs every question on one long-lived event
loop in a background thread (`sync`, a `SyncLoop`), so HTTP clients and their connections are reused; `close()`
shuts them. Async callers close with `await aclose()` on their own loop.

Why one loop: `asyncio.run` per call makes a new loop per question, and an HTTP client is bound to the loop it
first ran on, so every call opened a fresh connection pool and left the old one's sockets to the garbage
collector. `SyncLoop` (also what a `MultiRouter` holds) starts its `LoopThread` on first use, and its `close`
works from any thread, the loop's own included (a finaliser run by the garbage collector may run there), so a
Router that is never closed still shuts its clients on their own loop when it is collected or the interpreter
exits.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from engines.config import GraphrouteConfig
    from engines.engine import Engine
    from engines.models.factory import Models
    from engines.models.probe import EndpointCheck
    from router.budget import Budget
    from shared_context.index import Index

ENGINES = ("local", "global", "drift", "basic")
T = TypeVar("T")


class RouterLifecycle:
    """The loop, models and engines of one Router over one immutable index."""

    def __init__(self, index: Index, config: GraphrouteConfig | None = None, models: Models | None = None) -> None:
        from engines import load_config
        from shared_context.search_backend import configure_search

        self.index = index
        self.config = config if config is not None else load_config()
        configure_search(index, self.config.search)  # before any query builds a search table
        # Vectors stored in the index by a model we cannot call are replaced by the configured embedder's
        # own (attached on first use); every answer says so.
        stored = {name: (t.dim, t.model) for name, t in index.vectors.items()}
        self.models = models if models is not None else _build_models(self.config, index)
        self.notes: list[str] = _foreign_vector_notes(stored, self.models)
        self.engines: dict[str, Engine] = {}
        # fixed by the configuration: whether a chat model other than the offline one can be asked
        self.offline = self.models.offline
        self._lock = threading.Lock()
        self.sync = SyncLoop()  # the sync API's event loop, started on first use; it refuses to run once closed
        # Closes the sync loop (and so its HTTP clients) when this lifecycle is collected or the interpreter
        # exits without `close()`; holds no reference to it.
        self._finalizer = weakref.finalize(self, self.sync.close)
        self._closed = False
        self.vectors = _VectorCheck(self.index, self.models)

    # ---- the event loop of the synchronous API, and closing -------------------------------------

    def close(self) -> None:
        """Close the HTTP clients of the sync loop and stop it. Idempotent; unusable after."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.sync.close(self.models.aclose())
        self._finalizer.detach()

    async def aclose(self) -> None:
        """Close the HTTP clients this (the caller's) event loop opened, and the sync loop if one ran."""
        await self.models.aclose()
        if self.sync.started:
            await asyncio.to_thread(self.close)
        else:
            self.sync.close()  # never started: nothing to stop, but it must not start after this
        self._closed = True

    async def acheck_endpoints(self) -> list[EndpointCheck]:
        """Check every model endpoint once, each within its `probe_timeout_s` (`engines.models.probe`); the
        embedder's reply also checks its vector size against the index's stored vectors (status "error"
        naming the table when they differ)."""
        checks = await self.models.check_endpoints()
        for i, check in enumerate(checks):
            if check.role == "embedding":
                checks[i] = self.vectors.settle(check)
        return checks

    # ---- engines, built once --------------------------------------------------------------------

    def engine(self, name: str) -> Engine:
        with self._lock:
            if name not in self.engines:
                self.engines[name] = self._make_engine(name)
            return self.engines[name]

    def _make_engine(self, name: str, max_map_calls: int | None = None) -> Engine:
        """The engine `name`; `max_map_calls` caps the map calls of global search with pre-ranking."""
        from engines import BasicSearch, DriftSearch, GlobalSearch, LocalSearch

        cfg = self.config
        if name == "local":
            return LocalSearch(self.index, self.models, config=cfg.local)
        if name == "global":
            return GlobalSearch(self.index, self.models, config=cfg.global_search)
        if name == "global_prerank":
            overrides: dict[str, object] = {"prerank": True}
            if max_map_calls is not None:
                overrides["max_map_calls"] = max_map_calls
            return GlobalSearch(self.index, self.models, config=cfg.global_search.model_copy(update=overrides))
        if name == "drift":
            return DriftSearch(self.index, self.models, config=cfg.drift)
        if name == "basic":
            return BasicSearch(self.index, self.models, config=cfg.basic)
        raise ValueError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")

    def routed_engine(self, name: str, budget: Budget | None) -> Engine:
        """The engine a route to `name` runs: global search pre-ranked (the cheaper configuration), else `name`."""
        return self.prerank_engine(budget) if name in ("global", "global_prerank") else self.engine(name)

    def prerank_engine(self, budget: Budget | None) -> Engine:
        """Global search with pre-ranking: the configured share of report tokens, and no more map calls
        than the call budget leaves room for (one reduce and a possible escalation aside). Built once per
        map-call cap, like every other engine."""
        cap = self.config.global_search.max_map_calls
        if budget is not None and budget.max_llm_calls is not None:
            room = max(1, budget.max_llm_calls - 2)
            cap = room if cap is None else min(cap, room)
        key = f"global_prerank:{cap}"
        with self._lock:
            if key not in self.engines:
                self.engines[key] = (self._make_engine("global_prerank", max_map_calls=cap) if cap
                                     else self._make_engine("global_prerank"))
            return self.engines[key]

    def warm_up(self) -> None:
        """Build now what the first questions would otherwise build while their callers wait: every engine
        (with the embedder, whose offline fit can take seconds), the chat models (the SDK's import is about
        a second of CPU), and the tables linking, classification and the local context read on first use.
        Synchronous and CPU-bound: call it before serving."""
        from engines.plan import prepare_question
        from router.classifier import classify

        for name in ENGINES:
            self.engine(name)
        self.models.embedder  # noqa: B018 - a property: builds (and fits) the embedder
        for stage in (None, *self.models.config.stages):  # the default endpoint and each stage's own
            self.models.chat(stage)
        if not len(self.index.entities):
            return
        # Any entity's name makes a question that touches every lazily built table; the first one will do.
        asked = prepare_question(f"Who is {self.index.entities[0].title}?", self.index).with_linking(self.index)
        classify(asked.text, self.index, linker=asked.linker(self.index))
        self.engine("local").estimate(asked)  # builds the local context on the question's linking


# ---- the sync API's event loop ----------------------------------------------------------------


class LoopThread:
    """An event loop running forever in a daemon thread; `run(coro)` blocks until the coroutine is done."""

    def __init__(self, name: str = "graphroute-loop") -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        self._closed = False

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._ready.set)
        try:
            self._loop.run_forever()
        finally:
            if self._closed:  # stopped by a close from this very thread: nobody joins to close the loop
                self._loop.close()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def closed(self) -> bool:
        return self._closed

    def run(self, coro: Coroutine[object, None, T]) -> T:
        """Run `coro` on the loop from any other thread (a running loop in the caller's thread is fine)."""
        if self._closed:
            coro.close()
            raise RuntimeError("this Router is closed")
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("the synchronous API was called from the Router's own event loop; use the async form")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result()
        except KeyboardInterrupt:  # Ctrl-C: stop the question rather than leave it running in the background
            future.cancel()
            raise

    def close(self, final: Coroutine[object, None, object] | None = None) -> None:
        """Run `final` (e.g. closing HTTP clients), cancel what is left, close the loop's async generators
        (the HTTP clients' closers among them), stop the loop and join the thread.

        From the loop's own thread (a finaliser) it cannot wait for itself: the same steps are scheduled and
        the loop closes itself once they are done."""
        if self._closed:
            if final is not None:
                final.close()
            return
        if threading.current_thread() is self._thread:
            self._closed = True
            self._loop.call_soon(self._start_shutdown, final)
            return
        if final is not None:
            self.run(final)
        self._closed = True
        asyncio.run_coroutine_threadsafe(self._shutdown(None), self._loop).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def _start_shutdown(self, final: Coroutine[object, None, object] | None) -> None:
        task = self._loop.create_task(self._shutdown(final))
        task.add_done_callback(lambda _: self._loop.stop())

    async def _shutdown(self, final: Coroutine[object, None, object] | None) -> None:
        if final is not None:
            await final
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._loop.shutdown_asyncgens()
        await self._loop.shutdown_default_executor()


class SyncLoop:
    """A Router's synchronous API loop: a `LoopThread` started on the first `run`; `close` from any thread."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # re-entrant: a finaliser may run while this thread holds it
        self._thread: LoopThread | None = None
        self._closed = False

    @property
    def started(self) -> bool:
        return self._thread is not None

    def run(self, coro: Coroutine[object, None, T]) -> T:
        with self._lock:
            if self._closed:
                coro.close()
                raise RuntimeError("this Router is closed")
            if self._thread is None:
                self._thread = LoopThread()
            thread = self._thread
        return thread.run(coro)

    def close(self, final: Coroutine[object, None, object] | None = None) -> None:
        """Run `final` on the loop (when it ever started), then stop it. Idempotent."""
        with self._lock:
            self._closed = True
            thread, self._thread = self._thread, None
        if thread is None:
            if final is not None:
                final.close()
            return
        thread.close(final)


class _VectorCheck:
    """Whether a remote embedder's vectors fit the index's stored ones, found out without a network call in
    the constructor.

    A configured `dimensions` is checked at once. Otherwise the first question (or `graphroute serve`'s
    start-up check) asks the endpoint for one short embedding, cut at `probe_timeout_s` and the question's
    deadline. Until that has answered, `embedder.dim` is 0, so no engine asks for a query vector: a
    question goes on with names and keywords and says so, naming the endpoint, and the check is tried again
    after `RETRY_S`. Vectors of another size are an `IndexFormatError` naming the table, for every question.
    """

    RETRY_S = 30.0

    def __init__(self, index: Index, models: Models) -> None:
        self._index = index
        self._models = models
        embedding = models.config.embedding
        self.done = embedding.offline or not index.vectors
        self._error: Exception | None = None
        self._retry_at = 0.0
        self._note = ""
        if self.done:
            return
        if embedding.dimensions:
            index.check_embedding_dim(embedding.dimensions, embedding.model)
            self.done = True
        else:
            models.embedder  # noqa: B018 - built now: a missing key is an error here, with no network call

    async def ensure(self, deadline: float | None, notes: list[str]) -> None:
        if self.done:
            return
        if self._error is not None:
            raise self._error
        now = time.perf_counter()
        if now < self._retry_at:
            notes.append(self._note)
            return
        from engines.models.probe import Probed, check_endpoint

        embedder = self._models.embedder
        if embedder.dim or not isinstance(embedder, Probed):  # its size is known (or it cannot be asked)
            self._check_size()
            return
        bound = self._models.config.embedding.probe_timeout_s
        if deadline is not None:
            bound = min(bound, deadline - now)
        if bound <= 0:
            notes.append("embeddings: the deadline left no time to check the embedding endpoint; matched by "
                         "names and keywords, without the index's vectors")
            return
        self.settle(await check_endpoint("embedding", embedder, bound))
        if self._error is not None:
            raise self._error
        if not self.done:
            notes.append(self._note)

    def _check_size(self) -> None:
        """IndexFormatError (kept for every later question) when the embedder's size differs from the stored
        vectors'; done when it fits (or is not known: an embedder of the caller's own that reports none)."""
        embedder = self._models.embedder
        if embedder.dim:
            try:
                self._index.check_embedding_dim(embedder.dim, embedder.name)
            except ValueError as err:
                self._error = err
                raise
        self.done = True

    def settle(self, check: EndpointCheck) -> EndpointCheck:
        """Record what the embedding endpoint's check found; the check, marked "error" when the size differs."""
        if self.done:
            return check
        if not check.ok:
            self._note = (f"embeddings: {check.line()}; matched by names and keywords, without the index's vectors "
                          f"(checked again after {self.RETRY_S:g} s)")
            self._retry_at = time.perf_counter() + self.RETRY_S
            return check
        try:
            self._check_size()
        except ValueError as err:
            return replace(check, status="error", detail=str(err))
        return check


def _foreign_vector_notes(stored: dict[str, tuple[int, str | None]], models: Models) -> list[str]:
    embedding = models.config.embedding
    if not stored:
        return []
    ours = embedding.model
    foreign = {name: dim for name, (dim, model) in stored.items() if model != ours}
    if not foreign or not embedding.offline:
        return []
    tables = ", ".join(f"{name} (dim {dim})" for name, dim in sorted(foreign.items()))
    return [
        f"the index's stored vectors ({tables}) come from an embedding model that is not configured; "
        f"questions are matched with exact names, keywords and the offline embedder ({ours}) fitted on this index"
    ]


def _build_models(config: GraphrouteConfig, index: Index) -> Models:
    from engines.models.factory import Models

    return Models.from_config(config.models, index=index)
