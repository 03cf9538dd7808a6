"""Query sets for `route-bench`: plain text, CSV, JSONL or parquet files, or a built-in set.

A query has an `id`, the `question`, an optional `label` (the engine that should answer it) and, for
grading, an optional gold `answer`, gold `evidence` (a list, or one string of claims separated by "; " as
GraphRAG-Bench writes them) and a `question_type`. A label map (`--label-map`, JSON
`{"field": "question_type", "map": {"Fact Retrieval": "local", ...}}`) derives labels from another column; an
`alt` column (or the label map's `alt` object) names a second engine that is also right, so the router choosing
it is no routing error.
Every problem with the input becomes a `BenchInputError` naming the file and line, never a traceback.
"""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BUILTIN_DIR = Path(__file__).resolve().parent / "queries"
# Short names users type after `builtin:`; any other `<name>.jsonl` in BUILTIN_DIR works too.
BUILTIN_ALIASES = {"sample": "sample_corpus", "carol": "christmas_carol"}
VALID_LABELS = ("local", "global", "drift", "basic")
QUESTION_COLUMNS = ("question", "query", "text")


class BenchInputError(ValueError):
    """A command-line input (index, queries, engines, model spec) is unusable; the message says why."""


EVIDENCE_SEPARATOR = "; "


@dataclass(frozen=True)
class Query:
    id: str
    question: str
    label: str | None = None
    answer: str | None = None  # gold answer (grading)
    evidence: tuple[str, ...] = field(default_factory=tuple)  # gold evidence claims (grading)
    question_type: str | None = None
    alt: str | None = None  # a second engine that is also right (an `alt` column, or the label map's `alt`)


@dataclass(frozen=True)
class LabelMap:
    """Labels from another column: `field` value -> engine; values mapped to "exclude" drop the question."""

    field: str
    mapping: dict[str, str]
    alt: dict[str, str] = field(default_factory=dict)  # value -> an engine that is also right

    @classmethod
    def load(cls, path: str) -> LabelMap:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BenchInputError(f"label map not found: {path}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise BenchInputError(f"cannot read label map {path}: {err}") from None
        if not isinstance(data, dict) or not isinstance(data.get("field"), str) or not isinstance(data.get("map"), dict):
            raise BenchInputError(f"label map {path} needs a 'field' (column name) and a 'map' (value -> engine)")
        mapping = {str(k): str(v).strip().lower() for k, v in data["map"].items()}
        bad = sorted(v for v in set(mapping.values()) if v not in (*VALID_LABELS, "exclude"))
        if bad:
            raise BenchInputError(f"label map {path}: {bad[0]!r} is not an engine (use {', '.join(VALID_LABELS)} "
                                  "or exclude)")
        alt = {str(k): str(v).strip().lower() for k, v in (data.get("alt") or {}).items()}
        return cls(field=data["field"].strip().lower(), mapping=mapping, alt=alt)


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.jsonl"))


def resolve_builtin(name: str) -> Path:
    stem = BUILTIN_ALIASES.get(name, name)
    path = BUILTIN_DIR / f"{stem}.jsonl"
    if not path.is_file():
        known = ", ".join(f"builtin:{n}" for n in builtin_names()) or "none installed"
        raise BenchInputError(f"unknown built-in query set 'builtin:{name}' (known: {known})")
    return path


def load_queries(spec: str, limit: int | None = None, *, label_map: LabelMap | None = None,
                 seed: int = 0) -> list[Query]:
    """Read queries from `spec`: a path (.txt, .csv, .jsonl/.ndjson, .parquet) or `builtin:<name>`.

    `limit` keeps a stratified sample (see `stratified_sample`), not the first N questions.
    """
    path = resolve_builtin(spec.split(":", 1)[1]) if spec.startswith("builtin:") else Path(spec)
    if path.suffix.lower() == ".parquet":
        queries = _parse_parquet(path, label_map)
    else:
        queries = _read_text_file(path, label_map)
    if not queries:
        raise BenchInputError(f"queries file {path} holds no questions")
    _check_unique_ids(queries, path)
    return stratified_sample(queries, limit, seed) if limit else queries


def stratified_sample(queries: list[Query], n: int, seed: int) -> list[Query]:
    """`n` queries spread over strata (label x question type) in proportion to their sizes, at least one from
    every stratum while `n` allows; seeded, so the same file, `n` and seed give the same sample. Kept in file
    order."""
    if n >= len(queries):
        return list(queries)
    strata: dict[tuple[str, str], list[int]] = {}
    for i, q in enumerate(queries):
        strata.setdefault((q.label or "", q.question_type or ""), []).append(i)
    keys = sorted(strata)
    quota = dict.fromkeys(keys, 0)
    # One per stratum first (largest strata first when n is smaller than the number of strata) ...
    for key in sorted(keys, key=lambda k: (-len(strata[k]), k))[:n]:
        quota[key] = 1
    # ... then the rest by largest remainder of the proportional share.
    left = n - sum(quota.values())
    if left > 0:
        share = {k: n * len(strata[k]) / len(queries) - quota[k] for k in keys}
        for k in keys:
            extra = min(max(int(share[k]), 0), len(strata[k]) - quota[k], left)
            quota[k] += extra
            left -= extra
        for k in sorted(keys, key=lambda k: (-(share[k] - int(share[k])), k)):
            if left == 0:
                break
            if quota[k] < len(strata[k]):
                quota[k] += 1
                left -= 1
    rng = random.Random(seed)
    picked: list[int] = []
    for k in keys:
        picked += rng.sample(strata[k], quota[k])
    return [queries[i] for i in sorted(picked)]


def _read_text_file(path: Path, label_map: LabelMap | None) -> list[Query]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BenchInputError(f"queries file not found: {path}") from None
    except IsADirectoryError:
        raise BenchInputError(f"queries path is a directory, not a file: {path}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise BenchInputError(f"cannot read queries file {path}: {err}") from None
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return _parse_jsonl(text, path, label_map)
    if suffix == ".csv":
        return _parse_csv(text, path, label_map)
    return _parse_lines(text)


def _parse_parquet(path: Path, label_map: LabelMap | None) -> list[Query]:
    import pandas as pd

    try:
        frame = pd.read_parquet(path)
    except FileNotFoundError:
        raise BenchInputError(f"queries file not found: {path}") from None
    except Exception as err:  # pyarrow raises several types for a damaged or foreign file
        raise BenchInputError(f"cannot read parquet queries file {path}: {err}") from None
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    if not any(c in frame.columns for c in QUESTION_COLUMNS):
        raise BenchInputError(f"{path}: needs a 'question' column (found: {', '.join(frame.columns)})")
    out = []
    for n, row in enumerate(frame.to_dict("records"), start=1):
        # GraphRAG-Bench repeats an id (Novel-55f0c0e2) for two questions: keep both, name the second by row.
        out.append(_make_query(row, path, n, label_map))
    return _dedupe_ids(out)


def _parse_lines(text: str) -> list[Query]:
    # One question per line; blank lines and `#` comments are skipped. Ids are line numbers so they stay
    # stable when a user comments a question out.
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        q = line.strip()
        if q and not q.startswith("#"):
            out.append(Query(id=f"q{lineno}", question=q))
    return out


def _parse_jsonl(text: str, path: Path, label_map: LabelMap | None) -> list[Query]:
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise BenchInputError(f"{path}:{lineno}: not valid JSON ({err.msg})") from None
        if not isinstance(row, dict):
            raise BenchInputError(f"{path}:{lineno}: each line must be a JSON object with a 'question'")
        out.append(_make_query(row, path, lineno, label_map))
    return [q for q in out if q.label != "exclude"]


def _parse_csv(text: str, path: Path, label_map: LabelMap | None) -> list[Query]:
    reader = csv.DictReader(io.StringIO(text))
    fields = [f.strip().lower() for f in reader.fieldnames or []]
    if not any(c in fields for c in QUESTION_COLUMNS):
        raise BenchInputError(
            f"{path}: CSV needs a 'question' column (found: {', '.join(fields) or 'no header'})"
        )
    out = []
    for lineno, raw in enumerate(reader, start=2):
        row = {str(k).strip().lower(): v for k, v in raw.items() if k is not None}
        if not any((row.get(c) or "").strip() for c in QUESTION_COLUMNS):
            continue
        out.append(_make_query(row, path, lineno, label_map))
    return [q for q in out if q.label != "exclude"]


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and value != value):  # None / NaN
        return None
    text = str(value).strip()
    return text or None


def _evidence(value: Any) -> tuple[str, ...]:
    if isinstance(value, list | tuple) or (hasattr(value, "tolist") and not isinstance(value, str)):
        items = [str(v).strip() for v in (value.tolist() if hasattr(value, "tolist") else value)]
        return tuple(v for v in items if v)
    text = _text(value)
    return tuple(p.strip() for p in text.split(EVIDENCE_SEPARATOR) if p.strip()) if text else ()


def _make_query(row: Mapping[str, Any], path: Path, lineno: int, label_map: LabelMap | None = None) -> Query:
    row = {str(k).strip().lower(): v for k, v in row.items()}
    question = next((t for c in QUESTION_COLUMNS if (t := _text(row.get(c)))), "")
    if not question:
        raise BenchInputError(f"{path}:{lineno}: missing 'question'")
    label_raw, alt = _text(row.get("label")), _text(row.get("alt"))
    if label_raw is None and label_map is not None:
        value = _text(row.get(label_map.field))
        label_raw = label_map.mapping.get(value) if value is not None else None
        alt = label_map.alt.get(value) if value is not None else None
    label = label_raw.lower() if label_raw else None
    if label is not None and label not in (*VALID_LABELS, "exclude"):
        raise BenchInputError(
            f"{path}:{lineno}: label {label_raw!r} is not an engine (use one of {', '.join(VALID_LABELS)})"
        )
    qid = _text(row.get("id")) or f"q{lineno}"
    qtype = _text(row.get("question_type")) or _text(row.get("type"))
    if alt is not None and alt.lower() not in VALID_LABELS:
        raise BenchInputError(f"{path}:{lineno}: alt {alt!r} is not an engine (use one of {', '.join(VALID_LABELS)})")
    return Query(id=qid, question=question, label=label, answer=_text(row.get("answer")),
                 evidence=_evidence(row.get("evidence")), question_type=qtype, alt=alt.lower() if alt else None)


def _dedupe_ids(queries: list[Query]) -> list[Query]:
    seen: dict[str, int] = {}
    out = []
    for q in queries:
        if q.label == "exclude":
            continue
        n = seen.get(q.id, 0)
        seen[q.id] = n + 1
        out.append(q if n == 0 else Query(q.id + f"#{n + 1}", q.question, q.label, q.answer, q.evidence,
                                          q.question_type, q.alt))
    return out


def _check_unique_ids(queries: list[Query], path: Path) -> None:
    seen: set[str] = set()
    for q in queries:
        if q.id in seen:
            raise BenchInputError(f"{path}: duplicate query id {q.id!r}")
        seen.add(q.id)
