"""What a replica shares with the others through Redis (`[serve] redis_url`), set up in one place.

`SharedState.connect` makes the Redis link, the cross-replica admission, the daily spending ledger and the
shared model-call cache (handed to every index's models); `start` runs the heartbeat thread that renews this
replica's leases every third of `[serve] redis_lease_s` (and so also notices when Redis comes back while no
request asks); `stop` ends it and leaves the replica set. Without `redis_url` none of this exists and the
service counts in its own process, as a single host always did.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING

from engines.models.base import JSONObject
from engines.models.redis_cache import RedisCallCache
from engines.models.redis_link import RedisLink
from router.service.redis_admission import RedisAdmission, caller_ids
from router.service.spending import Spending

if TYPE_CHECKING:
    import redis

    from engines.config import ServeConfig
    from engines.models.factory import Models

log = logging.getLogger("graphroute.serve")


class SharedState:
    """The Redis link of one replica and what it keeps there."""

    def __init__(self, link: RedisLink, admission: RedisAdmission, spending: Spending, lease_s: float) -> None:
        self.link = link
        self.admission = admission
        self.spending = spending
        self._interval = lease_s / 3
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def connect(cls, config: ServeConfig, api_keys: list[str], per_key_limit: int,
                models: Iterable[Models] = ()) -> SharedState:
        """The shared state of `config.redis_url` (set). Redis need not answer yet: until it does, the
        replica counts alone, and the first heartbeat that reaches it shares everything."""
        assert config.redis_url is not None
        link = RedisLink(config.redis_url, config.redis_prefix)
        admission = RedisAdmission(link, api_keys, config.max_concurrency, per_key_limit, config.redis_lease_s)
        spending = Spending(config.max_cost_per_day, config.max_calls_per_day, caller_ids(api_keys), link,
                            config.redis_lease_s)
        for model_set in models:
            model_set.share_cache(RedisCallCache(link, model_set.cache, config.redis_cache_ttl_s))
        state = cls(link, admission, spending, config.redis_lease_s)
        state.beat()
        return state

    def beat(self) -> None:
        """Renew this replica's leases and send what Redis missed; a failure marks the link down."""

        def renew(client: redis.Redis) -> bool:
            self.admission.renew(client)
            self.spending.renew(client)
            return True

        # a down link is tried again here too, so recovery is noticed without waiting for a request
        self.link.run(renew, False)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="graphroute-redis-lease", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.beat()
            except Exception:  # never let the heartbeat die: leases would lapse under a live replica
                log.exception("renewing this replica's Redis leases failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.admission.retire()
        self.link.close()

    def health(self) -> JSONObject:
        """`/healthz`'s `redis` object."""
        return dict(self.link.status())
