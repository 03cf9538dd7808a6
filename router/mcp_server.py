"""`graphroute mcp`: the indexes as a Model Context Protocol server, for agents (stdio, or streamable HTTP).

Built on the official `mcp` SDK (`MCPServer`); this module is imported only by the `mcp` command, so
`import router` never loads the SDK.

Tools (each takes an optional `index`: the first index is the default):
- `ask`: the question routed to the engine that answers it best within an optional budget; the answer, its
  route and reasons, citations and cost, as text and as structured content. Reports progress while it runs.
- `route`: the routing decision and the budget plan, with no model call.
- `search_local`, `search_global`, `search_basic`: one engine, chosen by the caller.
- `entity`: an entity with its relationships and the text units (sources) that mention it.
- `list_indexes`: the indexes this server answers over.
Resources: `graphroute://<index>/reports` (the community reports, listed) and
`graphroute://<index>/reports/<community>` (one report's full text).

Errors: a failure a tool anticipates (a question refused, an unknown index, a budget no engine fits, a model
or engine failure) is a tool result with `isError` and a message that names the problem (with what was spent);
an unknown resource is the protocol's invalid-params error.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.resources.types import FunctionResource
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from router.fanout import MultiRouter
from router.router import Router
from shared_context.scope import Scope

if TYPE_CHECKING:
    from engines.models.base import Usage
    from router.answer import Answer
    from router.classifier import RouteDecision
    from router.mcp_limits import McpLimits
    from router.service.tenants import Tenants

Mode = Literal["auto", "local", "global", "drift", "basic"]
MAX_RELATIONSHIPS = 25
MAX_SOURCES = 10
EXCERPT_CHARS = 600


# ---- structured results ---------------------------------------------------------------------------------


class RouteInfo(BaseModel):
    engine: str = Field(description="the engine the classifier chose")
    confidence: float
    probabilities: dict[str, float]
    reasons: list[str]
    method: str = Field(description="how it was decided: model, forced, cost default, ...")
    index: str | list[str] | None = Field(default=None, description=(
        "the index the question went to (the list when it fanned out over several)"))


class CitationInfo(BaseModel):
    kind: str = Field(description="Entities, Relationships, Sources, Reports or Claims")
    id: str
    resolved: bool = Field(description="the id exists in the index and was in the context the model saw")
    documents: list[str] = Field(description="titles of the documents the cited record comes from")
    index: str | None = Field(default=None, description="the index of the cited record, in a fanned-out answer")


class CostInfo(BaseModel):
    llm_calls: int
    prompt_tokens: int
    output_tokens: int
    embedding_tokens: int
    cost_usd: float
    seconds: float


class AskResult(BaseModel):
    index: str | list[str]
    question: str
    answer: str
    engine: str = Field(description="the engine that wrote the answer (after any step-down or escalation)")
    route: RouteInfo
    plan: list[str] = Field(description="the budget plan: each engine tried with its estimate")
    citations: list[CitationInfo]
    cost: CostInfo
    model: str
    offline: bool
    degraded: list[str] = Field(description="what failed or was cut short, if anything")
    escalations: list[str]
    notes: list[str]


class PlanStepInfo(BaseModel):
    engine: str
    prerank: bool = Field(description="global search reading only the most relevant share of the reports")
    llm_calls: int
    cost_usd: float
    seconds_guess: float
    fits: bool
    why_not: str


class RouteResult(BaseModel):
    index: str | list[str]
    question: str
    engine: str = Field(description="the engine an ask would run: the route, stepped down to fit the budget")
    route: RouteInfo
    stepped_down: bool
    plan: list[PlanStepInfo]


class RelationshipInfo(BaseModel):
    id: str
    source: str
    target: str
    description: str
    weight: float


class SourceInfo(BaseModel):
    id: str
    document: str
    excerpt: str


class EntityResult(BaseModel):
    index: str
    title: str
    type: str
    description: str
    matched: str = Field(description="exact: the name is the entity's title; else the closest entity by linking")
    other_matches: list[str]
    relationships: list[RelationshipInfo]
    relationship_count: int
    sources: list[SourceInfo]
    source_count: int
    communities: list[int]


class IndexInfo(BaseModel):
    name: str
    default: bool
    path: str
    entities: int
    relationships: int
    text_units: int
    community_reports: int
    documents: int


class IndexList(BaseModel):
    indexes: list[IndexInfo]


# ---- the server -----------------------------------------------------------------------------------------


class GraphrouteTools:
    """The tools and resources over named Routers (the first is the default index)."""

    def __init__(self, routers: Mapping[str, Router], tenants: Tenants | None = None,
                 limits: McpLimits | None = None) -> None:
        """`tenants`: API keys bound to indexes, for the server over HTTP (a call's key comes in its headers);
        `limits`: the keys' daily spending limits (`router.mcp_limits`)."""
        if not routers:
            raise ValueError("the MCP server needs at least one index")
        self.routers = dict(routers)
        self.default = next(iter(self.routers))
        self.multi = MultiRouter(self.routers, owns_routers=False)  # index routing, for questions naming none
        self.tenants = tenants
        self.limits = limits

    def visible(self, ctx: Context | None) -> list[str]:
        """The indexes this call may read: all over stdio (the local user's own process) or without key
        bindings; over HTTP with bindings, those of the key in its Authorization or X-API-Key header."""
        from router.mcp_limits import key_of

        headers = ctx.headers if ctx is not None else None
        if self.tenants is None or headers is None:
            return list(self.routers)
        return self.tenants.for_key(key_of(headers))

    def router(self, index: str | None, visible: list[str] | None = None) -> tuple[str, Router]:
        """The named index (the first visible one when None); any other name is unknown, and only the
        visible indexes are listed."""
        shown = list(self.routers) if visible is None else visible
        name = index or (shown[0] if shown else None)
        if name is None:
            raise ToolError("no index is available with this API key")
        if name not in shown:
            raise ToolError(f"unknown index {name!r} (indexes: {', '.join(shown)})")
        return name, self.routers[name]

    async def ask(self, question: str, index: str | None, mode: Mode, ctx: Context | None, *,
                  max_cost: float | None = None, max_calls: int | None = None, deadline_s: float | None = None,
                  history: list[str] | None = None, scope: Scope | None = None) -> CallToolResult:
        from engines.errors import EngineError
        from engines.events import ContextReady, Progress
        from engines.models.errors import ModelError
        from router.budget import Budget, BudgetError
        from router.mcp_limits import UnknownKey
        from router.router import Done, EngineEvent, Escalated, RouteDecided

        visible = self.visible(ctx)
        if index is not None:
            self.router(index, visible)  # an unknown name is refused before anything runs
        elif not visible:
            raise ToolError("no index is available with this API key")
        try:  # the key's day: held from the chosen engine's estimate before its first model call
            spend = None if self.limits is None else self.limits.gate(ctx.headers if ctx is not None else None)
        except UnknownKey as exc:
            raise ToolError(str(exc)) from None
        step = 0

        async def progress(message: str) -> None:
            nonlocal step
            step += 1
            if ctx is not None:
                await ctx.report_progress(step, None, message)

        answer = None
        failure: Exception | None = None
        try:
            budget = Budget(max_cost, max_calls, deadline_s)
            async for event in self.multi.astream(question, history, mode, budget, index=index, indexes=visible,
                                                  deltas=False, scope=scope,
                                                  admit=None if spend is None else spend.admit):
                if isinstance(event, RouteDecided):
                    where = _index_text(event.decision.index).rstrip("; ")
                    await progress(f"route: {event.decision.engine}; running {event.engine}"
                                   + (f" ({where})" if where else ""))
                elif isinstance(event, EngineEvent) and isinstance(event.event, Progress):
                    await progress(f"{event.engine} {event.event.stage}: {event.event.message}")
                elif isinstance(event, EngineEvent) and isinstance(event.event, ContextReady):
                    await progress(f"{event.engine} {event.event.stage}: context of {event.event.tokens} tokens")
                elif isinstance(event, Escalated):
                    esc = event.escalation
                    await progress(f"escalating {esc.from_engine} -> {esc.to_engine}: {esc.reason}")
                elif isinstance(event, Done):
                    answer = event.answer
        except (BudgetError, ValueError) as exc:  # a spending limit's refusal says when it resets
            failure = exc
            raise ToolError(str(exc)) from None
        except (EngineError, ModelError) as exc:
            failure = exc
            raise ToolError(f"{exc}{_spent(getattr(exc, 'usage', None))}") from None
        finally:  # what the question cost replaces its hold (its estimate when unknown; once)
            if spend is not None:
                spend.settle(answer.usage if answer is not None else getattr(failure, "usage", None))
        if answer is None:  # astream always ends with Done or raises
            raise ToolError("the question ended without an answer")
        result = ask_result(answer.route.index or "", answer)
        return CallToolResult(content=[TextContent(type="text", text=ask_text(result))],
                              structured_content=result.model_dump(mode="json"))

    async def route(self, question: str, index: str | None, *, max_cost: float | None = None,
                    max_calls: int | None = None, deadline_s: float | None = None,
                    history: list[str] | None = None, scope: Scope | None = None,
                    ctx: Context | None = None) -> CallToolResult:
        from router.budget import Budget, BudgetError
        from router.router import public_name

        visible = self.visible(ctx)
        if index is not None:
            self.router(index, visible)
        elif not visible:
            raise ToolError("no index is available with this API key")
        try:
            decision, plan = await self.multi.aroute(question, history, Budget(max_cost, max_calls, deadline_s),
                                                     index=index, indexes=visible, scope=scope)
        except (BudgetError, ValueError) as exc:
            raise ToolError(str(exc)) from None
        steps = [PlanStepInfo(engine=public_name(s.engine), prerank=s.engine == "global_prerank", llm_calls=s.llm_calls,
                              cost_usd=round(s.cost, 6), seconds_guess=round(s.seconds_guess, 2), fits=s.fits,
                              why_not=s.why_not or "")
                 for s in plan.steps]
        result = RouteResult(index=decision.index or "", question=question, engine=public_name(plan.chosen),
                             route=route_info(decision), stepped_down=plan.stepped_down, plan=steps)
        lines = [f"engine: {result.engine} (route: {decision.engine}, confidence {decision.confidence:.2f}"
                 f"{'; ' + _index_text(decision.index).rstrip('; ') if decision.index else ''})",
                 *(f"- {r}" for r in decision.reasons)]
        lines += [f"plan: {s.engine}{' (pre-ranked reports)' if s.prerank else ''}: ~{s.llm_calls} calls, "
                  f"~${s.cost_usd:.4f}, ~{s.seconds_guess:.1f}s" + ("" if s.fits else f", over budget ({s.why_not})")
                  for s in steps]
        return CallToolResult(content=[TextContent(type="text", text="\n".join(lines))],
                              structured_content=result.model_dump(mode="json"))

    async def entity(self, name: str, index: str | None, ctx: Context | None = None) -> CallToolResult:
        index_name, router = self.router(index, self.visible(ctx))
        if not name.strip():
            raise ToolError("the entity name is empty")
        result = await asyncio.to_thread(entity_result, index_name, router, name)
        return CallToolResult(content=[TextContent(type="text", text=entity_text(result))],
                              structured_content=result.model_dump(mode="json"))

    def list_indexes(self, ctx: Context | None = None) -> IndexList:
        out = []
        visible = self.visible(ctx)
        for name in visible:
            ix = self.routers[name].index
            out.append(IndexInfo(name=name, default=name == visible[0], path=str(ix.path or ""),
                                 entities=len(ix.entities), relationships=len(ix.relationships),
                                 text_units=len(ix.text_units), community_reports=len(ix.community_reports),
                                 documents=len(ix.documents)))
        return IndexList(indexes=out)

    def report_list(self, name: str) -> str:
        index = self.routers[name].index
        reports = [{"community": r.community, "level": r.level, "title": r.title, "rank": r.rank,
                    "uri": f"graphroute://{name}/reports/{r.community}"} for r in index.community_reports]
        return json.dumps({"index": name, "reports": reports}, ensure_ascii=False)

    def report(self, index: str, community: str, ctx: Context | None = None) -> str:
        visible = self.visible(ctx)
        if index not in visible:
            raise ResourceNotFoundError(f"unknown index {index!r} (indexes: {', '.join(visible)})")
        ix = self.routers[index].index
        try:
            pos = ix.report_pos[int(community)]
        except (KeyError, ValueError):
            raise ResourceNotFoundError(f"index {index!r} has no report for community {community!r}") from None
        report = ix.community_reports[pos]
        return report.full_content or f"# {report.title}\n\n{report.summary}"


def build_server(routers: Mapping[str, Router], *, close_routers: bool = True,
                 tenants: Tenants | None = None, limits: McpLimits | None = None) -> MCPServer:
    """The MCP server over `routers` (name -> Router; the first is the default index). With `close_routers`,
    the Routers' model clients are closed when the server stops. `tenants`: API keys bound to indexes (over
    HTTP): then neither the instructions nor the resource list name the indexes. `limits`: the keys' daily
    spending limits, whose Redis heartbeat runs while the server does."""
    tools = GraphrouteTools(routers, tenants, limits)

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        if limits is not None:
            limits.start()
        try:
            yield
        finally:
            if limits is not None:
                limits.stop()
            if close_routers:
                for router in tools.routers.values():
                    await router.aclose()

    names = f" ({', '.join(tools.routers)}; default {tools.default})" if tenants is None else ""
    server: MCPServer = MCPServer(
        "graphroute",
        instructions=(f"Answers questions over GraphRAG knowledge-graph indexes{names}. With no index named, `ask` "
                      "picks the index that covers the question (several: it asks each and merges). `ask` routes each question to local, global, DRIFT or basic search; "
                      "`route` shows the choice without calling a model; `entity` looks up one entity."),
        lifespan=lifespan,
        log_level="WARNING",
    )
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(description="Answer a question over an index, routed to the engine that answers it best for the "
                 "least cost (local: specific entities; global: themes across the corpus; DRIFT: broad questions "
                 "that need detail; basic: text passages). Returns the answer with its route, reasons, citations "
                 "and cost.", annotations=read_only)
    async def ask(question: str, index: str | None = None, mode: Mode = "auto", max_cost: float | None = None,
                  max_calls: int | None = None, deadline_s: float | None = None,
                  history: list[str] | None = None, scope_documents: list[str] | None = None,
                  scope_globs: list[str] | None = None, scope_where: dict[str, str | int | float | bool] | None = None,
                  ctx: Context | None = None) -> Annotated[CallToolResult, AskResult]:
        scope = _scope(scope_documents, scope_globs, scope_where)
        return await tools.ask(question, index, mode, ctx, max_cost=max_cost, max_calls=max_calls,
                               deadline_s=deadline_s, history=history, scope=scope)

    @server.tool(description="The engine a question would be routed to, the reasons and the budget plan, "
                 "without calling a model.", annotations=read_only)
    async def route(question: str, index: str | None = None, max_cost: float | None = None,
                    max_calls: int | None = None, deadline_s: float | None = None,
                    history: list[str] | None = None, scope_documents: list[str] | None = None,
                    scope_globs: list[str] | None = None, scope_where: dict[str, str | int | float | bool] | None = None,
                    ctx: Context | None = None) -> Annotated[CallToolResult, RouteResult]:
        return await tools.route(question, index, max_cost=max_cost, max_calls=max_calls, deadline_s=deadline_s,
                                 history=history, scope=_scope(scope_documents, scope_globs, scope_where), ctx=ctx)

    @server.tool(description="Local search: answer from the entities the question names, their relationships, "
                 "claims, reports and source passages.", annotations=read_only)
    async def search_local(question: str, index: str | None = None,
                           ctx: Context | None = None) -> Annotated[CallToolResult, AskResult]:
        return await tools.ask(question, index, "local", ctx)

    @server.tool(description="Global search: map-reduce over the community reports, for questions about themes "
                 "across the whole corpus.", annotations=read_only)
    async def search_global(question: str, index: str | None = None,
                            ctx: Context | None = None) -> Annotated[CallToolResult, AskResult]:
        return await tools.ask(question, index, "global", ctx)

    @server.tool(description="Basic search: answer from the text passages most similar to the question.",
                 annotations=read_only)
    async def search_basic(question: str, index: str | None = None,
                           ctx: Context | None = None) -> Annotated[CallToolResult, AskResult]:
        return await tools.ask(question, index, "basic", ctx)

    @server.tool(description="An entity of the knowledge graph by name: its description, relationships and the "
                 "source passages that mention it.", annotations=read_only)
    async def entity(name: str, index: str | None = None,
                     ctx: Context | None = None) -> Annotated[CallToolResult, EntityResult]:
        return await tools.entity(name, index, ctx)

    @server.tool(description="The indexes this server answers over, with their sizes.", annotations=read_only)
    def list_indexes(ctx: Context | None = None) -> IndexList:
        return tools.list_indexes(ctx)

    for name in tools.routers if tenants is None else ():  # a listing would name every index to every key
        server.add_resource(FunctionResource.from_function(
            fn=lambda name=name: tools.report_list(name), uri=f"graphroute://{name}/reports",
            name=f"{name} community reports", mime_type="application/json",
            description=f"The community reports of index {name}: community, level, title, rank and URI."))

    @server.resource("graphroute://{index}/reports/{community}", name="community report", mime_type="text/markdown",
                     description="One community report's full text.")
    def report(index: str, community: str, ctx: Context | None = None) -> str:
        return tools.report(index, community, ctx)

    return server


async def serve_stdio(server: MCPServer) -> None:
    await server.run_stdio_async()


async def serve_http(server: MCPServer, host: str, port: int, allowed_hosts: list[str] | None = None) -> None:
    """Streamable HTTP at /mcp. The endpoint has no authentication, so it answers only this machine's programs
    (`router.host_policy`, the keyless service's policy); the SDK's own copy of the check is off."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    from router.host_policy import HostGuard, HostPolicy

    app = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False), host=host)
    config = uvicorn.Config(HostGuard(app, HostPolicy.of(allowed_hosts or ())), host=host, port=port,
                            log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()


# ---- results as structured content and text ------------------------------------------------------------


def _scope(documents: list[str] | None, globs: list[str] | None,
           where: dict[str, str | int | float | bool] | None) -> Scope | None:
    """The `scope_*` arguments of `ask` and `route` (as `/v1/ask` and `/v1/route` take `scope`); none given: no scope."""
    if not (documents or globs or where):
        return None
    try:
        return Scope(tuple(documents or ()), tuple(globs or ()), dict(where or {}))
    except ValueError as exc:
        raise ToolError(str(exc)) from None


def route_info(decision: RouteDecision) -> RouteInfo:
    return RouteInfo(engine=str(decision.engine), confidence=round(float(decision.confidence), 4),
                     probabilities={str(k): round(float(v), 4) for k, v in decision.probabilities.items()},
                     reasons=[str(r) for r in decision.reasons], method=str(getattr(decision, "method", "model")),
                     index=decision.index)


def _index_text(index: str | list[str] | None) -> str:
    """'index carol; ' for a progress or route line ('' without one)."""
    if index is None:
        return ""
    return f"index {index if isinstance(index, str) else ', '.join(index)}; "


def ask_result(index: str | list[str], answer: Answer) -> AskResult:
    total = answer.usage.total
    seen: set[tuple[str, str, str]] = set()
    citations = []
    for c in answer.citations:
        cited_in = getattr(c, "index", None)  # a fanned-out answer's citations name their index
        key = (str(c.kind), str(c.id), str(cited_in or ""))
        if key in seen:
            continue
        seen.add(key)
        citations.append(CitationInfo(kind=key[0], id=key[1], resolved=bool(c.resolved),
                                      documents=[str(d) for d in (c.document_titles or c.document_ids)],
                                      index=cited_in))
    return AskResult(
        index=index, question=answer.question, answer=answer.text, engine=answer.engine,
        route=route_info(answer.route), plan=list(answer.plan), citations=citations,
        cost=CostInfo(llm_calls=total.llm_calls, prompt_tokens=total.prompt_tokens, output_tokens=total.output_tokens,
                      embedding_tokens=total.embedding_tokens, cost_usd=round(total.cost, 6),
                      seconds=round(answer.seconds, 3)),
        model=answer.model, offline=answer.offline, degraded=list(answer.degraded),
        escalations=[f"{e.from_engine} -> {e.to_engine}: {e.reason}" for e in answer.escalations],
        notes=list(answer.notes),
    )


def ask_text(result: AskResult) -> str:
    route = result.route
    lines = [result.answer or "(no answer)", "",
             f"engine: {result.engine} (route: {route.engine}, confidence {route.confidence:.2f}, {route.method})"]
    lines += [f"- {r}" for r in route.reasons]
    for what, items in (("escalated", result.escalations), ("degraded", result.degraded)):
        lines += [f"{what}: {item}" for item in items]
    if result.citations:
        cited = ", ".join(f"{c.kind} {c.id}" for c in result.citations[:12])
        lines.append(f"citations: {cited}" + (f" (+{len(result.citations) - 12} more)" if len(result.citations) > 12
                                               else ""))
    cost = result.cost
    lines.append(f"cost: {cost.llm_calls} model calls, {cost.prompt_tokens} prompt + {cost.output_tokens} output "
                 f"tokens, ${cost.cost_usd:.4f}, {cost.seconds:.2f}s ({result.model})")
    return "\n".join(lines)


def entity_result(index_name: str, router: Router, name: str) -> EntityResult:
    from shared_context.linking import link_entities

    index = router.index
    by_title = index.entity_by_title
    pos = by_title.get(name, by_title.get(name.upper()))
    others: list[str] = []
    if pos is None:
        link = link_entities(index, name, k=5)
        if not link.entities:
            raise ToolError(f"no entity of index {index_name!r} matches {name!r}")
        pos = link.entities[0].position
        others = [e.entity.title for e in link.entities[1:]]
    ent = index.entities[pos]
    rel_positions = list(index.entity_relationships[pos])
    relationships = [RelationshipInfo(id=r.short_id, source=r.source, target=r.target, description=r.description,
                                      weight=float(r.weight))
                     for r in (index.relationships[p] for p in rel_positions[:MAX_RELATIONSHIPS])]
    unit_positions = list(index.entity_text_units[pos])
    sources = []
    for p in unit_positions[:MAX_SOURCES]:
        unit = index.text_units[p]
        doc = index.text_unit_document[p] if p < len(index.text_unit_document) else -1
        title = index.documents[doc].title if doc >= 0 else ""
        text = unit.text if len(unit.text) <= EXCERPT_CHARS else unit.text[:EXCERPT_CHARS].rstrip() + " …"
        sources.append(SourceInfo(id=unit.short_id, document=title, excerpt=text))
    return EntityResult(
        index=index_name, title=ent.title, type=ent.type or "", description=ent.description or "",
        matched="exact" if not others and (name == ent.title or name.upper() == ent.title) else "closest",
        other_matches=others, relationships=relationships, relationship_count=len(rel_positions),
        sources=sources, source_count=len(unit_positions), communities=[int(c) for c in index.entity_communities[pos]],
    )


def entity_text(result: EntityResult) -> str:
    lines = [f"{result.title} ({result.type or 'entity'}; {result.matched} match)", result.description, ""]
    if result.other_matches:
        lines.insert(1, f"other close entities: {', '.join(result.other_matches)}")
    lines.append(f"relationships ({len(result.relationships)} of {result.relationship_count}):")
    lines += [f"- [{r.id}] {r.source} -> {r.target}: {r.description}" for r in result.relationships]
    lines.append(f"sources ({len(result.sources)} of {result.source_count}):")
    lines += [f"- [{s.id}] {s.document}: {s.excerpt[:200]}" for s in result.sources]
    return "\n".join(lines)


def _spent(usage: Usage | None) -> str:
    total = usage.total if usage is not None else None
    if total is None or not (total.llm_calls or total.embedding_calls):
        return ""
    return f" (spent: {total.llm_calls} model calls, ${total.cost:.4f})"
