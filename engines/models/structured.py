"""Structured output that survives local models: JSON mode, repair, validation, one corrective retry.

`complete_json` asks for JSON mode, repairs the reply (the `json-repair` package, after dropping reasoning
blocks; a truncated reply also yields a cut-back candidate without its half-written last element), coerces harmless
differences (numeric strings such as "85", integral floats, a bare list where the schema wants an
object with one list field) and validates against the pydantic schema. Out-of-range values are
rejected, never clamped, so a rating of 9 on a 0–5 scale is reported rather than silently changed.
On failure it retries once, showing the model its reply and the validation error; after that it
raises `StructuredOutputError`, which carries every completion so usage is never lost.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import types
import typing
from typing import TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from engines.models.base import JSON, THINK_OPEN, ChatModel, Completion, Message, drop_closed_reasoning
from engines.models.errors import ModelError, StructuredOutputError
from engines.models.task_context import TaskContext

__all__ = ["complete_json", "parse_structured", "repair_json_text"]

M = TypeVar("M", bound=BaseModel)
_NUMBER = re.compile(r"^\s*[-+]?\d+(\.\d+)?\s*%?\s*$")


# ---------------------------------------------------------------------------- repair


def _strip_thinking(text: str) -> str:
    """Drop reasoning blocks; after an unclosed `<think>` only the last JSON object counts (the reasoning
    may quote drafts), and a lone `</think>` (the server dropped the opening tag) ends the reasoning."""
    text = drop_closed_reasoning(text)
    opened = THINK_OPEN.search(text)
    if opened:
        rest = text[opened.end() :]
        last = rest.rfind("{")
        return rest[last:] if last >= 0 else rest
    return text


def _without_last_element(value: JSON) -> JSON | None:
    """`value` without the last element of the first list on its trailing path (the element a truncated
    reply was writing; a half-written object inside it goes as a whole), or None when there is no list."""
    if isinstance(value, list):
        return value[:-1] if value else None
    if isinstance(value, dict) and value:
        key = next(reversed(value))
        inner = _without_last_element(value[key])
        return None if inner is None else {**value, key: inner}
    return None


def _trailing_list_empty(value: JSON) -> bool:
    """True when the list `_without_last_element` cut (the first one on the trailing path) is now empty."""
    if isinstance(value, list):
        return not value
    if isinstance(value, dict) and value:
        return _trailing_list_empty(value[next(reversed(value))])
    return False


def repair_candidates(text: str) -> list[JSON]:
    """JSON values recoverable from a model reply, best first (may be empty): the `json-repair` reading,
    preceded for a truncated reply by the same without its half-written last list element. A truncated
    reply with no list to cut back to is a `ValueError`: its last field is cut mid-value."""
    with contextlib.suppress(ValueError):  # the common case: valid JSON already
        value = json.loads(text)
        return [value] if isinstance(value, dict | list) else []
    import json_repair  # imported on first repair: valid JSON (the common case) never needs it

    body = _strip_thinking(text)
    try:
        value = json_repair.loads(body)
    except Exception:  # json-repair is a best-effort heuristic; any failure of it means "no JSON"
        return []
    if not isinstance(value, dict | list):
        return []
    truncated = body.count("{") + body.count("[") > body.count("}") + body.count("]")
    if not truncated:
        return [value]
    cut = _without_last_element(value)
    if cut is None:  # no list to cut back to: the cut-off field itself ("Who is Sc") would be taken as meant
        raise ValueError("the reply is cut off: its JSON object is never closed")
    if _trailing_list_empty(cut):  # nothing complete before the cut: not "an empty answer"
        raise ValueError("the reply is cut off before its first complete item")
    return [cut, value]


def repair_json_text(text: str) -> JSON:
    """The best JSON value recoverable from a model reply; `ValueError` when there is none."""
    candidates = repair_candidates(text)
    if not candidates:
        preview = text.strip().replace("\n", " ")[:120]
        raise ValueError(f"no JSON object found in the reply (starts: {preview!r})")
    return candidates[0]


# ---------------------------------------------------------------------------- coercion and validation


def _is_int_annotation(annotation: object) -> bool:
    if annotation is int:
        return True
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return any(a is int for a in get_args(annotation))
    return False


def _model_of(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _coerce(value: JSON, schema: type[BaseModel]) -> JSON:
    """Normalise numbers for int fields ("85" → 85, 4.0 → 4, 4.6 → 5) and recurse into nested models."""
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for name, info in schema.model_fields.items():
        key = name if name in out else (info.alias if info.alias in out else None)
        if key is None:
            continue
        item = out[key]
        if _is_int_annotation(info.annotation):
            if isinstance(item, str) and _NUMBER.match(item):
                item = float(item.strip().rstrip("%").strip())
            if isinstance(item, float) and math.isfinite(item):
                item = math.floor(item + 0.5)  # half-up, so 4.5 → 5 (models write scores like 4.5)
            out[key] = item
            continue
        nested = _model_of(info.annotation)
        if nested is not None:
            if isinstance(item, list):
                out[key] = [_coerce(x, nested) for x in item]
            else:
                out[key] = _coerce(item, nested)
    return out


def _has_none_of_the_fields(value: JSON, schema: type[BaseModel]) -> bool:
    if not isinstance(value, dict) or not schema.model_fields:
        return False
    names = {n for n, f in schema.model_fields.items()} | {f.alias for f in schema.model_fields.values() if f.alias}
    return not names & set(value)


def _wrap_bare_list(value: JSON, schema: type[BaseModel]) -> JSON:
    """A bare list where the schema is an object with exactly one list field: wrap it in that field."""
    if not isinstance(value, list):
        return value
    list_fields = [n for n, f in schema.model_fields.items() if get_origin(f.annotation) in (list, typing.List)]  # noqa: UP006
    if len(list_fields) == 1:
        return {list_fields[0]: value}
    return value


def _describe(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:6]:
        loc = ".".join(str(p) for p in e["loc"]) or "(root)"
        parts.append(f"{loc}: {e['msg']} (got {e.get('input')!r})"[:300])
    return "; ".join(parts)


def parse_structured(text: str, schema: type[M]) -> M:
    """Repair, coerce and validate `text`; `ValueError` with a readable reason when impossible."""
    candidates = repair_candidates(text)
    if not candidates:
        preview = text.strip().replace("\n", " ")[:120]
        raise ValueError(f"the reply contains no JSON object (it starts: {preview!r})")
    first_error: str | None = None
    for candidate in candidates:
        if _has_none_of_the_fields(candidate, schema):
            # A schema whose fields all have defaults would accept `{}` (what "{oops" repairs to) as a
            # real, empty answer: "found nothing" instead of a failure.
            first_error = first_error or f"it has none of the fields {sorted(schema.model_fields)}"
            continue
        try:
            return schema.model_validate(_coerce(_wrap_bare_list(candidate, schema), schema))
        except ValidationError as err:
            first_error = first_error or _describe(err)
    raise ValueError(f"the JSON does not match the {schema.__name__} schema: {first_error}")


def _schema_hint(schema: type[BaseModel]) -> str:
    return json.dumps(schema.model_json_schema(), separators=(",", ":"))[:1500]


async def complete_json(
    model: ChatModel,
    messages: list[Message],
    schema: type[M],
    *,
    task: str,
    max_tokens: int | None = None,
    temperature: float | None = None,
    context: TaskContext | None = None,
) -> tuple[M, list[Completion]]:
    """Ask `model` for JSON matching `schema`. Returns (parsed, completions) or raises StructuredOutputError.
    `context`: the typed data the messages render, for the model (`ChatModel.complete`)."""
    completions: list[Completion] = []
    first = await model.complete(messages, task=task, json_schema=schema, max_tokens=max_tokens,
                                 temperature=temperature, context=context)
    completions.append(first)
    try:
        return parse_structured(first.text, schema), completions
    except ValueError as err:
        error = str(err)
    retry_messages: list[Message] = [
        *messages,
        {"role": "assistant", "content": first.text},
        {
            "role": "user",
            "content": (
                f"Your previous reply could not be used: {error}\n"
                f"Reply again with ONLY one JSON object matching this JSON schema, with no prose and no "
                f"code fences:\n{_schema_hint(schema)}"
            ),
        },
    ]
    try:
        second = await model.complete(
            retry_messages, task=task, json_schema=schema, max_tokens=max_tokens, temperature=temperature,
            context=context,
        )
    except ModelError as exc:
        raise StructuredOutputError(
            f"{model.name} gave invalid {schema.__name__} JSON ({error}) and the corrective retry failed: {exc}",
            completions=completions,
            last_error=error,
            schema_name=schema.__name__,
            task=task,
        ) from exc
    completions.append(second)
    try:
        return parse_structured(second.text, schema), completions
    except ValueError as err:
        raise StructuredOutputError(
            f"{model.name} did not return valid {schema.__name__} JSON after one corrective retry: {err}",
            completions=completions,
            last_error=str(err),
            schema_name=schema.__name__,
            task=task,
        ) from None
