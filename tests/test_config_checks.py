"""graphroute.toml values that would defeat themselves, and non-booleans, are errors naming the key."""

from __future__ import annotations

import pytest

from engines.config import ConfigError, config_from_mapping


@pytest.mark.parametrize(
    ("data", "key", "message"),
    [
        ({"global_search": {"prerank": "yes"}}, "global_search.prerank", "valid boolean"),
        ({"router": {"escalate_on_empty": 1}}, "router.escalate_on_empty", "valid boolean"),
        ({"questions": {"n": "5"}}, "questions.n", "valid integer"),
        ({"local": {"max_context_tokens": 0}}, "local.max_context_tokens", ">= 100"),
        ({"local": {"top_k_mapped_entities": 0}}, "local.top_k_mapped_entities", ">= 1"),
        ({"global_search": {"data_max_tokens": 50}}, "global_search.data_max_tokens", ">= 128"),
        ({"drift": {"reduce_max_tokens": 100}}, "drift.reduce_max_tokens", ">= 128"),
        ({"drift": {"local_search": {"top_k_mapped_entities": 0}}}, "drift.local_search.top_k_mapped_entities", ">= 1"),
        ({"drift": {"local_search_max_context_tokens": 0}}, "drift.local_search.max_context_tokens", ">= 100"),
        ({"questions": {"max_context_tokens": 0}}, "questions.local_search.max_context_tokens", ">= 100"),
    ],
)
def test_bad_values_name_their_key(data: dict, key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        config_from_mapping(data, {})
    assert err.value.key == key
    assert f"graphroute.toml: {key}:" in str(err.value)


def test_drift_and_questions_use_the_local_context_settings_with_their_own_defaults() -> None:
    default = config_from_mapping({}, {})
    assert default.drift.local_context().text_unit_prop == 0.6
    assert default.drift.local_context().community_prop == 0.1
    assert default.questions.local_context().max_context_tokens == 8_000
    cfg = config_from_mapping(
        {"drift": {"local_search_max_context_tokens": 5000, "local_search": {"top_k_relationships": 3}},
         "questions": {"max_context_tokens": 3000, "local_search": {"text_unit_strategy": "hybrid"}}}, {})
    assert cfg.drift.local_search.max_context_tokens == 5000  # the older flat spelling still works
    assert cfg.drift.local_search.top_k_relationships == 3
    assert cfg.drift.local_search.text_unit_prop == 0.6  # DRIFT's default kept when another key is set
    assert cfg.questions.local_search.max_context_tokens == 3000
    assert cfg.questions.local_search.text_unit_strategy == "hybrid"


@pytest.mark.parametrize(
    ("kwargs", "key", "message"),
    [
        ({"chunk_size": 8}, "chunk_size", r"indexer: chunk_size: must be >= 16 \(got 8\)"),
        ({"chunk_size": 100, "chunk_overlap": 100}, "chunk_overlap", "must be smaller than chunk_size"),
        ({"claims": "yes"}, "claims", "valid boolean"),
        ({"model_concurrency": 0}, "model_concurrency", ">= 1"),
        ({"chunk_sise": 300}, "chunk_sise", "unknown setting"),
    ],
)
def test_indexer_settings_are_checked_like_the_rest(kwargs: dict, key: str, message: str) -> None:
    from indexer import IndexerConfig, IndexerError

    with pytest.raises(IndexerError, match=message) as err:
        IndexerConfig(**kwargs)
    assert err.value.key == key


def test_environment_is_read_by_pydantic_settings_with_precedence_and_named_errors() -> None:
    from engines.models.env_settings import EnvSettings
    from engines.models.errors import ModelConfigError

    env = EnvSettings.read({"OPENAI_API_KEY": "low", "GRAPHROUTE_API_KEY": "high", "GRAPHROUTE_TIMEOUT_S": "12",
                            "GRAPHROUTE_CHAT_MODEL": "", "UNRELATED": "x"})
    assert env.api_key == "high" and env.timeout_s == 12.0
    assert env.chat_model is None  # empty means unset
    with pytest.raises(ModelConfigError, match=r"environment: GRAPHROUTE_TOTAL_DEADLINE_S: must be a number") as err:
        EnvSettings.read({"GRAPHROUTE_TOTAL_DEADLINE_S": "soon"})
    assert err.value.key == "GRAPHROUTE_TOTAL_DEADLINE_S"
