"""The OpenAI chat-completions dialect: model names, messages -> question + history, responses and SSE chunks.

`model` is `graphroute` (auto routing) or `graphroute-local|global|drift|basic`, optionally `@INDEX`.
The last user message is the question; earlier user/assistant messages are the history (system messages
are ignored: the engines bring their own prompts). Responses carry the usual fields plus `graphroute`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson
import starlette.responses

from engines.models.base import Message
from router.router import MODES

MODEL_PREFIX = "graphroute"


class RequestError(ValueError):
    """A bad request: `status` and a message naming the field."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


def parse_model(model: Any, indexes: list[str]) -> tuple[str, str | None]:
    """(mode, index name or None for the default) from `graphroute[-MODE][@INDEX]`."""
    if not isinstance(model, str) or not model:
        raise RequestError("'model' is required: graphroute, or graphroute-local|global|drift|basic, optionally @INDEX")
    base, _, index = model.partition("@")
    if base == MODEL_PREFIX:
        mode = "auto"
    elif base.startswith(MODEL_PREFIX + "-") and base[len(MODEL_PREFIX) + 1:] in MODES:
        mode = base[len(MODEL_PREFIX) + 1:]
    else:
        raise RequestError(f"unknown model {model!r}; use graphroute or graphroute-<mode> with mode one of "
                           f"{', '.join(MODES)}, optionally @INDEX", 404, "model_not_found")
    if index and index not in indexes:
        raise RequestError(f"unknown index {index!r} in model {model!r}; known: {', '.join(indexes)}", 404,
                           "model_not_found")
    return mode, index or None


def split_messages(messages: Any) -> tuple[str, list[Message]]:
    """(question, history) from chat messages; content may be a string or a list of text parts."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list of {role, content}")
    turns: list[Message] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "developer"):
            raise RequestError(f"messages[{i}] needs a role of system, user or assistant")
        content = m.get("content")
        if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        if not isinstance(content, str):
            raise RequestError(f"messages[{i}].content must be text")
        if m["role"] in ("user", "assistant"):
            turns.append({"role": m["role"], "content": content})
    if not turns or turns[-1]["role"] != "user":
        raise RequestError("the last message must be the user's question")
    return turns[-1]["content"], turns[:-1]


def graphroute_object(index: str, answer: Any) -> dict[str, Any]:
    """What only graphroute knows: route and reasons, the engine used, plan, escalations, citations, usage, cost."""
    d = answer.to_dict()
    return {
        "index": index,
        "route": d["route"],
        "engine": d["engine"],
        "stepped_down_from": d["stepped_down_from"],
        "plan": d["plan"],
        "escalations": d["escalations"],
        "degraded": d["degraded"],
        "notes": d["notes"],
        "standalone_question": d["standalone_question"],
        "citations": d["citations"],
        "document_ids": d["document_ids"],
        "text_unit_ids": d["text_unit_ids"],
        "usage": d["usage"],
        "cost": answer.usage.total.cost,
        "model": d["model"],
        "offline": d["offline"],
        "seconds": d["seconds"],
    }


def usage_block(answer: Any) -> dict[str, int]:
    total = answer.usage.total
    return {"prompt_tokens": total.prompt_tokens, "completion_tokens": total.output_tokens,
            "total_tokens": total.prompt_tokens + total.output_tokens}


def escalation_note(escalation: Any) -> str:
    """The content delta that separates a superseded streamed answer from the next engine's answer."""
    e = escalation
    return (f"\n\n---\n[graphroute: the {e.from_engine} search answer above is superseded ({e.reason}); "
            f"escalated to {e.to_engine} search, whose answer follows]\n\n")


class Completion:
    """Ids and timestamps shared by one response (all chunks of a stream carry the same id)."""

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model

    def response(self, index: str, answer: Any) -> dict[str, Any]:
        return {
            "id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer.text},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": usage_block(answer),
            "graphroute": graphroute_object(index, answer),
        }

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        body = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}
        return sse(body)

    def usage_chunk(self, answer: Any) -> str:
        return sse({"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                    "choices": [], "usage": usage_block(answer)})


_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def dumps(obj: Any) -> bytes:
    """A response body as JSON: orjson, about a tenth of the standard encoder's CPU on a chat completion's
    answer, citations and usage (paid by every request). Unknown types become strings, as in `sse`."""
    return orjson.dumps(obj, default=str, option=_ORJSON_OPTIONS)


class JSONResponse(starlette.responses.JSONResponse):
    """Starlette's JSON response, encoded by `dumps`."""

    def render(self, content: Any) -> bytes:
        return dumps(content)


def sse(obj: Any) -> str:
    return f"data: {dumps(obj).decode()}\n\n"
