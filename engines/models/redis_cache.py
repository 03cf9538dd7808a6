"""The model-call cache in the replicas' shared Redis: a call one replica paid for is a hit on every other.

The same keys as the sqlite cache (`cache.completion_key`, `cache.embedding_key`) and the same hits: the
original token counts, `cached=True`, no time and no cost. A completion is a Redis hash
(`<prefix>:calls:c:<key>`: model, text, prompt and output tokens, estimated), an embedding one too
(`<prefix>:calls:e:<key>`: dim, little-endian float32 vector, prompt tokens); each expires after
`[serve] redis_cache_ttl_s`. While Redis is down every call goes to `fallback` (the local sqlite cache when
one is configured, else none), and nothing is lost but the sharing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from engines.models.cache import CallCache, cached_completion

if TYPE_CHECKING:
    import redis
    from redis.typing import EncodableT, FieldT

    from engines.models.base import Completion
    from engines.models.redis_link import RedisLink


class RedisCallCache:
    """`CallCache` on a `RedisLink`, falling back to `fallback` (or no cache) while Redis is down."""

    def __init__(self, link: RedisLink, fallback: CallCache | None = None, ttl_s: float | None = None) -> None:
        self.link = link
        self.fallback = fallback
        self._ttl_ms = None if ttl_s is None else int(ttl_s * 1000)
        self.hits = 0
        self.misses = 0

    @property
    def label(self) -> str:
        return f"Redis {self.link.url} (shared by the replicas)"

    def _completion_key(self, key: str) -> str:
        return self.link.key("calls", "c", key)

    def _vector_key(self, key: str) -> str:
        return self.link.key("calls", "e", key)

    # ------------------------------------------------------------------ completions
    def get(self, key: str) -> Completion | None:
        failed: list[bytes | str | None] = []
        row = self.link.run(lambda c: c.hmget(self._completion_key(key), ["model", "text", "prompt_tokens",
                                                                          "output_tokens", "estimated"]), failed)
        if row is failed:  # Redis is down: the local cache, if any
            return self.fallback.get(key) if self.fallback is not None else None
        if any(v is None for v in row):
            self.misses += 1
            return None
        self.hits += 1
        model, text, prompt, output, estimated = (v.decode() if isinstance(v, bytes) else str(v) for v in row)
        return cached_completion(model, text, int(prompt), int(output), estimated == "1")

    def put(self, key: str, completion: Completion) -> None:
        fields: dict[FieldT, EncodableT] = {"model": completion.model, "text": completion.text, "prompt_tokens": completion.prompt_tokens,
                  "output_tokens": completion.output_tokens, "estimated": int(completion.usage_estimated)}
        name = self._completion_key(key)

        def store(client: redis.Redis) -> bool:
            pipe = client.pipeline(transaction=True)
            pipe.hset(name, mapping=fields)
            if self._ttl_ms is not None:
                pipe.pexpire(name, self._ttl_ms)
            pipe.execute()
            return True

        if not self.link.run(store, False) and self.fallback is not None:
            self.fallback.put(key, completion)

    # ------------------------------------------------------------------ embeddings
    def get_vectors(self, keys: list[str]) -> dict[str, tuple[np.ndarray, int]]:
        if not keys:
            return {}

        def fetch(client: redis.Redis) -> list[list[bytes | None]]:
            pipe = client.pipeline(transaction=False)
            for key in keys:
                pipe.hmget(self._vector_key(key), ["dim", "vector", "prompt_tokens"])
            return list(pipe.execute())

        failed: list[list[bytes | None]] = []
        rows = self.link.run(fetch, failed)
        if rows is failed:
            return self.fallback.get_vectors(keys) if self.fallback is not None else {}
        found: dict[str, tuple[np.ndarray, int]] = {}
        for key, (dim, blob, tokens) in zip(keys, rows, strict=True):
            if dim is None or blob is None or tokens is None:
                continue
            vector = np.frombuffer(blob, dtype="<f4")
            if vector.shape[0] == int(dim):  # a truncated or foreign value is a miss, never a wrong vector
                found[key] = (vector.astype(np.float32), int(tokens))
        return found

    def put_vectors(self, model: str, items: list[tuple[str, np.ndarray, int]]) -> None:
        def store(client: redis.Redis) -> bool:
            pipe = client.pipeline(transaction=False)
            for key, vector, tokens in items:
                name = self._vector_key(key)
                pipe.hset(name, mapping={"model": model, "dim": int(vector.shape[0]), "prompt_tokens": int(tokens),
                                         "vector": np.asarray(vector, dtype="<f4").tobytes()})
                if self._ttl_ms is not None:
                    pipe.pexpire(name, self._ttl_ms)
            pipe.execute()
            return True

        if items and not self.link.run(store, False) and self.fallback is not None:
            self.fallback.put_vectors(model, items)
