"""Query sets for `route-bench`: plain text, CSV or JSONL files, or a built-in set.

A query has an `id`, the `question` and an optional `label` (the engine that should answer it).
Every problem with the input becomes a `BenchInputError` naming the file and line, never a traceback.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path

BUILTIN_DIR = Path(__file__).resolve().parent / "queries"
# Short names users type after `builtin:`; any other `<name>.jsonl` in BUILTIN_DIR works too.
BUILTIN_ALIASES = {"sample": "sample_corpus", "carol": "christmas_carol"}
VALID_LABELS = ("local", "global", "drift", "basic")
QUESTION_COLUMNS = ("question", "query", "text")


class BenchInputError(ValueError):
    """A command-line input (index, queries, engines, model spec) is unusable; the message says why."""


@dataclass(frozen=True)
class Query:
    id: str
    question: str
    label: str | None = None


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.jsonl"))


def resolve_builtin(name: str) -> Path:
    stem = BUILTIN_ALIASES.get(name, name)
    path = BUILTIN_DIR / f"{stem}.jsonl"
    if not path.is_file():
        known = ", ".join(f"builtin:{n}" for n in builtin_names()) or "none installed"
        raise BenchInputError(f"unknown built-in query set 'builtin:{name}' (known: {known})")
    return path


def load_queries(spec: str, limit: int | None = None) -> list[Query]:
    """Read queries from `spec`: a path (.txt, .csv, .jsonl/.json-lines) or `builtin:<name>`."""
    path = resolve_builtin(spec.split(":", 1)[1]) if spec.startswith("builtin:") else Path(spec)
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
        queries = _parse_jsonl(text, path)
    elif suffix == ".csv":
        queries = _parse_csv(text, path)
    else:
        queries = _parse_lines(text)
    if not queries:
        raise BenchInputError(f"queries file {path} holds no questions")
    _check_unique_ids(queries, path)
    return queries[:limit] if limit else queries


def _parse_lines(text: str) -> list[Query]:
    # One question per line; blank lines and `#` comments are skipped. Ids are line numbers so they stay
    # stable when a user comments a question out.
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        q = line.strip()
        if q and not q.startswith("#"):
            out.append(Query(id=f"q{lineno}", question=q))
    return out


def _parse_jsonl(text: str, path: Path) -> list[Query]:
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
        out.append(_make_query(row, path, lineno))
    return out


def _parse_csv(text: str, path: Path) -> list[Query]:
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
        out.append(_make_query(row, path, lineno))
    return out


def _make_query(row: dict[str, object], path: Path, lineno: int) -> Query:
    question = next((str(row[c]).strip() for c in QUESTION_COLUMNS if row.get(c)), "")
    if not question:
        raise BenchInputError(f"{path}:{lineno}: missing 'question'")
    label_raw = row.get("label")
    label = str(label_raw).strip().lower() if label_raw not in (None, "") else None
    if label is not None and label not in VALID_LABELS:
        raise BenchInputError(
            f"{path}:{lineno}: label {label_raw!r} is not an engine (use one of {', '.join(VALID_LABELS)})"
        )
    qid = str(row["id"]).strip() if row.get("id") not in (None, "") else f"q{lineno}"
    return Query(id=qid, question=question, label=label)


def _check_unique_ids(queries: list[Query], path: Path) -> None:
    seen: set[str] = set()
    for q in queries:
        if q.id in seen:
            raise BenchInputError(f"{path}: duplicate query id {q.id!r}")
        seen.add(q.id)
