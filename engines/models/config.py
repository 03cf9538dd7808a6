"""Typed model configuration: endpoints, per-stage overrides, prices and the call cache.

Sources, lowest to highest precedence: built-in defaults, the `[models]` tables of
`graphroute.toml`, then environment variables (`OPENAI_API_KEY`, `OPENAI_BASE_URL`,
`GRAPHROUTE_*`; see `ENV_VARS`; read by pydantic-settings, `engines.models.env_settings.EnvSettings`). With no API key and no base URL anywhere the provider is
`"offline"` (the extractive chat model and the TF-IDF embedder), so the product works with no key.
A base URL alone (Ollama, vLLM, the loopback test server) selects the OpenAI-compatible backend
with a placeholder key, because such servers ignore keys.

Every validation error is a `ModelConfigError` whose message names the file and dotted key,
e.g. ``graphroute.toml: models.chat.timeout_s: must be > 0``.
"""

from __future__ import annotations

import os
import tomllib
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from engines.models.base import STAGES
from engines.models.errors import ModelConfigError
from engines.models.redaction import redact, remember_secret, short_repr

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails

Provider = Literal["openai", "azure", "offline"]
JsonMode = Literal["auto", "on", "off"]
HttpClient = Literal["auto", "httpx", "aiohttp"]

OFFLINE_CHAT_MODEL = "offline-extractive"
OFFLINE_EMBEDDING_MODEL = "graphroute-offline-tfidf-svd"
SENTENCE_EMBEDDING_MODEL = "all-MiniLM-L6-v2"  # needs the 'sentence' extra
LOCAL_EMBEDDING_MODELS = (OFFLINE_EMBEDDING_MODEL, SENTENCE_EMBEDDING_MODEL)
DEFAULT_CHAT_MODEL = "gpt-4.1-mini"
DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"
# Local OpenAI-compatible servers (Ollama, vLLM, llama.cpp) ignore the key, but the SDK requires one.
PLACEHOLDER_API_KEY = "not-needed"

ENV_VARS = {
    "OPENAI_API_KEY": "API key for the chat and embedding endpoints",
    "OPENAI_BASE_URL": "base URL of an OpenAI-compatible server (also selects the OpenAI backend)",
    "GRAPHROUTE_API_KEY": "API key (overrides OPENAI_API_KEY)",
    "GRAPHROUTE_BASE_URL": "base URL (overrides OPENAI_BASE_URL)",
    "GRAPHROUTE_PROVIDER": "openai | azure | offline (forces the provider)",
    "GRAPHROUTE_CHAT_MODEL": "chat model name",
    "GRAPHROUTE_EMBEDDING_MODEL": "embedding model name",
    "GRAPHROUTE_<STAGE>_MODEL": "chat model for one stage, e.g. GRAPHROUTE_MAP_MODEL=gpt-4.1-nano",
    "GRAPHROUTE_TIMEOUT_S": "per-call timeout in seconds",
    "GRAPHROUTE_MAX_RETRIES": "retries after the first attempt",
    "GRAPHROUTE_TOTAL_DEADLINE_S": "deadline for one call including retries",
    "GRAPHROUTE_CONCURRENCY": "max calls in flight per (endpoint, model)",
    "GRAPHROUTE_JSON_MODE": "auto | on | off",
    "GRAPHROUTE_MODEL_CACHE": "path of the on-disk model-call cache (enables it); 0/off disables",
    "AZURE_OPENAI_API_KEY": "API key for provider=azure",
    "AZURE_OPENAI_ENDPOINT": "endpoint for provider=azure",
    "OPENAI_API_VERSION": "API version for provider=azure",
}


class ModelEndpoint(BaseModel):
    """One model behind one endpoint, with its client limits."""

    # defer_build: validators are built on first use, not when `import router` defines the class (import time)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, defer_build=True)

    # openai (or any OpenAI-compatible server), azure, or offline (the extractive model / embedder)
    provider: Provider = "offline"
    # the model name the endpoint serves
    model: str = Field(default=OFFLINE_CHAT_MODEL, min_length=1)
    # the endpoint's URL (OPENAI_BASE_URL); unset: the provider's default
    base_url: str | None = None
    # the endpoint's key (else OPENAI_API_KEY from the environment)
    api_key: SecretStr | None = None
    api_version: str | None = None  # azure only
    azure_deployment: str | None = None  # azure only
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=5, ge=0, le=50)
    total_deadline_s: float = Field(default=180.0, gt=0)
    concurrency: int = Field(default=16, ge=1, le=4096)
    # ask for JSON output on structured steps: auto (when the endpoint supports it), on or off
    json_mode: JsonMode = "auto"
    dimensions: int | None = Field(default=None, gt=0)  # embeddings: requested/known vector size
    batch_size: int = Field(default=16, ge=1, le=2048)  # embeddings: texts per request
    # The SDK's HTTP transport. aiohttp is the openai SDK's documented choice for concurrency (its
    # `DefaultAioHttpClient`): 1.4-1.7 ms CPU per chat call against httpx's 2.1-2.4 ms with 64 concurrent
    # calls (2.0-2.3 against 3.2-3.7 streamed). "auto": aiohttp when installed (the `openai[aiohttp]` extra),
    # else the SDK's default httpx.
    http_client: HttpClient = "auto"
    probe_timeout_s: float = Field(default=5.0, gt=0, description=(
        "Bound, in seconds, on the one short call that checks this endpoint: the embedding model's vector size "
        "on a first question when `dimensions` is not set (within the question's deadline, if sooner), and "
        "each endpoint's check when `graphroute serve` starts. An endpoint that does not answer within it "
        "is reported; questions go on without it where they can."))

    @field_validator("api_key")
    @classmethod
    def _hidden_everywhere(cls, key: SecretStr | None) -> SecretStr | None:
        """A configured key is masked in every message and log line this process writes."""
        if key is not None and key.get_secret_value() != PLACEHOLDER_API_KEY:
            remember_secret(key.get_secret_value())
        return key

    @property
    def offline(self) -> bool:
        return self.provider == "offline"

    @property
    def limiter_key(self) -> tuple[str, str]:
        return (self.base_url or f"{self.provider}:default", self.model)


class EndpointOverride(BaseModel):
    """Per-stage changes applied on top of `models.chat` (only the fields given)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    # openai (or any OpenAI-compatible server), azure, or offline (the extractive model / embedder)
    provider: Provider | None = None
    # the model name the endpoint serves
    model: str | None = Field(default=None, min_length=1)
    # the endpoint's URL (OPENAI_BASE_URL); unset: the provider's default
    base_url: str | None = None
    # the endpoint's key (else OPENAI_API_KEY from the environment)
    api_key: SecretStr | None = None
    # Azure OpenAI's API version
    api_version: str | None = None
    # the Azure OpenAI deployment name
    azure_deployment: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)
    max_retries: int | None = Field(default=None, ge=0, le=50)
    total_deadline_s: float | None = Field(default=None, gt=0)
    concurrency: int | None = Field(default=None, ge=1, le=4096)
    # ask for JSON output on structured steps: auto (when the endpoint supports it), on or off
    json_mode: JsonMode | None = None
    # the SDK's HTTP transport: auto (aiohttp when installed), httpx or aiohttp
    http_client: HttpClient | None = None
    probe_timeout_s: float | None = Field(default=None, gt=0)

    @field_validator("api_key")
    @classmethod
    def _hidden_everywhere(cls, key: SecretStr | None) -> SecretStr | None:
        """A configured key is masked in every message and log line this process writes."""
        if key is not None and key.get_secret_value() != PLACEHOLDER_API_KEY:
            remember_secret(key.get_secret_value())
        return key


class ModelPrice(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    input: float = Field(ge=0)  # $ per 1M prompt tokens
    output: float = Field(default=0.0, ge=0)  # $ per 1M output tokens


# Public list prices in USD per 1M tokens (input, output; standard tier, no caching/batch discount). Override
# in graphroute.toml under [models.prices."<model>"] when yours differ.
_LIST_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "o4-mini": (1.10, 4.40),
    "text-embedding-3-small": (0.02, 0.0),
    "text-embedding-3-large": (0.13, 0.0),
    "text-embedding-ada-002": (0.10, 0.0),
    OFFLINE_CHAT_MODEL: (0.0, 0.0),
    OFFLINE_EMBEDDING_MODEL: (0.0, 0.0),
    SENTENCE_EMBEDDING_MODEL: (0.0, 0.0),
}


def default_prices() -> dict[str, ModelPrice]:
    """The list prices as a fresh table (built on call, so importing the module validates nothing)."""
    return {name: ModelPrice(input=i, output=o) for name, (i, o) in _LIST_PRICES.items()}


class PriceTable(BaseModel):
    """Model name -> price. Unknown models cost 0 and are recorded in `unknown_models` (and warned once)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    prices: dict[str, ModelPrice] = Field(default_factory=default_prices)
    # models known to have no price entry (their cost counts as $0, reported once)
    unknown_models: set[str] = Field(default_factory=set, exclude=True)

    def lookup(self, model: str) -> ModelPrice | None:
        """Exact name, else the longest known name that prefixes it (`gpt-4.1-mini-2025-04-14`)."""
        if model in self.prices:
            return self.prices[model]
        name = model.rsplit("/", 1)[-1]  # "openai/gpt-4.1" as LiteLLM spells it
        if name in self.prices:
            return self.prices[name]
        best = max((k for k in self.prices if name.startswith(k + "-")), key=len, default=None)
        return self.prices[best] if best else None

    def is_known(self, model: str) -> bool:
        return self.lookup(model) is not None

    def cost(self, model: str, prompt_tokens: int, output_tokens: int = 0) -> float:
        price = self.lookup(model)
        if price is None:
            if model not in self.unknown_models:
                self.unknown_models.add(model)
                warnings.warn(
                    f"no price known for model {model!r}; its cost is counted as $0 "
                    f'(add [models.prices."{model}"] input/output $ per 1M tokens to graphroute.toml)',
                    stacklevel=2,
                )
            return 0.0
        return (prompt_tokens * price.input + output_tokens * price.output) / 1_000_000


def default_cache_dir(env: Mapping[str, str]) -> Path:
    base = env.get("GRAPHROUTE_CACHE_DIR")
    return Path(base).expanduser() if base else Path.home() / ".cache" / "graphroute"


class CacheConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    # keep model answers in an on-disk cache, keyed by the whole request
    enabled: bool = False
    path: Path | None = None  # sqlite file; default <cache dir>/model_calls.sqlite


class ModelsConfig(BaseModel):
    """Everything the model layer needs; embedded as `models` in the top-level GraphrouteConfig."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    chat: ModelEndpoint = Field(default_factory=ModelEndpoint)
    embedding: ModelEndpoint = Field(
        default_factory=lambda: ModelEndpoint(model=OFFLINE_EMBEDDING_MODEL, batch_size=16)
    )
    stages: dict[str, EndpointOverride] = Field(default_factory=dict)
    prices: PriceTable = Field(default_factory=PriceTable)
    cache: CacheConfig = Field(default_factory=CacheConfig)

    @property
    def offline(self) -> bool:
        return self.chat.offline

    def endpoint_for(self, stage: str | None) -> ModelEndpoint:
        """The chat endpoint for `stage`: `chat` with that stage's override applied."""
        if not stage or stage not in self.stages:
            return self.chat
        changes = self.stages[stage].model_dump(exclude_none=True)
        merged = self.chat.model_dump() | changes
        if "provider" not in changes and (changes.keys() & {"model", "base_url"}) and self.chat.offline:
            merged["provider"] = "openai"
        return ModelEndpoint.model_validate(merged)


# ---------------------------------------------------------------------------------------------
# loading


def format_validation_error(err: ValidationError | list[ErrorDetails], source: str, prefix: str) -> str:
    """`source: dotted.key: what is wrong (got value)` for each error, joined by "; "."""
    lines: list[str] = []
    for e in err.errors() if isinstance(err, ValidationError) else err:
        loc = ".".join(str(p) for p in (prefix, *e["loc"]) if p != "")
        ctx = e.get("ctx") or {}
        kind = e["type"]
        if kind == "greater_than":
            msg = f"must be > {_num(ctx.get('gt'))}"
        elif kind == "greater_than_equal":
            msg = f"must be >= {_num(ctx.get('ge'))}"
        elif kind == "less_than_equal":
            msg = f"must be <= {_num(ctx.get('le'))}"
        elif kind == "extra_forbidden":
            msg = "unknown setting"
        elif kind == "literal_error":
            msg = f"must be one of {ctx.get('expected')}"
        elif kind == "value_error":
            msg = str(ctx.get("error", e["msg"]))
        else:
            msg = e["msg"][0].lower() + e["msg"][1:]
        got = e.get("input")
        shown = "" if kind == "extra_forbidden" or isinstance(got, dict) else f" (got {short_repr(got)})"
        line = redact(f"{source}: {loc}: {msg}{shown}")
        if line not in lines:
            lines.append(line)
    return "; ".join(lines)


def _num(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _env_overrides(env: Mapping[str, str]) -> dict[str, object]:
    """Settings from the environment, shaped like the toml `[models.chat]` table."""
    from engines.models.env_settings import EnvSettings

    return EnvSettings.read(env).chat_table()


# chat field -> the GRAPHROUTE_* variable that sets it (for error messages)
_ENV_FIELDS = {
    "timeout_s": "GRAPHROUTE_TIMEOUT_S",
    "total_deadline_s": "GRAPHROUTE_TOTAL_DEADLINE_S",
    "max_retries": "GRAPHROUTE_MAX_RETRIES",
    "concurrency": "GRAPHROUTE_CONCURRENCY",
    "json_mode": "GRAPHROUTE_JSON_MODE",
    "provider": "GRAPHROUTE_PROVIDER",
}

_SHARED_FIELDS = ("provider", "base_url", "api_key", "api_version", "timeout_s", "max_retries",
                  "total_deadline_s", "concurrency", "probe_timeout_s")


def models_config_from_mapping(
    data: Mapping[str, object] | None,
    env: Mapping[str, str] | None = None,
    *,
    source: str = "graphroute.toml",
) -> ModelsConfig:
    """Build a `ModelsConfig` from the parsed `[models]` table plus the environment.

    `source` names the file in error messages. The embedding endpoint inherits provider, base URL,
    key and limits from `chat` unless `[models.embedding]` sets them.
    """
    env = os.environ if env is None else env
    raw: dict[str, Any] = {k: v for k, v in dict(data or {}).items()}
    for table in ("chat", "embedding", "stages", "prices", "cache"):
        if table in raw and not isinstance(raw[table], Mapping):
            raise ModelConfigError(f"{source}: models.{table}: must be a table", key=f"models.{table}")
    chat: dict[str, Any] = dict(raw.get("chat", {}))
    embedding: dict[str, Any] = dict(raw.get("embedding", {}))
    env_chat = _env_overrides(env)
    chat.update(env_chat)
    from engines.models.env_settings import EnvSettings  # pydantic-settings loads when a config is read

    env_settings = EnvSettings.read(env)
    if env_settings.embedding_model:
        embedding["model"] = env_settings.embedding_model

    # Provider: explicit wins; else a key or a base URL means an OpenAI-compatible server; else offline.
    if "provider" not in chat:
        chat["provider"] = "openai" if (chat.get("api_key") or chat.get("base_url")) else "offline"
    if chat["provider"] in ("openai", "azure") and not chat.get("api_key"):
        if chat["provider"] == "azure" or not chat.get("base_url"):
            raise ModelConfigError(
                f"{source}: models.chat.api_key: provider {chat['provider']!r} needs an API key "
                "(set OPENAI_API_KEY, or models.chat.api_key, or provider = \"offline\")",
                key="models.chat.api_key",
            )
        chat["api_key"] = PLACEHOLDER_API_KEY
    if chat["provider"] == "offline":
        chat.setdefault("model", OFFLINE_CHAT_MODEL)
    else:
        chat.setdefault("model", DEFAULT_CHAT_MODEL)
        if chat.get("model") == OFFLINE_CHAT_MODEL:
            chat["model"] = DEFAULT_CHAT_MODEL

    if "provider" not in embedding and embedding.get("model") == SENTENCE_EMBEDDING_MODEL:
        embedding["provider"] = "offline"  # runs locally whatever the chat endpoint is
    if "provider" not in embedding and (embedding.get("api_key") or embedding.get("base_url")):
        embedding["provider"] = "openai"
    # Fields the embedding endpoint inherits; a bad inherited value is reported once, under models.chat.
    inherited = [f for f in _SHARED_FIELDS if f in chat and f not in embedding]
    for field in inherited:
        embedding[field] = chat[field]
    if embedding.get("provider") == "offline":
        # Offline embedders: the TF-IDF one (default) or the optional local sentence model.
        if embedding.get("model") not in LOCAL_EMBEDDING_MODELS:
            embedding["model"] = OFFLINE_EMBEDDING_MODEL
    else:
        embedding.setdefault("model", DEFAULT_EMBEDDING_MODEL)

    stages: dict[str, Any] = dict(raw.get("stages", {}))
    for stage in STAGES:
        name = f"GRAPHROUTE_{stage.upper()}_MODEL"
        if env.get(name):
            stages.setdefault(stage, {})
            stages[stage] = dict(stages[stage]) | {"model": env[name]}
    unknown = sorted(set(stages) - set(STAGES))
    if unknown:
        raise ModelConfigError(
            f"{source}: models.stages.{unknown[0]}: unknown stage (known: {', '.join(STAGES)})",
            key=f"models.stages.{unknown[0]}",
        )

    prices = default_prices()
    user_prices = raw.get("prices", {})
    cache: dict[str, Any] = dict(raw.get("cache", {}))
    env_cache = (env_settings.model_cache or "").strip()
    if env_cache:
        if env_cache.lower() in ("0", "off", "false", "no"):
            cache["enabled"] = False
        else:
            cache.update(enabled=True, path=env_cache)
    rest = {k: v for k, v in raw.items() if k not in ("chat", "embedding", "stages", "prices", "cache")}
    try:
        parsed_prices = {str(k): ModelPrice.model_validate(v) for k, v in user_prices.items()}
    except ValidationError as err:
        bad = next(k for k, v in user_prices.items() if not _valid_price(v))
        raise ModelConfigError(
            format_validation_error(err, source, f"models.prices.{bad}"), key=f"models.prices.{bad}"
        ) from None
    prices.update(parsed_prices)
    try:
        config = ModelsConfig.model_validate(
            {"chat": chat, "embedding": embedding, "stages": stages, "cache": cache, **rest}
            | {"prices": PriceTable(prices=prices)}
        )
    except ValidationError as err:
        errors = [e for e in err.errors() if not (e["loc"][:1] == ("embedding",) and e["loc"][1:2]
                  and e["loc"][1] in inherited)]
        errors = errors or err.errors()
        first = errors[0]["loc"]
        parts = []
        for e in errors:  # a bad value that came from the environment names its variable, not the file
            var = _ENV_FIELDS.get(str(e["loc"][1])) if e["loc"][:1] == ("chat",) and len(e["loc"]) > 1 else None
            from_env = var is not None and var in env and str(e["loc"][1]) in env_chat
            parts.append(format_validation_error([e], f"environment {var}" if from_env else source, "models"))
        raise ModelConfigError(
            "; ".join(parts),
            key="models." + ".".join(str(p) for p in first),
        ) from None
    if config.cache.enabled and config.cache.path is None:
        config.cache.path = default_cache_dir(env) / "model_calls.sqlite"
    if config.chat.provider == "azure" and not config.chat.api_version:
        raise ModelConfigError(
            f"{source}: models.chat.api_version: provider 'azure' needs an API version "
            "(e.g. \"2024-10-21\"; or set OPENAI_API_VERSION)",
            key="models.chat.api_version",
        )
    if config.chat.provider == "azure" and not config.chat.base_url:
        raise ModelConfigError(
            f"{source}: models.chat.base_url: provider 'azure' needs the resource endpoint "
            "(https://<resource>.openai.azure.com; or set AZURE_OPENAI_ENDPOINT)",
            key="models.chat.base_url",
        )
    return config


def _valid_price(value: object) -> bool:
    try:
        ModelPrice.model_validate(value)
        return True
    except ValidationError:
        return False


def find_config_file(env: Mapping[str, str]) -> Path | None:
    """`$GRAPHROUTE_CONFIG` if set, else `./graphroute.toml` when it exists."""
    if env.get("GRAPHROUTE_CONFIG"):
        return Path(env["GRAPHROUTE_CONFIG"]).expanduser()
    candidate = Path.cwd() / "graphroute.toml"
    return candidate if candidate.is_file() else None


def read_toml(path: Path) -> dict[str, object]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ModelConfigError(f"{path}: config file not found", key=str(path)) from None
    except tomllib.TOMLDecodeError as err:
        raise ModelConfigError(f"{path}: not valid TOML: {err}", key=str(path)) from None


def load_models_config(
    toml_path: str | Path | None = None, env: Mapping[str, str] | None = None
) -> ModelsConfig:
    """Read `[models]` from `toml_path` (or the file `find_config_file` finds) and the environment."""
    env = os.environ if env is None else env
    path = Path(toml_path) if toml_path is not None else find_config_file(env)
    data = read_toml(path) if path is not None else {}
    models = data.get("models", {})
    if not isinstance(models, Mapping):
        raise ModelConfigError(f"{path}: models: must be a table", key="models")
    return models_config_from_mapping(models, env, source=str(path.name if path else "environment"))
