"""Every error the service sends, in the OpenAI API's shape, so OpenAI clients raise their typed errors:

    {"error": {"message": "...", "type": "invalid_request_error", "param": "n", "code": "unsupported_value"}}

`type` is the class of the failure (by status), `code` a stable string naming the failure (or null) and
`param` the request field at fault (or null). Some errors add fields: a failed question's `usage`, a 500's
`request_id`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import orjson

from engines.models.redaction import redact

if TYPE_CHECKING:
    from engines.models.base import JSON, JSONObject

# OpenAI's `type` values by status; any other 4xx is an invalid request, any other 5xx a server error.
_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


def error_type(status: int) -> str:
    return _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def error_object(status: int, message: str, code: str | None = None, param: str | None = None,
                 **extra: JSON) -> JSONObject:
    """The `error` object (without its envelope); no secret in its message (`redaction.redact`), and every
    text encodable (a lone surrogate the request held is written as its escape)."""
    return {"message": encodable(redact(message)), "type": error_type(status),
            "param": None if param is None else encodable(param), "code": code, **extra}


def encodable(text: str) -> str:
    """`text` as UTF-8 can encode it: a lone surrogate (from a percent-encoded path, say) becomes '\\udxxx'."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode()
    return text


def error_body(status: int, message: str, code: str | None = None, param: str | None = None, **extra: JSON) -> bytes:
    """A whole error response body."""
    return orjson.dumps({"error": error_object(status, message, code, param, **extra)}, default=str)


class RequestError(ValueError):
    """A request the service refuses: its HTTP `status`, a message naming the field, and OpenAI's `code` and
    `param`."""

    def __init__(self, message: str, status: int = 400, code: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.param = param
