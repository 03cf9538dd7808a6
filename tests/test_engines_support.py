"""Shared helpers for the engine tests (loopback model, scripted task replies, the index fixtures), plus
tests of the pure pieces: citation parsing/resolution, config loading, input checks, result JSON."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fixture_paths import DULCE

from engines.prompts import TASK_MARKERS

MARKERS = TASK_MARKERS


@functools.cache
def load(path: Path) -> Any:
    from shared_context import load_index

    return load_index(path)


_OPEN_MODELS: list[Any] = []


@pytest.fixture()
async def srv() -> AsyncIterator[Any]:
    """A loopback server; models made for it are closed on the test's own event loop afterwards."""
    from testing.model_server import LoopbackServer

    with LoopbackServer(latency_ms=0) as server:
        yield server
        while _OPEN_MODELS:
            await _OPEN_MODELS.pop().aclose()


def loopback_model(server: Any, model: str = "gpt-4.1-mini", concurrency: int = 64) -> Any:
    from pydantic import SecretStr

    from engines.models.config import ModelEndpoint, PriceTable
    from engines.models.openai_backend import OpenAIChatModel

    endpoint = ModelEndpoint(provider="openai", base_url=server.base_url, api_key=SecretStr("test"), model=model,
                             timeout_s=20, max_retries=0, total_deadline_s=30, concurrency=concurrency)
    chat = OpenAIChatModel(endpoint, PriceTable())
    _OPEN_MODELS.append(chat)
    return chat


def task_of(request: Any) -> str | None:
    system = "\n".join(m.get("content") or "" for m in request.body.get("messages", []) if m.get("role") == "system")
    for task, marker in MARKERS.items():
        if re.search(marker, system):
            return task
    return None


def system_of(request: Any) -> str:
    return "\n".join(m.get("content") or "" for m in request.body.get("messages", []) if m.get("role") == "system")


def last_user(request: Any) -> str:
    users = [m.get("content") or "" for m in request.body.get("messages", []) if m.get("role") == "user"]
    return users[-1] if users else ""


def requests_for(server: Any, task: str) -> list[Any]:
    return [r for r in server.chat_requests if task_of(r) == task]


def script(server: Any, task: str, reply: Any, **kw: Any) -> None:
    server.add_rule(None, system=MARKERS[task], reply=reply, **kw)


def map_reply(*points: tuple[str, int]) -> str:
    return json.dumps({"points": [{"description": d, "score": s} for d, s in points]})


# ----------------------------------------------------------------------------- pure pieces


def test_parse_references_handles_more_and_aliases() -> None:
    from engines.citations import parse_references

    text = ("A [Data: Sources (1, 2); Entities (3, +more)] and B [Data: Reports (5); Relationships (7, 8, 9, 10, 11, +more)]"
            " and again [Data: Sources (2)] [Data: Unknown (4)]")
    assert parse_references(text) == [
        ("Sources", "1"), ("Sources", "2"), ("Entities", "3"), ("Reports", "5"),
        ("Relationships", "7"), ("Relationships", "8"), ("Relationships", "9"), ("Relationships", "10"),
        ("Relationships", "11"),
    ]


def test_citations_resolve_to_documents_and_flag_unknown_ids() -> None:
    from engines.citations import resolve_citations, union_ids

    index = load(DULCE)
    unit = index.text_units[0]
    entity = next(e for e in index.entities if e.text_unit_ids)
    report = index.community_reports[0]
    text = (f"x [Data: Sources ({unit.short_id}); Entities ({entity.short_id}); Reports ({report.short_id}); "
            f"Claims (999999)]")
    cites = resolve_citations(index, text)
    by_kind = {c.kind: c for c in cites}
    assert by_kind["Sources"].text_unit_ids == [unit.id]
    assert by_kind["Sources"].document_ids == [index.documents[index.text_unit_document[0]].id]
    assert set(by_kind["Entities"].text_unit_ids) == set(entity.text_unit_ids)
    assert by_kind["Reports"].resolved and by_kind["Reports"].text_unit_ids
    assert not by_kind["Claims"].resolved
    units, docs = union_ids(cites)
    assert unit.id in units and len(docs) == 1


def test_load_config_reads_toml_and_names_bad_keys(tmp_path: Path) -> None:
    from engines.config import ConfigError, load_config

    good = tmp_path / "graphroute.toml"
    good.write_text("[global_search]\nconcurrency = 4\nprerank = true\n[drift]\nk_followups = 3\n")
    cfg = load_config(good, env={})
    assert cfg.global_search.concurrency == 4 and cfg.global_search.prerank
    assert cfg.drift.k_followups == 3 and cfg.models.offline
    bad = tmp_path / "bad.toml"
    bad.write_text("[global_search]\nconcurrency = 0\n")
    with pytest.raises(ConfigError, match=r"bad.toml: global_search.concurrency: must be >= 1"):
        load_config(bad, env={})
    bad.write_text("[drift]\nfolds = 2\n")
    with pytest.raises(ConfigError, match=r"drift.folds: unknown setting"):
        load_config(bad, env={})
    bad.write_text("[nonsense]\nx = 1\n")
    with pytest.raises(ConfigError, match=r"nonsense: unknown section"):
        load_config(bad, env={})


def test_drift_defaults_stay_within_22_calls_and_keep_local_budget() -> None:
    from engines.config import DriftSearchConfig

    cfg = DriftSearchConfig()
    assert cfg.max_llm_calls <= 22
    # GraphRAG bug 8: 0.9 + 0.1 left nothing for entities/relationships.
    assert cfg.local_search.text_unit_prop + cfg.local_search.community_prop < 1.0


def test_vote_ties_go_up() -> None:
    from engines.dynamic_selection import vote

    assert vote([1, 3]) == 3
    assert vote([0, 0, 5]) == 0
    assert vote([2, 4, 4, 2]) == 4


def test_clean_questions_strips_bullets_and_duplicates() -> None:
    from engines.questions import clean_questions

    raw = ["- Who is Scrooge?", "2. What does Marley want?", "", "- who is scrooge?", '"Why Christmas?"', "x\n- y"]
    assert clean_questions(raw, 10) == ["Who is Scrooge?", "What does Marley want?", "Why Christmas?", "x", "y"]
    assert clean_questions(raw, 2) == ["Who is Scrooge?", "What does Marley want?"]
