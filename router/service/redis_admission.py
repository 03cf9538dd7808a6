"""Concurrency admission (429) across replicas, counted in the shared Redis (`[serve] redis_url`).

Each replica (each `serve` process, each worker of `serve --workers`) owns one Redis hash of its requests in
flight (`<prefix>:admission:<replica>`: `total`, then one field per caller) and an entry in the replica set
(`<prefix>:admission:replicas`, scored by when its lease ends). Admitting is one Lua script, so
check-and-count is atomic over every replica: drop the replicas whose lease ended, sum the live rows, refuse
or count this request in this replica's row. A replica renews its lease every third of `[serve]
redis_lease_s` (`renew`, from `shared_state`'s heartbeat) and rewrites its row from its own counts then, so a
Redis restart or a lost update heals itself; a replica that dies stops renewing, and its slots come back
when its lease ends.

Callers are named by a digest of their API key, not their position in the key list, so replicas configured
with the keys in another order still count one key together. While Redis is down, requests are counted in
this replica alone (`LocalAdmission`, the same limits): the service keeps answering, each replica under its
own limits, until Redis answers again.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from typing import TYPE_CHECKING

from router.service.admission import LocalAdmission

if TYPE_CHECKING:
    import redis

    from engines.models.redis_link import RedisLink

# KEYS: the replica set, this replica's row. ARGV: row-name prefix, this replica's id, the caller's field,
# server limit, per-key limit, lease (ms). Returns 0 admitted, 1 refused by the server limit, 2 by the key's.
_ENTER = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local lease = tonumber(ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
redis.call('ZADD', KEYS[1], now_ms + lease, ARGV[2])
local total, caller = 0, 0
for _, replica in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local row = redis.call('HMGET', ARGV[1] .. replica, 'total', ARGV[3])
  total = total + (tonumber(row[1]) or 0)
  caller = caller + (tonumber(row[2]) or 0)
end
if total >= tonumber(ARGV[4]) then return 1 end
if caller >= tonumber(ARGV[5]) then return 2 end
redis.call('HINCRBY', KEYS[2], 'total', 1)
redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
redis.call('PEXPIRE', KEYS[2], lease)
return 0
"""

# KEYS: this replica's row. ARGV: the caller's field. Never below zero (the row may have been rewritten).
_LEAVE = """
for _, field in ipairs({'total', ARGV[1]}) do
  if (tonumber(redis.call('HGET', KEYS[1], field)) or 0) > 0 then redis.call('HINCRBY', KEYS[1], field, -1) end
end
return 0
"""

# KEYS: the replica set, this replica's row. ARGV: this replica's id, lease (ms), then field/value pairs.
_RENEW = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('DEL', KEYS[2])
if #ARGV > 2 then redis.call('HSET', KEYS[2], unpack(ARGV, 3)) end
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]))
redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[1])
return 0
"""

_REFUSED = {1: "server", 2: "key"}


def caller_ids(api_keys: list[str]) -> list[str]:
    """Each caller's name in Redis: a digest of its key (the same on every replica), or "anyone" with no keys."""
    if not api_keys:
        return ["anyone"]
    return ["k" + hashlib.sha256(key.encode()).hexdigest()[:16] for key in api_keys]


class RedisAdmission:
    """`Admission` over every replica sharing the Redis of `link`; this replica's own counts when it is down."""

    def __init__(self, link: RedisLink, api_keys: list[str], limit: int, per_key_limit: int,
                 lease_s: float) -> None:
        self.limit, self.per_key_limit = limit, per_key_limit
        self.link = link
        self.replica = uuid.uuid4().hex[:16]
        self._callers = caller_ids(api_keys)
        self._lease_ms = int(lease_s * 1000)
        self._set = link.key("admission", "replicas")
        self._row_prefix = link.key("admission", "")
        self._row = self._row_prefix + self.replica
        self._local = LocalAdmission(limit, per_key_limit, len(self._callers))  # while Redis is down
        self._held = [0] * len(self._callers)  # this replica's requests counted in Redis, by caller
        self._lock = threading.Lock()  # one admission at a time: the row in Redis follows `_held`
        client = link.client
        self._enter, self._leave, self._renew = (client.register_script(s) for s in (_ENTER, _LEAVE, _RENEW))

    def enter(self, caller: int) -> str | None:
        """None when admitted, else which limit refused it ("server" or "key")."""
        field = self._callers[caller]
        with self._lock:
            outcome = self.link.run(lambda c: int(self._enter(
                keys=[self._set, self._row],
                args=[self._row_prefix, self.replica, field, self.limit, self.per_key_limit, self._lease_ms],
                client=c)), -1)
            if outcome == 0:
                self._held[caller] += 1
                return None
        if outcome == -1:  # Redis is down: this replica's own limits
            return self._local.enter(caller)
        return _REFUSED[outcome]

    def leave(self, caller: int) -> None:
        with self._lock:
            if self._held[caller] == 0:  # admitted while Redis was down
                self._local.leave(caller)
                return
            self._held[caller] -= 1
            field = self._callers[caller]
            # a failed update is rewritten from `_held` by the next renewal
            self.link.run(lambda c: self._leave(keys=[self._row], args=[field], client=c), None)

    def in_flight(self) -> int:
        """This replica's requests in flight (what its metrics report)."""
        return sum(self._held) + self._local.in_flight()

    def renew(self, client: redis.Redis) -> None:
        """Extend this replica's lease and rewrite its row from its own counts (raises when Redis fails)."""
        with self._lock:
            pairs: list[str | int] = []
            if sum(self._held):
                pairs = ["total", sum(self._held)]
                for field, held in zip(self._callers, self._held, strict=True):
                    if held:
                        pairs += [field, held]
            self._renew(keys=[self._set, self._row], args=[self.replica, self._lease_ms, *pairs],
                        client=client)

    def retire(self) -> None:
        """Leave the replica set at a clean shutdown (its slots come back at once, not at lease end)."""
        def leave_set(client: redis.Redis) -> None:
            pipe = client.pipeline()
            pipe.zrem(self._set, self.replica)
            pipe.delete(self._row)
            pipe.execute()

        self.link.run(leave_set, None)
