"""A GraphRAG project's `settings.yaml` (or `settings.json`), read into graphroute's configuration shape.

The project is the folder holding the index's output folder (`<project>/output`), or the file named with
`--settings`. What is read:

- the chat and embedding model of each search section (`chat_model_id` in GraphRAG 2.x's `models`,
  `completion_model_id` in 3.x's `completion_models`; `embedding_model_id`): `model`, `api_base`, `api_key`,
  `api_version`, the Azure deployment name, `model_provider`/`type`, `request_timeout`, `max_retries`,
  `concurrent_requests`, `model_supports_json`, `temperature`. `${VAR}` and `$VAR` are taken from the
  environment, then the project's `.env` (the environment wins, as in GraphRAG). Local search's models
  are graphroute's; global search's and DRIFT's become per-stage models when they differ.
- the parameters of `local_search`, `global_search`, `drift_search` and `basic_search` that graphroute has,
  under graphroute's names, and their prompt files (relative to the project folder).

Keys GraphRAG has and graphroute does not use are listed in `ProjectSettings.unused`, never dropped silently.
A `${VAR}` is only resolved in a value that is used, so a variable an index-time section needs may be unset.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engines.config import ConfigError
from engines.models.redaction import capped, redact, remember_secret, short_repr
from engines.prompt_files import PromptFileError, inside
from engines.prompts import PromptError, PromptTemplate

SETTINGS_FILES = ("settings.yaml", "settings.yml", "settings.json")

# GraphRAG search-section key -> graphroute section and key (dotted below the section).
SECTION_KEYS: dict[str, tuple[str, dict[str, str]]] = {
    "local_search": ("local", {
        "prompt": "prompt",
        "text_unit_prop": "text_unit_prop",
        "community_prop": "community_prop",
        "conversation_history_max_turns": "conversation_history_max_turns",
        "top_k_entities": "top_k_mapped_entities",
        "top_k_relationships": "top_k_relationships",
        "max_context_tokens": "max_context_tokens",
    }),
    "global_search": ("global_search", {
        "map_prompt": "map_prompt",
        "reduce_prompt": "reduce_prompt",
        "knowledge_prompt": "knowledge_prompt",
        "max_context_tokens": "max_context_tokens",
        "data_max_tokens": "data_max_tokens",
        "map_max_length": "map_max_length",
        "reduce_max_length": "reduce_max_length",
        "dynamic_search_threshold": "dynamic_threshold",
        "dynamic_search_keep_parent": "dynamic_keep_parent",
        "dynamic_search_num_repeats": "dynamic_num_repeats",
        "dynamic_search_max_level": "dynamic_max_level",
    }),
    "drift_search": ("drift", {
        "prompt": "followup_prompt",
        "reduce_prompt": "reduce_prompt",
        "drift_k_followups": "k_followups",
        "primer_folds": "primer_folds",
        "n_depth": "n_depth",
        "concurrency": "concurrency",
        "reduce_max_tokens": "reduce_max_tokens",
        "local_search_text_unit_prop": "local_search.text_unit_prop",
        "local_search_community_prop": "local_search.community_prop",
        "local_search_top_k_mapped_entities": "local_search.top_k_mapped_entities",
        "local_search_top_k_relationships": "local_search.top_k_relationships",
        "local_search_max_data_tokens": "local_search.max_context_tokens",
    }),
    "basic_search": ("basic", {
        "prompt": "prompt",
        "k": "k",
        "max_context_tokens": "max_context_tokens",
    }),
}
# (section, key) of each prompt file -> the stage whose slots it must have (engines/prompts.py)
_PROMPT_STAGES = {
    ("local_search", "prompt"): "local",
    ("global_search", "map_prompt"): "global_map",
    ("global_search", "reduce_prompt"): "global_reduce",
    ("global_search", "knowledge_prompt"): "global_knowledge",
    ("drift_search", "prompt"): "drift_followup",
    ("drift_search", "reduce_prompt"): "drift_reduce",
    ("basic_search", "prompt"): "basic",
}
_MODEL_ID_KEYS = ("chat_model_id", "completion_model_id", "embedding_model_id")
# The engines whose answers a section's chat model writes, for its `temperature`.
_TEMPERATURE_SECTIONS = {"local_search": ("local", "questions"), "global_search": ("global_search",),
                         "drift_search": ("drift",), "basic_search": ("basic",)}
# Model entry keys read (the rest of a used entry is reported as unused).
_MODEL_KEYS = {"type", "model_provider", "model", "api_base", "api_key", "api_version", "deployment_name",
               "azure_deployment_name", "auth_type", "auth_method", "request_timeout", "max_retries",
               "concurrent_requests", "model_supports_json", "temperature", "retry"}
_AZURE_TYPES = {"azure_openai_chat", "azure_openai_embedding"}
_OPENAI_TYPES = {"openai_chat", "openai_embedding", "chat", "embedding"}
_MANAGED_IDENTITY = "azure_managed_identity"
# Index-time sections: graphroute reads the index they built, not these settings.
_INDEX_TIME = {"input", "input_storage", "chunks", "chunking", "output", "output_storage", "update_index_output",
               "cache", "reporting", "vector_store", "embed_text", "extract_graph", "summarize_descriptions",
               "extract_graph_nlp", "prune_graph", "cluster_graph", "extract_claims", "community_reports",
               "embed_graph", "umap", "snapshots", "workflows", "root_dir", "encoding_model", "async_mode",
               "parallelization", "skip_workflows", "embeddings", "llm", "storage", "entity_extraction",
               "claim_extraction", "claim_extract", "chunking_strategy", "bt_graphrag"}


@dataclass
class ProjectSettings:
    """What a GraphRAG project's settings give graphroute."""

    path: Path
    layer: dict[str, object]  # graphroute.toml-shaped: {"models": {...}, "local": {...}, ...}
    unused: list[str] = field(default_factory=list)  # "local_search.foo", "models.default_chat_model.bar"
    notes: list[str] = field(default_factory=list)  # how a setting was read, when it is not one to one
    index_time: list[str] = field(default_factory=list)  # index-time sections present (not read)

    @property
    def root(self) -> Path:
        return self.path.parent


def find_settings(index: str | Path) -> Path | None:
    """The settings file of the GraphRAG project holding the index folder `index` (its parent folder)."""
    text = str(index)
    if "://" in text and not text.startswith("file://"):
        return None  # a remote index has no project folder here
    folder = Path(os.path.abspath(Path(text.removeprefix("file://")).expanduser()))
    parent = folder.parent  # the folder as named: an output folder linked from elsewhere is still the project's
    for name in SETTINGS_FILES:
        candidate = parent / name
        if candidate.is_file():
            return candidate
    return None


def read_settings(path: str | Path, env: Mapping[str, str], *, allow_prompt_outside: bool = False) -> ProjectSettings:
    """Read the settings file into graphroute's configuration layer. ConfigError names the file and key.
    Its prompt files must be inside its folder unless `allow_prompt_outside`."""
    file = Path(path)
    data = _load(file)
    values = _Values(file, {**_dotenv(file.parent / ".env"), **env})
    settings = ProjectSettings(path=file, layer={})
    _read_sections(data, values, settings, allow_prompt_outside)
    _read_models(data, values, settings)
    known = {"models", "completion_models", "embedding_models", *SECTION_KEYS}
    settings.index_time = sorted(k for k in data if k in _INDEX_TIME)
    settings.unused.extend(sorted(k for k in data if k not in known and k not in _INDEX_TIME and data[k] is not None))
    return settings


# ---- reading the file -------------------------------------------------------------------------------------


def _load(file: Path) -> dict[str, object]:
    try:
        text = file.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(f"{file}: settings file not found", key=str(file)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read the settings file ({exc})", key=str(file)) from None
    try:
        data = json.loads(text) if file.suffix == ".json" else load_yaml(text)
    except ValueError as exc:
        raise ConfigError(f"{file}: not valid JSON: {capped(str(exc))}", key=str(file)) from None
    except AliasBombError as exc:
        raise ConfigError(f"{file}: {exc}", key=str(file)) from None
    except Exception as exc:  # yaml.YAMLError and its subclasses carry the line and column
        raise ConfigError(f"{file}: not valid YAML: {capped(redact(str(exc)))}", key=str(file)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: the settings must be a mapping of sections", key=str(file))
    return data


class AliasBombError(Exception):
    """The YAML's aliases expand to more values than any settings file holds."""


# A settings file holds a few hundred values; YAML aliases (`*name`) repeat a node without copying it, so a few
# hundred bytes can expand to billions of values (an "alias bomb") that every later step would walk or print.
MAX_YAML_VALUES = 100_000


def load_yaml(text: str) -> object:
    """`yaml.safe_load`, refused (AliasBombError) when its aliases expand past `MAX_YAML_VALUES` values."""
    import yaml

    data = yaml.safe_load(text)
    count, stack = 0, [data]
    while stack:  # every value as a reader of the expanded document meets it (a shared node once per use)
        item = stack.pop()
        count += 1
        if count > MAX_YAML_VALUES:
            raise AliasBombError(f"more than {MAX_YAML_VALUES:,} values once its YAML aliases are expanded; "
                                 "a settings file holds far fewer (an alias bomb?)")
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return data


def _dotenv(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(path).items() if v is not None}


class _Values:
    """Values of the file with `${VAR}` resolved on use, errors naming the file and the dotted key."""

    def __init__(self, file: Path, variables: Mapping[str, str]) -> None:
        self.file = file
        self.variables = variables

    def error(self, key: str, message: str) -> ConfigError:
        return ConfigError(redact(f"{self.file.name}: {key}: {message}"), key=key)

    def resolve(self, key: str, value: object) -> object:
        if not isinstance(value, str) or "$" not in value:
            return value
        template = string.Template(value)
        for name in template.get_identifiers():  # a variable may hold a key, whatever key it is read for
            remember_secret(self.variables.get(name))
        try:
            return template.substitute(self.variables)
        except KeyError as exc:
            raise self.error(key, f"${{{exc.args[0]}}} is not set (in the environment or the project's .env)") from None
        except ValueError:
            raise self.error(key, "a '$' that names no variable (write $$ for a literal '$')") from None


# ---- search sections --------------------------------------------------------------------------------------


def _read_sections(data: Mapping[str, object], values: _Values, settings: ProjectSettings,
                   allow_prompt_outside: bool) -> None:
    for section, (ours, keys) in SECTION_KEYS.items():
        raw = data.get(section)
        if raw is None:
            continue
        if not isinstance(raw, Mapping):
            raise values.error(section, "must be a mapping")
        target = _table(settings.layer, ours)
        for key, value in raw.items():
            dotted = f"{section}.{key}"
            if key in _MODEL_ID_KEYS:
                continue  # read with the models
            if key not in keys:
                if value is not None:
                    settings.unused.append(dotted)
                continue
            value = values.resolve(dotted, value)
            if value is None:
                continue
            stage = _PROMPT_STAGES.get((section, key))
            if stage is not None:
                if not isinstance(value, str):
                    raise values.error(dotted, "must be a prompt file path")
                try:  # checked here, so an error names the settings key the user wrote
                    file = inside(settings.root, value, allow_outside=allow_prompt_outside)
                    PromptTemplate.from_file(stage, file)
                except (PromptError, PromptFileError) as exc:
                    raise values.error(dotted, str(exc)) from None
                value = {"file": str(file)}
            _set(target, keys[key], value)


def _table(parent: dict[str, object], key: str) -> dict[str, object]:
    """The table `parent[key]`, made empty when absent (the layer holds only tables made here)."""
    table = parent.setdefault(key, {})
    assert isinstance(table, dict), f"{key} is a setting, not a table"
    return table


def _set(table: dict[str, object], dotted: str, value: object) -> None:
    *parents, last = dotted.split(".")
    for part in parents:
        table = _table(table, part)
    table[last] = value


# ---- models -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ModelRef:
    id: str
    key: str  # the dotted key of its entry, e.g. "models.default_chat_model"
    entry: Mapping[str, object]


def _model_tables(data: Mapping[str, object], values: _Values) -> tuple[dict[str, _ModelRef], dict[str, _ModelRef]]:
    """(chat models, embedding models) by id: GraphRAG 3.x's completion_models / embedding_models, and 2.x's
    models (where either kind may be looked up)."""
    chat: dict[str, _ModelRef] = {}
    embedding: dict[str, _ModelRef] = {}
    for section, targets in (("models", (chat, embedding)), ("completion_models", (chat,)),
                             ("embedding_models", (embedding,))):
        table = data.get(section)
        if table is None:
            continue
        if not isinstance(table, Mapping):
            raise values.error(section, "must be a mapping of model ids")
        for model_id, entry in table.items():
            if not isinstance(entry, Mapping):
                raise values.error(f"{section}.{model_id}", "must be a mapping")
            for target in targets:
                target.setdefault(str(model_id), _ModelRef(str(model_id), f"{section}.{model_id}", entry))
    return chat, embedding


def _section_model(data: Mapping[str, object], section: str, kind: str, table: dict[str, _ModelRef],
                   values: _Values) -> _ModelRef | None:
    raw = data.get(section)
    raw = raw if isinstance(raw, Mapping) else {}
    defaults: tuple[str, ...]
    if kind == "chat":
        given = raw.get("completion_model_id", raw.get("chat_model_id"))
        defaults = ("default_completion_model", "default_chat_model")
    else:
        given = raw.get("embedding_model_id")
        defaults = ("default_embedding_model",)
    if given is not None:
        ref = table.get(str(given))
        if ref is None:
            key = "completion_model_id" if "completion_model_id" in raw else f"{kind}_model_id"
            if kind == "embedding":
                key = "embedding_model_id"
            raise values.error(f"{section}.{key}", f"no model {given!r} in the settings' models "
                               f"(known: {', '.join(sorted(table)) or 'none'})")
        return ref
    return next((table[d] for d in defaults if d in table), None)


def _read_models(data: Mapping[str, object], values: _Values, settings: ProjectSettings) -> None:
    chat_models, embedding_models = _model_tables(data, values)
    chat = {s: _section_model(data, s, "chat", chat_models, values) for s in SECTION_KEYS}
    embed = {s: _section_model(data, s, "embedding", embedding_models, values)
             for s in ("local_search", "drift_search", "basic_search")}
    models: dict[str, object] = {}
    used: dict[str, _ModelRef] = {}
    main = chat["local_search"] or next((r for r in chat.values() if r is not None), None)
    if main is not None:
        models["chat"] = _endpoint(main, values, settings, "chat")
        used[main.key] = main
    stages: dict[str, dict[str, object]] = {}
    for section, stage_names in (("global_search", ("map", "rate", "reduce")), ("drift_search", ("primer", "followups",
                                                                                                  "reduce"))):
        ref = chat[section]
        if ref is None or main is None or ref.id == main.id:
            continue
        used[ref.key] = ref
        override = _endpoint(ref, values, settings, "chat")
        for stage in stage_names:
            if stage in stages:  # the reduce stage serves both; global search's model keeps it
                settings.notes.append(f"{section}: the reduce stage keeps global_search's model "
                                      f"({stages[stage]['model']}); {ref.id} answers DRIFT's primer and follow-ups")
                continue
            stages[stage] = override
    if stages:
        models["stages"] = stages
    basic = chat["basic_search"]
    if basic is not None and main is not None and basic.id != main.id:
        settings.notes.append(f"basic_search: basic search answers with local search's model "
                              f"({main.id}); graphroute has one answer model")
    embedding = embed["local_search"] or embed["drift_search"] or embed["basic_search"]
    if embedding is not None:
        models["embedding"] = _endpoint(embedding, values, settings, "embedding")
        used[embedding.key] = embedding
        for section, ref in embed.items():
            if ref is not None and ref.id != embedding.id:
                settings.notes.append(f"{section}.embedding_model_id: one embedding model serves every engine "
                                      f"({embedding.id})")
    for section, engines in _TEMPERATURE_SECTIONS.items():
        ref = main if section == "basic_search" else chat.get(section)  # basic answers with the main model
        if ref is None or ref.entry.get("temperature") is None:
            continue
        key = f"{ref.key}.temperature"
        temperature = _number(values, key, values.resolve(key, ref.entry["temperature"]), float)
        for engine in engines:
            _table(settings.layer, engine).setdefault("temperature", temperature)
    for ref in used.values():
        for key, value in ref.entry.items():
            if key not in _MODEL_KEYS and value is not None:
                settings.unused.append(f"{ref.key}.{key}")
        retry = ref.entry.get("retry")
        if isinstance(retry, Mapping):
            settings.unused.extend(f"{ref.key}.retry.{k}" for k in retry if k != "max_retries")
    if models:
        settings.layer["models"] = models


def _provider(ref: _ModelRef, values: _Values) -> str:
    entry = ref.entry
    kind = str(values.resolve(f"{ref.key}.type", entry.get("type") or "")).lower()
    provider = str(values.resolve(f"{ref.key}.model_provider", entry.get("model_provider") or "")).lower()
    if kind in _AZURE_TYPES or provider in ("azure", "azure_openai"):
        return "azure"
    if provider in ("", "openai") and (kind in _OPENAI_TYPES or not kind):
        return "openai"
    if entry.get("api_base"):  # another provider behind an OpenAI-compatible server (vLLM, Ollama, a proxy)
        return "openai"
    # the value as written (its case kept), so a secret a ${VAR} put there is masked in the message
    written = values.resolve(f"{ref.key}.{'model_provider' if provider else 'type'}",
                             entry.get("model_provider") if provider else entry.get("type"))
    what = f"{'model_provider' if provider else 'type'} {short_repr(written)}"
    raise values.error(f"{ref.key}.{'model_provider' if provider else 'type'}",
                       f"{what} is not an OpenAI-compatible endpoint; graphroute calls OpenAI and Azure OpenAI "
                       "APIs (give api_base of an OpenAI-compatible server, or configure [models] in graphroute.toml)")


def _endpoint(ref: _ModelRef, values: _Values, settings: ProjectSettings, kind: str) -> dict[str, object]:
    """A model entry as a graphroute `[models.chat]`/`[models.embedding]` table."""
    entry = ref.entry

    def get(key: str) -> object:
        return values.resolve(f"{ref.key}.{key}", entry.get(key))

    auth = get("auth_type") or get("auth_method")
    if auth == _MANAGED_IDENTITY:
        raise values.error(f"{ref.key}.{'auth_type' if 'auth_type' in entry else 'auth_method'}",
                           "azure_managed_identity is not supported; give an api_key")
    if not get("model"):
        raise values.error(f"{ref.key}.model", "the model name is missing")
    table: dict[str, object] = {"provider": _provider(ref, values), "model": str(get("model"))}
    optional = {"base_url": get("api_base"), "api_key": get("api_key"), "api_version": get("api_version"),
                "azure_deployment": get("deployment_name") or get("azure_deployment_name")}
    table.update({k: str(v) for k, v in optional.items() if v not in (None, "")})
    timeout = get("request_timeout")
    if timeout is not None:
        table["timeout_s"] = _number(values, f"{ref.key}.request_timeout", timeout, float)
    retry = entry.get("retry")
    retries = retry.get("max_retries") if isinstance(retry, Mapping) else get("max_retries")
    if retries is not None:
        count = _number(values, f"{ref.key}.max_retries", retries, int)
        if count >= 0:  # GraphRAG's -1 means "as the server says"; graphroute's default retries then apply
            table["max_retries"] = count
    concurrency = get("concurrent_requests")
    if concurrency is not None:
        table["concurrency"] = _number(values, f"{ref.key}.concurrent_requests", concurrency, int)
    if kind == "chat" and get("model_supports_json") is False:
        table["json_mode"] = "off"
    return table


def _number(values: _Values, key: str, value: object, kind: type[int] | type[float]) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise values.error(key, f"must be a number (got {short_repr(value)})")
    try:
        number = kind(float(value)) if kind is int else kind(value)
    except (ValueError, OverflowError):
        raise values.error(key, f"must be a number (got {short_repr(value)})") from None
    return number

