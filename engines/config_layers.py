"""Where each setting comes from: graphroute.toml and the environment, then a GraphRAG project's settings,
then the defaults.

`resolve_config` reads the layers, merges them key by key (a key set in graphroute.toml wins over the same
key from the project's settings; the model environment variables win over both) and records the source of
every value, which `graphroute config --show` prints. A model endpoint named in graphroute.toml or the
environment (a provider or a base URL of its own) replaces the settings' endpoint whole, so one endpoint's
address is never paired with another's key or model.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engines.config import GraphrouteConfig, config_from_mapping
from engines.graphrag_settings import ProjectSettings, find_settings, read_settings
from engines.models.config import find_config_file, read_toml
from engines.models.errors import ModelConfigError

DEFAULT = "default"


@dataclass
class ResolvedConfig:
    config: GraphrouteConfig
    sources: dict[str, str] = field(default_factory=dict)  # dotted key -> "graphroute.toml", "settings.yaml", ...
    settings: ProjectSettings | None = None
    toml: Path | None = None

    def source_of(self, key: str) -> str:
        """Where the value of the dotted `key` came from (a key under a set table counts as set with it)."""
        parts = key.split(".")
        for n in range(len(parts), 0, -1):
            found = self.sources.get(".".join(parts[:n]))
            if found is not None:
                return found
        return DEFAULT

    def settings_note(self) -> str | None:
        """One line about the project's settings keys graphroute does not use (None when there are none)."""
        if self.settings is None or not self.settings.unused:
            return None
        unused = self.settings.unused
        shown = ", ".join(unused[:6]) + (f" and {len(unused) - 6} more" if len(unused) > 6 else "")
        return (f"{self.settings.path}: {len(unused)} setting{'s' if len(unused) != 1 else ''} graphroute does not "
                f"use: {shown} (graphroute config --show lists them)")


def resolve_config(
    config_path: str | Path | None = None,
    *,
    index: str | Path | None = None,
    settings: str | Path | bool | None = None,
    env: Mapping[str, str] | None = None,
    allow_prompt_outside: bool = False,
) -> ResolvedConfig:
    """The configuration with its sources. `settings`: a settings file, False for none, or None to look for
    the project's settings beside the index folder `index` (when given). Prompt files named by a relative
    path stay inside the folder of the file that names them unless `allow_prompt_outside`."""
    env = os.environ if env is None else env
    toml = Path(config_path) if config_path is not None else find_config_file(env)
    toml_data: dict[str, object] = read_toml(toml) if toml is not None else {}
    settings_file: Path | None = None
    if isinstance(settings, str | Path):
        settings_file = Path(settings)
    elif settings is None and index is not None:
        settings_file = find_settings(index)
    project = (read_settings(settings_file, env, allow_prompt_outside=allow_prompt_outside)
               if settings_file is not None else None)
    layer = _without_replaced_endpoints(project.layer, toml_data, env) if project is not None else {}
    merged = _merge(layer, toml_data)
    source = toml.name if toml is not None else "environment"
    try:
        config = config_from_mapping(merged, env, source=source, base_dir=toml.parent if toml is not None else None,
                                     allow_prompt_outside=allow_prompt_outside)
    except ModelConfigError:
        if project is not None and layer:  # a bad value from the settings file names that file
            config_from_mapping(layer, env, source=project.path.name)
        raise
    sources: dict[str, str] = {}
    if project is not None:
        sources.update(dict.fromkeys(_leaves(layer), project.path.name))
    if toml is not None:
        sources.update(dict.fromkeys(_leaves(toml_data), toml.name))
    sources.update(_environment_sources(env))
    return ResolvedConfig(config, sources, project, toml)


def load_project_config(
    index: str | Path, config_path: str | Path | None = None, settings: str | Path | bool | None = None
) -> GraphrouteConfig:
    """The configuration for the index at `index` (its project's settings included), warning once about
    settings graphroute does not use."""
    resolved = resolve_config(config_path, index=index, settings=settings)
    note = resolved.settings_note()
    if note:
        warnings.warn(note, stacklevel=2)
    return resolved.config


# ---- merging -----------------------------------------------------------------------------------------------


def _merge(low: Mapping[str, object], high: Mapping[str, object]) -> dict[str, object]:
    """`high` over `low`, table by table."""
    out = dict(low)
    for key, value in high.items():
        below = out.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping) and not _is_prompt(value):
            out[key] = _merge(below, value)
        else:
            out[key] = value
    return out


def _is_prompt(value: Mapping[str, object]) -> bool:
    return set(value) in ({"file"}, {"text"})


def _names_endpoint(table: object) -> bool:
    return isinstance(table, Mapping) and ("provider" in table or "base_url" in table)


def _without_replaced_endpoints(layer: dict[str, object], toml: Mapping[str, object],
                                env: Mapping[str, str]) -> dict[str, object]:
    models = layer.get("models")
    if not isinstance(models, Mapping):
        return layer
    from engines.models.env_settings import EnvSettings

    toml_models = toml.get("models") if isinstance(toml.get("models"), Mapping) else {}
    assert isinstance(toml_models, Mapping)
    kept = dict(models)
    if _names_endpoint(toml_models.get("chat")) or _names_endpoint(EnvSettings.read(env).chat_table()):
        kept.pop("chat", None)
    if _names_endpoint(toml_models.get("embedding")):
        kept.pop("embedding", None)
    return {**layer, "models": kept} if kept else {k: v for k, v in layer.items() if k != "models"}


def _leaves(table: Mapping[str, object], prefix: str = "") -> Iterator[str]:
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and not _is_prompt(value):
            yield from _leaves(value, dotted + ".")
        else:
            yield dotted


def _environment_sources(env: Mapping[str, str]) -> dict[str, str]:
    """The model settings the environment gives, with the variable that gives each."""
    from engines.models.base import STAGES
    from engines.models.config import ENV_VARS
    from engines.models.env_settings import EnvSettings

    chat = EnvSettings.read(env).chat_table()
    by_field = {
        "provider": ("GRAPHROUTE_PROVIDER",),
        "api_key": ("AZURE_OPENAI_API_KEY", "GRAPHROUTE_API_KEY", "OPENAI_API_KEY"),
        "base_url": ("GRAPHROUTE_BASE_URL", "OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT"),
        "api_version": ("OPENAI_API_VERSION",),
        "model": ("GRAPHROUTE_CHAT_MODEL",),
        **{f: (f"GRAPHROUTE_{f.upper()}",) for f in ("timeout_s", "total_deadline_s", "max_retries",
                                                     "concurrency", "json_mode")},
    }
    out: dict[str, str] = {}
    for name in chat:
        var = next((v for v in by_field.get(name, ()) if env.get(v)), None)
        out[f"models.chat.{name}"] = f"environment {var}" if var else "environment"
    if env.get("GRAPHROUTE_EMBEDDING_MODEL"):
        out["models.embedding.model"] = "environment GRAPHROUTE_EMBEDDING_MODEL"
    for stage in STAGES:
        var = f"GRAPHROUTE_{stage.upper()}_MODEL"
        if env.get(var):
            out[f"models.stages.{stage}.model"] = f"environment {var}"
    if env.get("GRAPHROUTE_MODEL_CACHE") and "GRAPHROUTE_MODEL_CACHE" in ENV_VARS:
        out["models.cache"] = "environment GRAPHROUTE_MODEL_CACHE"
    return out
