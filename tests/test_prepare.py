"""`graphroute prepare INDEX` and `[serve] require_prepared`, on a small index built at test time: a store
prepared for the tables as they are is accepted, a missing or stale one is named, a replica does not load an
index that is not prepared (`/readyz` names it, its requests get a 503), and `serve` stops with the reason
when no index is prepared."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pytest
from small_index import build_small_index

from engines.config import GraphrouteConfig, ServeConfig
from router.cli import main
from router.prepare import split_prepared
from router.router import Router
from router.service import Service
from router.service.server import ServiceThread
from shared_context import load_index
from shared_context.prepared import prepared_problem


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_small_index(tmp_path_factory.mktemp("prepare"))


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache folder of the test's own (what a replica host starts with), restored afterwards."""
    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_prepare_builds_the_store_that_a_check_then_accepts(small_index: Path, cache_dir: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert "no prepared store" in prepared_problem(small_index)
    other = cache_dir.parent / "elsewhere"
    assert main(["prepare", str(small_index), "--cache-dir", str(other), "--no-settings"]) == 0
    out = capsys.readouterr().out
    assert "peak memory" in out and "prepared.json" in out
    assert os.environ["GRAPHROUTE_CACHE_DIR"] == str(other.resolve())
    assert prepared_problem(small_index) == ""
    assert any(other.rglob("prepared.json")) and not cache_dir.exists()


def test_a_changed_table_makes_the_store_stale(small_index: Path, cache_dir: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "index"
    shutil.copytree(small_index, copy)
    assert main(["prepare", str(copy), "--no-settings"]) == 0
    assert prepared_problem(copy) == ""
    documents = next(p for p in copy.iterdir() if p.name.startswith("documents"))
    later = time.time() + 60
    os.utime(documents, (later, later))  # rewritten in place, as an update would
    problem = prepared_problem(copy)
    assert "is stale: documents changed since it was prepared" in problem and "graphroute prepare" in problem


def test_a_replica_refuses_an_index_that_is_not_prepared(small_index: Path, cache_dir: Path,
                                                         tmp_path: Path) -> None:
    assert main(["prepare", str(small_index), "--no-settings"]) == 0
    missing = tmp_path / "not-prepared"
    import shutil

    shutil.copytree(small_index, missing)
    ready, refused = split_prepared({"harbour": str(small_index), "other": str(missing)}, required=True)
    assert list(ready) == ["harbour"] and "no prepared store" in refused["other"]
    assert split_prepared({"other": str(missing)}, required=False) == ({"other": str(missing)}, {})
    with pytest.raises(ValueError, match="no index is prepared"):
        split_prepared({"other": str(missing)}, required=True)
    config = GraphrouteConfig(serve=ServeConfig(require_prepared=True, warm_rows=0))
    service = Service({"harbour": Router(load_index(small_index), config)}, config.serve, unready=refused)
    service.warm_up()
    with ServiceThread(service) as server:
        ready_check = httpx.get(server.url + "/readyz")
        assert ready_check.status_code == 503
        assert ready_check.json()["reasons"][0].startswith("index 'other' is not served: no prepared store")
        asked = httpx.post(server.url + "/v1/ask", json={"question": "Who runs the harbour?", "index": "other"})
        assert asked.status_code == 503 and "not served by this server" in asked.json()["error"]["message"]
        assert httpx.post(server.url + "/v1/ask", json={"question": "Who runs Northgate Harbour?"}).status_code == 200


def test_serve_stops_with_the_reason_when_no_index_is_prepared(small_index: Path, cache_dir: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "graphroute.toml"
    toml.write_text("[serve]\nrequire_prepared = true\n", encoding="utf-8")
    assert main(["serve", "--index", str(small_index), "--port", "0", "--config", str(toml), "--no-settings"]) == 2
    err = capsys.readouterr().err
    assert "require_prepared: no index is prepared" in err and "graphroute prepare" in err


def _contexts(path: Path, questions: list[str]) -> list[str]:
    """Every context a question's engines read, rendered: local, global batches, basic Sources."""
    from shared_context import CommunityContextBuilder, LocalContextBuilder
    from shared_context.basic_context import basic_context, top_text_units

    index = load_index(path)
    local, community = LocalContextBuilder(index), CommunityContextBuilder(index)
    out = []
    for q in questions:
        out.append(local.build(q).text)
        out.extend(batch.text for batch in community.build(q))
        out.append(basic_context(index, top_text_units(index, q, 10)[0], 4_000).text)
    return out


def test_a_prepared_store_gives_the_contexts_a_first_open_builds(carol_path: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    questions = ["Who is Bob Cratchit?", "What does Scrooge learn from the three spirits?",
                 "How are Tiny Tim and Fred related to Scrooge?"]
    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(tmp_path / "prepared"))
    assert main(["prepare", str(carol_path), "--no-settings"]) == 0
    assert prepared_problem(carol_path) == ""
    from_prepared = _contexts(carol_path, questions)
    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(tmp_path / "first-open"))  # nothing stored: built on open
    built_on_open = _contexts(carol_path, questions)
    assert len(from_prepared) == len(built_on_open) > len(questions) * 2
    assert all(text for text in from_prepared)
    for prepared_text, first_open_text in zip(from_prepared, built_on_open, strict=True):
        assert prepared_text == first_open_text  # byte for byte
