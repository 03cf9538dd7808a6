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
from types import SimpleNamespace
from typing import Any

__all__ = ["ServerError", "answer_view", "ask_server"]


class ServerError(Exception):
    """The server could not be reached or refused the question (the message names which)."""


def ask_server(url: str, body: dict[str, Any], timeout_s: float, post: Callable[..., Any] | None = None) -> dict[str, Any]:
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


def _ns(value: Any) -> Any:
    if isinstance(value, dict):
        return SimpleNamespace(**{k: _ns(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_ns(v) for v in value]
    return value


def answer_view(data: dict[str, Any]) -> Any:
    """The answer JSON with the attributes `render_answer` reads (route, usage stages, citations...)."""
    view = _ns({k: v for k, v in data.items() if k not in ("usage", "route")})
    view.route = SimpleNamespace(**data.get("route", {}))
    view.route.probabilities = dict(data.get("route", {}).get("probabilities", {}))
    usage = data.get("usage", {})
    view.usage = SimpleNamespace(stages={k: SimpleNamespace(**v) for k, v in usage.get("stages", {}).items()},
                                 total=SimpleNamespace(**usage.get("total", {})))
    return view
