"""Bounded checks of the model endpoints, so a wrong endpoint shows before the first question.

Each endpoint model (the chat model of each stage that has its own endpoint, the embedder) that calls over the
network answers one short request, cut at its `probe_timeout_s`: a chat endpoint lists its models (no tokens
spent), an embedding endpoint embeds one short text (its vector size is learned from the reply). `graphroute
serve` runs them at start-up and reports them in `/healthz` and `/v1/indexes`; offline models need none.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from engines.models.config import ModelEndpoint
from engines.models.errors import ModelError, ModelTimeoutError, ModelUnavailableError
from engines.models.redaction import capped, redact

if TYPE_CHECKING:
    from engines.models.base import JSONObject

Status = Literal["ok", "offline", "unreachable", "error"]


@runtime_checkable
class Probed(Protocol):
    """A model that can check its endpoint in one bounded request ('' or a note when it answers)."""

    endpoint: ModelEndpoint
    name: str
    base_url: str

    async def probe(self, timeout_s: float) -> str: ...


@dataclass
class EndpointCheck:
    """What one endpoint's check found."""

    role: str  # "chat", "chat (map)" for a stage with its own endpoint, or "embedding"
    model: str
    endpoint: str  # base URL ("" for an offline model)
    status: Status
    detail: str = ""  # the error, or a note on a successful check
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "offline")

    def line(self) -> str:
        """One line for an operator: 'chat gpt-4.1 at http://...: ok (0.12 s)'."""
        where = f" at {self.endpoint}" if self.endpoint else ""
        detail = f": {self.detail}" if self.detail else ""
        timing = f" ({self.seconds:.2f} s)" if self.status != "offline" else ""
        return redact(f"{self.role} {self.model}{where}: {self.status}{timing}{detail}")

    def to_dict(self) -> JSONObject:
        """JSON for `/healthz` and `/v1/indexes` (no credentials: the address and detail are redacted)."""
        return {"role": self.role, "model": self.model, "status": self.status, "detail": redact(self.detail),
                "seconds": round(self.seconds, 3), "endpoint": redact(self.endpoint)}


def offline_check(role: str, model: str) -> EndpointCheck:
    return EndpointCheck(role, model, "", "offline", "runs on this machine; no endpoint to check")


async def check_endpoint(role: str, model: Probed, timeout_s: float | None = None) -> EndpointCheck:
    """Run `model.probe` within its endpoint's `probe_timeout_s` (or `timeout_s`, when sooner): ok, or why not."""
    bound = model.endpoint.probe_timeout_s if timeout_s is None else min(timeout_s, model.endpoint.probe_timeout_s)
    started = time.perf_counter()
    status: Status = "ok"
    try:
        async with asyncio.timeout(bound):
            detail = await model.probe(bound)
    except (TimeoutError, ModelTimeoutError):
        status, detail = "unreachable", f"no answer within {bound:g} s ([models] probe_timeout_s)"
    except ModelUnavailableError as err:
        status, detail = "unreachable", str(err)
    except ModelError as err:
        status, detail = "error", str(err)
    except Exception as err:  # any other failure (a URL the client refuses, a malformed reply): reported, the
        # service starts degraded rather than not at all
        status, detail = "error", capped(" ".join(f"{type(err).__name__}: {err}".split()), 300)
    return EndpointCheck(role, model.name, model.base_url, status, detail, time.perf_counter() - started)
