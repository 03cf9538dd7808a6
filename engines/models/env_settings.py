"""The environment variables of the model layer, read and typed by pydantic-settings.

Its own module so that importing the model layer does not load pydantic-settings (and python-dotenv):
`engines.models.config` imports it when a configuration is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from pydantic import AliasChoices, Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from engines.models.errors import ModelConfigError

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo


class EnvSettings(BaseSettings):
    """The environment variables of `ENV_VARS`, read and typed by pydantic-settings (empty means unset).

    Where two variables set one thing, the first named wins (GRAPHROUTE_API_KEY over OPENAI_API_KEY).
    """

    model_config = SettingsConfigDict(case_sensitive=True, env_ignore_empty=True, extra="ignore")

    provider: str | None = Field(None, validation_alias="GRAPHROUTE_PROVIDER")
    api_key: str | None = Field(None, validation_alias=AliasChoices("GRAPHROUTE_API_KEY", "OPENAI_API_KEY"))
    base_url: str | None = Field(None, validation_alias=AliasChoices("GRAPHROUTE_BASE_URL", "OPENAI_BASE_URL"))
    azure_api_key: str | None = Field(None, validation_alias="AZURE_OPENAI_API_KEY")
    azure_endpoint: str | None = Field(None, validation_alias="AZURE_OPENAI_ENDPOINT")
    api_version: str | None = Field(None, validation_alias="OPENAI_API_VERSION")
    chat_model: str | None = Field(None, validation_alias="GRAPHROUTE_CHAT_MODEL")
    embedding_model: str | None = Field(None, validation_alias="GRAPHROUTE_EMBEDDING_MODEL")
    timeout_s: float | None = Field(None, validation_alias="GRAPHROUTE_TIMEOUT_S")
    total_deadline_s: float | None = Field(None, validation_alias="GRAPHROUTE_TOTAL_DEADLINE_S")
    max_retries: float | None = Field(None, validation_alias="GRAPHROUTE_MAX_RETRIES")  # whole: checked below
    concurrency: float | None = Field(None, validation_alias="GRAPHROUTE_CONCURRENCY")
    json_mode: str | None = Field(None, validation_alias="GRAPHROUTE_JSON_MODE")
    model_cache: str | None = Field(None, validation_alias="GRAPHROUTE_MODEL_CACHE")

    @field_validator("provider", "json_mode")
    @classmethod
    def _lower(cls, value: str | None) -> str | None:
        return (value.strip().lower() or None) if value is not None else None

    @field_validator("max_retries", "concurrency")
    @classmethod
    def _whole(cls, value: float | None) -> float | None:
        if value is not None and value != int(value):
            raise ValueError("a whole number")
        return value

    @classmethod
    def read(cls, env: Mapping[str, str]) -> EnvSettings:
        """Settings from `env` (os.environ or a mapping given by the caller), errors naming the variable."""
        raw = _MappingEnvSource(cls, env)()
        try:
            return cls.model_validate(raw)
        except ValidationError as err:
            e = err.errors()[0]
            name = str(e["loc"][0])
            field = cls.model_fields.get(name)
            var = next((a for a in _aliases(field) if a in env), name) if field is not None else name
            reason = e.get("ctx", {}).get("error")
            kind = str(reason) if reason is not None else "a number" if e["type"].startswith("float") else "valid"
            raise ModelConfigError(f"environment: {var}: must be {kind} (got {env.get(var)!r})", key=var) from None

    def chat_table(self) -> dict[str, object]:
        """These settings shaped like the toml `[models.chat]` table. With provider "azure", Azure's own
        key (AZURE_OPENAI_API_KEY) wins over the OpenAI one and AZURE_OPENAI_ENDPOINT is the base URL
        unless GRAPHROUTE_BASE_URL / OPENAI_BASE_URL name one."""
        azure = self.provider == "azure"
        table: dict[str, object] = {
            "provider": self.provider,
            "api_key": (self.azure_api_key if azure else None) or self.api_key,
            "base_url": self.base_url or (self.azure_endpoint if azure else None),
            "api_version": self.api_version if azure else None,
            "model": self.chat_model,
            "timeout_s": self.timeout_s,
            "total_deadline_s": self.total_deadline_s,
            "max_retries": None if self.max_retries is None else int(self.max_retries),
            "concurrency": None if self.concurrency is None else int(self.concurrency),
            "json_mode": self.json_mode,
        }
        return {k: v for k, v in table.items() if v is not None and v != ""}


class _MappingEnvSource(EnvSettingsSource):
    """pydantic-settings' environment source over a given mapping (tests and embedders pass their own)."""

    def __init__(self, settings_cls: type[BaseSettings], env: Mapping[str, str]) -> None:
        self._mapping = env
        super().__init__(settings_cls, case_sensitive=True, env_ignore_empty=True)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return {k: v for k, v in self._mapping.items() if v is not None and v.strip() != ""}


def _aliases(field: FieldInfo) -> list[str]:
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(c) for c in alias.choices]
    return [str(alias)] if alias else []
