"""Copy a route-bench output folder for committing, without the data set's own texts.

GraphRAG-Bench questions and the corpus excerpts in answers are not ours to publish: the copy keeps every
figure and each row's `query_id` (the data set's own id, so a reader with the data can join them back),
and drops question texts and answer previews. report.md and the charts carry no question text.

    python -m benchmarks.redact_report /tmp/rb_out benchmarks/results/NAME [--data-root ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

ROW_TEXT_FIELDS = ("question", "response_preview")
NOTE = "Question texts and answer previews removed: the data set is read from ../shared/data, not copied here; rows keep query_id"


def redact(report: dict[str, Any], data_root: str | None = None) -> dict[str, Any]:
    """The report without row texts; the queries path is shown relative to `data_root` when under it."""
    out = dict(report)
    out["rows"] = [{k: v for k, v in row.items() if k not in ROW_TEXT_FIELDS} for row in report.get("rows", [])]
    queries = dict(out.get("queries") or {})
    spec = str(queries.get("spec", ""))
    if data_root and spec.startswith(data_root.rstrip("/") + "/"):
        queries["spec"] = f"{spec[len(data_root.rstrip('/')) + 1:]} (read from ../shared/data)"
        out["queries"] = queries
    out["redacted"] = NOTE
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--data-root", default=None, help="path prefix of the shared data folder, shown as relative")
    args = parser.parse_args(argv)
    src: Path = args.src
    if not (src / "report.json").is_file():
        print(f"{src}: no report.json (not a route-bench output folder)", file=sys.stderr)
        return 2
    report = json.loads((src / "report.json").read_text(encoding="utf-8"))
    texts = {str(r.get("question")) for r in report.get("rows", []) if r.get("question")}
    markdown = (src / "report.md").read_text(encoding="utf-8") if (src / "report.md").is_file() else ""
    leaked = sorted(t for t in texts if t in markdown)
    if leaked:
        print(f"{src}/report.md quotes {len(leaked)} question text(s); not copied", file=sys.stderr)
        return 1
    args.dest.mkdir(parents=True, exist_ok=True)
    (args.dest / "report.json").write_text(json.dumps(redact(report, args.data_root), indent=1) + "\n", encoding="utf-8")
    for name in ["report.md", *sorted(p.name for p in src.glob("*.png"))]:
        if (src / name).is_file():
            shutil.copyfile(src / name, args.dest / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
