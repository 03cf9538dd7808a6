"""The OpenAI chat-completions dialect: requests checked field by field, model names, messages -> question +
history, responses and SSE chunks that follow the OpenAI schemas.

`model` is `graphroute` (auto routing) or `graphroute-local|global|drift|basic`, optionally `@INDEX`.
The last user message is the question; earlier user/assistant messages are the history (system messages
are ignored: the engines bring their own prompts). Responses carry the usual fields plus `graphroute`.

Every request field is either honoured or refused with a 400 naming it (`param`): `max_tokens` /
`max_completion_tokens` cap the answer (the final answer's model call is capped too, and the text the client
receives is cut at that many tokens, `finish_reason: "length"`); `temperature`, `top_p`, `seed` and the
penalties go to the model call that writes the answer (`engines.models.request_options`); `n` other than 1,
tools, logprobs, stop sequences and non-text formats are refused. `user`, `metadata` and the other
bookkeeping fields change nothing in an answer and are accepted.

A stream is OpenAI's: every chunk has `id`, `object`, `created`, `model` and one choice; graphroute's own
events (the route and plan, an escalation) travel in a top-level `graphroute_event` field of a chunk whose
delta is empty (or, for an escalation after answer text, carries the separator line), and the last content
chunk carries the `graphroute` object. The usage chunk (empty `choices`, as OpenAI sends it) only when
`stream_options.include_usage` asks for it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import orjson
import starlette.responses

from engines.events import ContextReady, Progress
from engines.models.base import JSON, JSONObject, Message
from engines.models.request_options import AnswerOptions
from router.router import MODES
from router.service.errors import RequestError

if TYPE_CHECKING:
    from router.answer import Answer, Escalation
    from router.classifier import RouteDecision
    from shared_context.tokens import Tokenizer

MODEL_PREFIX = "graphroute"
MODEL_CREATED = 0  # `created` of the model objects: they are routes, not trained artefacts


def model_ids(indexes: list[str]) -> list[str]:
    """Every model id the service answers to: each mode, plain and `@INDEX` for each index."""
    names = [f"{MODEL_PREFIX}{'' if m == 'auto' else '-' + m}" for m in MODES]
    return [n + (f"@{ix}" if ix else "") for ix in ("", *indexes) for n in names]


def model_object(model_id: str) -> JSONObject:
    return {"id": model_id, "object": "model", "created": MODEL_CREATED, "owned_by": "graphroute"}


def parse_model(model: JSON, indexes: list[str]) -> tuple[str, str | None]:
    """(mode, index name or None for the default) from `graphroute[-MODE][@INDEX]`."""
    if not isinstance(model, str) or not model:
        raise RequestError("'model' is required: graphroute, or graphroute-local|global|drift|basic, optionally "
                           "@INDEX", param="model")
    base, _, index = model.partition("@")
    if base == MODEL_PREFIX:
        mode = "auto"
    elif base.startswith(MODEL_PREFIX + "-") and base[len(MODEL_PREFIX) + 1:] in MODES:
        mode = base[len(MODEL_PREFIX) + 1:]
    else:
        raise RequestError(f"unknown model {model!r}; use graphroute or graphroute-<mode> with mode one of "
                           f"{', '.join(MODES)}, optionally @INDEX", 404, "model_not_found", "model")
    if index and index not in indexes:
        raise RequestError(f"unknown index {index!r} in model {model!r}; known: {', '.join(indexes)}", 404,
                           "model_not_found", "model")
    return mode, index or None


def split_messages(messages: JSON) -> tuple[str, list[Message]]:
    """(question, history) from chat messages; content may be a string or a list of text parts."""
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list of {role, content}", param="messages")
    turns: list[Message] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "developer"):
            raise RequestError(f"messages[{i}] needs a role of system, developer, user or assistant",
                               param=f"messages[{i}].role")
        content = m.get("content")
        if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            if any(isinstance(p, dict) and p.get("type") not in ("text", None) for p in content):
                raise RequestError(f"messages[{i}].content: only text parts are supported",
                                   param=f"messages[{i}].content", code="unsupported_value")
            texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
            if not all(isinstance(t, str) for t in texts):
                raise RequestError(f"messages[{i}].content: a text part's text must be a string",
                                   param=f"messages[{i}].content")
            content = "".join(t for t in texts if isinstance(t, str))
        if not isinstance(content, str):
            raise RequestError(f"messages[{i}].content must be text", param=f"messages[{i}].content")
        role = m["role"]
        if role == "user" or role == "assistant":
            turns.append({"role": role, "content": content})
    if not turns or turns[-1]["role"] != "user":
        raise RequestError("the last message must be the user's question", param="messages")
    return turns[-1]["content"], turns[:-1]


# ---- request fields -------------------------------------------------------------------------------------

def _number(low: float, high: float) -> Callable[[JSON], bool]:
    return lambda v: isinstance(v, int | float) and not isinstance(v, bool) and low <= v <= high


def _whole(low: int, high: int) -> Callable[[JSON], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


INT32_MAX = 2**31 - 1  # a token count; bounded so no later step meets a number it cannot encode
INT64 = 2**63


# Honoured fields: the check a given (non-null) value must pass, and what it must be.
_HONOURED: dict[str, tuple[Callable[[JSON], bool], str]] = {
    "max_tokens": (_whole(1, INT32_MAX), f"a whole number from 1 to {INT32_MAX}"),
    "max_completion_tokens": (_whole(1, INT32_MAX), f"a whole number from 1 to {INT32_MAX}"),
    "temperature": (_number(0, 2), "a number from 0 to 2"),
    "top_p": (_number(0, 1), "a number from 0 to 1"),
    "presence_penalty": (_number(-2, 2), "a number from -2 to 2"),
    "frequency_penalty": (_number(-2, 2), "a number from -2 to 2"),
    "seed": (_whole(-INT64, INT64 - 1), "a 64-bit whole number"),
    "stream": (lambda v: isinstance(v, bool), "true or false"),
    "stream_options": (lambda v: isinstance(v, dict) and set(v) <= {"include_usage", "include_obfuscation"}
                       and all(isinstance(x, bool) for x in v.values()),
                       "an object with include_usage true or false"),
}
# Fields that change nothing in an answer (bookkeeping for the caller's own records): accepted.
_BOOKKEEPING = frozenset({"user", "metadata", "service_tier", "prompt_cache_key", "safety_identifier"})
# Fields graphroute cannot honour: accepted only with the value that asks for nothing (null, or the default
# shown); any other value is refused, naming the field and why.
_ONLY_DEFAULT: dict[str, tuple[tuple[JSON, ...], str]] = {
    "n": ((1,), "graphroute writes one answer per request; n must be 1"),
    "logprobs": ((False,), "log probabilities are not available: an answer is built from several model calls"),
    "top_logprobs": ((0,), "log probabilities are not available: an answer is built from several model calls"),
    "stop": (("", []), "stop sequences are not supported; use max_tokens to cap the answer"),
    "tools": (([],), "tool calls are not supported: graphroute answers from its index"),
    "tool_choice": (("none", "auto"), "tool calls are not supported: graphroute answers from its index"),
    "functions": (([],), "function calls are not supported: graphroute answers from its index"),
    "function_call": (("none", "auto"), "function calls are not supported: graphroute answers from its index"),
    "parallel_tool_calls": ((True, False), ""),
    "response_format": (({"type": "text"},), "answers are text; response_format must be {\"type\": \"text\"}"),
    "logit_bias": (({},), "logit_bias is not supported: an answer is built from several model calls"),
    "modalities": ((["text"],), "answers are text; modalities must be [\"text\"]"),
    "audio": ((), "answers are text; audio output is not supported"),
    "prediction": ((), "predicted outputs are not supported"),
    "web_search_options": ((), "web search is not supported: graphroute answers from its index"),
    "reasoning_effort": ((), "the models behind graphroute are set by the server's configuration"),
    "verbosity": ((), "the answer's length follows the server's configuration; use max_tokens to cap it"),
    "store": ((False,), "graphroute keeps no completions"),
}
_OWN = frozenset({"model", "messages", "budget"})  # `budget`: graphroute's own (extra_body)


@dataclass
class ChatRequest:
    """A checked chat-completions request."""

    model: str
    mode: str
    index: str | None
    question: str
    history: list[Message]
    stream: bool = False
    include_usage: bool = False
    budget: JSON = None
    options: AnswerOptions = field(default_factory=AnswerOptions)

    @property
    def max_tokens(self) -> int | None:
        return self.options.max_tokens


def check_fields(body: JSONObject) -> None:
    """RequestError naming the first field that is unknown, malformed, or asks for what graphroute cannot do."""
    for name, value in body.items():
        if name in _OWN or name in _BOOKKEEPING or value is None:
            continue
        if name in _HONOURED:
            ok, what = _HONOURED[name]
            if not ok(value):
                raise RequestError(f"'{name}' must be {what}", param=name, code="invalid_value")
        elif name in _ONLY_DEFAULT:
            allowed, why = _ONLY_DEFAULT[name]
            if not any(value == a and type(value) is type(a) for a in allowed):
                raise RequestError(f"'{name}' = {orjson.dumps(value, default=str).decode()[:80]} is not supported: "
                                   f"{why}", param=name, code="unsupported_parameter")
        else:
            raise RequestError(f"unknown parameter '{name}'", param=name, code="unknown_parameter")


def _checked_int(body: JSONObject, name: str) -> int | None:
    """A field `check_fields` has passed as a whole number (bool excluded), or None when unset."""
    value = body.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _checked_float(body: JSONObject, name: str) -> float | None:
    """A field `check_fields` has passed as a number, or None when unset."""
    value = body.get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def parse_request(body: JSONObject, indexes: list[str]) -> ChatRequest:
    """The checked request: every field honoured or refused (RequestError naming it)."""
    check_fields(body)
    mode, index = parse_model(body.get("model"), indexes)
    question, history = split_messages(body.get("messages"))
    caps = [v for v in (_checked_int(body, "max_tokens"), _checked_int(body, "max_completion_tokens"))
            if v is not None]
    options = AnswerOptions(
        max_tokens=min(caps) if caps else None, temperature=_checked_float(body, "temperature"),
        top_p=_checked_float(body, "top_p"), seed=_checked_int(body, "seed"),
        presence_penalty=_checked_float(body, "presence_penalty"),
        frequency_penalty=_checked_float(body, "frequency_penalty"),
    )
    stream_options = body.get("stream_options")
    include_usage = isinstance(stream_options, dict) and bool(stream_options.get("include_usage"))
    return ChatRequest(str(body["model"]), mode, index, question, history, stream=bool(body.get("stream")),
                       include_usage=include_usage, budget=body.get("budget"), options=options)


# ---- responses ------------------------------------------------------------------------------------------

def graphroute_object(index: str, answer: Answer) -> JSONObject:
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


def route_event(decision: RouteDecision, engine: str, plan: list[str]) -> JSONObject:
    return {"type": "route", "route": decision.engine, "engine": engine, "reasons": [*decision.reasons],
            "plan": [*plan]}


def stage_event(engine: str, event: Progress | ContextReady) -> JSONObject:
    """An engine's progress (`Progress`: a stage started or stepped) or context size (`ContextReady`), for a
    client that shows the stages as they run; the per-stage tokens and seconds come with the answer."""
    out: JSONObject = {"type": "stage", "engine": engine, "stage": event.stage}
    if isinstance(event, ContextReady):
        out["context_tokens"] = event.tokens
    else:
        out.update(message=event.message, step=event.step, total=event.total)
    return out


def usage_block(answer: Answer) -> JSONObject:
    total = answer.usage.total
    return {"prompt_tokens": total.prompt_tokens, "completion_tokens": total.output_tokens,
            "total_tokens": total.prompt_tokens + total.output_tokens}


def escalation_note(escalation: Escalation) -> str:
    """The content delta that separates a superseded streamed answer from the next engine's answer."""
    e = escalation
    return (f"\n\n---\n[graphroute: the {e.from_engine} search answer above is superseded ({e.reason}); "
            f"escalated to {e.to_engine} search, whose answer follows]\n\n")


class TokenCap:
    """Cuts the text a client receives at `limit` tokens (its `max_tokens`), delta by delta.

    Pieces are counted one by one (a sum that only overestimates the count of their concatenation, as
    joining can merge tokens but never split one); only once the sum passes the limit is the whole text
    counted, and cut where the limit falls."""

    def __init__(self, limit: int | None, tokenizer: Tokenizer) -> None:
        self.limit = limit
        self._tok = tokenizer
        self._text = ""
        self._counted = 0
        self.reached = False

    def take(self, piece: str) -> str:
        """The part of `piece` still within the limit ("" once it is reached)."""
        if self.limit is None:
            return piece
        if self.reached or not piece:
            return ""
        self._counted += self._tok.count(piece)
        if self._counted <= self.limit:
            self._text += piece
            return piece
        whole = self._text + piece
        exact = self._tok.count(whole)
        if exact <= self.limit:
            self._text, self._counted = whole, exact
            return piece
        kept = self._tok.truncate(whole, self.limit)
        self.reached = True
        out = kept[len(self._text):] if kept.startswith(self._text) else ""
        self._text = kept
        return out

    def finish_reason(self) -> str:
        return "length" if self.reached else "stop"


class Completion:
    """Ids and timestamps shared by one response (all chunks of a stream carry the same id)."""

    def __init__(self, model: str) -> None:
        self.id = f"chatcmpl-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model

    def response(self, index: str, answer: Answer, text: str, finish: str) -> JSONObject:
        return {
            "id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                         "finish_reason": finish, "logprobs": None}],
            "usage": usage_block(answer),
            "graphroute": graphroute_object(index, answer),
        }

    def chunk(self, delta: JSONObject, finish: str | None = None, **extra: JSON) -> str:
        body: JSONObject = {"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}
        return sse(body)

    def usage_chunk(self, answer: Answer) -> str:
        """OpenAI's last chunk when `stream_options.include_usage` is set: no choices, the request's usage."""
        return sse({"id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                    "choices": [], "usage": usage_block(answer)})


_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def dumps(obj: object) -> bytes:
    """A response body as JSON: orjson, about a tenth of the standard encoder's CPU on a chat completion's
    answer, citations and usage (paid by every request). Unknown types become strings, as in `sse`."""
    return orjson.dumps(obj, default=str, option=_ORJSON_OPTIONS)


class JSONResponse(starlette.responses.JSONResponse):
    """Starlette's JSON response, encoded by `dumps`."""

    def render(self, content: object) -> bytes:
        return dumps(content)


def sse(obj: object) -> str:
    return f"data: {dumps(obj).decode()}\n\n"
