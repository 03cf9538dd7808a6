"""A GraphRAG project folder (settings.yaml, .env, prompts/, output/) answers with its own models and prompts:
the settings' chat model and key reach the model server, the user's prompt is sent with its slots filled,
graphroute.toml and the environment win over the settings, and keys graphroute does not use are named."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from engines.config import ConfigError
from engines.config_layers import resolve_config
from engines.graphrag_settings import find_settings, read_settings

SETTINGS = """\
models:
  default_chat_model:
    type: openai_chat
    model_provider: openai
    auth_type: api_key
    api_key: ${GRAPHRAG_API_KEY}
    model: gpt-4o-mini
    api_base: ${MODEL_SERVER}
    model_supports_json: true
    concurrent_requests: 7
    async_mode: threaded
    retry_strategy: native
    max_retries: 0
    tokens_per_minute: null
  default_embedding_model:
    type: openai_embedding
    model_provider: openai
    auth_type: api_key
    api_key: ${GRAPHRAG_API_KEY}
    model: text-embedding-3-large
    api_base: ${MODEL_SERVER}
input:
  storage:
    type: file
    base_dir: input
chunks:
  size: 1200
extract_graph:
  model_id: default_chat_model
  prompt: prompts/extract_graph.txt
local_search:
  chat_model_id: default_chat_model
  embedding_model_id: default_embedding_model
  prompt: prompts/local_search_system_prompt.txt
  top_k_entities: 7
  text_unit_prop: 0.5
  community_prop: 0.15
global_search:
  chat_model_id: default_chat_model
  map_prompt: prompts/global_search_map_system_prompt.txt
  dynamic_search_use_summary: false
"""

LOCAL_PROMPT = """---Role---
You are the project's analyst. PROJECT PROMPT.

---Target response length and format---
{response_type}

---Data tables---
{context_data}

Answer in {response_type}.
"""

MAP_PROMPT = """---Role---
Key points as JSON: {{"points": [{{"description": "...", "score": 50}}]}}, at most {max_length} words.
{context_data}
"""


@pytest.fixture
def project(tmp_path: Path, dulce_path: Path) -> Path:
    """A GraphRAG project whose output folder is the GraphRAG-written Operation Dulce index."""
    root = tmp_path / "project"
    (root / "prompts").mkdir(parents=True)
    (root / "output").symlink_to(dulce_path, target_is_directory=True)
    (root / "settings.yaml").write_text(SETTINGS, encoding="utf-8")
    (root / ".env").write_text("GRAPHRAG_API_KEY=sk-project-key\n", encoding="utf-8")
    (root / "prompts" / "local_search_system_prompt.txt").write_text(LOCAL_PROMPT, encoding="utf-8")
    (root / "prompts" / "global_search_map_system_prompt.txt").write_text(MAP_PROMPT, encoding="utf-8")
    return root


def test_the_project_answers_with_its_model_key_and_prompt(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from router.cli import main
    from testing.model_server import LoopbackServer

    reply = "Alex Mercer is an agent of Paranormal Military Squad [Data: Entities (0)]."
    with LoopbackServer(embedding_dim=3072) as server:
        server.add_rule(None, system=r"PROJECT PROMPT", reply=reply)
        monkeypatch.setenv("MODEL_SERVER", server.base_url)
        monkeypatch.chdir(project.parent)  # no graphroute.toml here
        code = main(["ask", "Who is Alex Mercer?", "--index", str(project / "output"), "--mode", "local", "--json"])
        out, err = capsys.readouterr()
        chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
        embeds = [r for r in server.requests if r.path.endswith("/embeddings")]
    assert code == 0, err
    answer = json.loads(out)
    assert answer["text"] == reply and answer["model"] == "gpt-4o-mini" and not answer["offline"]
    assert len(chats) == 1 and chats[0].body["model"] == "gpt-4o-mini"
    assert chats[0].headers.get("authorization") == "Bearer sk-project-key"  # from the project's .env
    assert embeds and all(r.body["model"] == "text-embedding-3-large" for r in embeds)
    system = chats[0].body["messages"][0]["content"]
    assert system.startswith("---Role---\nYou are the project's analyst. PROJECT PROMPT.")
    assert "{context_data}" not in system and "{response_type}" not in system
    assert system.count("a concise answer of at most 8 key points") == 2  # --length medium, both slots
    assert "-----Entities-----" in system and "ALEX MERCER" in system
    assert "settings.yaml: 3 settings graphroute does not use" in err  # named once, on stderr


def test_settings_values_and_their_sources(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODEL_SERVER", "http://127.0.0.1:9/v1")
    resolved = resolve_config(None, index=project / "output", env={"MODEL_SERVER": "http://127.0.0.1:9/v1"})
    config = resolved.config
    assert config.models.chat.model == "gpt-4o-mini" and config.models.chat.base_url == "http://127.0.0.1:9/v1"
    assert config.models.chat.api_key is not None and config.models.chat.api_key.get_secret_value() == "sk-project-key"
    assert config.models.chat.concurrency == 7 and config.models.chat.max_retries == 0
    assert config.models.embedding.model == "text-embedding-3-large"
    assert (config.local.top_k_mapped_entities, config.local.text_unit_prop, config.local.community_prop) == (7, 0.5, 0.15)
    assert config.local.prompt is not None
    assert config.local.prompt.source == str(project / "prompts" / "local_search_system_prompt.txt")
    assert config.global_search.map_prompt is not None and config.drift.followup_prompt is None
    assert resolved.source_of("local.top_k_mapped_entities") == "settings.yaml"
    assert resolved.source_of("models.chat.model") == "settings.yaml"
    assert resolved.source_of("local.max_context_tokens") == "default"
    assert resolved.settings is not None
    assert resolved.settings.unused == [
        "global_search.dynamic_search_use_summary",
        "models.default_chat_model.async_mode",
        "models.default_chat_model.retry_strategy",
    ]  # tokens_per_minute is null: nothing set, nothing to report
    assert resolved.settings.index_time == ["chunks", "extract_graph", "input"]


def test_graphroute_toml_and_the_environment_win_over_the_settings(project: Path, tmp_path: Path) -> None:
    toml = tmp_path / "graphroute.toml"
    toml.write_text("[local]\ntop_k_mapped_entities = 3\n", encoding="utf-8")
    env = {"MODEL_SERVER": "http://127.0.0.1:9/v1", "GRAPHROUTE_CHAT_MODEL": "gpt-4.1-nano"}
    resolved = resolve_config(toml, index=project / "output", env=env)
    assert resolved.config.local.top_k_mapped_entities == 3 and resolved.source_of("local.top_k_mapped_entities") \
        == "graphroute.toml"
    assert resolved.config.local.text_unit_prop == 0.5  # the settings still give what the toml leaves
    chat = resolved.config.models.chat
    assert chat.model == "gpt-4.1-nano" and chat.base_url == "http://127.0.0.1:9/v1"  # model only: endpoint kept
    assert resolved.source_of("models.chat.model") == "environment GRAPHROUTE_CHAT_MODEL"
    # an endpoint named in graphroute.toml replaces the settings' endpoint whole: no key or model of theirs
    toml.write_text('[models.chat]\nbase_url = "http://127.0.0.1:8/v1"\n', encoding="utf-8")
    chat = resolve_config(toml, index=project / "output", env={"MODEL_SERVER": "x"}).config.models.chat
    assert chat.base_url == "http://127.0.0.1:8/v1" and chat.model == "gpt-4.1-mini"
    assert chat.api_key is not None and chat.api_key.get_secret_value() == "not-needed"
    # and so does one named in the environment
    env = {"MODEL_SERVER": "x", "OPENAI_API_KEY": "sk-env"}
    assert resolve_config(None, index=project / "output", env=env).config.models.chat.base_url == "x"
    env = {"MODEL_SERVER": "x", "OPENAI_BASE_URL": "http://127.0.0.1:7/v1"}
    chat = resolve_config(None, index=project / "output", env=env).config.models.chat
    assert (chat.base_url, chat.model) == ("http://127.0.0.1:7/v1", "gpt-4.1-mini")
    assert resolve_config(None, index=project / "output", settings=False, env={}).config.models.offline


def test_settings_errors_name_the_file_and_key(project: Path) -> None:
    with pytest.raises(ConfigError, match=r"settings\.yaml: models\.default_chat_model\.api_base: \$\{MODEL_SERVER\} "
                                          r"is not set \(in the environment or the project's \.env\)"):
        resolve_config(None, index=project / "output", env={})
    (project / "prompts" / "local_search_system_prompt.txt").write_text("Answer as {response_type}.", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        resolve_config(None, index=project / "output", env={"MODEL_SERVER": "x"})
    assert str(err.value) == (
        f"settings.yaml: local_search.prompt: {project / 'prompts' / 'local_search_system_prompt.txt'}: the local "
        "search answer prompt has no {context_data} slot (required: {context_data}, {response_type})")
    (project / "settings.yaml").write_text("local_search: [1, 2]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"settings\.yaml: local_search: must be a mapping"):
        read_settings(project / "settings.yaml", {})
    (project / "settings.yaml").write_text("local_search:\n  top_k_entities: [\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"settings\.yaml: not valid YAML"):
        read_settings(project / "settings.yaml", {})


def test_graphrag_3_layout_azure_and_per_engine_models(tmp_path: Path) -> None:
    (tmp_path / "settings.yaml").write_text("""\
completion_models:
  default_completion_model:
    model_provider: azure
    model: gpt-4.1
    azure_deployment_name: answers
    api_base: https://example.openai.azure.com
    api_version: 2024-10-21
    auth_method: api_key
    api_key: $AZURE_KEY
    retry:
      type: exponential_backoff
      max_retries: 3
  cheap:
    model_provider: openai
    model: gpt-4.1-nano
    api_key: sk-cheap
    temperature: 0.3
embedding_models:
  default_embedding_model:
    model_provider: openai
    model: text-embedding-3-small
    api_key: sk-embed
local_search:
  completion_model_id: default_completion_model
global_search:
  completion_model_id: cheap
drift_search:
  completion_model_id: default_completion_model
  drift_k_followups: 4
  local_search_max_data_tokens: 6000
basic_search:
  completion_model_id: cheap
  k: 6
""", encoding="utf-8")
    project = read_settings(tmp_path / "settings.yaml", {"AZURE_KEY": "azure-secret"})
    chat = project.layer["models"]["chat"]
    assert chat == {"provider": "azure", "model": "gpt-4.1", "base_url": "https://example.openai.azure.com",
                    "api_key": "azure-secret", "api_version": "2024-10-21", "azure_deployment": "answers",
                    "max_retries": 3}
    stages = project.layer["models"]["stages"]
    assert set(stages) == {"map", "rate", "reduce"} and stages["map"]["model"] == "gpt-4.1-nano"
    assert project.layer["global_search"]["temperature"] == 0.3 and project.layer["basic"] == {"k": 6}
    assert project.layer["drift"] == {"k_followups": 4, "local_search": {"max_context_tokens": 6000}}
    assert project.notes == ["basic_search: basic search answers with local search's model "
                             "(default_completion_model); graphroute has one answer model"]
    assert project.unused == ["completion_models.default_completion_model.retry.type"]
    resolved = resolve_config(None, settings=tmp_path / "settings.yaml", env={"AZURE_KEY": "azure-secret"})
    assert resolved.config.models.endpoint_for("map").model == "gpt-4.1-nano"
    assert resolved.config.models.endpoint_for("answer").azure_deployment == "answers"
    assert resolved.config.models.embedding.model == "text-embedding-3-small"


@pytest.mark.parametrize(("entry", "problem"), [
    ("model_provider: anthropic\n    model: claude", r"models\.m\.model_provider: model_provider 'anthropic' is not "
                                                    r"an OpenAI-compatible endpoint"),
    ("type: azure_openai_chat\n    model: x\n    auth_type: azure_managed_identity",
     r"models\.m\.auth_type: azure_managed_identity is not supported"),
    ("type: openai_chat\n    api_key: k", r"models\.m\.model: the model name is missing"),
])
def test_model_entries_graphroute_cannot_call_are_refused(tmp_path: Path, entry: str, problem: str) -> None:
    (tmp_path / "settings.yaml").write_text(f"models:\n  m:\n    {entry}\nlocal_search:\n  chat_model_id: m\n",
                                            encoding="utf-8")
    with pytest.raises(ConfigError, match=problem):
        read_settings(tmp_path / "settings.yaml", {})
    (tmp_path / "settings.yaml").write_text("models: {}\nlocal_search:\n  chat_model_id: nope\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"local_search\.chat_model_id: no model 'nope'"):
        read_settings(tmp_path / "settings.yaml", {})


def test_router_from_index_reads_the_project_and_warns_once(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from router import Router
    from testing.model_server import LoopbackServer

    assert find_settings(project / "output") == project / "settings.yaml"
    with LoopbackServer(embedding_dim=3072) as server:
        monkeypatch.setenv("MODEL_SERVER", server.base_url)
        with pytest.warns(UserWarning, match=r"3 settings graphroute does not use: global_search\."):
            router = Router.from_index(project / "output")
        with router:
            assert router.config.models.chat.model == "gpt-4o-mini"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with Router.from_index(project / "output", settings=False) as offline:
                assert offline.models.offline


def test_config_show_prints_each_value_with_its_source(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from router.cli import main

    monkeypatch.setenv("MODEL_SERVER", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("GRAPHROUTE_TIMEOUT_S", "12")
    monkeypatch.chdir(project)
    assert main(["config", "--show", "--index", "output"]) == 0
    out = capsys.readouterr().out
    lines = {line.split(" = ")[0].strip(): line for line in out.splitlines() if " = " in line}
    assert lines["models.chat.model"].endswith("= gpt-4o-mini  (settings.yaml)")
    assert lines["models.chat.api_key"].endswith("= (set)  (settings.yaml)") and "sk-project-key" not in out
    assert lines["models.chat.timeout_s"].endswith("= 12.0  (environment GRAPHROUTE_TIMEOUT_S)")
    assert lines["local.top_k_mapped_entities"].endswith("= 7  (settings.yaml)")
    assert lines["local.prompt"].endswith(f"= {project / 'prompts' / 'local_search_system_prompt.txt'}  (settings.yaml)")
    assert lines["drift.k_followups"].endswith("= 7  (default)")
    assert "models.default_chat_model.async_mode" in out.split("not used")[1]
    assert main(["config", "--index", "output", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["sources"]["models.embedding.model"] == "settings.yaml"
    assert shown["settings"]["models.embedding.concurrency"] == 7 and shown["sources"]["models.embedding.concurrency"] \
        == "inferred"
    assert shown["unused_settings"][0] == "global_search.dynamic_search_use_summary"
    assert main(["config", "--index", "output", "--no-settings", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["settings"]["models.chat.provider"] == "offline"
