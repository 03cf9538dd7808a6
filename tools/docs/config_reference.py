"""Write `docs/reference/configuration.md` from the pydantic models of `graphroute.toml`, so it cannot drift.

    python -m tools.docs.config_reference            # rewrite the page
    python -m tools.docs.config_reference --check    # exit 1 when the committed page is stale
"""

from __future__ import annotations

import argparse
import inspect
import re
import sys
import types
import typing
from pathlib import Path

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from engines.config import GraphrouteConfig
from engines.models.config import ENV_VARS, EndpointOverride

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "configuration.md"

INTRO = """# Configuration reference

graphroute reads one typed configuration, `graphroute.toml` (the path given with `--config`,
`$GRAPHROUTE_CONFIG`, or `./graphroute.toml`), then a GraphRAG project's `settings.yaml` for what the file
leaves unset (see [Use your GraphRAG project](../guides/graphrag-project.md)), then the defaults below.
`graphroute config --show` prints every value in effect and where it came from. A misspelled key or a value of
the wrong type is an error that names the key. Keys that carry GraphRAG's names (`text_unit_prop`,
`community_prop`, `top_k_relationships`, `include_entity_rank`, `dynamic_community_selection`, ...) mean what
they mean in GraphRAG's query configuration; the defaults that differ are noted.

This page is generated from the configuration's models by `python -m tools.docs.config_reference`;
a test fails when it is out of date.
"""


def _type_name(annotation: object) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f'`"{a}"`' if isinstance(a, str) else f"`{a}`" for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "none"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel) and "Prompt" in annotation.__name__:
        return "prompt: a file path or inline text"
    return getattr(annotation, "__name__", str(annotation)).replace("SecretStr", "secret string")


def _default(field: FieldInfo, instance: BaseModel | None = None, name: str = "") -> str:
    if instance is not None:
        value = getattr(instance, name)
    elif field.default is PydanticUndefined:
        if field.default_factory is None:
            return "required"
        value = field.default_factory()  # type: ignore[call-arg]
    else:
        value = field.default
    if hasattr(value, "get_secret_value"):
        return "unset" if not value.get_secret_value() else "(secret)"
    if isinstance(value, BaseModel) or value == {} or value == []:
        return "-"
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    return f"`{value}`"


def _model_of(annotation: object) -> type[BaseModel] | None:
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _comments(model: type[BaseModel]) -> dict[str, str]:
    """A field's comment in its class's source (the block just above it, or the end of its line): the meaning
    of the many fields documented there rather than in a `description`."""
    found: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            lines = inspect.getsource(cls).splitlines()
        except (OSError, TypeError):
            continue
        block: list[str] = []
        for line in lines:
            stripped = line.strip()
            if stripped.startswith("#"):
                block.append(stripped.lstrip("#").strip())
                continue
            match = re.match(r"\s{4}(\w+)\s*:", line)
            if match and match.group(1) in cls.model_fields:
                trailing = line.split("  # ", 1)[1].strip() if "  # " in line else ""
                text = " ".join([*block, trailing]).strip()
                if text:
                    found[match.group(1)] = text
            block = []
    return found


def _describe(field: FieldInfo, comment: str = "") -> str:
    text = " ".join((field.description or comment).split())
    bounds = []
    for meta in field.metadata:
        for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            value = getattr(meta, name, None)
            if value is not None:
                bounds.append(f"{sign} {value}")
    if bounds:
        text = (text + " " if text else "") + f"({', '.join(bounds)})"
    return text.replace("|", "\\|")


def section(title: str, model: type[BaseModel], instance: BaseModel | None = None) -> list[str]:
    """The table of one `[title]` section (defaults read from `instance`, the section as the configuration
    builds it by default, where there is one), then one subsection per nested table."""
    lines = [f"## `[{title}]`", ""]
    about = " ".join((model.__doc__ or "").split())
    if about and not about.startswith(("A base class", "Usage docs")):
        lines += [about, ""]
    rows, nested = [], []
    comments = _comments(model)
    for name, field in model.model_fields.items():
        sub = _model_of(field.annotation) if field.default_factory is not None else None
        if sub is not None and typing.get_origin(field.annotation) is dict:
            nested.append((f"{title}.{name}.NAME", sub, None))
        elif sub is not None:
            nested.append((f"{title}.{name}", sub, getattr(instance, name) if instance is not None else None))
        else:
            rows.append(f"| `{name}` | {_type_name(field.annotation)} | {_default(field, instance, name)} | "
                        f"{_describe(field, comments.get(name, ''))} |")
    if rows:
        lines += ["| key | type | default | meaning |", "|---|---|---|---|", *rows, ""]
    for sub_title, sub, sub_instance in nested:
        lines += ["#" + line if line.startswith("## ") else line for line in section(sub_title, sub, sub_instance)]
    return lines


def render() -> str:
    lines = [INTRO]
    defaults = GraphrouteConfig()
    for name, field in GraphrouteConfig.model_fields.items():
        model = _model_of(field.annotation)
        assert model is not None, name
        lines += section(name, model, getattr(defaults, name))
    lines += ["## Environment variables", "", "| variable | meaning |", "|---|---|"]
    lines += [f"| `{k}` | {v} |" for k, v in ENV_VARS.items()]
    lines += ["", f"Stages that take an override under `[models.stages.NAME]` accept the keys of "
              f"`{EndpointOverride.__name__}` above; the names of the stages are listed in "
              "[Budgets and models per stage](../guides/budgets.md).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when the committed page is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE} is stale: run python -m tools.docs.config_reference", file=sys.stderr)
            return 1
        return 0
    PAGE.parent.mkdir(parents=True, exist_ok=True)
    PAGE.write_text(text)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
