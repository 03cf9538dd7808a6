"""Optional on-disk cache of model calls (sqlite, stdlib), shared by query time and the indexer.

Key: sha256 over (model, messages, task, JSON schema name, max_tokens, temperature) — everything that
changes the reply. A hit returns the stored `Completion` with `cached=True`, `seconds=0.0`, the ORIGINAL
token counts (so reports show what the call consumed when it was made) and `cost=0.0` (nothing is paid
again). `Usage.add_completion` counts hits in `cached_calls`. Embeddings are cached per (model, dim, text).

Thread- and async-safe: one sqlite connection per thread, WAL journal, short writes; concurrent
processes share the file through sqlite's own locking.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from engines.models.base import Completion, Message
from engines.models.errors import ModelConfigError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, text TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL, usage_estimated INTEGER NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS embeddings (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL,
    prompt_tokens INTEGER NOT NULL, created REAL NOT NULL);
"""


def completion_key(
    model: str,
    messages: list[Message],
    *,
    task: str,
    schema_name: str | None,
    max_tokens: int | None,
    temperature: float | None,
) -> str:
    payload: dict[str, Any] = {
        "model": model,
        "messages": [[m["role"], m["content"]] for m in messages],
        "task": task,
        "schema": schema_name,
        "max_tokens": max_tokens,
        "temperature": temperature,
    }
    return hashlib.sha256(json.dumps(payload, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def embedding_key(model: str, dim: int | None, text: str) -> str:
    return hashlib.sha256(json.dumps([model, dim, text], ensure_ascii=False).encode()).hexdigest()


class CallCache(Protocol):
    """What the model backends read and write: this sqlite file, or the replicas' shared Redis
    (`engines.models.redis_cache.RedisCallCache`)."""

    @property
    def label(self) -> str: ...

    def get(self, key: str) -> Completion | None: ...

    def put(self, key: str, completion: Completion) -> None: ...

    def get_vectors(self, keys: list[str]) -> dict[str, tuple[np.ndarray, int]]: ...

    def put_vectors(self, model: str, items: list[tuple[str, np.ndarray, int]]) -> None: ...


def cached_completion(model: str, text: str, prompt_tokens: int, output_tokens: int, estimated: bool) -> Completion:
    """A hit as every cache returns it: the original token counts, no time, nothing paid again."""
    return Completion(text=text, prompt_tokens=prompt_tokens, output_tokens=output_tokens, model=model, seconds=0.0,
                      usage_estimated=estimated, cached=True, cost=0.0)


class ModelCallCache:
    """sqlite-backed store of completions and embedding vectors."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ModelConfigError(
                f"models.cache.path: cannot create the cache folder {self.path.parent}: {err}", key="models.cache.path"
            ) from None
        self._local = threading.local()
        self._init_lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self._connect()  # fail early, with a clear message, on an unusable path

    @property
    def label(self) -> str:
        return str(self.path)

    def _connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        try:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=True)
            with self._init_lock:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.executescript(_SCHEMA)
        except sqlite3.Error as err:
            raise ModelConfigError(
                f"models.cache.path: cannot open the model-call cache {self.path}: {err}", key="models.cache.path"
            ) from None
        self._local.conn = conn
        return conn

    # ------------------------------------------------------------------ completions
    def get(self, key: str) -> Completion | None:
        row = self._connect().execute(
            "SELECT model, text, prompt_tokens, output_tokens, usage_estimated FROM completions WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        model, text, prompt_tokens, output_tokens, estimated = row
        return cached_completion(model, text, int(prompt_tokens), int(output_tokens), bool(estimated))

    def put(self, key: str, completion: Completion) -> None:
        self._connect().execute(
            "INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key, completion.model, completion.text, completion.prompt_tokens, completion.output_tokens,
             int(completion.usage_estimated), time.time()),
        )

    # ------------------------------------------------------------------ embeddings
    def get_vectors(self, keys: list[str]) -> dict[str, tuple[np.ndarray, int]]:
        """Stored (vector, prompt_tokens) for the keys present."""
        found: dict[str, tuple[np.ndarray, int]] = {}
        conn = self._connect()
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, dim, blob, tokens in conn.execute(
                f"SELECT key, dim, vector, prompt_tokens FROM embeddings WHERE key IN ({marks})", chunk
            ):
                vec = np.frombuffer(blob, dtype="<f4")
                if vec.shape[0] == dim:
                    found[key] = (vec.astype(np.float32), int(tokens))
        return found

    def put_vectors(self, model: str, items: list[tuple[str, np.ndarray, int]]) -> None:
        conn = self._connect()
        now = time.time()
        conn.execute("BEGIN")
        try:
            conn.executemany(
                "INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?, ?, ?, ?)",
                [(k, model, int(v.shape[0]), np.asarray(v, dtype="<f4").tobytes(), int(t), now) for k, v, t in items],
            )
            conn.execute("COMMIT")
        except sqlite3.Error:
            conn.execute("ROLLBACK")
            raise

    def __len__(self) -> int:
        return int(self._connect().execute("SELECT COUNT(*) FROM completions").fetchone()[0])
