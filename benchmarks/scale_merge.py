"""Several `benchmarks.scale` result files of one checkout merged into one:
`python -m benchmarks.scale_merge --commit C --note WHY --out DIR PART.json ...`.

For a before/after comparison on a shared machine the two checkouts' runs are interleaved (before run 1, after
run 1, before run 2, ...) so that both sides meet the same load; each run is then its own `--runs 1`
invocation, and this merges one side's files into the `scale.json` that `benchmarks.before_after` reads. Every
per-run record is kept as written (its own 1-minute load average included) and the medians and ranges are
recomputed over all of them (`benchmarks.scale.summarise`). The runs are expected to run from inside the
checkout, with it on `PYTHONPATH` (`python -m` puts the working directory first on the path, so run from
another checkout it would load that one's code). The merged file's `command` is the runs' own command (the
output folder shown as `<run folder>`) with how often it ran, its `parts` keep each run's command, date and
load averages, `commit` records which code ran (no command line shows it) and `note` says how the runs were
ordered.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from benchmarks.scale import summarise

Json = dict[str, Any]
_OUT_ARG = re.compile(r"--out[= ]\S+")


class MergeError(ValueError):
    """A part that is not a `benchmarks.scale` result file, or parts that cannot be merged."""


def _read(path: Path) -> Json:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise MergeError(f"{path}: not a readable JSON file ({exc})") from exc
    if not isinstance(report, dict) or not isinstance(report.get("results"), dict):
        raise MergeError(f"{path}: no `results` (not written by benchmarks.scale)")
    return report


def merge(parts: list[Json], commit: str, note: str) -> Json:
    """One report over all the parts' runs, in the parts' order."""
    if not parts:
        raise MergeError("no parts to merge")
    commands = {_OUT_ARG.sub("--out <run folder>", str(p.get("command", "?"))) for p in parts}
    if len(commands) > 1:
        raise MergeError(f"the parts ran different commands: {sorted(commands)}")
    results: dict[str, dict[str, Json]] = {}
    for part in parts:
        for shape, by_size in part["results"].items():
            for size, row in by_size.items():
                merged = results.setdefault(shape, {}).setdefault(
                    size, {"index": row.get("index"), "first_runs": [], "second_runs": []})
                merged["first_runs"] += row.get("first_runs", [])
                merged["second_runs"] += row.get("second_runs", [])
    for by_size in results.values():
        for row in by_size.values():
            row["first"], row["second"] = summarise(row["first_runs"]), summarise(row["second_runs"])
    return {
        "command": f"cd <checkout of {commit}> && PYTHONPATH=. {commands.pop()}, {len(parts)} times",
        "commit": commit,
        "note": note,
        "date": parts[0].get("date"),
        "machine": parts[0].get("machine"),
        "load_avg_start": parts[0].get("load_avg_start"),
        "load_avg_end": parts[-1].get("load_avg_end"),
        "runs": sum(int(p.get("runs", 1)) for p in parts),
        "parts": [{"command": _OUT_ARG.sub("--out <run folder>", str(p.get("command", "?"))),
                   **{k: p.get(k) for k in ("date", "load_avg_start", "load_avg_end")}} for p in parts],
        "results": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("parts", nargs="+", type=Path, help="scale.json files of one checkout, in run order")
    parser.add_argument("--commit", required=True, help="the commit whose code the parts ran")
    parser.add_argument("--note", default="", help="how the runs were made (e.g. interleaved with another side's)")
    parser.add_argument("--out", type=Path, required=True, help="folder for the merged scale.json")
    args = parser.parse_args(argv)
    try:
        report = merge([_read(p) for p in args.parts], args.commit, args.note)
    except MergeError as exc:
        parser.error(str(exc))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"merged {len(args.parts)} files ({report['runs']} runs) into {args.out / 'scale.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
