"""`benchmarks.scale_merge`: one side's interleaved `--runs 1` result files merged into one `scale.json`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import scale_merge


def _part(folder: Path, cold_s: float, load: float, out: str = "x") -> Path:
    second = {"cold_s": cold_s, "cold_cpu_s": cold_s / 2, "load_avg_1m": load}
    report = {"command": f"python -m benchmarks.scale --sizes 1000000 --runs 1 --out /tmp/runs/{out}",
              "date": f"d{cold_s}", "load_avg_start": [load, 1.0, 1.0], "load_avg_end": [load + 1, 1.0, 1.0],
              "runs": 1, "results": {"type-word": {"1000000": {"index": "/idx", "first_runs": [{"load_s": 9.0}],
                                                               "second_runs": [second]}}}}
    path = folder / f"{cold_s}.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


def test_every_run_is_kept_and_summarised_over_all_parts(tmp_path: Path) -> None:
    parts = [_part(tmp_path, 3.0, 4.0, "run1"), _part(tmp_path, 1.0, 6.0, "run2"), _part(tmp_path, 2.0, 5.0, "run3")]
    assert scale_merge.main([*map(str, parts), "--commit", "abc1234", "--note", "interleaved",
                             "--out", str(tmp_path / "out")]) == 0
    merged = json.loads((tmp_path / "out" / "scale.json").read_text(encoding="utf-8"))
    row = merged["results"]["type-word"]["1000000"]
    assert [r["cold_s"] for r in row["second_runs"]] == [3.0, 1.0, 2.0]
    assert [r["load_avg_1m"] for r in row["second_runs"]] == [4.0, 6.0, 5.0]
    assert row["second"]["cold_s"] == 2.0 and row["second"]["cold_s_range"] == [1.0, 3.0]
    assert row["first"]["runs"] == 3 and merged["runs"] == 3
    assert merged["command"] == ("cd <checkout of abc1234> && PYTHONPATH=. python -m benchmarks.scale --sizes 1000000 "
                                 "--runs 1 --out <run folder>, 3 times")
    assert merged["commit"] == "abc1234" and merged["note"] == "interleaved"
    assert [p["load_avg_start"][0] for p in merged["parts"]] == [4.0, 6.0, 5.0]
    assert all(p["command"].endswith("--out <run folder>") for p in merged["parts"])
    assert merged["load_avg_start"][0] == 4.0 and merged["load_avg_end"][0] == 6.0


def test_parts_of_different_commands_are_refused(tmp_path: Path) -> None:
    one = _part(tmp_path, 1.0, 1.0)
    other = json.loads(one.read_text(encoding="utf-8"))
    other["command"] = "python -m benchmarks.scale --sizes 100000 --runs 1"
    (tmp_path / "other.json").write_text(json.dumps(other), encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        scale_merge.main([str(one), str(tmp_path / "other.json"), "--commit", "c", "--out", str(tmp_path / "out")])
    assert exit_info.value.code == 2 and not (tmp_path / "out").exists()


def test_a_file_not_written_by_the_scale_script_is_a_named_error(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.json").write_text("{}", encoding="utf-8")
    with pytest.raises(SystemExit):
        scale_merge.main([str(tmp_path / "bad.json"), "--commit", "c", "--out", str(tmp_path / "out")])
    assert "bad.json: no `results` (not written by benchmarks.scale)" in capsys.readouterr().err
