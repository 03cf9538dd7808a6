"""The `graphroute` CLI end to end on the Christmas Carol index with the offline model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from router.cli import main


def test_ask_json(carol_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "Who is Bob Cratchit?", "--index", str(carol_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["engine"] == out["route"]["engine"] == "local"
    assert out["offline"] is True
    assert "Cratchit" in out["text"]
    assert out["usage"]["total"]["llm_calls"] == 1
    assert out["citations"] and out["document_ids"]


def test_ask_rich_output_shows_route_citations_and_usage(carol_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "What are the main themes of the story?", "--index", str(carol_path)]) == 0
    out = capsys.readouterr().out
    assert "route" in out and "global" in out
    assert "usage" in out and "map" in out and "total" in out
    assert "offline" in out


def test_ask_stream(carol_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "Who is Jacob Marley?", "--index", str(carol_path), "--stream"]) == 0
    out = capsys.readouterr().out
    assert "route: local" in out and "Marley" in out


def test_questions_are_labelled_with_routes(carol_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["questions", "--index", str(carol_path), "--n", "4", "--history", "Who is Scrooge?", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert 1 <= len(out["questions"]) <= 4
    # each label is the router classifier's decision for that question on this index
    from router.classifier import classify
    from shared_context import load_index

    index = load_index(carol_path)
    for q in out["questions"]:
        decision = classify(q["text"], index)
        assert (q["engine"], q["confidence"]) == (decision.engine, pytest.approx(decision.confidence)), q


def test_errors_are_messages_not_tracebacks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "Who?", "--index", str(tmp_path / "missing")]) == 2
    assert "index folder not found" in capsys.readouterr().err
    (tmp_path / "entities.parquet").write_text("not parquet")
    assert main(["ask", "Who?", "--index", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "cannot read the index" in err and "Traceback" not in err


def test_budget_flags(carol_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "How did Marley's ghost change Scrooge's treatment of Fred and Bob Cratchit?",
                 "--index", str(carol_path), "--mode", "drift", "--max-calls", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["engine"] == "local" and out["stepped_down_from"] == "drift"
    assert out["usage"]["total"]["llm_calls"] == 1
    assert main(["ask", "Who?", "--index", "x", "--max-calls", "0"]) == 2


def test_console_script_runs(carol_path: Path) -> None:
    exe = Path(sys.executable).with_name("graphroute")
    proc = subprocess.run(
        [str(exe), "ask", "Who is Tiny Tim?", "--index", str(carol_path), "--json"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OPENAI_API_KEY": ""},
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["engine"] == "local"


def test_index_then_ask(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = Path(__file__).resolve().parents[1] / "indexer" / "sample_corpus"
    out = tmp_path / "idx"
    assert main(["index", str(corpus), "--out", str(out), "--no-progress"]) == 0
    assert (out / "entities.parquet").exists() and (out / "lancedb").exists()
    capsys.readouterr()
    assert main(["ask", "Who leads the Tidewater Turbine Programme?", "--index", str(out), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["engine"] == "local"
    assert "Osei" in answer["text"]
    assert any(t.endswith(".md") for c in answer["citations"] for t in c.get("document_titles", []))
    assert answer["notes"] == []  # its vectors come from the offline embedder we use


def test_unreachable_model_is_a_clear_error(
    carol_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens on port 9
    monkeypatch.setenv("GRAPHROUTE_MAX_RETRIES", "1")
    assert main(["ask", "Who is Bob Cratchit?", "--index", str(carol_path)]) == 1
    err = capsys.readouterr().err
    assert "cannot reach model" in err and "127.0.0.1:9" in err and "Traceback" not in err
