"""Other people's questions for index routing: a seeded, stratified sample split into a dev half and a report half.

The questions were written by other people for the corpora the full indexes hold, and each has a known right index:

* GraphRAG-Bench novel dev questions (right index: the novels) and medical dev questions (right index: medical),
  sampled per question type;
* MultiHop-RAG sample questions (news articles of Sept-Dec 2023; no index holds them). Only those whose evidence
  articles are all sports or entertainment news are kept, as questions no index covers: technology and business
  news may be about Microsoft or its guests (the earnings calls, the podcast), and health or science news may be
  about the medical corpus, so those are left out rather than guessed. Questions with no evidence (`null_query`)
  are left out too: nothing says what they are about.

The Microsoft GraphRAG benchmark questions are never read here: they are held out for the independent check.

Each sampled question goes to the dev half or the report half by a hash of its id, so the split does not depend on
the sample's order or size. Mechanism changes may be made while looking at the dev half only.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import defaultdict
from pathlib import Path
from typing import Any

# evidence categories of a MultiHop-RAG question that none of the six corpora is about
OUTSIDE_CATEGORIES = frozenset(("sports", "entertainment"))


def half(qid: str) -> str:
    """'dev' or 'report', from a hash of the question id."""
    return "dev" if hashlib.sha256(qid.encode("utf-8")).digest()[0] % 2 == 0 else "report"


def _graphrag_bench(data: Path, subset: str, index: str) -> list[dict[str, Any]]:
    import pandas as pd

    frame = pd.read_parquet(data / "graphrag_bench" / "questions" / f"{subset}_questions_dev.parquet",
                            columns=["id", "source", "question", "question_type"])
    # `id` is not unique across books (one id appears under two sources): the id joined with its source is
    return [{"id": f"{r.id}@{r.source}", "question": str(r.question), "indexes": [index],
             "source": f"graphrag-bench {subset}", "type": str(r.question_type)} for r in frame.itertuples()]


def _multihop(data: Path) -> list[dict[str, Any]]:
    path = data / "multihop_rag_sample500" / "multihop_rag_sample500_dev.jsonl"
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        categories = {str(e.get("category", "")) for e in row.get("evidence_list") or []}
        if categories and categories <= OUTSIDE_CATEGORIES:
            out.append({"id": f"multihop:{row['id']}", "question": str(row["query"]), "indexes": [],
                        "source": "multihop-rag (sports, entertainment)", "type": str(row["question_type"])})
    return out


def sample(data: Path, per_type: int, seed: int, novel_index: str = "novel",
           medical_index: str = "medical") -> list[dict[str, Any]]:
    """Up to `per_type` questions per (source, question type), seeded; each marked with its half."""
    pool = (_graphrag_bench(data, "novel", novel_index) + _graphrag_bench(data, "medical", medical_index)
            + _multihop(data))
    strata: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for q in pool:
        strata[(q["source"], q["type"])].append(q)
    rng = random.Random(seed)
    chosen = []
    for key in sorted(strata):
        rows = strata[key]
        chosen.extend(rng.sample(rows, min(per_type, len(rows))))
    return [{**q, "half": half(q["id"])} for q in chosen]
