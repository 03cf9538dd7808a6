"""Daily spending limits per API key (`[serve] max_cost_per_day`, `max_calls_per_day`), across replicas.

Before a question's first model call, its estimate (the one the budget ladder uses: `Router.astream`'s
`admit`) is reserved against the key's day (UTC): refused with a JSON 429 naming the limit and when it
resets unless what was spent, what questions in flight reserved and this estimate together fit. After the
question, the reservation is replaced by what it really cost (`Reservation.settle`), so only an estimate
that was too low lets a key go past its limit, and by no more than that question's error.

With `[serve] redis_url` the ledger is in Redis (`<prefix>:spend:<day>:<caller>`: `cost`, `calls`; the
reservations in flight with their amounts and lease ends), reserved and settled by Lua scripts so replicas
never race. A reservation lives as long as its replica renews it: a replica that dies mid-question frees its
reservations when its lease ends. Without Redis, or while it is down, the ledger is this replica's own
(every question it settled today); settlements made while Redis was down are sent when it answers again.
"""

from __future__ import annotations

import datetime as dt
import itertools
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engines.models.base import Usage
from router.service.errors import RequestError

if TYPE_CHECKING:
    import redis

    from engines.models.redis_link import RedisLink
    from router.answer_loop import PlanStep

_DAY_TTL_S = 3 * 86400  # a day's ledger is kept a little past its day (a question settled after midnight)

# KEYS: spent hash, reservations' lease ends (zset), reservations' amounts (hash). ARGV: reservation id, cost,
# calls, max cost (-1: none), max calls (-1: none), lease (ms), ledger ttl (s). Returns {outcome, spent cost,
# spent calls, reserved cost, reserved calls}: outcome 0 reserved, 1 over the cost limit, 2 over the calls one.
_RESERVE = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now_ms)) do redis.call('HDEL', KEYS[3], gone) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now_ms)
local held_cost, held_calls = 0, 0
for _, amount in ipairs(redis.call('HVALS', KEYS[3])) do
  local c, n = string.match(amount, '^(%S+) (%S+)$')
  held_cost = held_cost + tonumber(c)
  held_calls = held_calls + tonumber(n)
end
local spent_cost = tonumber(redis.call('HGET', KEYS[1], 'cost')) or 0
local spent_calls = tonumber(redis.call('HGET', KEYS[1], 'calls')) or 0
local cost, calls = tonumber(ARGV[2]), tonumber(ARGV[3])
local max_cost, max_calls = tonumber(ARGV[4]), tonumber(ARGV[5])
local outcome = 0
if max_cost >= 0 and (spent_cost + held_cost >= max_cost or spent_cost + held_cost + cost > max_cost) then
  outcome = 1
elseif max_calls >= 0 and (spent_calls + held_calls >= max_calls or spent_calls + held_calls + calls > max_calls) then
  outcome = 2
else
  redis.call('ZADD', KEYS[2], now_ms + tonumber(ARGV[6]), ARGV[1])
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[2] .. ' ' .. ARGV[3])
  for i = 1, 3 do redis.call('EXPIRE', KEYS[i], tonumber(ARGV[7])) end
end
return {outcome, tostring(spent_cost), tostring(spent_calls), tostring(held_cost), tostring(held_calls)}
"""

# KEYS as above. ARGV: reservation id, cost, calls, ledger ttl (s).
_SETTLE = """
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HINCRBYFLOAT', KEYS[1], 'cost', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'calls', ARGV[3])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[4]))
return 0
"""

# KEYS: reservations' lease ends. ARGV: lease (ms), then the ids this replica holds.
_RENEW = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now_ms + tonumber(ARGV[1]), ARGV[i]) end
return 0
"""


class SpendingLimitExceeded(RequestError):
    """A question refused by a daily limit: a 429 that says when the limit resets."""

    def __init__(self, message: str, resets_at: dt.datetime) -> None:
        super().__init__(message, 429, "spending_limit_exceeded")
        self.resets_at = resets_at

    @property
    def retry_after_s(self) -> int:
        return max(1, int((self.resets_at - dt.datetime.now(dt.UTC)).total_seconds()) + 1)


@dataclass
class _Day:
    """One caller's day in this replica's own ledger."""

    cost: float = 0.0
    calls: int = 0
    held_cost: float = 0.0
    held_calls: int = 0


@dataclass
class Reservation:
    """One question's hold on its key's day; `settle` it once with what the question cost."""

    ledger: Spending
    caller: str
    day: str
    cost: float
    calls: int
    ident: str
    in_redis: bool
    settled: bool = field(default=False)

    def settle(self, usage: Usage | None) -> None:
        """Count what the question cost (its estimate when unknown: a stream the client left) instead of the
        reservation. Once; later calls do nothing."""
        if self.settled:
            return
        self.settled = True
        if usage is None:
            cost, calls = self.cost, self.calls
        else:
            total = usage.total
            cost, calls = total.cost, total.llm_calls - total.cached_calls
        self.ledger.settle(self, cost, calls)


def today() -> tuple[str, dt.datetime]:
    """The UTC day's name and when it ends (when a daily limit resets)."""
    now = dt.datetime.now(dt.UTC)
    ends = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), tzinfo=dt.UTC)
    return now.date().isoformat(), ends


class Spending:
    """The daily limits of every key: in Redis when `link` is given and answering, else in this replica."""

    def __init__(self, max_cost: float | None, max_calls: int | None, callers: list[str],
                 link: RedisLink | None = None, lease_s: float = 15.0) -> None:
        self.max_cost, self.max_calls = max_cost, max_calls
        self.callers = callers
        self.link = link
        self._lease_ms = int(lease_s * 1000)
        self._days: dict[tuple[str, str], _Day] = {}
        self._held: dict[str, Reservation] = {}  # this replica's reservations in Redis, by id
        self._late: list[tuple[Reservation, float, int]] = []  # settled while Redis was down: sent when it is back
        self._lock = threading.Lock()
        self._ids = itertools.count()
        self._prefix = uuid.uuid4().hex[:12]
        if link is not None:
            client = link.client
            self._reserve, self._settle, self._renew = (client.register_script(s)
                                                        for s in (_RESERVE, _SETTLE, _RENEW))

    @property
    def enabled(self) -> bool:
        return self.max_cost is not None or self.max_calls is not None

    def _keys(self, day: str, caller: str) -> list[str]:
        assert self.link is not None
        base = self.link.key("spend", day, caller)
        return [base, base + ":held", base + ":amounts"]

    def reserve(self, caller: int, cost: float, calls: int) -> Reservation:
        """Hold `cost` and `calls` of the caller's day, or raise `SpendingLimitExceeded`."""
        name = self.callers[caller]
        day, resets = today()
        ident = f"{self._prefix}-{next(self._ids)}"
        if self.link is not None:
            link, keys = self.link, self._keys(day, name)
            reply = link.run(lambda c: self._reserve(keys=keys, client=c, args=[
                ident, repr(float(cost)), int(calls), _limit(self.max_cost), _limit(self.max_calls), self._lease_ms,
                _DAY_TTL_S]), None)
            if reply is not None:
                outcome, spent_cost, spent_calls, held_cost, held_calls = (_number(v) for v in reply)
                if outcome:
                    raise self._refusal(int(outcome), spent_cost, int(spent_calls), held_cost, int(held_calls),
                                        cost, calls, resets)
                held = Reservation(self, name, day, cost, calls, ident, in_redis=True)
                with self._lock:
                    self._held[ident] = held
                return held
        with self._lock:  # no Redis, or it is down: this replica's own ledger
            mine = self._days.setdefault((day, name), _Day())
            used_cost, used_calls = mine.cost + mine.held_cost, mine.calls + mine.held_calls
            over_cost = self.max_cost is not None and (used_cost >= self.max_cost or used_cost + cost > self.max_cost)
            over_calls = self.max_calls is not None and (used_calls >= self.max_calls
                                                         or used_calls + calls > self.max_calls)
            if over_cost or over_calls:
                raise self._refusal(1 if over_cost else 2, mine.cost, mine.calls, mine.held_cost, mine.held_calls,
                                    cost, calls, resets)
            mine.held_cost += cost
            mine.held_calls += calls
        return Reservation(self, name, day, cost, calls, ident, in_redis=False)

    def settle(self, held: Reservation, cost: float, calls: int) -> None:
        with self._lock:
            mine = self._days.setdefault((held.day, held.caller), _Day())
            mine.cost += cost
            mine.calls += calls
            if not held.in_redis:
                mine.held_cost -= held.cost
                mine.held_calls -= held.calls
                return
            self._held.pop(held.ident, None)
        if self.link is None or not self._send(held, cost, calls):
            with self._lock:
                self._late.append((held, cost, calls))

    def _send(self, held: Reservation, cost: float, calls: int) -> bool:
        assert self.link is not None
        keys = self._keys(held.day, held.caller)
        args: list[str | int] = [held.ident, repr(float(cost)), int(calls), _DAY_TTL_S]
        return self.link.run(lambda c: self._settle(keys=keys, args=args, client=c) is not None, False)

    def renew(self, client: redis.Redis) -> None:
        """Extend this replica's reservations and send the settlements Redis missed (raises when it fails)."""
        with self._lock:
            held = list(self._held.values())
            late, self._late = self._late, []
        try:
            by_keys: dict[str, list[str]] = {}
            for r in held:
                by_keys.setdefault(self._keys(r.day, r.caller)[1], []).append(r.ident)
            for zset, idents in by_keys.items():
                self._renew(keys=[zset], args=[self._lease_ms, *idents], client=client)
            while late:
                r, cost, calls = late[0]
                self._settle(keys=self._keys(r.day, r.caller), client=client,
                             args=[r.ident, repr(float(cost)), int(calls), _DAY_TTL_S])
                late.pop(0)
        finally:
            if late:
                with self._lock:
                    self._late[:0] = late

    def _refusal(self, outcome: int, spent_cost: float, spent_calls: int, held_cost: float, held_calls: int,
                 cost: float, calls: int, resets: dt.datetime) -> SpendingLimitExceeded:
        when = resets.strftime("%Y-%m-%dT%H:%M:%SZ")
        if outcome == 1:
            message = (f"this API key has spent ${spent_cost:.4f} of its ${self.max_cost:.4f} a day "
                       f"([serve] max_cost_per_day); questions in flight hold ${held_cost:.4f} more and this one "
                       f"is estimated at ${cost:.4f}")
        else:
            message = (f"this API key has made {spent_calls} of its {self.max_calls} model calls a day "
                       f"([serve] max_calls_per_day); questions in flight hold {held_calls} more and this one is "
                       f"estimated at {calls}")
        return SpendingLimitExceeded(f"{message}; the limit resets at {when}", resets)


def _limit(value: float | None) -> float:
    return -1 if value is None else value


def _number(value: object) -> float:
    return float(value.decode() if isinstance(value, bytes) else str(value))


class SpendGate:
    """One request's hold on its API key's daily limits: reserved from the chosen engine's estimate before
    the question is answered (`Router.astream`'s `admit`), settled once with what it cost."""

    def __init__(self, spending: Spending, caller: int) -> None:
        self._spending, self._caller = spending, caller
        self._held: list[Reservation] = []  # one per answering index (a fanned-out question has several)

    async def admit(self, step: PlanStep) -> None:
        self._held.append(self._spending.reserve(self._caller, step.cost, step.llm_calls))

    def settle(self, usage: object) -> None:
        """`usage`: the answer's or a failure's `Usage` (a fanned-out answer's covers every index: the first hold
        counts it, the others nothing); anything else (unknown) counts each hold's estimate."""
        known = usage if isinstance(usage, Usage) else None
        for i, held in enumerate(self._held):
            held.settle(known if known is None or i == 0 else Usage())
