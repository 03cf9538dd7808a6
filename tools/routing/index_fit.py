"""Labelled questions measured on real offline indexes: what the classifier's index stage is fitted on.

Rows come from three places, each question probed on the index of its own corpus (`router.index_probe`):

* `data/index_dev.jsonl`: questions written for this project about the podcast, earnings-call, novel, medical
  and Operation Dulce indexes (every route, several kinds each);
* GraphRAG-Bench development questions (novel, medical) on the offline indexes of their corpora;
* the project's collection questions about podcasts and earnings calls, on those two indexes.

`data/index_eval.jsonl` and `data/index_eval_2.jsonl` hold the evaluation questions about the podcast and
earnings-call indexes, `data/index_eval_3.jsonl` those about the podcast, earnings-call and novel indexes; they are
never read here (`load_questions` refuses them). Index folders are found under `--indexes` (default `../indexes` beside
the repository: `podcast`, `earnings`, `novel`, `medical`, as built by `graphroute index`), Operation Dulce in the
shared data folder.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from router.index_probe import Probe, probe, summarise_links

if TYPE_CHECKING:
    from shared_context.index import Index

DATA = Path(__file__).resolve().parent / "data"
INDEX_DEV = DATA / "index_dev.jsonl"
INDEX_EVAL = DATA / "index_eval.jsonl"  # evaluation only
INDEX_EVAL_2 = DATA / "index_eval_2.jsonl"  # evaluation only: only its totals are reported
INDEX_EVAL_3 = DATA / "index_eval_3.jsonl"  # evaluation only, written last: only its totals are reported
EVALUATION_SETS = {"index_eval": INDEX_EVAL, "index_eval_2": INDEX_EVAL_2, "index_eval_3": INDEX_EVAL_3}
DEFAULT_INDEXES = Path(__file__).resolve().parents[3] / "indexes"
COLLECTION_INDEX = {"podcasts": "podcast", "earnings_calls": "earnings"}  # collection kind -> index it is measured on


@dataclass(frozen=True)
class IndexQuestion:
    question: str
    label: str
    index: str  # podcast | earnings | novel | medical | dulce
    source: str  # index_dev | graphrag_bench | collections | index_eval | index_eval_2 | index_eval_3
    kind: str = ""  # global | one_document | one_entity | drift ("" when not annotated)
    lang: str = "en"
    alt: str = ""  # a second route that is also right (the label map's `alt` reading), "" when none


@dataclass(frozen=True)
class Measured:
    item: IndexQuestion
    probe: Probe

    @property
    def vector(self) -> np.ndarray:
        return self.probe.vector()


class EvaluationDataError(ValueError):
    """Raised when fitting code is pointed at the with-index evaluation questions."""


def load_questions(path: Path = INDEX_DEV, source: str = "index_dev") -> list[IndexQuestion]:
    held_out = {p.resolve(): name for name, p in EVALUATION_SETS.items()}
    if path.resolve() in held_out and source != held_out[path.resolve()]:
        raise EvaluationDataError(f"{path} holds evaluation questions; the index stage is never fitted on them")
    with path.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [IndexQuestion(r["question"], r["label"], r["index"], source, r.get("kind", ""), r.get("lang", "en"))
            for r in rows]


def load_eval(name: str = "index_eval") -> list[IndexQuestion]:
    """One set of with-index evaluation questions (`EVALUATION_SETS`; for `benchmarks.router_eval` only)."""
    return load_questions(EVALUATION_SETS[name], name)


def index_paths(indexes: Path, data_dir: Path) -> dict[str, Path]:
    paths = {name: indexes / name for name in ("podcast", "earnings", "novel", "medical")}
    paths["dulce"] = data_dir / "operation_dulce"
    return {name: path for name, path in paths.items() if (path / "entities.parquet").is_file()}


def load_indexes(paths: dict[str, Path]) -> dict[str, Index]:
    from shared_context import load_index

    return {name: load_index(path) for name, path in paths.items()}


def measure_one(index: Index, question: str) -> Probe:
    from shared_context.linking import link_entities

    entities = index.entities
    links = summarise_links(link_entities(index, question), lambda pos: str(entities[pos].title))
    return probe(index, question, links)


def measure(rows: Iterable[IndexQuestion], indexes: dict[str, Index],
            progress: Callable[[str], None] | None = None) -> list[Measured]:
    """Probe every row whose index is available (others are skipped)."""
    out = []
    for row in rows:
        index = indexes.get(row.index)
        if index is not None:
            out.append(Measured(row, measure_one(index, row.question)))
    if progress is not None:
        progress(f"measured {len(out)} questions on {len(indexes)} indexes")
    return out


def stage_inputs(text_proba: np.ndarray, measured: Sequence[Measured]) -> np.ndarray:
    """[log wording probabilities | probe features] per row, what the index stage weighs."""
    logs = np.log(np.clip(text_proba, 1e-6, 1.0))
    return np.hstack([logs, np.vstack([m.vector for m in measured])])
