"""Copy a route-bench output folder for committing, without the data set's own texts or this machine's paths.

GraphRAG-Bench questions and the corpus excerpts in answers are not ours to publish: the copy keeps every
figure and each row's `query_id` (the data set's own id, so a reader with the data can join them back),
and drops question texts and answer previews. report.md and the charts carry no question text.
Absolute paths into the shared data folder (`--data-root`, by default `../shared/data` from the working
directory, however it is spelt: as given or with symlinks resolved) are shown as `../shared/data/...`, the
spelling the README and the benchmarks use from the repository root, in report.json and report.md alike.

    python -m benchmarks.redact_report /tmp/rb_out benchmarks/results/NAME [--data-root ../shared/data]
    python -m benchmarks.redact_report --in-place benchmarks/results/NAME [...]   # rewrite committed copies
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

ROW_TEXT_FIELDS = ("question", "response_preview")
DATA_SHOWN_AS = "../shared/data"
DEFAULT_DATA_ROOT = "../shared/data"
NOTE = "Question texts and answer previews removed: the data set is read from ../shared/data, not copied here; rows keep query_id"


def _root_pattern(data_root: str | Path) -> re.Pattern[str]:
    """Every absolute spelling of the data folder (as given, and with symlinks resolved), as a whole path
    component: `/work/shared/data/x` and `/work/shared/data` match, `/work/shared/database` does not."""
    folder = Path(data_root).expanduser()
    spellings = sorted({os.path.abspath(folder), os.path.realpath(folder)}, key=len, reverse=True)
    alternatives = "|".join(re.escape(s.rstrip("/")) for s in spellings if s.rstrip("/"))
    return re.compile(rf"(?<![\w.~/-])(?:{alternatives})(?![\w.~-])")


def relativise(value: Any, data_root: str | Path) -> Any:
    """`value` (a string, or JSON-like lists and dicts of them) with absolute data-folder paths shown as
    `../shared/data/...`; everything else, keys included, unchanged."""
    pattern = _root_pattern(data_root)

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return pattern.sub(DATA_SHOWN_AS, item)
        if isinstance(item, list):
            return [walk(x) for x in item]
        if isinstance(item, dict):
            return {k: walk(v) for k, v in item.items()}
        return item

    return walk(value)


def redact(report: dict[str, Any], data_root: str | Path | None = None) -> dict[str, Any]:
    """The report without row texts; paths under `data_root` shown as `../shared/data/...`."""
    out = dict(report)
    out["rows"] = [{k: v for k, v in row.items() if k not in ROW_TEXT_FIELDS} for row in report.get("rows", [])]
    out["redacted"] = NOTE
    return relativise(out, data_root) if data_root else out


def _leaked_questions(report: dict[str, Any], markdown: str) -> list[str]:
    texts = {str(r.get("question")) for r in report.get("rows", []) if r.get("question")}
    return sorted(t for t in texts if t in markdown)


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, indent=1) + "\n", encoding="utf-8")


def copy_redacted(src: Path, dest: Path, data_root: str | Path | None) -> str | None:
    """Copy `src` (a route-bench output folder) to `dest` redacted; the problem, if one stops the copy."""
    if not (src / "report.json").is_file():
        return f"{src}: no report.json (not a route-bench output folder)"
    report = json.loads((src / "report.json").read_text(encoding="utf-8"))
    markdown = (src / "report.md").read_text(encoding="utf-8") if (src / "report.md").is_file() else ""
    leaked = _leaked_questions(report, markdown)
    if leaked:
        return f"{src}/report.md quotes {len(leaked)} question text(s); not copied"
    dest.mkdir(parents=True, exist_ok=True)
    _write_json(dest / "report.json", redact(report, data_root))
    if markdown:
        (dest / "report.md").write_text(relativise(markdown, data_root) if data_root else markdown, encoding="utf-8")
    for name in sorted(p.name for p in src.glob("*.png")):
        shutil.copyfile(src / name, dest / name)
    return None


def redact_in_place(folder: Path, data_root: str | Path) -> str | None:
    """Rewrite a committed copy (its source run may be gone) through the same functions: report.json is
    redacted again (a no-op on a redacted one), every other JSON and Markdown file relativised."""
    if not folder.is_dir():
        return f"{folder}: not a folder"
    markdown = (folder / "report.md").read_text(encoding="utf-8") if (folder / "report.md").is_file() else ""
    for path in sorted(folder.glob("*.json")):
        value = json.loads(path.read_text(encoding="utf-8"))
        if path.name == "report.json":
            leaked = _leaked_questions(value, markdown)
            if leaked:
                return f"{folder}/report.md quotes {len(leaked)} question text(s); left as it was"
            new = redact(value, data_root)
        else:
            new = relativise(value, data_root)
        if new != value:  # a file with nothing to change keeps its own formatting
            _write_json(path, new)
    for path in sorted(folder.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        if relativise(text, data_root) != text:
            path.write_text(relativise(text, data_root), encoding="utf-8")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path, nargs="?")
    parser.add_argument("dest", type=Path, nargs="?")
    parser.add_argument("--in-place", type=Path, nargs="+", default=[], metavar="FOLDER",
                        help="rewrite already committed copies instead of copying a run")
    parser.add_argument("--data-root", default=DEFAULT_DATA_ROOT,
                        help=f"the shared data folder, shown as {DATA_SHOWN_AS} (default: {DEFAULT_DATA_ROOT})")
    args = parser.parse_args(argv)
    if bool(args.in_place) == bool(args.src and args.dest):
        parser.error("give SRC and DEST, or --in-place FOLDER...")
    problems = ([redact_in_place(folder, args.data_root) for folder in args.in_place] if args.in_place
                else [copy_redacted(args.src, args.dest, args.data_root)])
    for problem in filter(None, problems):
        print(problem, file=sys.stderr)
    return 1 if any(problems) else 0


if __name__ == "__main__":
    raise SystemExit(main())
