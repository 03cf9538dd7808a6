"""`graphroute config --show`: every setting in effect and where it came from (graphroute.toml, the
environment, the GraphRAG project's settings, or the default), then the project's settings graphroute does
not use. Keys are never printed: a set key shows as "(set)"; passwords and tokens in URLs and values taken
from a `${VAR}` are masked (`engines.models.redaction`)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, SecretStr
from rich.console import Console

from engines.models.redaction import redact

if TYPE_CHECKING:
    from engines.config_layers import ResolvedConfig

HIDDEN = "(set)"


def flatten(value: object, prefix: str = "") -> Iterator[tuple[str, object]]:
    """(dotted key, printable value) of every leaf setting; a prompt shows its source, a secret is hidden."""
    from engines.prompts import PromptTemplate

    if isinstance(value, PromptTemplate):
        yield prefix, value.source
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            field = type(value).model_fields[name]
            if field.exclude:
                continue
            yield from flatten(getattr(value, name), f"{prefix}.{name}" if prefix else name)
    elif isinstance(value, dict):
        if not value:
            yield prefix, {}
        for key, item in value.items():
            yield from flatten(item, f"{prefix}.{key}")
    elif isinstance(value, SecretStr):
        yield prefix, HIDDEN if value.get_secret_value() else ""
    elif prefix.endswith("api_keys") and isinstance(value, list):  # [serve] api_keys: plain strings
        yield prefix, [HIDDEN] * len(value)
    elif isinstance(value, str | Path):  # a URL's password or token, a value from a ${VAR}: masked
        yield prefix, redact(str(value))
    elif isinstance(value, tuple | list | set | frozenset):
        yield prefix, [redact(v) if isinstance(v, str) else v for v in value]
    else:
        yield prefix, value


def effective(resolved: ResolvedConfig) -> list[tuple[str, object, str]]:
    """(key, value, source) rows. The list prices stay one row unless a price was configured."""
    from engines.config import GraphrouteConfig
    from engines.config_layers import DEFAULT

    defaults = dict(flatten(GraphrouteConfig()))
    rows: list[tuple[str, object, str]] = []
    prices_set = any(k.startswith("models.prices") for k in resolved.sources)
    for key, value in flatten(resolved.config):
        if key.startswith("models.prices.") and not prices_set:
            continue
        source = resolved.source_of(key)
        if source == DEFAULT and key in defaults and defaults[key] != value:
            source = "inferred"  # e.g. the embedding endpoint inheriting the chat endpoint's address
        rows.append((key, value, source))
    if not prices_set:
        count = len(resolved.config.models.prices.prices)
        last = max(i for i, row in enumerate(rows) if row[0].startswith("models."))
        rows.insert(last + 1, ("models.prices", f"list prices of {count} models", DEFAULT))
    return rows


def show_config(args: argparse.Namespace, console: Console, settings: str | bool | None) -> int:
    """Print the configuration `args` select (--config, --index, the settings choice). Configuration errors
    propagate (ConfigError / ModelConfigError name the file and key)."""
    from engines.config_layers import resolve_config

    if args.index is None and settings is None:
        settings = False  # no index and no settings file named: nothing to look for
    resolved = resolve_config(args.config, index=args.index, settings=settings,
                              allow_prompt_outside=getattr(args, "allow_prompt_outside", False))
    rows = effective(resolved)
    project = resolved.settings
    if args.json:
        print(json.dumps({
            "settings": {k: v for k, v, _ in rows},
            "sources": {k: s for k, _, s in rows},
            "files": {"graphroute.toml": str(resolved.toml) if resolved.toml else None,
                      "settings": str(project.path) if project else None},
            "unused_settings": list(project.unused) if project else [],
            "index_time_sections": list(project.index_time) if project else [],
            "notes": list(project.notes) if project else [],
        }, indent=2, ensure_ascii=False, default=str))
        return 0
    files = [f"graphroute.toml: {resolved.toml or 'none'}", f"GraphRAG settings: {project.path if project else 'none'}"]
    for line in files:
        console.print(line, highlight=False, soft_wrap=True)
    width = max((len(k) for k, _, _ in rows), default=0)
    section = ""
    for key, value, source in rows:
        top = key.split(".")[0]
        if top != section:
            section = top
            console.print(f"\n\\[{section}]", style="bold", highlight=False)
        shown = json.dumps(value, ensure_ascii=False, default=str) if not isinstance(value, str) else value
        console.print(f"{key.ljust(width)} = {shown}  [dim]({source})[/dim]", highlight=False, soft_wrap=True)
    if project is not None:
        if project.unused:
            console.print(f"\n[bold]not used[/bold] (in {project.path.name}, not read by graphroute):")
            for key in project.unused:
                console.print(f"  {key}", highlight=False)
        if project.index_time:
            console.print(f"\nindex-time sections (the index they built is read, not them): "
                          f"{', '.join(project.index_time)}", highlight=False, soft_wrap=True)
        for note in project.notes:
            console.print(f"note: {note}", highlight=False, soft_wrap=True)
    return 0
