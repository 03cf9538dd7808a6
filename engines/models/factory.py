"""Build the chat model (per stage) and the embedder from a `ModelsConfig`.

    models = Models.from_config(load_models_config(), index=index)
    models.chat("map")        # the model for the map stage (per-stage override, else models.chat)
    models.embedder           # OpenAI embedder, or the offline one fitted on `index` (vectors attached)
    models.describe()         # "offline extractive model (no API key configured); ..."

Chat models are shared: stages whose endpoints are identical get the same instance, and every
OpenAI model of one (base_url, model) shares one concurrency limiter process-wide.

An engine accepts one `ChatModel` for every stage, the configured `Models` bundle, or None (the bundle the
configuration describes: offline by default), `ModelLike`; `engines.run.ModelSet` resolves what it was given,
once per stage, so a model call runs nothing here.
"""

from __future__ import annotations

import threading
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeAlias

from engines.models.base import ChatModel, Embedder, HoldsClients
from engines.models.cache import CallCache, ModelCallCache
from engines.models.config import SENTENCE_EMBEDDING_MODEL, ModelEndpoint, ModelsConfig
from engines.models.errors import ModelConfigError
from engines.models.limiter import LimiterRegistry

if TYPE_CHECKING:
    from engines.models.embedding_offline import OfflineEmbedder
    from shared_context.index import Index

if TYPE_CHECKING:
    from engines.models.probe import EndpointCheck


def _offline_chat() -> ChatModel:
    from engines.models.offline import OfflineChatModel  # lazy: written by another package owner

    model: ChatModel = OfflineChatModel()
    return model


def build_chat_model(
    config: ModelsConfig,
    stage: str | None = None,
    *,
    limiter_registry: LimiterRegistry | None = None,
    cache: CallCache | None = None,
) -> ChatModel:
    """The chat model for `stage` (None: the default `models.chat`)."""
    endpoint = config.endpoint_for(stage)
    if endpoint.offline:
        return _offline_chat()
    from engines.models.openai_backend import OpenAIChatModel

    return OpenAIChatModel(endpoint, config.prices, limiter_registry=limiter_registry, cache=cache)


def build_embedder(
    config: ModelsConfig,
    index: Index | None = None,
    *,
    limiter_registry: LimiterRegistry | None = None,
    cache: CallCache | None = None,
    cache_dir: str | None = None,
) -> Embedder:
    """The embedder. Offline embedders need `index`: they are fitted on it and its vectors are attached."""
    endpoint = config.embedding
    if not endpoint.offline:
        from engines.models.openai_backend import OpenAIEmbedder

        return OpenAIEmbedder(endpoint, config.prices, limiter_registry=limiter_registry, cache=cache)
    from engines.models.embedding_offline import attach_offline_vectors, embedder_for_index

    embedder: SentenceEmbedder | OfflineEmbedder
    if endpoint.model == SENTENCE_EMBEDDING_MODEL:
        from engines.models.embedding_sentence import SentenceEmbedder

        embedder = SentenceEmbedder()
    else:
        if index is None:
            raise ModelConfigError(
                "the offline embedder is fitted on an index's own text: pass index= (or configure "
                "[models.embedding] with an API key)",
                key="models.embedding",
            )
        embedder = embedder_for_index(index, cache_dir)
    if index is not None:
        attach_offline_vectors(index, embedder)
    result: Embedder = embedder
    return result


class Models:
    """The model stack of one graphroute instance: chat per stage, the embedder, prices and the cache."""

    def __init__(
        self,
        config: ModelsConfig,
        *,
        index: Index | None = None,
        embedder: Embedder | None = None,
        limiter_registry: LimiterRegistry | None = None,
        cache_dir: str | None = None,
    ) -> None:
        self.config = config
        self.index = index
        self._registry = limiter_registry
        self._cache_dir = cache_dir
        self.cache: CallCache | None = (ModelCallCache(config.cache.path) if config.cache.enabled and config.cache.path
                                        else None)
        self._chat: dict[str, ChatModel] = {}  # by endpoint settings: stages with the same endpoint share one
        self._chat_by_stage: dict[str | None, ChatModel] = {}
        self._embedder = embedder
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, config: ModelsConfig, *, index: Index | None = None, embedder: Embedder | None = None,
                    limiter_registry: LimiterRegistry | None = None, cache_dir: str | None = None) -> Models:
        return cls(config, index=index, embedder=embedder, limiter_registry=limiter_registry, cache_dir=cache_dir)

    @property
    def offline(self) -> bool:
        return self.config.chat.offline and all(
            self.config.endpoint_for(s).offline for s in self.config.stages
        )

    def chat(self, stage: str | None = None) -> ChatModel:
        model = self._chat_by_stage.get(stage)  # every model call asks: no endpoint serialised again
        if model is not None:
            return model
        endpoint = self.config.endpoint_for(stage)
        key = endpoint.model_dump_json()
        with self._lock:
            model = self._chat.get(key)
            if model is None:
                model = self._chat[key] = (
                    _offline_chat()
                    if endpoint.offline
                    else build_chat_model(self.config, stage, limiter_registry=self._registry, cache=self.cache)
                )
            self._chat_by_stage[stage] = model
            return model

    def share_cache(self, cache: CallCache) -> None:
        """Use `cache` (the replicas' shared one) for every call from now on, models already built included."""
        from engines.models.openai_backend import OpenAIChatModel, OpenAIEmbedder

        with self._lock:
            self.cache = cache
            for model in (*self._chat.values(), self._embedder):
                if isinstance(model, OpenAIChatModel | OpenAIEmbedder):  # the offline models keep no cache
                    model.cache = cache

    @property
    def embedder(self) -> Embedder:
        """Built on first use (fitting the offline embedder can take seconds on a large index)."""
        with self._lock:
            if self._embedder is None:
                self._embedder = build_embedder(self.config, self.index, limiter_registry=self._registry,
                                                cache=self.cache, cache_dir=self._cache_dir)
            return self._embedder

    def describe(self) -> str:
        """One line naming the models, e.g. for the top of an answer."""
        chat = self.config.chat
        if chat.offline:
            text = "offline extractive model (no API key configured)"
        else:
            text = f"{chat.model} at {_where(chat)}"
        overrides = {
            s: self.config.endpoint_for(s) for s in self.config.stages if self.config.endpoint_for(s) != chat
        }
        if overrides:
            text += "; " + ", ".join(
                f"{s}: {'offline extractive model' if e.offline else e.model}" for s, e in overrides.items()
            )
        emb = self.config.embedding
        if emb.offline:
            kind = "local sentence model" if emb.model == SENTENCE_EMBEDDING_MODEL else "offline TF-IDF embedder"
            text += f"; embeddings: {kind} ({emb.model})"
        else:
            text += f"; embeddings: {emb.model}"
        if self.cache is not None:
            text += f"; model-call cache: {self.cache.label}"
        return text

    async def aopen(self) -> None:
        """Make this event loop's HTTP clients for the chat models built so far (`graphroute serve` does it
        on its loop before it listens)."""
        for model in list(self._chat.values()):
            if isinstance(model, HoldsClients):
                await model.aopen()

    async def check_endpoints(self) -> list[EndpointCheck]:
        """Check each distinct endpoint once (the default chat model, each stage whose endpoint differs, the
        embedder), concurrently, each within its `probe_timeout_s`; offline models are reported, not called."""
        import asyncio

        from engines.models.probe import EndpointCheck, Probed, check_endpoint, offline_check

        checks: list[Coroutine[Any, Any, EndpointCheck] | EndpointCheck] = []
        seen: set[str] = set()
        for stage in (None, *self.config.stages):
            endpoint = self.config.endpoint_for(stage)
            key = endpoint.model_dump_json()
            if key in seen:
                continue
            seen.add(key)
            role = "chat" if stage is None else f"chat ({stage})"
            model = self.chat(stage)
            checks.append(check_endpoint(role, model) if isinstance(model, Probed)
                          else offline_check(role, model.name))
        embedding = self.config.embedding
        embedder = None if embedding.offline else self.embedder
        checks.append(check_endpoint("embedding", embedder) if isinstance(embedder, Probed)
                      else offline_check("embedding", embedding.model))
        pending = [c for c in checks if not isinstance(c, EndpointCheck)]
        done = iter(await asyncio.gather(*pending))
        return [c if isinstance(c, EndpointCheck) else next(done) for c in checks]

    async def aclose(self) -> None:
        """Close the HTTP clients this event loop opened."""
        held: list[object] = [*self._chat.values(), self._embedder]
        for model in held:
            if isinstance(model, HoldsClients):
                await model.aclose()


def _where(endpoint: ModelEndpoint) -> str:
    if endpoint.provider == "azure":
        return f"Azure {endpoint.base_url}"
    return endpoint.base_url or "api.openai.com"


# What engines accept as `model`: one chat model for every stage, the configured bundle, or None (from config).
ModelLike: TypeAlias = "ChatModel | Models | None"
