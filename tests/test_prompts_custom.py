"""Custom prompts: checked when loaded (missing or unknown slots name the file), filled without str.format,
used by every engine and stage, and answered by the offline model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engines import prompts
from engines.config import ConfigError, config_from_mapping
from engines.prompts import STAGES, PromptError, PromptTemplate

VALUES = {
    "context_data": "-----Sources-----\nid|text\n1|Scrooge is a miser {response_type} {x.__class__}",
    "response_type": "one paragraph",
    "citation_rules": prompts.CITATION_RULES,
    "report_data": "----Analyst 1----\nImportance Score: 80\nA point.",
    "max_length": "500",
    "general_knowledge": prompts.NO_GENERAL_KNOWLEDGE,
    "template": "# Report",
    "global_query": "Who is Scrooge?",
    "k_followups": "7",
    "question_count": "3",
    "history": "-----Conversation History-----\nturn|content\nuser|Who is Scrooge?",
}


@pytest.mark.parametrize("stage", sorted(prompts.BUILTIN))
def test_builtin_prompts_fill_exactly_as_str_format_did(stage: str) -> None:
    text = prompts.BUILTIN[stage]
    template = prompts.builtin(stage)
    values = {k: VALUES[k] for k in template.slots}
    assert template.fill(**values) == text.format(**values)


@pytest.mark.parametrize("stage", sorted(prompts.BUILTIN))
def test_a_prompt_filled_around_its_context_once_is_the_prompt_filled_whole(stage: str) -> None:
    # engines fill everything but the context when they are built; each question only joins its context in
    template = prompts.builtin(stage)
    values = {k: VALUES[k] for k in template.slots}
    for slot in template.slots:
        rest = {k: v for k, v in values.items() if k != slot}
        assert values[slot].join(template.around(slot, **rest)) == template.fill(**values)
    twice = PromptTemplate(stage="basic", text="{context_data} and again {context_data}, {response_type}")
    assert "X".join(twice.around("context_data", response_type="r")) == "X and again X, r"


def test_a_value_is_inserted_as_plain_text_never_parsed_again() -> None:
    filled = prompts.builtin("basic").fill(response_type="a list", context_data=VALUES["context_data"])
    assert "{response_type} {x.__class__}" in filled  # the context's braces stay as they were
    assert "Response type: a list" in filled


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_prompt_missing_context_data_is_refused_naming_the_file(tmp_path: Path) -> None:
    _write(tmp_path, "local.txt", "Answer in {response_type}. Use only what you know.")
    with pytest.raises(ConfigError) as err:
        config_from_mapping({"local": {"prompt": "local.txt"}}, {}, base_dir=tmp_path)
    message = str(err.value)
    assert message.startswith("graphroute.toml: local.prompt: ")
    assert f"{tmp_path / 'local.txt'}: the local search answer prompt has no {{context_data}} slot" in message
    assert err.value.key == "local.prompt"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{context_data} {response_type} {x.__class__}", r"line 1: {x.__class__} is not a slot"),
        ("{context_data} {response_type}\n{x[0]}", r"line 2: {x\[0\]} is not a slot"),
        ("{context_data!r} {response_type}", r"{context_data!r} is not a slot"),
        ("{context_data:>10} {response_type}", r"{context_data:>10} is not a slot"),
        ("{context_data} {response_type} {question}", r"unknown slot {question} in the local search answer prompt"),
        ('{context_data} {response_type} JSON: {"a": 1}', r"{\"a\": 1} is not a slot"),
        ("{context_data} {response_type} a } alone", r"line 1: a single '}'"),
        ("{context_data} {response_type} a { alone", r"line 1: a single '{'"),
    ],
)
def test_fields_that_are_not_plain_slots_are_refused(tmp_path: Path, text: str, problem: str) -> None:
    _write(tmp_path, "p.txt", text)
    with pytest.raises(ConfigError, match=problem):
        config_from_mapping({"local": {"prompt": "p.txt"}}, {}, base_dir=tmp_path)


def test_graphrag_prompt_files_load_with_their_slot_names(tmp_path: Path) -> None:
    """GraphRAG's own prompt files use {followups} in the DRIFT follow-up, {context_data} in the DRIFT reduce
    and JSON examples with doubled braces."""
    _write(tmp_path, "drift_local.txt", "---Goal---\n{response_type}\nOverall: {global_query}\nUp to {followups} "
           "follow-ups.\nJSON: {{'response': '', 'score': 0, 'follow_up_queries': []}}\n{context_data}")
    _write(tmp_path, "drift_reduce.txt", "Reports:\n{context_data}\nFormat: {response_type}")
    _write(tmp_path, "map.txt", 'Points: {{"points": [{{"description": "...", "score": 1}}]}}\n'
           "Limit {max_length} words.\n{context_data}")
    config = config_from_mapping({"drift": {"followup_prompt": "drift_local.txt", "reduce_prompt": "drift_reduce.txt"},
                                  "global_search": {"map_prompt": "map.txt"}}, {}, base_dir=tmp_path)
    followup = config.drift.followup_prompt
    assert followup is not None and followup.source == str(tmp_path / "drift_local.txt")
    filled = followup.fill(response_type="a list", global_query="Who?", followups="5", context_data="DATA",
                           k_followups="5")
    assert "Up to 5 follow-ups." in filled and "JSON: {'response': ''" in filled
    assert config.global_search.map_prompt is not None
    assert config.global_search.map_prompt.fill(context_data="T", max_length="9").startswith('Points: {"points"')


def test_inline_prompts_and_missing_files(tmp_path: Path) -> None:
    config = config_from_mapping({"basic": {"prompt": {"text": "Sources:\n{context_data}\nAs {response_type}."}}},
                                 {}, base_dir=tmp_path)
    assert config.basic.prompt is not None and config.basic.prompt.source == "inline text"
    with pytest.raises(ConfigError, match=r"basic\.prompt: inline text: unknown slot {foo}"):
        config_from_mapping({"basic": {"prompt": {"text": "{context_data} {response_type} {foo}"}}}, {})
    with pytest.raises(ConfigError, match=r"nope\.txt: prompt file not found"):
        config_from_mapping({"questions": {"prompt": "nope.txt"}}, {}, base_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"a prompt is a file path"):
        config_from_mapping({"questions": {"prompt": {"path": "x.txt"}}}, {}, base_dir=tmp_path)
    (tmp_path / "latin.txt").write_bytes("{context_data} {question_count} café".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin\.txt: the prompt file is not UTF-8 text"):
        config_from_mapping({"questions": {"prompt": "latin.txt"}}, {}, base_dir=tmp_path)


def test_a_template_of_another_stage_is_refused() -> None:
    from engines.config import BasicSearchConfig

    with pytest.raises(ValueError, match="a local prompt where a basic prompt is expected"):
        BasicSearchConfig(prompt=prompts.builtin("local"))


def test_every_stage_has_a_builtin_prompt() -> None:
    assert set(prompts.BUILTIN) == set(STAGES)
    with pytest.raises(PromptError, match="unknown prompt stage"):
        PromptTemplate.checked("judge", "x")


# ---- the engines use the configured prompts ------------------------------------------------------------

CUSTOM = {
    ("local", "prompt"): "CUSTOM-LOCAL answer as {response_type}.\n\n{context_data}",
    ("basic", "prompt"): "CUSTOM-BASIC answer as {response_type}.\n\n{context_data}",
    ("global_search", "map_prompt"): 'CUSTOM-MAP JSON {{"points": []}} in {max_length} words.\n\n{context_data}',
    ("global_search", "reduce_prompt"): "CUSTOM-REDUCE as {response_type}.\n\n{report_data}",
    ("drift", "hyde_prompt"): "CUSTOM-HYDE like this:\n{template}",
    ("drift", "primer_prompt"): "CUSTOM-PRIMER for {query}.\n\n{community_reports}",
    ("drift", "followup_prompt"): "CUSTOM-FOLLOWUP of {global_query}, up to {followups}.\n\n{context_data}",
    ("drift", "reduce_prompt"): "CUSTOM-DRIFT-REDUCE as {response_type}.\n\n{context_data}",
    ("router", "rewrite_prompt"): "CUSTOM-REWRITE JSON {{\"question\": \"...\"}}\n\n{history}",
}


def _custom_config(tmp_path: Path, server: Any) -> Any:
    data: dict[str, Any] = {"models": {"chat": {"base_url": server.base_url, "api_key": "test", "max_retries": 0},
                                       "embedding": {"provider": "offline"}}}
    for (section, key), text in CUSTOM.items():
        data.setdefault(section, {})[key] = f"{section}-{key}.txt"
        _write(tmp_path, f"{section}-{key}.txt", text)
    return config_from_mapping(data, {}, base_dir=tmp_path)


def test_every_engine_sends_its_configured_prompt(tmp_path: Path) -> None:
    from robust_support import carol, carol_embedder

    from benchmarks.bench_mock import OfflineResponder
    from router import Router
    from testing.model_server import LoopbackServer

    offline = OfflineResponder()

    def reply(body: dict[str, Any]) -> str:
        system = body["messages"][0]["content"]
        if system.startswith("CUSTOM-MAP"):
            return '{"points": [{"description": "Scrooge is a miser [Data: Reports (1)]", "score": 70}]}'
        if system.startswith("CUSTOM-PRIMER"):
            return '{"intermediate_answer": "## Scrooge\\nA miser.", "score": 60, "follow_up_queries": ["Who is Marley?"]}'
        if system.startswith("CUSTOM-FOLLOWUP"):
            return '{"response": "Marley was his partner.", "score": 50, "follow_up_queries": []}'
        if system.startswith("CUSTOM-REWRITE"):
            return '{"question": "Who is the nephew of Scrooge?"}'
        if system.startswith(("CUSTOM-HYDE", "CUSTOM-LOCAL", "CUSTOM-BASIC", "CUSTOM-REDUCE", "CUSTOM-DRIFT")):
            return "An answer written from the custom prompt."
        return str(offline(body))

    from benchmarks.bench_mock import RelayedModels
    from engines.models.limiter import LimiterRegistry

    with LoopbackServer(default_reply=reply) as server:
        config = _custom_config(tmp_path, server)
        models = RelayedModels(config.models, index=carol(), embedder=carol_embedder(),
                               limiter_registry=LimiterRegistry())
        with Router(carol(), config=config, models=models) as router:
            for mode in ("local", "basic", "global", "drift"):
                answer = router.ask("Who is Ebenezer Scrooge?", mode=mode)
                assert answer.engine == mode and answer.text
            router.ask("And his nephew?", history=["Who is Ebenezer Scrooge?"], mode="local")
        systems = [r.body["messages"][0]["content"] for r in server.requests if r.path.endswith("/chat/completions")]
    for marker in ("CUSTOM-LOCAL answer as multiple paragraphs.", "CUSTOM-BASIC", "CUSTOM-MAP", "CUSTOM-REDUCE",
                   "CUSTOM-HYDE", "CUSTOM-PRIMER for Who is Ebenezer Scrooge?.", "CUSTOM-FOLLOWUP of Who is Ebenezer "
                   "Scrooge?, up to 7.", "CUSTOM-DRIFT-REDUCE", "CUSTOM-REWRITE"):
        assert any(s.startswith(marker) for s in systems), marker
    local = next(s for s in systems if s.startswith("CUSTOM-LOCAL"))
    assert "-----Entities-----" in local and "{context_data}" not in local  # the slot filled with the tables
    replaced = ("local", "basic", "global_map", "global_reduce", "drift_hyde", "drift_primer", "drift_followup",
                "drift_reduce", "rewrite")
    builtin_openings = tuple(prompts.BUILTIN[stage].split("\n")[0] for stage in replaced)
    assert not any(s.startswith(builtin_openings) for s in systems)


def test_the_offline_model_answers_with_a_custom_prompt(tmp_path: Path) -> None:
    from robust_support import carol

    from router import Router

    _write(tmp_path, "local.txt", "Reply briefly ({response_type}) from these tables only.\n{context_data}")
    config = config_from_mapping({"local": {"prompt": "local.txt"}}, {}, base_dir=tmp_path)
    with Router(carol(), config=config) as router:
        answer = router.ask("Who is Bob Cratchit?", mode="local")
    assert answer.offline and "Cratchit" in answer.text
    assert answer.citations and all(c.resolved for c in answer.citations)
