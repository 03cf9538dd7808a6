"""`graphroute ask --server URL`: ask a running `graphroute serve` instead of loading the index here.

For many questions from the command line, a resident process answers each one without the start-up of
a new one (imports, opening the index, the tokenizer's tables). The answer is the service's `/v1/ask`
JSON, printed as `graphroute ask` prints a local answer (or as JSON with `--json`). The index is the
server's: `--index` names one of its indexes (default: its first); the server's configuration applies.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from engines.citations import Citation
from engines.models.base import JSONObject, StageUsage, Usage
from engines.result import SearchResult
from router.answer import Answer, Escalation
from router.classifier import Engine, RouteDecision

if TYPE_CHECKING:
    import httpx

__all__ = ["ServerError", "answer_view", "ask_server"]


class ServerError(Exception):
    """The server could not be reached or refused the question (the message names which)."""


def ask_server(url: str, body: JSONObject, timeout_s: float,
               post: Callable[..., httpx.Response] | None = None) -> JSONObject:
    """POST `body` to `url`/v1/ask and return the answer JSON (`$GRAPHROUTE_API_KEY` sent as a bearer key)."""
    import httpx

    headers = {"content-type": "application/json"}
    key = os.environ.get("GRAPHROUTE_API_KEY", "").strip()
    if key:
        headers["authorization"] = f"Bearer {key}"
    target = url.rstrip("/") + "/v1/ask"
    try:
        response = (post or httpx.post)(target, content=json.dumps(body), headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise ServerError(f"cannot reach the server at {url}: {exc}") from None
    try:
        data = response.json()
    except ValueError:
        raise ServerError(f"the server at {url} answered HTTP {response.status_code} without JSON") from None
    if response.status_code != 200 or not isinstance(data, dict) or "text" not in data:
        error = data.get("error") if isinstance(data, dict) else None
        message = error.get("message") if isinstance(error, dict) else str(data)[:200]
        raise ServerError(f"the server at {url} refused the question (HTTP {response.status_code}): {message}")
    return data


def _number(data: JSONObject, key: str) -> float:
    value = data.get(key)
    return float(value) if isinstance(value, int | float) else 0.0


def _object(data: JSONObject, key: str) -> JSONObject:
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _texts(data: JSONObject, key: str) -> list[str]:
    value = data.get(key)
    return [str(v) for v in value] if isinstance(value, list) else []


def _stage(data: JSONObject) -> StageUsage:
    return StageUsage(
        llm_calls=int(_number(data, "llm_calls")), prompt_tokens=int(_number(data, "prompt_tokens")),
        output_tokens=int(_number(data, "output_tokens")), cached_calls=int(_number(data, "cached_calls")),
        cost=_number(data, "cost"), seconds=_number(data, "seconds"), estimated=bool(data.get("estimated")),
        embedding_calls=int(_number(data, "embedding_calls")),
        embedding_tokens=int(_number(data, "embedding_tokens")))


def _citation(data: JSONObject) -> Citation:
    return Citation(str(data.get("kind", "")), str(data.get("id", "")), _texts(data, "text_unit_ids"),
                    _texts(data, "document_ids"), _texts(data, "document_titles"))


def answer_view(data: JSONObject) -> Answer:
    """The server's answer JSON (`Answer.to_dict`) read back as an `Answer`, for `render_answer`."""
    route = _object(data, "route")
    probabilities = _object(route, "probabilities")
    decision = RouteDecision(
        engine=cast("Engine", str(route.get("engine", ""))),  # the engine the server named, as it named it
        confidence=_number(route, "confidence"),
        probabilities={str(k): _number(probabilities, k) for k in probabilities},
        reasons=_texts(route, "reasons"), method=str(route.get("method", "model")))
    usage = _object(data, "usage")
    stages = _object(usage, "stages")
    text, question = str(data.get("text", "")), str(data.get("question", ""))
    citations = data.get("citations")
    result = SearchResult(
        engine=str(data.get("engine", "")), question=question, response=text,
        citations=[_citation(c) for c in citations if isinstance(c, dict)] if isinstance(citations, list) else [],
        text_unit_ids=_texts(data, "text_unit_ids"), document_ids=_texts(data, "document_ids"))
    escalations = data.get("escalations")
    stepped = data.get("stepped_down_from")
    return Answer(
        question=question, standalone_question=str(data.get("standalone_question", question)), text=text,
        route=decision, engine=str(data.get("engine", "")),
        usage=Usage(stages={str(k): _stage(v) for k, v in stages.items() if isinstance(v, dict)}),
        model=str(data.get("model", "")), offline=bool(data.get("offline")), seconds=_number(data, "seconds"),
        result=result, plan=_texts(data, "plan"), stepped_down_from=str(stepped) if stepped else None,
        escalations=[Escalation(str(e.get("from_engine", "")), str(e.get("to_engine", "")), str(e.get("reason", "")))
                     for e in escalations if isinstance(e, dict)] if isinstance(escalations, list) else [],
        degraded=_texts(data, "degraded"), notes=_texts(data, "notes"))
