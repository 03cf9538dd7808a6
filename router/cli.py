"""The `graphroute` command: `index`, `ask`, `questions`, `serve`, `mcp`, `config`, `demo`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel
from rich.table import Table

from router.cli_history import HELP as HISTORY_HELP

if TYPE_CHECKING:
    from engines.citations import Citation
    from engines.models.base import JSONObject, Message, Usage
    from router.answer import Answer
    from router.classifier import RouteDecision

if TYPE_CHECKING:  # imported where used at run time: `graphroute --help` stays fast
    from engines.config import GraphrouteConfig
    from engines.config_layers import ResolvedConfig
    from engines.models.base import StageUsage
    from router.fanout import MultiRouter
    from router.mcp_limits import McpLimits
    from router.router import Router
    from router.service.supervisor import WorkerPool
    from router.service.tenants import Tenants
    from shared_context.scope import Scope


# what `graphroute index` reads (indexer.reader.SUPPORTED; written out so `--help` imports no indexer)
INPUT_FORMATS = ".txt .md .html .pdf .docx files, and .csv .jsonl .parquet rows"


class CliError(Exception):
    """A user-facing error: printed without a traceback, exit code 2."""


def _settings_args(parser: argparse.ArgumentParser) -> None:
    """--settings / --no-settings: the GraphRAG project's settings.yaml (default: beside the index folder)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--settings", metavar="PATH",
                       help="the GraphRAG project's settings.yaml or settings.json (default: the one in the folder "
                            "that holds the index folder, if any)")
    group.add_argument("--no-settings", action="store_true", help="ignore the GraphRAG project's settings")
    parser.add_argument("--allow-prompt-outside", action="store_true",
                        help="read prompt files that the settings (or graphroute.toml) name by a relative path "
                             "leading outside their folder (refused by default: a downloaded project's settings "
                             "must not read your other files)")


def _settings_choice(args: argparse.Namespace) -> str | bool | None:
    if getattr(args, "no_settings", False):
        return False
    return getattr(args, "settings", None)


def _parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="graphroute", description="Route questions over a GraphRAG index.")
    sub = p.add_subparsers(dest="command", required=True)

    ix = sub.add_parser("index", help="build a GraphRAG-compatible index from documents: " + INPUT_FORMATS)
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] == "index" or args[0].startswith("-"):  # the indexer's options (and its
        from indexer.cli import build_arg_parser  # imports) only when they can be asked for

        build_arg_parser(ix)

    ask = sub.add_parser("ask", help="answer a question, routed to the best engine")
    ask.add_argument("question")
    ask.add_argument("--index", action="append", metavar="[NAME=]PATH",
                     help="GraphRAG output folder; repeat for several, and the router picks the index too (with "
                          "--server: the name of one of the server's indexes, or none to let the server pick)")
    ask.add_argument("--server", metavar="URL",
                     help="ask a running 'graphroute serve' at URL (e.g. http://127.0.0.1:8000) instead of loading "
                          "the index in this process: no start-up per question; the server's configuration applies")
    ask.add_argument("--mode", choices=["auto", "local", "global", "drift", "basic"],
                     help="engine to use (default: [router] default_mode in graphroute.toml, else auto)")
    ask.add_argument("--config", help="graphroute.toml (default: ./graphroute.toml if present)")
    ask.add_argument("--history", nargs="+", metavar="TURNS", help=HISTORY_HELP)
    ask.add_argument("--max-cost", type=float, help="budget: US dollars for this question")
    ask.add_argument("--max-calls", type=int, help="budget: model calls for this question")
    ask.add_argument("--deadline", type=float, help="budget: seconds for this question")
    ask.add_argument("--scope-document", action="append", metavar="TITLE_OR_ID",
                     help="answer only from this document (repeat for several)")
    ask.add_argument("--scope-glob", action="append", metavar="PATTERN",
                     help="answer only from documents whose title or id matches (e.g. 'reports/2024-*')")
    ask.add_argument("--where", action="append", metavar="KEY=VALUE",
                     help="answer only from documents whose metadata has KEY equal to VALUE (repeat: all must hold)")
    ask.add_argument("--json", action="store_true", help="print the whole answer as JSON")
    ask.add_argument("--stream", action="store_true", help="stream progress and the answer as it is written")
    ask.add_argument("--length", choices=["short", "medium", "long"],
                     help="answer length: sets every engine's response type and global search's reduce length "
                          "(default medium; with --server, the server's configuration decides)")
    _settings_args(ask)

    qs = sub.add_parser("questions", help="suggest next questions, each labelled with its route")
    qs.add_argument("--index", required=True)
    qs.add_argument("--n", type=int, default=5)
    qs.add_argument("--history", nargs="+", metavar="TURNS", help=HISTORY_HELP)
    qs.add_argument("--config")
    qs.add_argument("--json", action="store_true")
    _settings_args(qs)

    sv = sub.add_parser("serve", help="serve one or more indexes over HTTP (OpenAI-compatible API and a web page)")
    sv.add_argument("--index", action="append", required=True, metavar="[NAME=]PATH",
                    help="an index folder, optionally named (repeat for several; the first is the default)")
    sv.add_argument("--host", help="address to bind (default: [serve] host, 127.0.0.1)")
    sv.add_argument("--port", type=int, help="port (default: [serve] port, 8000)")
    sv.add_argument("--config", help="graphroute.toml (default: ./graphroute.toml if present)")
    sv.add_argument("--api-key", action="append", default=[], metavar="KEY",
                    help="require this API key (repeatable; also $GRAPHROUTE_API_KEYS, comma-separated)")
    sv.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                    help="allow browser calls from this origin (CORS is off by default)")
    sv.add_argument("--allowed-host", action="append", default=[], metavar="NAME[:PORT]",
                    help="without an API key, answer requests to this host name too (default: loopback only)")
    sv.add_argument("--workers", type=int, metavar="N",
                    help="worker processes sharing the port (default: [serve] workers, 1); each loads the indexes, "
                         "and the model concurrency limits are divided among them")
    _settings_args(sv)

    pr = sub.add_parser("prepare", help="build an index's derived store once, so replicas open it in seconds "
                                        "([serve] require_prepared makes them refuse an index not prepared)")
    pr.add_argument("index", metavar="PATH", help="the index folder or URI (s3://...), as the replicas name it")
    pr.add_argument("--cache-dir", metavar="DIR",
                    help="where the store goes (default: $GRAPHROUTE_CACHE_DIR or ~/.cache/graphroute); replicas "
                         "read it with GRAPHROUTE_CACHE_DIR=DIR")
    pr.add_argument("--config", help="graphroute.toml (default: ./graphroute.toml if present)")
    _settings_args(pr)

    mc = sub.add_parser("mcp", help="serve indexes to agents over the Model Context Protocol (stdio, or --http)")
    mc.add_argument("--index", action="append", required=True, metavar="[NAME=]PATH",
                    help="an index folder, optionally named (repeat for several; the first is the default)")
    mc.add_argument("--http", action="store_true",
                    help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    mc.add_argument("--host", default="127.0.0.1", help="--http: address to bind (default 127.0.0.1)")
    mc.add_argument("--port", type=int, default=8001, help="--http: port (default 8001)")
    mc.add_argument("--allowed-host", action="append", default=[], metavar="NAME[:PORT]",
                    help="--http: answer requests to this host name too (default: loopback only)")
    mc.add_argument("--config", help="graphroute.toml (default: ./graphroute.toml if present)")
    _settings_args(mc)

    cf = sub.add_parser("config", help="print the effective configuration and where each value came from")
    cf.add_argument("--show", action="store_true", help="print every setting with its source (the default action)")
    cf.add_argument("--index", help="an index folder: its GraphRAG project's settings are read too")
    cf.add_argument("--config", help="graphroute.toml (default: ./graphroute.toml if present)")
    cf.add_argument("--json", action="store_true", help="print the settings and their sources as JSON")
    cf.add_argument("--section", metavar="NAME", help="only this section's settings (e.g. local, global_search)")
    cf.add_argument("pattern", nargs="?", metavar="PATTERN",
                    help="only the keys matching this glob (e.g. '*community_prop', 'drift.local_search.*'); "
                         "without a wildcard, the keys containing it")
    _settings_args(cf)
    return p


def _load_router(index: str, config_path: str | None, length: str | None = None,
                 settings: str | bool | None = None, allow_prompt_outside: bool = False) -> Router:
    from engines.answer_length import apply_length
    from engines.config_layers import resolve_config
    from router.router import Router
    from shared_context import IndexFormatError, load_index

    if "://" not in index and not Path(index).exists():  # URIs (file://, s3://...) are checked by the loader
        raise CliError(f"index folder not found: {index}")
    cfg_path = config_path or ("graphroute.toml" if Path("graphroute.toml").exists() else None)
    try:
        resolved = resolve_config(cfg_path, index=index, settings=settings, allow_prompt_outside=allow_prompt_outside)
        _note_settings(resolved)
        config = resolved.config
        if length is not None:
            config = apply_length(config, length)
        return Router(load_index(index), config=config)
    except IndexFormatError as exc:
        raise CliError(f"cannot read the index: {exc}") from exc
    except ValueError as exc:  # pydantic validation / config errors name the key
        raise CliError(str(exc)) from exc


def _load_routers(specs: Sequence[str], config_path: str | None, length: str | None = None,
                  settings: str | bool | None = None, allow_prompt_outside: bool = False) -> Router | MultiRouter:
    """One index: its Router. Several (`--index` repeated, `[NAME=]PATH`): a MultiRouter that picks the index."""
    if len(specs) == 1:
        return _load_router(specs[0], config_path, length, settings, allow_prompt_outside)
    from router.fanout import MultiRouter

    routers: dict[str, Router] = {}
    try:
        for name, path in _parse_index_specs(specs).items():
            routers[name] = _load_router(path, config_path, length, settings, allow_prompt_outside)
    except BaseException:
        for loaded in routers.values():
            loaded.close()
        raise
    return MultiRouter(routers)


def _scope(args: argparse.Namespace) -> Scope | None:
    """--scope-document, --scope-glob and --where KEY=VALUE as one Scope (None without them). A VALUE that reads
    as a whole number also matches metadata holding that number."""
    from shared_context.scope import Scope

    if not (args.scope_document or args.scope_glob or args.where):
        return None
    where: dict[str, str | int] = {}
    for item in args.where or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--where {item!r}: give KEY=VALUE")
        where[key.strip()] = int(value) if value.strip().lstrip("-").isdigit() else value
    return Scope(tuple(args.scope_document or ()), tuple(args.scope_glob or ()), where)


def _first(router: Router | MultiRouter) -> Router:
    """The Router whose configuration the command's defaults come from (the first index's)."""
    from router.router import Router

    if isinstance(router, Router):
        return router
    first = next(iter(router.routers.values()))
    assert isinstance(first, Router)
    return first


_NOTED: set[str] = set()


def _note_settings(resolved: ResolvedConfig) -> None:
    """Say once per process which of the project's settings graphroute does not use."""
    note = resolved.settings_note()
    if note and note not in _NOTED:
        _NOTED.add(note)
        Console(stderr=True).print(f"note: {note}", style="dim", highlight=False, soft_wrap=True)


def _usage_table(usage: Usage) -> Table:
    t = Table(title="usage", show_lines=False)
    for col in ("stage", "calls", "prompt tok", "output tok", "cached", "embed tok", "cost $", "seconds"):
        t.add_column(col, justify="right" if col != "stage" else "left")
    for name, s in usage.stages.items():
        t.add_row(name, str(s.llm_calls), str(s.prompt_tokens), str(s.output_tokens), str(s.cached_calls),
                  _embeddings(s), f"{s.cost:.5f}", f"{s.seconds:.3f}")
    tot = usage.total
    t.add_row("total", str(tot.llm_calls), str(tot.prompt_tokens), str(tot.output_tokens),
              str(tot.cached_calls), _embeddings(tot), f"{tot.cost:.5f}", f"{tot.seconds:.3f}", style="bold")
    return t


def _embeddings(stage: StageUsage) -> str:
    """Embedding tokens of a stage (what embeddings are billed on; "–" when it embedded nothing)."""
    calls = int(getattr(stage, "embedding_calls", 0))
    return str(int(getattr(stage, "embedding_tokens", 0))) if calls else "–"


def _citation_table(citations: Sequence[Citation], max_rows: int = 12, max_docs: int = 3) -> Table:
    """One row per cited record (deduplicated), with the documents it resolves to."""
    ct = Table(title="citations")
    for col in ("source", "id", "documents"):
        ct.add_column(col)
    seen: set[tuple[str, str]] = set()
    rows = 0
    for c in citations:
        index = getattr(c, "index", "")  # a fanned-out answer's citations name their index
        key = (f"{index}: {c.kind}" if index else c.kind, c.id)
        if key in seen:
            continue
        seen.add(key)
        if rows == max_rows:
            ct.add_row("…", "", f"{len({(x.kind, x.id) for x in citations}) - rows} more")
            break
        docs = list(c.document_titles or c.document_ids)
        shown = ", ".join(docs[:max_docs]) + (f" (+{len(docs) - max_docs} more)" if len(docs) > max_docs else "")
        ct.add_row(key[0], key[1], shown or "—")
        rows += 1
    return ct


def route_lines(route: RouteDecision, mode: str | None) -> list[str]:
    """How the engine was chosen. A forced mode names the forced engine, then the classifier's own opinion
    (its most probable engine and probabilities) on a separate line, never the forced one as its pick."""
    ranked = sorted(route.probabilities.items(), key=lambda kv: -kv[1])
    probs = ", ".join(f"{k} {v:.2f}" for k, v in ranked)
    forced_reason = f"mode '{mode}' requested by the caller"
    reasons = [f"  • {r}" for r in route.reasons if r != forced_reason]
    index = [] if route.index is None else [f"[bold]index[/bold]: {_index_names(route.index)}"]
    if mode in (None, "auto"):
        return [*index, f"[bold]route[/bold]: {route.engine} (confidence {route.confidence:.2f}; {probs})", *reasons]
    lines = [*index, f"[bold]engine[/bold]: {mode} (forced by --mode {mode}; the router did not choose it)"]
    if ranked:
        own, p = ranked[0]
        lines.append(f"[bold]classifier's own opinion[/bold]: {own} (confidence {p:.2f}; {probs})")
    return lines + reasons


def _index_names(index: str | list[str]) -> str:
    return index if isinstance(index, str) else ", ".join(index) + " (fanned out)"


def render_answer(console: Console, answer: Answer, *, show_text: bool = True, mode: str | None = None) -> None:
    route = answer.route
    if show_text:
        console.print(Panel(Markdown(answer.text or "(empty)"), title=f"answer — {answer.engine} search"))
    for line in route_lines(route, mode):
        console.print(line)
    if answer.standalone_question != answer.question:
        console.print(f"[bold]standalone question[/bold]: {answer.standalone_question}")
    if answer.stepped_down_from:
        console.print(f"[yellow]stepped down[/yellow] from {answer.stepped_down_from} to fit the budget")
    for esc in answer.escalations:
        console.print(f"[yellow]escalated[/yellow] {esc.from_engine} → {esc.to_engine}: {esc.reason}")
    for d in answer.degraded:
        console.print(f"[red]degraded[/red]: {d}")
    for note in answer.notes:
        console.print(f"[dim]note: {note}[/dim]")
    if answer.citations:
        console.print(_citation_table(answer.citations))
    console.print(_usage_table(answer.usage))
    console.print(f"model: {answer.model}{' (offline, no API key configured)' if answer.offline else ''}; "
                  f"{answer.seconds:.2f}s")


def _history(values: Sequence[str] | None) -> list[Message]:
    from router.cli_history import HistoryError, read_history

    try:
        return read_history(values)
    except HistoryError as exc:
        raise CliError(str(exc)) from None


def _cmd_ask(args: argparse.Namespace, console: Console) -> int:
    from router.budget import Budget, BudgetError
    from router.router import Done, EngineEvent, Escalated, RouteDecided

    try:  # checked first: a meaningless budget needs no index loaded to be refused
        budget = Budget(args.max_cost, args.max_calls, args.deadline)
    except BudgetError as exc:
        raise CliError(str(exc)) from exc
    if args.server:
        return _ask_server(args, console)
    if not args.index:
        raise CliError("ask needs --index PATH (or --server URL)")
    history = _history(args.history)  # checked before the index is loaded
    scope = _scope(args)
    router = _load_routers(args.index, args.config, args.length or "medium", _settings_choice(args),
                           args.allow_prompt_outside)
    mode = args.mode or _first(router).config.router.default_mode

    async def run() -> Answer | None:
        answer = None
        streaming_text = False
        async for ev in router.astream(args.question, history=history, mode=args.mode, budget=budget,
                                       deltas=args.stream and not args.json, classify_forced=True, scope=scope):
            if args.json:
                if isinstance(ev, Done):
                    answer = ev.answer
                continue
            if isinstance(ev, RouteDecided) and args.stream:
                how = f"mode {mode} (forced)" if mode not in (None, "auto") else f"route: {ev.decision.engine}"
                console.print(f"[dim]{how} → running {ev.engine}[/dim]")
            elif isinstance(ev, EngineEvent) and args.stream:
                from engines.events import AnswerDelta, Progress

                if isinstance(ev.event, AnswerDelta):
                    streaming_text = True
                    console.print(ev.event.text, end="", soft_wrap=True, highlight=False, markup=False)
                elif isinstance(ev.event, Progress):
                    console.print(f"[dim]{ev.event.stage}: {ev.event.message}[/dim]")
            elif isinstance(ev, Escalated) and args.stream:
                console.print(f"\n[yellow]escalating {ev.escalation.from_engine} → {ev.escalation.to_engine}[/yellow]")
            elif isinstance(ev, Done):
                answer = ev.answer
        if streaming_text:
            console.print()
        return answer

    try:
        with router:  # closes the HTTP clients of the Router's loop
            answer = router.run(run())
    except (ValueError, BudgetError) as exc:
        raise CliError(str(exc)) from exc
    if answer is None:  # the stream always ends with the answer; a clear error if it ever does not
        raise CliError("the question ended without an answer")
    if args.json:
        print(json.dumps(answer.to_dict(), indent=2, ensure_ascii=False, default=str))
    else:
        render_answer(console, answer, show_text=not args.stream, mode=mode)
    return 0


def _ask_server(args: argparse.Namespace, console: Console) -> int:
    from router.cli_server import ServerError, answer_view, ask_server

    if args.stream:
        raise CliError("--stream is not available with --server (the server's /v1/chat/completions streams)")
    if args.length or args.config:
        raise CliError("--length and --config are the server's with --server (its configuration applies)")
    body: JSONObject = {"question": args.question, "mode": args.mode}
    if args.index and len(args.index) > 1:
        raise CliError("--server takes at most one --index (a name of the server's indexes)")
    if args.index:
        body["index"] = args.index[0]
    if args.history:
        body["history"] = [{"role": turn["role"], "content": turn["content"]} for turn in _history(args.history)]
    limits = {"max_cost": args.max_cost, "max_llm_calls": args.max_calls, "deadline_s": args.deadline}
    if any(v is not None for v in limits.values()):
        body["budget"] = {k: v for k, v in limits.items() if v is not None}
    try:
        data = ask_server(args.server, body, timeout_s=(args.deadline or 600.0) + 30.0)
    except ServerError as exc:
        raise CliError(str(exc)) from exc
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    else:
        render_answer(console, answer_view(data), mode=args.mode or "auto")
    return 0


def _cmd_questions(args: argparse.Namespace, console: Console) -> int:
    from engines import QuestionGenerator

    if args.n < 1 or args.n > 50:
        raise CliError("--n must be between 1 and 50")
    history = _history(args.history)
    router = _load_router(args.index, args.config, settings=_settings_choice(args),
                          allow_prompt_outside=args.allow_prompt_outside)
    from router.classifier import classify

    index = router.index
    # The router's classifier labels each suggestion; engines never import the router (layering).
    gen = QuestionGenerator(index, router.models, config=router.config.questions,
                            labeller=lambda q: classify(q, index))
    with router:
        result = router.run(gen.generate(history, n=args.n))
    if args.json:
        print(json.dumps(
            {"questions": [{"text": q.text, "engine": q.engine, "confidence": q.confidence}
                           for q in result.questions],
             "usage": result.usage.to_dict()}, indent=2, ensure_ascii=False))
        return 0
    t = Table(title="suggested questions")
    t.add_column("#", justify="right")
    t.add_column("question")
    t.add_column("route")
    for i, q in enumerate(result.questions, 1):
        t.add_row(str(i), q.text, f"{q.engine or '?'}" + (f" ({q.confidence:.2f})" if q.confidence else ""))
    console.print(t)
    console.print(_usage_table(result.usage))
    return 0


def _parse_index_specs(specs: Sequence[str]) -> dict[str, str]:
    """`NAME=PATH` or `PATH` (named after its folder) -> {name: path}; names must be unique."""
    out: dict[str, str] = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            path, name = spec, Path(spec.rstrip("/")).name or "index"
        if not name or any(c in name for c in "@/ "):
            raise CliError(f"--index {spec!r}: the name must be non-empty without '@', '/' or spaces")
        if name in out:
            raise CliError(f"--index {spec!r}: the name {name!r} is used twice (give NAME=PATH)")
        out[name] = path
    return out


def _cmd_serve(args: argparse.Namespace, console: Console) -> int:
    import os

    from engines import load_config
    from router.service import Service, serve

    specs = _parse_index_specs(args.index)
    cfg_path = args.config or ("graphroute.toml" if Path("graphroute.toml").exists() else None)
    try:
        config = load_config(cfg_path, allow_prompt_outside=args.allow_prompt_outside)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    serve_cfg = config.serve
    updates: dict[str, Any] = {}
    if args.host:
        updates["host"] = args.host
    if args.port is not None:
        updates["port"] = args.port
    if args.cors_origin:
        updates["cors_origins"] = list(args.cors_origin)
    if args.allowed_host:
        updates["allowed_hosts"] = list(args.allowed_host)
    if args.workers is not None:
        updates["workers"] = args.workers
    try:
        serve_cfg = serve_cfg.model_validate({**serve_cfg.model_dump(), **updates})
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    env_keys = [k.strip() for k in os.environ.get("GRAPHROUTE_API_KEYS", "").split(",") if k.strip()]
    keys = [*serve_cfg.api_keys, *env_keys, *args.api_key]
    from router.service.tenants import TenantConfigError, Tenants

    try:  # key bindings are checked before anything is loaded: a bad one is one line
        keys = Tenants.from_config(keys, serve_cfg, list(specs))[1]
    except TenantConfigError as exc:
        raise CliError(str(exc)) from None
    access = "API key required" if keys else "no API key: loopback use only"
    if serve_cfg.host not in ("127.0.0.1", "localhost", "::1") and not keys:
        console.print("[yellow]warning:[/yellow] listening beyond loopback without an API key; only requests to a "
                      "loopback name or an --allowed-host are answered")
    if serve_cfg.workers > 1:
        _serve_workers(specs, config.model_copy(update={"serve": serve_cfg}), keys, access, console,
                       _settings_choice(args), cfg_path, args.allow_prompt_outside)
        return 0
    from router.service.listeners import ListenError, listen

    try:  # the port first: a busy one is one line, before any index is loaded
        sock = listen(serve_cfg.host, serve_cfg.port)
    except ListenError as exc:
        raise CliError(exc.strerror) from None
    try:
        from router.prepare import split_prepared

        try:
            specs, unready = split_prepared(specs, serve_cfg.require_prepared)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        for name, why in unready.items():
            console.print(f"[yellow]warning:[/yellow] not serving {name}: {why}", highlight=False, soft_wrap=True)
        routers = {name: _load_router(path, args.config, settings=_settings_choice(args),
                                      allow_prompt_outside=args.allow_prompt_outside)
                   for name, path in specs.items()}
        service = Service(routers, serve_cfg, api_keys=keys, unready=unready)
        console.print(f"graphroute serve: warming up {', '.join(routers)} and checking the model endpoints",
                      highlight=False, soft_wrap=True)
        service.prepare()
    except BaseException:
        sock.close()
        raise
    for line in service.endpoint_lines():
        console.print(f"  {line}", highlight=False, soft_wrap=True)
    host = f"[{serve_cfg.host}]" if ":" in serve_cfg.host else serve_cfg.host
    console.print(f"graphroute serve: {', '.join(routers)} on http://{host}:{sock.getsockname()[1]} ({access})",
                  highlight=False, soft_wrap=True)
    serve(service, sock)
    return 0


def _serve_workers(specs: dict[str, str], config: GraphrouteConfig, keys: list[str], access: str, console: Console,
                   settings: str | bool | None = None, config_path: str | None = None,
                   allow_prompt_outside: bool = False) -> None:
    """`serve --workers N`: the supervisor binds and watches; each worker loads the indexes itself."""
    from engines.config_layers import resolve_config
    from router.service.supervisor import WorkerError, serve_workers
    from router.service.worker import WorkerSpec

    index_configs: dict[str, GraphrouteConfig] = {}
    for name, path in specs.items():
        if "://" not in path and not Path(path).exists():
            raise CliError(f"index folder not found: {path}")
        if settings is False:
            continue
        try:
            resolved = resolve_config(config_path, index=path, settings=settings,
                                      allow_prompt_outside=allow_prompt_outside)
        except ValueError as exc:
            raise CliError(str(exc)) from exc
        if resolved.settings is not None:
            _note_settings(resolved)
            index_configs[name] = resolved.config
    workers = config.serve.workers

    def serving(pool: WorkerPool) -> None:
        console.print(f"graphroute serve: {', '.join(specs)} on {pool.url} with {workers} workers "
                      f"(pids {', '.join(map(str, pool.pids.values()))}; {access})", highlight=False, soft_wrap=True)

    def bound(pool: WorkerPool) -> None:
        console.print(f"graphroute serve: starting {workers} workers on port {pool.port} (each loads and warms up "
                      "the indexes and checks the model endpoints)", highlight=False, soft_wrap=True)

    try:
        serve_workers(WorkerSpec(specs, config, keys, index_configs=index_configs),
                      lambda line: console.print(line, highlight=False, soft_wrap=True), serving, bound)
    except WorkerError as exc:
        raise CliError(str(exc)) from None


def _cmd_prepare(args: argparse.Namespace, console: Console) -> int:
    import os

    from engines import load_config
    from router.prepare import prepare

    if args.cache_dir:
        os.environ["GRAPHROUTE_CACHE_DIR"] = str(Path(args.cache_dir).expanduser().resolve())
    cfg_path = args.config or ("graphroute.toml" if Path("graphroute.toml").exists() else None)
    try:
        warm_rows = load_config(cfg_path).serve.warm_rows
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    console.print(f"graphroute prepare: opening {args.index} and building its derived store", highlight=False,
                  soft_wrap=True)
    marker, seconds, peak = prepare(args.index, lambda path: _load_router(path, args.config,
                                                                          settings=_settings_choice(args)), warm_rows)
    console.print(f"graphroute prepare: done in {seconds:.1f} s, peak memory {peak / 2**30:.2f} GB; {marker}",
                  highlight=False, soft_wrap=True)
    return 0


def _cmd_mcp(args: argparse.Namespace) -> int:
    """`graphroute mcp`: stdout is the protocol channel over stdio, so everything else goes to stderr."""
    import asyncio

    from router.mcp_server import build_server, serve_http, serve_stdio

    err = Console(stderr=True)
    specs = _parse_index_specs(args.index)
    if args.http and not 0 < args.port < 65536:
        raise CliError(f"--port {args.port}: must be between 1 and 65535")
    routers = {name: _load_router(path, args.config, settings=_settings_choice(args),
                                  allow_prompt_outside=args.allow_prompt_outside)
               for name, path in specs.items()}
    tenants, limits = _mcp_keys(args.config, routers) if args.http else (None, None)
    server = build_server(routers, tenants=tenants, limits=limits)
    if args.http:
        if tenants is None and args.host not in ("127.0.0.1", "localhost", "::1"):
            err.print("[yellow]warning:[/yellow] the MCP endpoint has no authentication; listening beyond loopback")
        err.print(f"graphroute mcp: {', '.join(routers)} on http://{args.host}:{args.port}/mcp", highlight=False)
        asyncio.run(serve_http(server, args.host, args.port, args.allowed_host))
    else:
        asyncio.run(serve_stdio(server))
    return 0


def _mcp_keys(config_path: str | None, routers: Mapping[str, Router]) -> tuple[Tenants | None, McpLimits | None]:
    """For the MCP server over HTTP: `[serve] key_indexes` / `keys_file` (None when no key is bound) and the
    keys' daily spending limits, `[serve] max_cost_per_day` / `max_calls_per_day` (None when unset), shared with
    the service's replicas through `[serve] redis_url`."""
    from engines import load_config
    from router.mcp_limits import McpLimits, mcp_keys
    from router.service.tenants import Tenants

    cfg_path = config_path or ("graphroute.toml" if Path("graphroute.toml").exists() else None)
    try:
        serve_cfg = load_config(cfg_path).serve
        tenants, keys = Tenants.from_config(mcp_keys(serve_cfg), serve_cfg, list(routers))
    except ValueError as exc:  # pydantic validation, a bad keys file, a binding naming no served index
        raise CliError(str(exc)) from exc
    limits = McpLimits.from_config(serve_cfg, keys, [r.models for r in routers.values()])
    return (tenants if tenants.bound else None), limits


def _spent(usage: Usage | None) -> str:
    """' (spent: 3 model calls, 1,234 prompt tokens, $0.0012)' for an error line, '' when nothing was spent."""
    total = usage.total if usage is not None else None
    if total is None or not (total.llm_calls or total.embedding_calls):
        return ""
    return (f" (spent: {total.llm_calls} model calls, {total.prompt_tokens:,} prompt tokens, "
            f"{total.output_tokens:,} output tokens, ${total.cost:.4f})")


def _shown(exc: BaseException) -> str:
    """An error as the user sees it: no secret in it, and cut when it quotes a huge input."""
    from rich.markup import escape

    from engines.models.redaction import capped, redact

    return escape(capped(redact(str(exc))))


def _cmd_index(args: argparse.Namespace) -> int:
    from indexer.cli import run_from_args

    return int(run_from_args(args) or 0)


def _one_line_warnings(err: Console) -> Callable[..., None]:
    """Warnings (a model with no price, settings not used) as one "warning:" line naming what to do, not
    Python's two lines with the source path of the call that warned."""

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: object = None, line: str | None = None) -> None:
        from rich.markup import escape

        err.print(f"[yellow]warning:[/yellow] {escape(str(message))}", highlight=False, soft_wrap=True)

    return show


def main(argv: Sequence[str] | None = None) -> int:
    import warnings

    args = _parser(argv).parse_args(argv)
    console = Console()
    err = Console(stderr=True)
    shown, warnings.showwarning = warnings.showwarning, _one_line_warnings(err)
    try:
        return _run(args, console, err)
    finally:
        warnings.showwarning = shown


def _run(args: argparse.Namespace, console: Console, err: Console) -> int:
    try:
        if args.command == "ask":
            return _cmd_ask(args, console)
        if args.command == "questions":
            return _cmd_questions(args, console)
        if args.command == "index":
            return _cmd_index(args)
        if args.command == "serve":
            return _cmd_serve(args, console)
        if args.command == "mcp":
            return _cmd_mcp(args)
        if args.command == "prepare":
            return _cmd_prepare(args, console)
        if args.command == "config":
            from engines.models.errors import ModelConfigError
            from router.config_show import show_config

            try:
                return show_config(args, console, _settings_choice(args))
            except (ModelConfigError, ValueError) as exc:
                raise CliError(str(exc)) from exc
    except CliError as exc:
        err.print(f"[red]error:[/red] {_shown(exc)}", highlight=False, soft_wrap=True)  # one line, however narrow
        return 2
    except Exception as exc:  # model and engine failures name their stage and cause; no traceback
        from engines.errors import EngineError
        from engines.models.errors import ModelError

        if not isinstance(exc, EngineError | ModelError):
            raise
        err.print(f"[red]error:[/red] {_shown(exc)}{_spent(getattr(exc, 'usage', None))}", highlight=False,
                  soft_wrap=True)  # one line, however narrow the terminal
        return 1
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130
    return 2


if __name__ == "__main__":
    sys.exit(main())
