"""route-bench end to end: every engine and the router, offline and through the loopback server (mock:50),
checking the report's fields and that its figures add up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import route_bench
from indexer import build_index

ALL = "local,global,global-prerank,drift,basic,router"  # the router's global step is global-prerank
FIELDS = ("llm_calls", "prompt_tokens", "output_tokens", "cached_calls", "embedding_calls", "embedding_tokens")
QUESTIONS = [
    {"id": "l1", "question": "Who is Bob Cratchit and what does he do for Scrooge?", "label": "local"},
    {"id": "g1", "question": "What are the main themes of the whole story?", "label": "global"},
    {"id": "d1", "question": "How does Scrooge's attitude towards the Cratchit family change from the beginning "
                             "to the end, and what causes the change?", "label": "drift"},
]


@pytest.fixture(scope="module")
def index_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The index the indexer builds from the repository's sample corpus (offline model): no shared data needed,
    and a broken indexer import fails here instead of falling back to another index."""
    corpus = Path(__file__).resolve().parents[1] / "indexer" / "sample_corpus"
    assert corpus.is_dir(), corpus
    out = tmp_path_factory.mktemp("sample_index")
    build_index(corpus, out, progress=False)
    return out


@pytest.fixture(scope="module")
def small_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A lighter DRIFT (2 folds, 1 round of 2 follow-ups) keeps the suite fast; figures must add up all the same."""
    f = tmp_path_factory.mktemp("config") / "graphroute.toml"
    f.write_text("[drift]\nprimer_folds = 2\nn_depth = 1\nk_followups = 2\n", encoding="utf-8")
    return f


@pytest.fixture(scope="module")
def queries_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    f = tmp_path_factory.mktemp("queries") / "q.jsonl"
    f.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return f


def _run(index: Path, queries: Path, config: Path, out: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code = route_bench.main(["--index", str(index), "--queries", str(queries), "--out", str(out),
                             "--config", str(config), "--no-progress", "--quiet", *extra])
    report = json.loads((out / "report.json").read_text(encoding="utf-8")) if (out / "report.json").exists() else {}
    return code, report


@pytest.fixture(scope="module")
def offline_report(index_path: Path, queries_file: Path, small_config: Path,
                   tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("offline")
    code, report = _run(index_path, queries_file, small_config, out, "--engines", ALL, "--model", "offline")
    assert code == 0, report.get("failures") or report.get("consistency")
    report["_out"] = str(out)
    return report


@pytest.fixture(scope="module")
def mock_report(index_path: Path, queries_file: Path, small_config: Path,
                tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("mock")
    code, report = _run(index_path, queries_file, small_config, out, "--engines", ALL, "--model", "mock:50",
                        "--concurrency", "2")
    assert code == 0, report.get("failures") or report.get("consistency")
    report["_out"] = str(out)
    return report


def _assert_figures_add_up(report: dict[str, Any]) -> None:
    rows = report["rows"]
    assert len(rows) == len(QUESTIONS) * len(ALL.split(","))
    for row in rows:
        assert row["ok"], row["error"]
        stages, total = row["usage"]["stages"], row["usage"]["total"]
        for f in FIELDS:
            assert total[f] == sum(s[f] for s in stages.values()) == row[f], (row["engine"], f)
        assert row["cost"] == pytest.approx(sum(s["cost"] for s in stages.values()))
        assert row["cost"] > 0  # every engine makes at least one priced call
    alone = {(r["engine"], r["query_id"]): r for r in rows if r["engine"] != "router"}
    for row in (r for r in rows if r["engine"] == "router"):
        own = sum(row["usage"]["stages"].get(s, {}).get("llm_calls", 0) for s in ("rewrite", "classify"))
        engines_calls = sum(alone[(e, row["query_id"])]["llm_calls"] for e in row["tried"])
        assert row["llm_calls"] == engines_calls + own
        assert row["engine_used"] == row["tried"][-1]
    assert report["consistency"]["problems"] == []
    assert report["consistency"]["checked_rows"] == len(rows)
    # summary figures are sums over the rows
    for engine, s in report["summary"].items():
        mine = [r for r in rows if r["engine"] == engine]
        assert s["llm_calls_total"] == sum(r["llm_calls"] for r in mine)
        assert s["cost_total"] == pytest.approx(sum(r["cost"] for r in mine))
        assert s["latency_p50_s"] <= s["latency_p95_s"]


def _assert_report_fields(report: dict[str, Any]) -> None:
    for key in ("config", "model", "pricing", "packages", "python", "index", "queries", "summary", "router",
                "consistency", "failures", "rows", "charts", "engine_config"):
        assert key in report, key
    assert report["config"]["seed"] == 0
    assert report["engine_config"]["drift"]["k_followups"] == 2  # --config was applied and recorded
    assert report["engine_config"]["drift"]["seed"] == 0
    assert report["packages"]["graphroute"] != "not installed"
    assert set(report["summary"]) == set(ALL.split(","))
    quality = report["router"]["quality"]
    assert quality["n"] == len(QUESTIONS)
    assert 0.0 <= quality["macro_f1"] <= 1.0 and 0.0 <= quality["accuracy"] <= 1.0
    assert quality["correct"] == sum(1 for r in report["rows"] if r["engine"] == "router" and r["route"] == r["label"])
    for base in ("global", "drift"):
        sav = report["router"]["savings"][base]
        assert sav["pairs"] == len(QUESTIONS)
        assert sav["baseline_cost"] == pytest.approx(report["summary"][base]["cost_total"])
    out = Path(report["_out"])
    assert (out / "report.md").read_text(encoding="utf-8").startswith("# route-bench report")
    assert {"latency_vs_cost.png", "cost_per_query.png"} <= set(report["charts"])
    for name in report["charts"]:
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000


def test_offline_report_fields_and_consistency(offline_report: dict[str, Any]) -> None:
    _assert_report_fields(offline_report)
    _assert_figures_add_up(offline_report)
    assert offline_report["pricing"]["mode"] == "priced_as"
    assert offline_report["pricing"]["chat_model"] == "gpt-4.1-mini"
    assert offline_report["model"]["mock_server"] is None


def test_mock_report_goes_through_http_with_latency(mock_report: dict[str, Any],
                                                    offline_report: dict[str, Any]) -> None:
    _assert_report_fields(mock_report)
    _assert_figures_add_up(mock_report)
    server = mock_report["model"]["mock_server"]
    rows = mock_report["rows"]
    assert server["chat_requests"] == sum(r["llm_calls"] for r in rows) > 0
    assert server["failed_requests"] == 0
    assert server["invalid_json_replies"] == {}
    # every call waits 50 ms, so no question that called the model can be faster than that
    assert all(r["seconds"] >= 0.05 for r in rows if r["llm_calls"] > 0)
    # the mock serves the offline model's answers: same calls per run as offline, only slower
    calls = {(r["engine"], r["query_id"]): r["llm_calls"] for r in offline_report["rows"]}
    assert {(r["engine"], r["query_id"]): r["llm_calls"] for r in rows} == calls


def test_offline_runs_are_reproducible(index_path: Path, queries_file: Path, small_config: Path, tmp_path: Path,
                                       offline_report: dict[str, Any]) -> None:
    code, again = _run(index_path, queries_file, small_config, tmp_path, "--engines", ALL, "--model", "offline")
    assert code == 0

    def stable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for r in rows:
            r = {k: v for k, v in r.items() if k not in ("seconds", "reported_seconds")}
            r["usage"] = {part: {name: {k: v for k, v in s.items() if k != "seconds"}
                                 for name, s in r["usage"][part].items()} if part == "stages"
                          else {k: v for k, v in r["usage"][part].items() if k != "seconds"}
                          for part in ("stages", "total")}
            out.append(r)
        return out

    assert stable(again["rows"]) == stable(offline_report["rows"])


def test_console_script_runs_as_a_subprocess(index_path: Path, queries_file: Path, tmp_path: Path,
                                             small_config: Path) -> None:
    exe = Path(sys.executable).with_name("route-bench")
    if not exe.exists():
        pytest.skip("console script not installed in this environment")
    # the simulated model (`mock:`) ships with route-bench: the command runs it from outside the checkout
    proc = subprocess.run(
        [str(exe), "--index", str(index_path), "--queries", str(queries_file), "--engines", "local",
         "--limit", "1", "--out", str(tmp_path), "--config", str(small_config), "--no-progress", "--model", "mock:0"],
        capture_output=True, text=True, timeout=120, env=os.environ | {"COLUMNS": "160"}, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "route-bench" in proc.stdout and "local" in proc.stdout  # the terminal table
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert [(r["engine"], r["ok"]) for r in report["rows"]] == [("local", True)]
    assert report["model"]["mock_server"]["chat_requests"] >= 1
    bad = subprocess.run([str(exe), "--index", str(tmp_path / "missing"), "--queries", str(queries_file)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "index path not found" in bad.stderr and "Traceback" not in bad.stderr


def test_model_cache_turns_repeats_into_free_hits(index_path: Path, queries_file: Path, small_config: Path,
                                                  tmp_path: Path) -> None:
    code, report = _run(index_path, queries_file, small_config, tmp_path / "out", "--engines", "local,basic",
                        "--model", "mock:0", "--repeat", "2", "--limit", "2",
                        "--model-cache", str(tmp_path / "calls.sqlite"))
    assert code == 0, report.get("failures") or report.get("consistency")
    first = [r for r in report["rows"] if r["repeat"] == 0]
    second = [r for r in report["rows"] if r["repeat"] == 1]
    assert all(r["cached_calls"] == 0 and r["cost"] > 0 for r in first)
    assert all(r["cached_calls"] == r["llm_calls"] > 0 for r in second)
    # a hit is free; only the question's embedding (priced as text-embedding-3-small) is left
    assert all(r["usage"]["stages"]["answer"]["cost"] == 0 and r["cost"] < 1e-5 for r in second)
    assert report["summary"]["local"]["cached_calls_total"] == 2
    # cache hits never reach the server
    assert report["model"]["mock_server"]["chat_requests"] == sum(r["llm_calls"] for r in first)


def _clear_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "GRAPHROUTE_", "AZURE_OPENAI_")) and name != "GRAPHROUTE_CACHE_DIR":
            monkeypatch.delenv(name, raising=False)


def test_openai_mode_without_an_endpoint_exits_2(index_path: Path, queries_file: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _clear_model_env(monkeypatch)
    monkeypatch.chdir(tmp_path)  # no ./graphroute.toml
    code = route_bench.main(["--index", str(index_path), "--queries", str(queries_file), "--model", "openai",
                             "--out", str(tmp_path / "out"), "--no-progress", "--quiet"])
    assert code == 2
    assert "--model openai needs an endpoint" in capsys.readouterr().err


def test_openai_mode_uses_the_configured_endpoint_and_its_prices(index_path: Path, queries_file: Path,
                                                                 tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from benchmarks.bench_mock import OfflineResponder
    from testing.model_server import LoopbackServer

    _clear_model_env(monkeypatch)
    with LoopbackServer(default_reply=OfflineResponder()) as srv:
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        monkeypatch.setenv("GRAPHROUTE_CHAT_MODEL", "gpt-4.1-nano")
        cfg = tmp_path / "graphroute.toml"
        cfg.write_text('[models.embedding]\nprovider = "offline"\n', encoding="utf-8")
        code, report = _run(index_path, queries_file, cfg, tmp_path / "out", "--model", "openai",
                            "--engines", "local", "--limit", "1")
        requests = len(srv.chat_requests)
    assert code == 0, report.get("failures")
    assert report["pricing"]["mode"] == "reported"
    assert report["model"]["chat_model"] == "gpt-4.1-nano"
    row = report["rows"][0]
    assert row["llm_calls"] == requests == 1
    # nano prices: $0.10 in / $0.40 out per 1M tokens, applied by the model layer to the server's counts
    assert row["cost"] == pytest.approx((row["prompt_tokens"] * 0.10 + row["output_tokens"] * 0.40) / 1e6)
