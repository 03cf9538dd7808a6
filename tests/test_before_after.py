"""`benchmarks.before_after`: medians and ranges of each side's runs, missing files said as missing, sources copied."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import before_after


def _write(folder: Path, rel: str, report: dict[str, object]) -> None:
    path = folder / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report), encoding="utf-8")


def _side(folder: Path, walls: list[float]) -> None:
    runs = [{"wall_s": w, "user_s": w / 2, "sys_s": 0.1} for w in walls]
    _write(folder, "cli_latency/cli_latency.json", {"command": "python -m benchmarks.cli_latency", "date": "d",
                                                    "results": {"carol": {"runs": runs}}})
    _write(folder, "question_path.json", {"first": {"files": 50}, "second": {"files": 44}})


def test_each_side_is_summarised_from_its_own_runs(tmp_path: Path) -> None:
    _side(tmp_path / "b", [3.0, 1.0, 2.0])
    _side(tmp_path / "a", [1.5, 1.0, 4.0])
    out = tmp_path / "out"
    before_after.main(["--before", str(tmp_path / "b"), "--after", str(tmp_path / "a"), "--out", str(out),
                       "--skipped", "scale_1m/scale.json=too slow here"])
    report = json.loads((out / "before_after.json").read_text(encoding="utf-8"))
    wall = "`graphroute ask` wall time, Christmas Carol"
    assert report["before"]["figures"][wall]["median"] == 2.0 and report["before"]["figures"][wall]["range"] == [1.0, 3.0]
    assert report["after"]["figures"][wall]["median"] == 1.5
    cpu = report["after"]["figures"]["`graphroute ask` CPU (user + system), Christmas Carol"]
    assert abs(cpu["median"] - 0.85) < 1e-9  # user + system of the median run
    assert report["after"]["figures"]["cold start (second process), 1M entities (CPU)"]["missing"] == "too slow here"
    assert report["after"]["figures"]["local context p50, 10k entities (CPU)"]["missing"] == "no scale/scale.json"
    assert (out / "before" / "cli_latency" / "cli_latency.json").exists()
    assert report["before"]["sources"]["cli_latency/cli_latency.json"]["command"] == "python -m benchmarks.cli_latency"


def test_a_figure_the_file_was_written_without_is_missing_with_its_reason(tmp_path: Path) -> None:
    for folder in (tmp_path / "b", tmp_path / "a"):
        _side(folder, [1.0])
        runs = [{"local_p50_ms": 10.0, "local_cpu_p50_ms": 5.0, "cold_s": 1.0, "cold_cpu_s": 0.5}]
        _write(folder, "scale/scale.json", {"results": {"type-word": {"10000": {"second_runs": runs}}}})
    out = tmp_path / "out"
    before_after.main(["--before", str(tmp_path / "b"), "--after", str(tmp_path / "a"), "--out", str(out),
                       "--skipped", "cold start (second process), 100k entities (wall)=measured at 10k only"])
    figures = json.loads((out / "before_after.json").read_text(encoding="utf-8"))["after"]["figures"]
    assert figures["local context p50, 10k entities (wall)"]["median"] == 10.0
    assert figures["cold start (second process), 100k entities (wall)"]["missing"] == "measured at 10k only"
    assert figures["cold start (second process), 100k entities (CPU)"]["missing"] == "not in scale/scale.json"


def test_a_source_measured_apart_keeps_its_commit_and_note(tmp_path: Path) -> None:
    for folder in (tmp_path / "b", tmp_path / "a"):
        _side(folder, [1.0])
    runs = [{"cold_s": 9.0, "cold_cpu_s": 8.0}]
    _write(tmp_path / "a", "scale_1m/scale.json", {"command": "c", "commit": "abc1234", "note": "interleaved",
                                                   "results": {"type-word": {"1000000": {"second_runs": runs}}}})
    out = tmp_path / "out"
    before_after.main(["--before", str(tmp_path / "b"), "--after", str(tmp_path / "a"), "--out", str(out),
                       "--after-commit", "def5678"])
    after = json.loads((out / "before_after.json").read_text(encoding="utf-8"))["after"]
    assert after["sources"]["scale_1m/scale.json"] == {"command": "c", "date": None, "load_avg_start": None,
                                                           "load_avg_end": None, "commit": "abc1234",
                                                           "note": "interleaved"}
    assert "commit" not in after["sources"]["cli_latency/cli_latency.json"]
    assert after["figures"]["cold start (second process), 1M entities (wall)"]["runs"] == [9.0]
