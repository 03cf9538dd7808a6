"""One form for `--history` in `ask` and `questions` (a file, inline JSON turns, or earlier questions as
text), `graphroute --help` naming the input formats the indexer reads, and warnings as one line naming the
setting to add."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from router.cli import INPUT_FORMATS, main
from router.cli_history import HistoryError, read_history

TURNS = [{"role": "user", "content": "Who is Bob Cratchit?"}, {"role": "assistant", "content": "Scrooge's clerk."}]


def test_history_takes_a_file_inline_json_or_questions(tmp_path: Path) -> None:
    file = tmp_path / "turns.json"
    file.write_text(json.dumps(TURNS), encoding="utf-8")
    assert read_history([str(file)]) == TURNS
    assert read_history([json.dumps(TURNS)]) == TURNS
    assert read_history(["Who is Bob Cratchit?", "And his son?"]) == [
        {"role": "user", "content": "Who is Bob Cratchit?"}, {"role": "user", "content": "And his son?"}]
    assert read_history([str(file), "And his son?"])[-1] == {"role": "user", "content": "And his son?"}
    assert read_history(None) == []


@pytest.mark.parametrize(("value", "problem"), [
    ("[{\"role\": \"user\"", "inline JSON is not valid JSON"),
    ("missing.json", "missing.json: no such file"),
    ("{\"role\": \"robot\", \"content\": \"hi\"}", "--history: "),
    ("[1, 2]", "--history: "),
])
def test_a_bad_history_value_is_named(value: str, problem: str) -> None:
    with pytest.raises(HistoryError, match=problem.replace("[", r"\[")):
        read_history([value])


def test_ask_and_questions_take_the_same_history(carol_path: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "turns.json"
    file.write_text(json.dumps(TURNS), encoding="utf-8")
    for history in ([str(file)], [json.dumps(TURNS)], ["Who is Bob Cratchit?"]):
        assert main(["ask", "What happens to his son?", "--index", str(carol_path), "--no-settings", "--json",
                     "--history", *history]) == 0
        answer = json.loads(capsys.readouterr().out)
        assert "Cratchit" in answer["standalone_question"], answer["standalone_question"]
        assert main(["questions", "--index", str(carol_path), "--no-settings", "--json", "--n", "2",
                     "--history", *history]) == 0
        assert json.loads(capsys.readouterr().out)["questions"]
    assert main(["ask", "Who?", "--index", str(carol_path), "--history", "[oops"]) == 2
    assert "--history: inline JSON is not valid JSON" in capsys.readouterr().err


def test_help_names_the_input_formats_the_readme_lists(capsys: pytest.CaptureFixture[str]) -> None:
    from indexer.reader import SUPPORTED

    with pytest.raises(SystemExit):
        main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert INPUT_FORMATS in out
    listed = {w.strip(",") for w in INPUT_FORMATS.split() if w.startswith(".")}
    assert listed == set(SUPPORTED) - {".htm", ".markdown"}
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert all(fmt in readme for fmt in listed)
    with pytest.raises(SystemExit):
        main(["ask", "--help"])
    assert "a file holding such a list" in " ".join(capsys.readouterr().out.split())


def test_a_price_warning_is_one_line_naming_the_setting(carol_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from testing.model_server import LoopbackServer

    with LoopbackServer(default_reply="Bob Cratchit is Scrooge's clerk.", embedding_dim=3072) as server:
        monkeypatch.setenv("GRAPHROUTE_BASE_URL", server.base_url)
        monkeypatch.setenv("GRAPHROUTE_API_KEY", "sk-test")
        monkeypatch.setenv("GRAPHROUTE_CHAT_MODEL", "my-local-model")
        monkeypatch.setenv("GRAPHROUTE_EMBEDDING_MODEL", "text-embedding-3-large")  # the index's own
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # as a user's python shows it
            code = main(["ask", "Who is Bob Cratchit?", "--index", str(carol_path), "--no-settings",
                         "--mode", "basic"])
    assert code == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "price" in line]
    assert len(lines) == 1, err
    assert lines[0].startswith("warning: no price known for model 'my-local-model'")
    assert '[models.prices."my-local-model"]' in lines[0] and "graphroute.toml" in lines[0]
    assert "UserWarning" not in err and ".py:" not in err
