"""Model configuration from graphroute.toml + environment, its error messages, and prices."""

from __future__ import annotations

import warnings

import pytest

from engines.models.config import (
    OFFLINE_CHAT_MODEL,
    OFFLINE_EMBEDDING_MODEL,
    PLACEHOLDER_API_KEY,
    ModelPrice,
    PriceTable,
    load_models_config,
    models_config_from_mapping,
)
from engines.models.errors import ModelConfigError
from engines.models.factory import Models


def write(tmp_path, text: str):
    path = tmp_path / "graphroute.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_no_key_anywhere_means_offline():
    config = load_models_config(toml_path=None, env={})
    assert config.offline and config.chat.provider == "offline" and config.chat.model == OFFLINE_CHAT_MODEL
    assert config.embedding.offline and config.embedding.model == OFFLINE_EMBEDDING_MODEL
    assert Models(config).describe().startswith("offline extractive model (no API key configured)")


def test_env_key_selects_openai_with_defaults():
    config = load_models_config(env={"OPENAI_API_KEY": "sk-abc"})
    assert config.chat.provider == "openai" and config.chat.model == "gpt-4.1-mini"
    assert config.chat.api_key is not None and config.chat.api_key.get_secret_value() == "sk-abc"
    assert "sk-abc" not in repr(config)  # secrets never print
    assert config.embedding.provider == "openai" and config.embedding.model == "text-embedding-3-small"


def test_base_url_alone_selects_openai_compatible_with_placeholder_key():
    config = load_models_config(env={"OPENAI_BASE_URL": "http://localhost:11434/v1", "GRAPHROUTE_CHAT_MODEL": "qwen3"})
    assert config.chat.provider == "openai" and config.chat.model == "qwen3"
    assert config.chat.api_key.get_secret_value() == PLACEHOLDER_API_KEY
    assert config.embedding.base_url == "http://localhost:11434/v1"


def test_toml_tables_and_env_precedence(tmp_path):
    path = write(tmp_path, """
[models.chat]
provider = "openai"
api_key = "from-file"
model = "gpt-4.1"
timeout_s = 30
concurrency = 4
json_mode = "off"

[models.embedding]
model = "text-embedding-3-large"
dimensions = 256

[models.stages.map]
model = "gpt-4.1-nano"

[models.stages.rate]
model = "gpt-4.1-nano"
concurrency = 32

[models.prices."my-local-model"]
input = 0.5
output = 1.0

[models.cache]
enabled = true
path = "calls.sqlite"
""")
    config = load_models_config(path, env={"GRAPHROUTE_CHAT_MODEL": "gpt-4o", "GRAPHROUTE_TIMEOUT_S": "12"})
    assert config.chat.model == "gpt-4o" and config.chat.timeout_s == 12  # env wins over the file
    assert config.chat.api_key.get_secret_value() == "from-file" and config.chat.json_mode == "off"
    assert config.embedding.model == "text-embedding-3-large" and config.embedding.dimensions == 256
    assert config.embedding.api_key.get_secret_value() == "from-file"  # inherited from chat
    assert config.endpoint_for("map").model == "gpt-4.1-nano" and config.endpoint_for("map").timeout_s == 12
    assert config.endpoint_for("rate").concurrency == 32 and config.endpoint_for("answer").model == "gpt-4o"
    assert config.prices.lookup("my-local-model") == ModelPrice(input=0.5, output=1.0)
    assert config.prices.lookup("gpt-4.1") is not None  # defaults kept alongside user prices
    assert config.cache.enabled and str(config.cache.path) == "calls.sqlite"


def test_per_stage_env_override():
    config = load_models_config(env={"OPENAI_API_KEY": "k", "GRAPHROUTE_MAP_MODEL": "gpt-4.1-nano"})
    models = Models(config)
    assert models.chat("map").name == "gpt-4.1-nano" and models.chat("answer").name == "gpt-4.1-mini"
    assert models.chat("reduce") is models.chat("answer")  # same endpoint, same instance
    assert "map: gpt-4.1-nano" in models.describe()


@pytest.mark.parametrize(
    ("toml", "env", "message"),
    [
        ('[models.chat]\nprovider = "offline"\ntimeout_s = 0', {}, "graphroute.toml: models.chat.timeout_s: must be > 0"),
        ('[models.chat]\nprovider = "offline"\nconcurency = 3', {}, "models.chat.concurency: unknown setting"),
        ('[models.chat]\nprovider = "offline"\njson_mode = "yes"', {}, "models.chat.json_mode: must be one of"),
        ('[models.chat]\nprovider = "gemini"', {}, "models.chat.provider: must be one of"),
        ('[models.chat]\nprovider = "openai"', {}, "models.chat.api_key: provider 'openai' needs an API key"),
        ('[models.stages.mapp]\nmodel = "x"', {}, "models.stages.mapp: unknown stage"),
        ('[models.prices.x]\ninput = -1', {}, "models.prices.x.input: must be >= 0"),
        ('[models.chat]\nprovider = "azure"\napi_key = "k"', {}, "models.chat.api_version: provider 'azure'"),
        ("[models]\nchat = 3", {}, "models.chat: must be a table"),
        ("", {"GRAPHROUTE_CONCURRENCY": "many"}, "GRAPHROUTE_CONCURRENCY: must be a number"),
        ("", {"GRAPHROUTE_MAX_RETRIES": "1.5"}, "GRAPHROUTE_MAX_RETRIES: must be a whole number"),
    ],
)
def test_errors_name_the_key(tmp_path, toml, env, message):
    with pytest.raises(ModelConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_models_config(write(tmp_path, toml), env=env)


def test_error_carries_dotted_key(tmp_path):
    with pytest.raises(ModelConfigError) as info:
        load_models_config(write(tmp_path, "[models.embedding]\nprovider = 'offline'\nbatch_size = 0"), env={})
    assert info.value.key == "models.embedding.batch_size"


def test_bad_toml_and_missing_file(tmp_path):
    with pytest.raises(ModelConfigError, match="not valid TOML"):
        load_models_config(write(tmp_path, "[models\n"), env={})
    with pytest.raises(ModelConfigError, match="config file not found"):
        load_models_config(tmp_path / "nope.toml", env={})


def test_graphroute_config_env_var_names_the_file(tmp_path):
    path = write(tmp_path, '[models.chat]\nprovider = "openai"\napi_key = "k"\nmodel = "gpt-4.1-nano"')
    config = load_models_config(env={"GRAPHROUTE_CONFIG": str(path)})
    assert config.chat.model == "gpt-4.1-nano"


def test_azure_from_env():
    config = load_models_config(env={"GRAPHROUTE_PROVIDER": "azure", "AZURE_OPENAI_API_KEY": "az",
                                     "AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com",
                                     "OPENAI_API_VERSION": "2024-10-21"})
    assert config.chat.provider == "azure" and config.chat.api_version == "2024-10-21"
    assert config.chat.base_url == "https://r.openai.azure.com"


def test_environment_rules_live_in_the_settings_class():
    from engines.models.env_settings import EnvSettings

    env = {"GRAPHROUTE_PROVIDER": " Azure ", "AZURE_OPENAI_API_KEY": "az", "OPENAI_API_KEY": "oa",
           "AZURE_OPENAI_ENDPOINT": "https://r.openai.azure.com", "OPENAI_BASE_URL": "https://proxy.example/v1",
           "OPENAI_API_VERSION": "2024-10-21", "GRAPHROUTE_MAX_RETRIES": "3", "GRAPHROUTE_JSON_MODE": "PROMPT"}
    table = EnvSettings.read(env).chat_table()
    # Azure's key wins over OpenAI's; a base URL variable wins over the Azure endpoint; whole numbers are ints
    assert table == {"provider": "azure", "api_key": "az", "base_url": "https://proxy.example/v1",
                     "api_version": "2024-10-21", "max_retries": 3, "json_mode": "prompt"}
    openai_only = EnvSettings.read({"OPENAI_API_KEY": "oa", "AZURE_OPENAI_API_KEY": "az",
                                    "OPENAI_API_VERSION": "2024-10-21"}).chat_table()
    assert openai_only == {"api_key": "oa"}  # Azure variables count only with provider "azure"
    with pytest.raises(ModelConfigError, match=r"environment: GRAPHROUTE_CONCURRENCY: must be a whole number \(got '2.5'\)"):
        EnvSettings.read({"GRAPHROUTE_CONCURRENCY": "2.5"})


def test_cache_env_enables_cache_with_path(tmp_path):
    config = load_models_config(env={"GRAPHROUTE_MODEL_CACHE": str(tmp_path / "c.sqlite")})
    assert config.cache.enabled and config.cache.path == tmp_path / "c.sqlite"
    config = load_models_config(write(tmp_path, "[models.cache]\nenabled = true"), env={"GRAPHROUTE_CACHE_DIR": str(tmp_path)})
    assert config.cache.path == tmp_path / "model_calls.sqlite"


# ---------------------------------------------------------------------------- prices


def test_price_computation_and_dated_model_names():
    prices = PriceTable()
    assert prices.cost("gpt-4.1-mini", 1_000_000, 1_000_000) == pytest.approx(0.40 + 1.60)
    assert prices.cost("gpt-4.1", 2_000, 500) == pytest.approx((2_000 * 2.00 + 500 * 8.00) / 1e6)
    assert prices.cost("gpt-4.1-mini-2025-04-14", 1_000_000) == pytest.approx(0.40)  # longest prefix: -mini
    assert prices.cost("openai/gpt-4o-mini", 1_000_000, 0) == pytest.approx(0.15)
    assert prices.cost("text-embedding-3-large", 1_000_000) == pytest.approx(0.13)
    assert prices.cost(OFFLINE_CHAT_MODEL, 10_000, 10_000) == 0.0


def test_unknown_model_costs_zero_and_is_flagged_once():
    prices = PriceTable()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert prices.cost("llama3:8b", 1000, 1000) == 0.0
        assert prices.cost("llama3:8b", 1000, 1000) == 0.0
    assert "llama3:8b" in prices.unknown_models and not prices.is_known("llama3:8b")
    assert len([w for w in caught if "llama3:8b" in str(w.message)]) == 1


def test_user_price_overrides_default():
    config = models_config_from_mapping({"prices": {"gpt-4.1": {"input": 1.0, "output": 2.0}}}, env={})
    assert config.prices.cost("gpt-4.1", 1_000_000, 1_000_000) == pytest.approx(3.0)


def test_bad_env_value_names_the_variable_not_the_file(tmp_path):
    with pytest.raises(ModelConfigError, match=r"environment GRAPHROUTE_TIMEOUT_S: models\.chat\.timeout_s: must be > 0"):
        load_models_config(write(tmp_path, ""), env={"GRAPHROUTE_TIMEOUT_S": "0"})
    with pytest.raises(ModelConfigError, match=r"environment GRAPHROUTE_JSON_MODE: .*must be one of"):
        load_models_config(env={"GRAPHROUTE_JSON_MODE": "always"})
