"""What the benchmark scripts share: where the shared data folder is, and how a report is printed and saved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# The data sets live beside the repository (`../shared/data`), never inside it.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CAROL_INDEX = SHARED_DATA / "christmas_carol_graphrag_index"


def emit_report(report: dict[str, Any], out: str | Path | None, printed: dict[str, Any] | None = None) -> None:
    """Print `printed` (default: the whole report) as JSON, and write the whole report to `out` if given."""
    print(json.dumps(report if printed is None else printed, indent=2))
    if out:
        Path(out).write_text(json.dumps(report, indent=2) + "\n")
