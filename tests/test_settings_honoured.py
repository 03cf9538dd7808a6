"""A GraphRAG setting the user wrote applies to every question it names: graphroute's refinements of the local
context's shares yield to it. `config --show` marks "(settings.yaml)" only for the keys that file set, and
filters by section and key pattern."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engines.config import config_from_mapping
from engines.config_layers import resolve_config
from engines.local import local_builder
from shared_context.index import Index

FACT_QUESTIONS = ("Who is Ebenezer Scrooge?", "Describe Bob Cratchit.")


def _settings(tmp_path: Path, text: str) -> Path:
    file = tmp_path / "settings.yaml"
    file.write_text(text, encoding="utf-8")
    return file


@pytest.mark.parametrize("question", FACT_QUESTIONS)
def test_settings_yaml_community_prop_shows_reports_for_a_fact_question(carol: Index, tmp_path: Path,
                                                                        question: str) -> None:
    default = resolve_config(None, settings=False, env={}).config
    assert local_builder(carol, default.local).build(question).section("Reports") is None  # no reports by default
    file = _settings(tmp_path, "local_search:\n  community_prop: 0.2\n")
    config = resolve_config(None, settings=file, env={}).config
    ctx = local_builder(carol, config.local).build(question)
    assert ctx.need == "fact"
    reports = ctx.section("Reports")
    assert reports is not None and reports.rows
    assert ctx.budgets["Reports"] > 0.19 * config.local.max_context_tokens - 100  # the whole 0.2 share


def test_graphroute_toml_community_prop_is_honoured_too(carol: Index) -> None:
    config = config_from_mapping({"local": {"community_prop": 0.2}}, env={})
    assert local_builder(carol, config.local).build(FACT_QUESTIONS[0]).section("Reports") is not None
    # a refinement the user also wrote is theirs, and applies
    both = config_from_mapping({"local": {"community_prop": 0.2, "fact_community_prop": 0.0}}, env={})
    assert local_builder(carol, both.local).build(FACT_QUESTIONS[0]).section("Reports") is None


def test_text_unit_prop_written_turns_the_sources_refinements_off(carol: Index) -> None:
    config = config_from_mapping({"local": {"text_unit_prop": 0.5}}, env={})
    unset = config_from_mapping({}, env={}).local
    # a fact question (0.9 by the fact floor) and a weakly linked one (0.8) get the 0.5 the user wrote
    assert unset.sources_share(0.0, "fact") == 0.9 and unset.sources_share(0.0, "relation") == 0.8
    assert config.local.sources_share(0.0, "fact") == config.local.sources_share(0.0, "relation") == 0.5
    written, default = (local_builder(carol, c).build(FACT_QUESTIONS[0]) for c in (config.local, unset))
    assert written.budgets["Entities"] > default.budgets["Entities"]  # the room the user left the graph tables
    assert unset.refinement("fact_text_unit_prop") == 0.9 and config.local.refinement("fact_text_unit_prop") is None
    assert config.local.refinement("weak_link_text_unit_prop") is None


def test_drift_keeps_its_refinements_until_the_user_sets_its_share(tmp_path: Path) -> None:
    default = config_from_mapping({}, env={}).drift.local_search
    assert default.community_prop == 0.1 and default.refinement("fact_community_prop") == 0.0
    file = _settings(tmp_path, "drift_search:\n  local_search_community_prop: 0.25\n")
    drift = resolve_config(None, settings=file, env={}).config.drift.local_search
    assert drift.community_prop == 0.25 and drift.refinement("fact_community_prop") is None
    assert drift.refinement("fact_text_unit_prop") == default.fact_text_unit_prop  # text_unit_prop not written


def _show(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, str], str]:
    from router.cli import main

    code = main(["config", *args])
    captured = capsys.readouterr()
    lines = {line.split(" = ")[0].strip(): line for line in captured.out.splitlines() if " = " in line}
    return code, lines, captured.err


def test_config_show_marks_only_the_keys_the_settings_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    file = _settings(tmp_path, "global_search:\n  map_max_length: 300\n  dynamic_search_use_summary: false\n"
                               "drift_search:\n  not_a_graphroute_key: 1\n")
    code, lines, err = _show(capsys, "--show", "--settings", str(file))
    assert code == 0, err
    assert lines["global_search.map_max_length"].endswith("= 300  (settings.yaml)")
    assert lines["global_search.prerank"].endswith("= false  (default)")  # GraphRAG has no prerank
    assert lines["global_search.max_context_tokens"].endswith("(default)")
    assert all(line.endswith("(default)") for key, line in lines.items() if key.startswith("drift."))


def test_config_show_filters_by_section_and_key_pattern(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    file = _settings(tmp_path, "local_search:\n  community_prop: 0.2\n")
    code, lines, _ = _show(capsys, "--settings", str(file), "--section", "local")
    assert code == 0 and lines and all(key.startswith("local.") for key in lines)
    assert lines["local.community_prop"].endswith("= 0.2  (settings.yaml)")
    code, lines, _ = _show(capsys, "--settings", str(file), "*community_prop")
    assert code == 0
    assert set(lines) == {"local.community_prop", "local.fact_community_prop", "drift.local_search.community_prop",
                          "drift.local_search.fact_community_prop", "questions.local_search.community_prop",
                          "questions.local_search.fact_community_prop"}
    code, lines, _ = _show(capsys, "--settings", str(file), "--section", "drift", "fact_")  # no wildcard: contains
    assert code == 0 and set(lines) == {"drift.local_search.fact_text_unit_prop",
                                        "drift.local_search.fact_entity_share",
                                        "drift.local_search.fact_community_prop"}
    from router.cli import main

    assert main(["config", "--settings", str(file), "--json", "--section", "basic"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["settings"] and all(key.startswith("basic.") for key in shown["settings"])
    code, _, err = _show(capsys, "--section", "locals")
    assert code == 2 and "--section locals: no such section" in err and "local" in err
    code, _, err = _show(capsys, "--section", "local", "no_such_key*")
    assert code == 2 and "matches 'no_such_key*'" in err
