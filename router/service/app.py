"""The ASGI app: routes over one `Router` per index, behind `Guard` (keys, limits, drain, metrics)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, ParamSpec, TypeVar

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from engines.config import ServeConfig
from engines.models.base import JSON, JSONObject
from engines.models.probe import EndpointCheck
from engines.models.redaction import redact_logs, remember_secret
from engines.models.request_options import use_answer_options
from router.budget import Budget, BudgetError
from router.fanout import MultiRouter, UnknownIndexError
from router.router import MODES, Done, EngineEvent, Escalated, RouteDecided, Router, RouterEvent
from router.scoped import scope_note
from router.service.admission import Admission, LocalAdmission, callers_for, per_key_limit
from router.service.errors import RequestError, error_body, error_object
from router.service.graph_view import cited_graph, entity_record, named_citations, parse_graph_request
from router.service.guard import AUTHORIZED, CALLER, LOGGED, REQUEST_ID, Guard
from router.service.metrics import Metrics
from router.service.openai_compat import (
    ChatRequest,
    Completion,
    JSONResponse,
    TokenCap,
    escalation_note,
    graphroute_object,
    model_ids,
    model_object,
    parse_model,
    parse_request,
    route_event,
    sse,
    stage_event,
)
from router.service.passage_marks import MAX_QUOTE_CHARS, quoted_spans
from router.service.redis_admission import caller_ids
from router.service.shared_state import SharedState
from router.service.spending import SpendGate, Spending, SpendingLimitExceeded
from router.service.tenants import Tenants
from router.service.warmup import warm_for_service
from shared_context.scope import Scope, ScopeError

if TYPE_CHECKING:
    from router.answer import Answer

log = logging.getLogger("graphroute.serve")
T = TypeVar("T")
P = ParamSpec("P")
STATIC = Path(__file__).resolve().parent / "static"


class Service:
    """What the routes share: the routers by index name, the [serve] settings, keys, metrics, drain state."""

    def __init__(self, routers: Mapping[str, Router], config: ServeConfig | None = None,
                 api_keys: list[str] | None = None, paths: Mapping[str, str] | None = None, *,
                 admission: Admission | None = None, metrics: Metrics | None = None,
                 worker: int | None = None, unready: Mapping[str, str] | None = None) -> None:
        """`admission`, `metrics` and `worker` are a multi-worker server's (`router.service.workers`): counts
        shared with the other workers, and this worker's number; by default both count in this process."""
        if not routers:
            raise ValueError("serve needs at least one index")
        self.routers = dict(routers)
        self.default_index = next(iter(self.routers))
        self.config = config or ServeConfig()
        keys = [k for k in (api_keys if api_keys is not None else self.config.api_keys) if k]
        self.tenants, self.api_keys = Tenants.from_config(keys, self.config, list(self.routers))
        for key in self.api_keys:
            remember_secret(key)
        redact_logs(log)
        self.multi = MultiRouter(self.routers, owns_routers=False)  # index routing, for questions naming none
        self.paths = dict(paths or {})
        self.unready = dict(unready or {})  # index name -> why this replica does not serve it (not prepared)
        self.callers = callers_for(self.api_keys)
        own_limit = per_key_limit(self.config.max_concurrency, self.config.max_concurrency_per_key, self.callers)
        # Replicas behind a load balancer share admission, spending and the model-call cache through Redis.
        self.shared = None if self.config.redis_url is None else SharedState.connect(
            self.config, self.api_keys, own_limit, [r.models for r in self.routers.values()])
        self.admission: Admission = (self.shared.admission if self.shared is not None else
                                     admission or LocalAdmission(self.config.max_concurrency, own_limit, self.callers))
        self.spending = self.shared.spending if self.shared is not None else Spending(
            self.config.max_cost_per_day, self.config.max_calls_per_day, caller_ids(self.api_keys))
        self.metrics = metrics or Metrics()
        self.warm = False  # every index warmed up (`warm_up`): `/readyz` says ready from then on
        self.worker = worker
        self.endpoint_checks: dict[str, list[EndpointCheck]] = {}  # by index: `check_endpoints`, at start-up
        self.draining = False
        self._active = 0
        self._idle: asyncio.Event | None = None

    def prepare(self) -> None:
        """Before serving: warm every router up (engines, embedder fit, lazily built tables), then keep the
        garbage collector off what is loaded.

        The loaded indexes are over a hundred thousand long-lived objects; without `gc.freeze`, every full
        collection walks them all with every thread stopped (benchmarks/serve_load.py, 640 questions: 8 full
        collections, 0.1-0.16 s each). Frozen objects are still freed by reference counting; only cycles
        among them (none expected in loaded data) would be kept. The young generation's threshold goes from
        700 to 10,000 container allocations: 64 questions in flight allocate far more than 700 objects
        between two collections, so at 700 most collections found live objects only and promoted them
        (about 1,000 collections per 640 questions, against 15 at 10,000).
        """
        import gc

        self.warm_up()
        gc.collect()
        gc.freeze()
        gc.set_threshold(10_000, *gc.get_threshold()[1:])

    def warm_up(self) -> None:
        """Warm every router up and check the model endpoints; `/readyz` says ready from then on."""
        for router in self.routers.values():
            warm_for_service(router, self.config.warm_rows)
        self.check_endpoints()
        self.warm = True

    def readiness(self) -> list[str]:
        """Why this replica should not get traffic yet (empty: ready)."""
        if self.draining:
            return ["the server is shutting down"]
        reasons = [f"index {name!r} is not served: {why}" for name, why in self.unready.items()]
        return reasons if self.warm else ["the indexes are not warmed up yet", *reasons]

    def close_shared(self) -> None:
        """Stop renewing this replica's Redis leases and leave the replica set (its slots come back at once)."""
        if self.shared is not None:
            self.shared.stop()

    def check_endpoints(self) -> list[str]:
        """Check every index's model endpoints once, concurrently, each within its `probe_timeout_s`
        (`Router.acheck_endpoints`), for `/healthz`, `/v1/indexes` and the operator; one line per endpoint
        (those of several indexes sharing an endpoint are reported once). On a loop of its own, closed after:
        the serving loop makes its own clients."""

        async def run() -> list[list[EndpointCheck]]:
            try:
                return list(await asyncio.gather(*(r.acheck_endpoints() for r in self.routers.values())))
            finally:
                for router in self.routers.values():
                    await router.models.aclose()

        results = asyncio.run(run())
        self.endpoint_checks = dict(zip(self.routers, results, strict=True))
        return self.endpoint_lines()

    def endpoint_lines(self) -> list[str]:
        lines: list[str] = []
        for name, checks in self.endpoint_checks.items():
            for check in checks:
                line = check.line() + ("" if len(self.routers) == 1 else f" [index {name}]")
                if check.line() not in {x.split(" [index ")[0] for x in lines}:
                    lines.append(line)
        return lines

    @property
    def endpoints_ok(self) -> bool:
        return all(c.ok for checks in self.endpoint_checks.values() for c in checks)

    # ---- drain: new requests get 503, in-flight ones finish -----------------------------------------
    def request_started(self) -> None:
        self._active += 1

    def request_finished(self) -> None:
        self._active -= 1
        if self._active == 0 and self._idle is not None:
            self._idle.set()

    def begin_drain(self) -> None:
        self.draining = True

    async def wait_idle(self, timeout: float) -> bool:
        """True when every in-flight request finished within `timeout` seconds."""
        if self._active == 0:
            return True
        self._idle = asyncio.Event()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False

    # ---- helpers for the routes -------------------------------------------------------------------
    def router(self, name: JSON, visible: list[str] | None = None) -> tuple[str, Router]:
        """The named index's Router (the default index's when `name` is None); `visible`: the indexes the
        caller may read (all when None); any other name is unknown, and only visible ones are listed."""
        if name is not None and not isinstance(name, str):
            raise RequestError("'index' must be an index name", param="index")
        shown = list(self.routers) if visible is None else visible
        key = name or (shown[0] if shown else None)
        if key is None:
            raise RequestError("no index is available with this API key", 404, "not_found", "index")
        if key in self.unready and not self.tenants.bound:  # with keys bound to indexes: unknown, as any other
            raise RequestError(f"index {key!r} is not served by this server: {self.unready[key]}", 503, "unavailable",
                               "index")
        if key not in shown:
            raise RequestError(f"unknown index {key!r}; known: {', '.join(shown) or 'none'}", 404, "not_found",
                               "index")
        return key, self.routers[key]

    def visible(self, request: Request) -> list[str]:
        """The indexes this request's key may read (`router.service.tenants`)."""
        return self.tenants.visible(request.scope.get(CALLER), bool(request.scope.get(AUTHORIZED)))

    def named(self, name: JSON, visible: list[str]) -> str | None:
        """The index a request names (checked against the caller's), or None: index routing picks it."""
        return None if name is None else self.router(name, visible)[0]

    def budget(self, raw: JSON) -> Budget | None:
        """The request's budget, each missing field taken from the [serve] defaults; None when nothing is set."""
        if raw is not None and not isinstance(raw, dict):
            raise RequestError("'budget' must be an object {max_cost, max_llm_calls, deadline_s}", param="budget")
        raw = raw or {}
        unknown = set(raw) - {"max_cost", "max_llm_calls", "deadline_s"}
        if unknown:
            raise RequestError(f"unknown budget field {sorted(unknown)[0]!r} (use max_cost, max_llm_calls, deadline_s)",
                               param=f"budget.{sorted(unknown)[0]}")
        cfg = self.config
        max_cost = _budget_number(raw, "max_cost", cfg.max_cost)
        max_llm_calls = _budget_whole(raw, "max_llm_calls", cfg.max_llm_calls)
        deadline_s = _budget_number(raw, "deadline_s", cfg.deadline_s)
        if max_cost is None and max_llm_calls is None and deadline_s is None:
            return None
        try:
            return Budget(max_cost, max_llm_calls, deadline_s)
        except (BudgetError, TypeError, ValueError) as exc:
            raise RequestError(f"budget: {exc}", param="budget") from None

    def spend_gate(self, request: Request) -> SpendGate | None:
        """The request's hold on its key's daily limits; None when no daily limit is set."""
        if not self.spending.enabled:
            return None
        return SpendGate(self.spending, int(request.scope.get(CALLER, 0)))

    def check_question(self, question: JSON) -> str:
        if not isinstance(question, str):
            raise RequestError("'question' must be a string", param="question")
        if len(question) > self.config.max_question_chars:
            raise RequestError(f"question is {len(question)} characters; the limit is {self.config.max_question_chars} "
                               "([serve] max_question_chars)", 413, "request_too_large", "question")
        return question


class CpuExecutor(ThreadPoolExecutor):
    """The serving loop's default executor: `threads` threads for the CPU steps requests hand off
    (`asyncio.to_thread`), in order of arrival. The blocking lookups the loop itself hands its default
    executor (`loop.getaddrinfo`/`getnameinfo`, e.g. resolving a model host on a new connection; uvloop
    resolves on its own threads) go to threads of their own, never queued behind questions being built."""

    _LOOKUPS: ClassVar[frozenset[object]] = frozenset({socket.getaddrinfo, socket.getnameinfo})

    def __init__(self, threads: int) -> None:
        super().__init__(threads, thread_name_prefix="graphroute-cpu")
        self._lookups = ThreadPoolExecutor(4, thread_name_prefix="graphroute-lookup")

    def submit(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> Future[T]:
        if fn in self._LOOKUPS:
            return self._lookups.submit(fn, *args, **kwargs)
        return super().submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._lookups.shutdown(wait, cancel_futures=cancel_futures)
        super().shutdown(wait, cancel_futures=cancel_futures)


# Beyond any budget anyone sets, and small enough for every later step (a float, a comparison, a log line).
MAX_BUDGET = 1e9


def _budget_number(raw: JSONObject, name: str, default: float | None) -> float | None:
    """A budget field as a number (the [serve] default when absent), or a RequestError naming it."""
    value = raw.get(name, default)
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if abs(value) <= MAX_BUDGET:
            return value
        raise RequestError(f"budget: budget {name} must be at most {MAX_BUDGET:,.0f}", param="budget")
    raise RequestError(f"budget: budget {name} must be a number or None, got {type(value).__name__}",
                       param="budget")


def _budget_whole(raw: JSONObject, name: str, default: int | None) -> int | None:
    """A budget field as a whole number (the [serve] default when absent), or a RequestError naming it."""
    value = raw.get(name, default)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if abs(value) <= MAX_BUDGET:
            return value
        raise RequestError(f"budget: budget {name} must be at most {MAX_BUDGET:,.0f}", param="budget")
    raise RequestError(f"budget: budget {name} must be a whole number or None, got {type(value).__name__}",
                       param="budget")


def _error(status: int, message: str, code: str | None, param: str | None = None,
           headers: dict[str, str] | None = None) -> Response:
    return Response(error_body(status, message, code, param), status_code=status, media_type="application/json",
                    headers=headers)


async def _json(request: Request) -> JSONObject:
    """The body as a JSON object. orjson refuses what no client means to send: nesting deeper than 1,024
    levels (the standard library would recurse until it fails), NaN and Infinity, lone surrogates."""
    try:
        body = orjson.loads(await request.body())
    except orjson.JSONDecodeError as exc:
        raise RequestError(f"the request body must be JSON ({exc})", code="invalid_json") from None
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object", code="invalid_json")
    return body


def _failure(exc: Exception) -> Response:
    """Known failures as clean JSON errors; anything else goes up to the app's 500 handler (JSON, logged
    with the request id, no trace)."""
    status, body = _failure_body(exc)
    headers = {"Retry-After": str(exc.retry_after_s)} if isinstance(exc, SpendingLimitExceeded) else None
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _failure_body(exc: Exception) -> tuple[int, JSONObject]:
    """(status, error object) of a known failure; anything else is raised again."""
    from engines.errors import DeadlineExceeded, EngineError
    from engines.models.errors import ModelError
    from shared_context.errors import IndexFormatError

    if isinstance(exc, SpendingLimitExceeded):
        return 429, error_object(429, str(exc), exc.code, resets_at=exc.resets_at.strftime("%Y-%m-%dT%H:%M:%SZ"))
    if isinstance(exc, RequestError):
        return exc.status, error_object(exc.status, str(exc), exc.code, exc.param)
    if isinstance(exc, UnknownIndexError):
        return 404, error_object(404, str(exc), "not_found", "index")
    if isinstance(exc, BudgetError):
        return 422, error_object(422, str(exc), "budget_exceeded", "budget")
    if isinstance(exc, IndexFormatError):  # the server's index and models do not fit: the operator's to fix
        log.error("index error: %s", exc)
        return 500, error_object(500, str(exc), "index_error")
    if isinstance(exc, ValueError):  # the router's input checks (empty question, bad history, mode)
        return 400, error_object(400, str(exc), "invalid_value")
    if isinstance(exc, EngineError | ModelError | RuntimeError):
        log.warning("question failed: %s", exc)
        status, code = (504, "deadline_exceeded") if isinstance(exc, DeadlineExceeded) else (502, "upstream_error")
        body = error_object(status, str(exc) or type(exc).__name__, code)
        usage = getattr(exc, "usage", None)
        if usage is not None and hasattr(usage, "to_dict"):
            body["usage"] = usage.to_dict()  # what the failed question cost is never lost
        return status, body
    raise exc


def index_label(answer: Answer) -> str:
    """The index an answer came from, as one label: a fanned-out answer's names joined by '+'."""
    index = answer.route.index
    return "+".join(index) if isinstance(index, list) else str(index or "")


def _history(raw: JSON) -> list[str | JSONObject] | None:
    """The request's history, each item a string or an object (the router checks their roles and texts)."""
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise RequestError("'history' must be a list of strings or {role, content} messages", param="history")
    items: list[str | JSONObject] = []
    for i, item in enumerate(raw):
        if not isinstance(item, str | dict):
            raise RequestError(f"history item {i} must be a string or a {{'role', 'content'}} message",
                               param="history")
        items.append(item)
    return items


def _scope(raw: JSON) -> Scope | None:
    """The request's `scope`: {documents: [title or id], globs: [pattern], where: {key: value or [values]}}."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - {"documents", "globs", "where"}:
        raise RequestError("'scope' must be an object {documents, globs, where}", param="scope")
    names, globs, where = raw.get("documents") or [], raw.get("globs") or [], raw.get("where") or {}
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        raise RequestError("scope.documents must be a list of document titles or ids", param="scope.documents")
    if not (isinstance(globs, list) and all(isinstance(g, str) for g in globs)):
        raise RequestError("scope.globs must be a list of patterns", param="scope.globs")
    if not isinstance(where, dict):
        raise RequestError("scope.where must be an object of metadata keys and values", param="scope.where")
    try:
        return Scope(tuple(names), tuple(globs), dict(where))  # type: ignore[arg-type]  # values checked by Scope
    except ScopeError as exc:
        raise RequestError(str(exc), param="scope.where") from None


def _mode(raw: JSON) -> str | None:
    if raw is None:
        return None
    if raw not in MODES:
        raise RequestError(f"unknown mode {raw!r}; choose one of {', '.join(MODES)}", param="mode")
    return str(raw)


def add_redis_health(service: Service, body: JSONObject) -> None:
    """`/healthz`'s `redis` object (with `[serve] redis_url`): up or down, since when, the last error; while
    it is down the status is "degraded" (each replica counts its own limits, no shared cache)."""
    if service.shared is None:
        return
    body["redis"] = service.shared.health()
    if not service.shared.link.up:
        body["status"] = "degraded"


def create_app(service: Service) -> Guard:
    """The ASGI app (Guard around Starlette)."""

    def endpoints(name: str) -> list[JSON]:
        """An index's endpoint checks (addresses without credentials)."""
        return [c.to_dict() for c in service.endpoint_checks.get(name, [])]

    async def healthz(request: Request) -> Response:
        """Up or degraded for anyone (a load balancer sends no key); the indexes, endpoints and worker only
        to a caller with a key (or when none is configured)."""
        if service.draining:
            return JSONResponse({"status": "draining"}, status_code=503)
        body: JSONObject = {"status": "ok" if service.endpoints_ok else "degraded"}
        if not request.scope.get(AUTHORIZED):
            if service.shared is not None and not service.shared.link.up:
                body["status"] = "degraded"
            return JSONResponse(body)
        visible = service.visible(request)
        body["indexes"] = [*visible]
        if service.endpoint_checks:
            body["endpoints"] = {name: endpoints(name) for name in visible}
        if service.worker is not None:
            body["worker"] = service.worker
        add_redis_health(service, body)
        return JSONResponse(body)

    async def readyz(request: Request) -> Response:
        """For a load balancer: 200 once every index is loaded and warm, 503 (with the reasons) before that
        and while draining."""
        reasons = service.readiness()
        return JSONResponse({"ready": not reasons, "reasons": reasons}, status_code=503 if reasons else 200)

    async def metrics(request: Request) -> Response:
        only = service.visible(request) if service.tenants.bound else None
        return PlainTextResponse(service.metrics.render(only), media_type="text/plain; version=0.0.4")

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def indexes(request: Request) -> Response:
        out = []
        for name in service.visible(request):
            r = service.routers[name]
            ix = r.index
            out.append({"name": name, "default": name == service.default_index,
                        "entities": len(ix.entities), "relationships": len(ix.relationships),
                        "text_units": len(ix.text_units), "community_reports": len(ix.community_reports),
                        "documents": len(ix.documents), "models": r.models.describe(),
                        "endpoints": endpoints(name)})
        return JSONResponse({"indexes": out, "modes": list(MODES)})

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [model_object(m) for m in model_ids(service.visible(request))]})

    async def model(request: Request) -> Response:
        model_id = request.path_params["model_id"]
        visible = service.visible(request)
        if model_id not in model_ids(visible):
            try:
                parse_model(model_id, visible)  # names what is wrong with it
            except RequestError as exc:
                return _failure(exc)
            return _error(404, f"unknown model {model_id!r}", "model_not_found", "model")
        return JSONResponse(model_object(model_id))

    async def record(request: Request) -> Response:
        """A text unit, a document or an entity by id (or short id; an entity also by title), for the page. A text
        unit's `quote` (the answer's sentences citing it) gives the `highlights` the page marks."""
        try:
            _, router = service.router(request.path_params["name"], service.visible(request))
        except RequestError as exc:
            return _failure(exc)
        ix, kind, ident = router.index, request.path_params["kind"], request.path_params["id"]
        if kind == "text_units":
            from engines.citations import text_unit_position

            pos = text_unit_position(ix, ident)  # the id maps: no scan of a million text units
            if pos is None:
                return _error(404, f"no text unit {ident!r} in this index", "not_found", "id")
            unit = ix.text_units[pos]
            doc = ix.document_for_text_unit(unit.id)
            quote = request.query_params.get("quote", "")
            if len(quote) > MAX_QUOTE_CHARS:
                return _error(400, f"'quote' has {len(quote):,} characters; the limit is {MAX_QUOTE_CHARS:,}",
                              None, "quote")
            marks = [{"start": a, "end": b} for a, b in quoted_spans(unit.text, quote)]
            return JSONResponse({"id": unit.id, "short_id": unit.short_id, "text": unit.text, "highlights": marks,
                                 "document": None if doc is None else {"id": doc.id, "title": doc.title}})
        if kind == "documents":
            found = next((d for d in ix.documents if ident in (d.id, d.short_id)), None)
            if found is None:
                return _error(404, f"no document {ident!r} in this index", "not_found", "id")
            text, source = found.text, "document"
            if not text.strip():  # some GraphRAG outputs keep no document text: rebuild it from its chunks
                units = [ix.text_units[ix.text_unit_pos[u]] for u in found.text_unit_ids if u in ix.text_unit_pos]
                text, source = "\n\n".join(u.text for u in units), "text_units"
            return JSONResponse({"id": found.id, "short_id": found.short_id, "title": found.title, "text": text,
                                 "text_source": source, "text_unit_ids": list(found.text_unit_ids)})
        if kind == "entities":
            found_entity = entity_record(ix, ident)
            if found_entity is None:
                return _error(404, f"no entity {ident!r} in this index", "not_found", "id")
            return JSONResponse(found_entity)
        return _error(404, f"no record kind {kind!r} (use text_units, documents or entities)", "not_found", "kind")

    async def graph(request: Request) -> Response:
        """An answer's citations by name (with the text of each record) and the graph of the entities and
        relationships it cited, with their neighbours: what the web page draws beside the answer."""
        try:
            _, router = service.router(request.path_params["name"], service.visible(request))
            wanted = parse_graph_request(await _json(request))
        except Exception as exc:
            return _failure(exc)
        ix = router.index
        return JSONResponse({"citations": named_citations(ix, wanted.citations), **cited_graph(ix, wanted)})

    async def route(request: Request) -> Response:
        """The routing decision and the plan under the budget, with no model call."""
        try:
            body = await _json(request)
            visible = service.visible(request)
            question = service.check_question(body.get("question"))
            budget = service.budget(body.get("budget"))
            history = _history(body.get("history"))
            named = service.named(body.get("index"), visible)
            scope = _scope(body.get("scope"))
            decision, plan = await service.multi.aroute(question, history, budget, index=named, indexes=visible,
                                                        scope=scope)
        except Exception as exc:
            return _failure(exc)
        index: JSON = [*decision.index] if isinstance(decision.index, list) else decision.index
        return JSONResponse({"index": index, "engine": decision.engine, "confidence": decision.confidence,
                             "probabilities": dict(decision.probabilities), "reasons": list(decision.reasons),
                             "plan": plan.describe(), "chosen": plan.chosen,
                             "scope": None if scope is None else scope_note(decision.reasons)})

    async def ask(request: Request) -> Response:
        spend = service.spend_gate(request)
        try:
            body = await _json(request)
            visible = service.visible(request)
            named = service.named(body.get("index"), visible)
            question = service.check_question(body.get("question"))
            answer = await service.multi.aask(question, _history(body.get("history")), _mode(body.get("mode")),
                                              service.budget(body.get("budget")), index=named, indexes=visible,
                                              scope=_scope(body.get("scope")),
                                              admit=None if spend is None else spend.admit)
        except Exception as exc:
            if spend is not None:
                spend.settle(getattr(exc, "usage", None))
            return _failure(exc)
        if spend is not None:
            spend.settle(answer.usage)
        service.metrics.observe_answer(index_label(answer), answer)
        return JSONResponse({**answer.to_dict(), "index": answer.to_dict()["route"]["index"],  # type: ignore[index,call-overload]
                             "cost": answer.usage.total.cost})

    async def chat_completions(request: Request) -> Response:
        try:
            visible = service.visible(request)
            req = parse_request(await _json(request), visible)
            named = service.named(req.index, visible)
            router = service.routers[named or service.multi.names_of(visible)[0]]  # its tokenizer counts the answer
            service.check_question(req.question)
            budget = service.budget(req.budget)
            scope = _scope(req.scope)
        except Exception as exc:
            return _failure(exc)
        # The client's sampling and cap go to the call that writes the answer: set for this request's task,
        # which the streamed response and every task the engines start inherit.
        use_answer_options(req.options)
        completion = Completion(req.model)
        cap = TokenCap(req.max_tokens, router.index.tokenizer)
        spend = service.spend_gate(request)
        admit = None if spend is None else spend.admit
        if not req.stream:
            try:
                answer = await service.multi.aask(req.question, req.history or None, req.mode, budget, index=named,
                                                  indexes=visible, scope=scope, admit=admit)
            except Exception as exc:
                if spend is not None:
                    spend.settle(getattr(exc, "usage", None))
                return _failure(exc)
            if spend is not None:
                spend.settle(answer.usage)
            service.metrics.observe_answer(index_label(answer), answer)
            return JSONResponse(completion.response(index_label(answer), answer, cap.take(answer.text),
                                                    cap.finish_reason()))
        # Start the stream before answering, so a bad question is still a plain HTTP error.
        events = service.multi.astream(req.question, req.history or None, req.mode, budget, index=named,
                                       indexes=visible, scope=scope, admit=admit).__aiter__()
        try:
            first = await events.__anext__()
        except Exception as exc:
            if spend is not None:
                spend.settle(getattr(exc, "usage", None))
            return _failure(exc)
        return StreamingResponse(_chat_stream(service, req, completion, cap, first, events, spend),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    async def http_error(request: Request, exc: Exception) -> Response:
        """Starlette's own errors (no such route, method not allowed) as JSON errors."""
        assert isinstance(exc, HTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code)
        message = {404: f"no such endpoint: {request.url.path}",
                   405: f"{request.method} is not allowed on {request.url.path}"}.get(exc.status_code, exc.detail)
        return _error(exc.status_code, message, code, headers=dict(exc.headers or {}))

    async def server_error(request: Request, exc: Exception) -> Response:
        """Any unexpected error: a JSON 500 naming the request id; the traceback goes to the log under it."""
        request_id = request.scope.get(REQUEST_ID, "-")
        log.error("request %s: unhandled error serving %s", request_id, request.url.path, exc_info=exc)
        request.scope[LOGGED] = True
        return _error(500, f"internal error (request id {request_id}; the server log has the details)",
                      "internal_error")

    routes = [
        Route("/", page),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics),
        Route("/v1/indexes", indexes),
        Route("/v1/models", models),
        Route("/v1/models/{model_id:path}", model),
        Route("/v1/indexes/{name}/graph", graph, methods=["POST"]),
        Route("/v1/indexes/{name}/{kind}/{id:path}", record),
        Route("/v1/route", route, methods=["POST"]),
        Route("/v1/ask", ask, methods=["POST"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    middleware = []
    if service.config.cors_origins:  # CORS is off unless origins are configured
        middleware.append(Middleware(CORSMiddleware, allow_origins=service.config.cors_origins,
                                     allow_methods=["GET", "POST"], allow_headers=["authorization", "content-type"]))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # the serving loop's executor, which `asyncio.to_thread` uses ([serve] cpu_threads); the loop shuts
        # it down when it closes
        asyncio.get_running_loop().set_default_executor(CpuExecutor(service.config.cpu_threads))
        for router in service.routers.values():  # before uvicorn listens: the first request makes no client
            await router.models.aopen()
        if service.shared is not None:
            service.shared.start()  # this replica's Redis leases, renewed while it serves
        yield
        service.close_shared()
        for router in service.routers.values():  # the HTTP clients this loop opened
            await router.aclose()

    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan,
                    exception_handlers={HTTPException: http_error, Exception: server_error})
    return Guard(app, service)


async def _chat_stream(service: Service, req: ChatRequest, completion: Completion, cap: TokenCap,
                       first: RouterEvent, events: AsyncIterator[RouterEvent],
                       spend: SpendGate | None = None) -> AsyncIterator[str]:
    """SSE in OpenAI's chunk schema: every chunk has one choice. The first carries the role and, in its
    `graphroute_event` field, the route and plan; then the answer's deltas (cut at `max_tokens`); an
    escalation is a chunk with its `graphroute_event` (and, after answer text, a separator line as content,
    so a client that only joins the deltas sees the superseded answer marked); the last chunk has the
    finish reason and the `graphroute` object; an engine's progress and context size come as `graphroute_event`s
    of type `stage` (with empty content) as they happen; the usage chunk only when asked for; then [DONE].
    """
    from engines.events import AnswerDelta, ContextReady, Progress

    pending = first
    streamed = False  # answer text already sent since the last escalation
    role_sent = False
    try:
        while True:
            ev = pending
            if isinstance(ev, RouteDecided):
                event = route_event(ev.decision, ev.engine, ev.plan)
                delta: JSONObject = {"content": ""}
                if not role_sent:
                    delta = {"role": "assistant", "content": ""}
                    role_sent = True
                yield completion.chunk(delta, graphroute_event=event)
            elif isinstance(ev, EngineEvent) and isinstance(ev.event, AnswerDelta):
                text = cap.take(ev.event.text)
                if text:
                    streamed = True
                    yield completion.chunk({"content": text})
            elif isinstance(ev, EngineEvent) and isinstance(ev.event, Progress | ContextReady):
                yield completion.chunk({"content": ""}, graphroute_event=stage_event(ev.engine, ev.event))
            elif isinstance(ev, Escalated):
                e = ev.escalation
                event = {"type": "escalation", "from": e.from_engine, "to": e.to_engine, "reason": e.reason}
                # a plain OpenAI client concatenates content: say where one answer ends
                note = cap.take(escalation_note(e)) if streamed else ""
                yield completion.chunk({"content": note}, graphroute_event=event)
                streamed = False
            elif isinstance(ev, Done):
                answer = ev.answer
                if spend is not None:
                    spend.settle(answer.usage)
                service.metrics.observe_answer(index_label(answer), answer)
                yield completion.chunk({}, cap.finish_reason(), graphroute=graphroute_object(index_label(answer),
                                                                                                answer))
                if req.include_usage:
                    yield completion.usage_chunk(answer)
                break
            pending = await events.__anext__()
    except Exception as exc:  # mid-stream: an error event (the client raises it), never a trace
        if spend is not None:
            spend.settle(getattr(exc, "usage", None))
        try:
            body = _failure_body(exc)[1]
        except Exception:
            log.exception("streamed question failed")
            body = error_object(500, "internal error (the server log has the details)", "internal_error")
        yield sse({"error": body})
    finally:
        if spend is not None:
            spend.settle(None)  # the client left mid-answer: its estimate counts (settled once; a no-op after Done)
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    yield "data: [DONE]\n\n"
