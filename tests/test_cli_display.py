"""`graphroute ask` display: forced modes, the answer length switch, the usage table's embedding column."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from router.cli import main


def test_forced_basic_shows_the_forced_engine_and_the_classifiers_own_opinion_apart(
        carol_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "Who is Bob Cratchit?", "--index", str(carol_path), "--mode", "basic"]) == 0
    out = capsys.readouterr().out
    assert "answer — basic search" in out
    assert "engine: basic (forced by --mode basic" in out
    assert "classifier's own opinion: local" in out
    assert "route: local" not in out and "requested by the caller" not in out


def test_forced_global_does_not_claim_the_classifier_chose_it(carol_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "Who is Bob Cratchit?", "--index", str(carol_path), "--mode", "global"]) == 0
    out = capsys.readouterr().out
    assert "engine: global (forced by --mode global" in out and "classifier's own opinion: local" in out
    assert "route: global" not in out


def test_auto_mode_still_prints_the_route(carol_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "Who is Bob Cratchit?", "--index", str(carol_path)]) == 0
    out = capsys.readouterr().out
    assert "route: local (confidence" in out and "forced" not in out


def test_usage_table_has_an_embedding_column(carol_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "Who is Bob Cratchit?", "--index", str(carol_path), "--json"]) == 0
    usage = json.loads(capsys.readouterr().out)["usage"]
    embedded = {k: v for k, v in usage["stages"].items() if v["embedding_calls"]}
    assert main(["ask", "Who is Bob Cratchit?", "--index", str(carol_path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"┃\s+embed\s+┃", out)  # the header (rich wraps it over two lines)
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│ ")}
    assert embedded, "the offline embedder embeds the question for entity linking"
    for name, stage in embedded.items():
        row = next(v for k, v in rows.items() if name.startswith(k.rstrip("…")))
        assert f" {stage['embedding_tokens']} │" in row


@pytest.mark.parametrize(("length", "most"), [("short", 3), ("medium", 8)])
def test_length_bounds_a_global_answer(carol_path: Path, capsys: pytest.CaptureFixture[str], length: str,
                                       most: int) -> None:
    assert main(["ask", "What are the main themes of the story?", "--index", str(carol_path), "--mode", "global",
                 "--length", length, "--json"]) == 0
    text = json.loads(capsys.readouterr().out)["text"]
    assert 1 <= sum(1 for line in text.splitlines() if line.startswith("- ")) <= most


def test_unknown_length_is_a_usage_error(carol_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["ask", "Who?", "--index", str(carol_path), "--length", "huge"])
    assert "invalid choice: 'huge'" in capsys.readouterr().err
