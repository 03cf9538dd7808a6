"""Daily spending limits for the MCP server over HTTP: the service's per-key `max_cost_per_day` and
`max_calls_per_day`, counted in the same ledger (`router.service.spending`).

A call's key (its `Authorization: Bearer` or `X-API-Key` header) names its caller exactly as the service does
(`caller_ids`: a digest of the key), so with `[serve] redis_url` one key's day is shared by every `serve`
replica and every MCP server on that Redis; without it the MCP server keeps its own ledger. A question is held
against the key's day from the estimate the budget ladder makes before its first model call and settled with
what it really cost; a refusal is a tool error that says when the limit resets.

With API keys configured and a limit set, a call carrying no known key is refused: the limits are per key.
Without any key every call is one caller, as in the service.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from router.service.redis_admission import caller_ids
from router.service.spending import SpendGate, Spending

if TYPE_CHECKING:
    from engines.config import ServeConfig
    from engines.models.factory import Models
    from router.service.shared_state import SharedState

__all__ = ["McpLimits", "UnknownKey", "key_of", "mcp_keys"]


class UnknownKey(ValueError):
    """A call without a configured API key while daily limits are per key."""


def mcp_keys(config: ServeConfig) -> list[str]:
    """The API keys the service would accept: `[serve] api_keys` and `$GRAPHROUTE_API_KEYS` (bound keys are
    added by `Tenants.from_config`)."""
    env_keys = [k.strip() for k in os.environ.get("GRAPHROUTE_API_KEYS", "").split(",") if k.strip()]
    return [k for k in (*config.api_keys, *env_keys) if k]


def key_of(headers: Mapping[str, str] | None) -> str:
    """The key a call carries ('' when none), read as the service reads it."""
    lowered = {k.lower(): v for k, v in (headers or {}).items()}
    given = lowered.get("authorization", "")
    return given[7:].strip() if given[:7].lower() == "bearer " else lowered.get("x-api-key", "").strip()


class McpLimits:
    """The daily ledger of the MCP server's callers (and the Redis state it shares, when configured)."""

    def __init__(self, spending: Spending, keys: Sequence[str], shared: SharedState | None = None) -> None:
        self.spending = spending
        self.shared = shared
        self._keys = [k.encode() for k in keys]

    @classmethod
    def from_config(cls, config: ServeConfig, keys: Sequence[str], models: Iterable[Models] = ()) -> McpLimits | None:
        """The limits of `[serve]` for callers with `keys` (every key, in order); None when no daily limit is
        set. With `redis_url`, the ledger and the model-call cache are the replicas' shared ones."""
        if config.max_cost_per_day is None and config.max_calls_per_day is None:
            return None
        if config.redis_url is None:
            return cls(Spending(config.max_cost_per_day, config.max_calls_per_day, caller_ids(list(keys))), keys)
        from router.service.admission import callers_for, per_key_limit
        from router.service.shared_state import SharedState

        own_limit = per_key_limit(config.max_concurrency, config.max_concurrency_per_key, callers_for(list(keys)))
        shared = SharedState.connect(config, list(keys), own_limit, models)
        return cls(shared.spending, keys, shared)

    def caller(self, key: str) -> int:
        """The caller number of `key` (UnknownKey when keys are configured and it is none of them)."""
        if not self._keys:
            return 0
        given, found = key.encode(), -1
        for i, known in enumerate(self._keys):  # every key compared, in constant time
            if hmac.compare_digest(given, known):
                found = i
        if found < 0:
            raise UnknownKey("this server's daily limits are per API key: send a configured key as "
                             "'Authorization: Bearer <key>'")
        return found

    def gate(self, headers: Mapping[str, str] | None) -> SpendGate:
        """One call's hold on its key's day (reserved by `admit`, settled once with what it cost)."""
        return SpendGate(self.spending, self.caller(key_of(headers)))

    def start(self) -> None:
        if self.shared is not None:
            self.shared.start()

    def stop(self) -> None:
        if self.shared is not None:
            self.shared.stop()
