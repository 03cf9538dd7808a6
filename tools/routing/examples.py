"""The labelled questions the router classifier is trained and evaluated on.

* `data/questions.jsonl`: the project's own set (sources ``graphroute``: hand-written questions and the domain
  templates; ``collections``: questions about collections of documents and speakers; see
  `tools.routing.question_bank`);
* GraphRAG-Bench novel + medical development questions and the MultiHop-RAG development sample, read from the
  shared data folder and mapped to routes by each data set's `router_label_map.json` (labels mapped to
  ``exclude`` are dropped).

The new-styles sets (`data/new_styles*.jsonl`) are evaluation only: every loader here refuses them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
QUESTIONS = DATA / "questions.jsonl"
NEW_STYLES = DATA / "new_styles.jsonl"  # evaluation only, never trained on
NEW_STYLES_2 = DATA / "new_styles_2.jsonl"  # second held-out set, same rule
NEW_STYLES_3 = DATA / "new_styles_3.jsonl"  # third held-out set, written last, same rule
HELD_OUT = (NEW_STYLES, NEW_STYLES_2, NEW_STYLES_3)
DEFAULT_DATA_DIR = REPO_ROOT.parent / "shared" / "data"
CLASSES = ("drift", "global", "local")
SOURCES = ("graphroute", "collections", "graphrag_bench", "multihop")


@dataclass(frozen=True)
class Example:
    question: str
    label: str
    source: str  # graphroute | collections | graphrag_bench | multihop
    subset: str  # finer grouping for reports: graphroute | collections | novel | medical | multihop
    lang: str
    entities: tuple[str, ...] = ()
    domain: str = ""
    group: str = ""  # template id (questions expanded from one template share it); "" = the question itself
    alt: str = ""  # a second route that is also right (the label map's `alt` reading), "" when none

    @property
    def cv_group(self) -> str:
        """What grouped cross-validation keeps together: the template, or the question when hand-written."""
        return self.group or f"{self.source}:{self.question}"


# ------------------------------------------------------------------------------------------------ data


class HeldOutDataError(ValueError):
    """Raised when training code is pointed at a held-out new-styles evaluation set."""


def refuse_held_out(path: Path) -> None:
    for held_out in HELD_OUT:
        if path.resolve() == held_out.resolve() or path.name == held_out.name:
            raise HeldOutDataError(f"{path} is a held-out new-styles evaluation set; it is never training data")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def load_own(path: Path = QUESTIONS) -> list[Example]:
    refuse_held_out(path)
    rows = []
    for r in read_jsonl(path):
        source = str(r.get("source", "graphroute"))
        rows.append(Example(r["question"], r["label"], source, source, r.get("lang", "en"),
                            tuple(r.get("entities", ())), r.get("domain", ""), str(r.get("template", ""))))
    return rows


def _label_map(path: Path) -> tuple[str, dict[str, str], dict[str, str]]:
    """(field, label per value, the also-right `alt` label per value: local for questions scoped to one book or
    a few named articles, where it finds the same evidence as DRIFT at a fraction of the cost)."""
    spec = json.loads(path.read_text(encoding="utf-8"))
    return spec["field"], dict(spec["map"]), dict(spec.get("alt", {}))


def load_graphrag_bench(data_dir: Path) -> list[Example]:
    import pandas as pd  # only needed at train time

    base = data_dir / "graphrag_bench"
    field, mapping, alt = _label_map(base / "router_label_map.json")
    rows = []
    for subset in ("novel", "medical"):
        frame = pd.read_parquet(base / "questions" / f"{subset}_questions_dev.parquet", columns=["question", field])
        for question, qtype in zip(frame["question"], frame[field], strict=True):
            label = mapping.get(str(qtype), "exclude")
            if label in CLASSES:
                rows.append(Example(str(question), label, "graphrag_bench", subset, "en", domain=subset,
                                    alt=alt.get(str(qtype), "")))
    return rows


def load_multihop(data_dir: Path) -> list[Example]:
    base = data_dir / "multihop_rag_sample500"
    field, mapping, alt = _label_map(base / "router_label_map.json")
    rows = []
    with (base / "multihop_rag_sample500_dev.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                r = json.loads(line)
                label = mapping.get(str(r[field]), "exclude")
                if label in CLASSES:
                    rows.append(Example(str(r["query"]), label, "multihop", "multihop", "en", domain="news",
                                        alt=alt.get(str(r[field]), "")))
    return rows


def load_all(data_dir: Path | None) -> list[Example]:
    rows = load_own()
    if data_dir is not None:
        rows += load_graphrag_bench(data_dir) + load_multihop(data_dir)
    return rows
