"""Parse an engine prompt into its parts (ARCHITECTURE.md, "Tasks and the prompt contract").

The question is the last user message. Data sits in the system message as context tables
(`-----Name-----` then a `|`-delimited CSV table up to a blank line outside quotes), analyst
blocks (`----Analyst n----`, `Importance Score: s`, text) or a `-----Template-----` text, plus
scalar lines `Key: value`. Parsing never raises: a malformed part is skipped, so the model can
still answer honestly from whatever was readable.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

_HEADER_RE = re.compile(r"^\s*-{3,}\s*([^-\s][^\n]*?)\s*-{3,}\s*$")
_ANALYST_RE = re.compile(r"analyst\s*(\d+)", re.IGNORECASE)
_IMPORTANCE_RE = re.compile(r"^\s*importance score\s*:\s*(-?[\d.]+)", re.IGNORECASE)
_SCALAR_KEYS = (
    "response type",
    "overall question",
    "max follow-ups",
    "number of questions",
    "max length",
    "engines",
)
_SCALAR_RE = re.compile(
    r"^\s*(" + "|".join(re.escape(k) for k in _SCALAR_KEYS) + r")\s*:\s*(.*?)\s*$", re.IGNORECASE
)
_CANONICAL = {
    "conversation history": "Conversation History",
    "reports": "Reports",
    "entities": "Entities",
    "relationships": "Relationships",
    "claims": "Claims",
    "covariates": "Claims",
    "sources": "Sources",
    "template": "Template",
}


@dataclass
class Table:
    """One context table; column names are lower-cased, every row maps column -> cell text."""

    name: str
    columns: list[str]
    rows: list[dict[str, str]]

    def column(self, *candidates: str) -> str | None:
        """The first of `candidates` that is a column of this table."""
        for c in candidates:
            if c in self.columns:
                return c
        return None

    @property
    def id_column(self) -> str:
        return "id" if "id" in self.columns else self.columns[0]

    def ids(self) -> list[str]:
        key = self.id_column
        return [r.get(key, "") for r in self.rows if r.get(key, "")]


@dataclass(frozen=True)
class AnalystBlock:
    number: int
    importance: float
    text: str


@dataclass
class ParsedPrompt:
    question: str
    tables: dict[str, Table] = field(default_factory=dict)
    analysts: list[AnalystBlock] = field(default_factory=list)
    scalars: dict[str, str] = field(default_factory=dict)
    template: str = ""
    history: list[tuple[str, str]] = field(default_factory=list)  # (role, content), oldest first

    def table(self, name: str) -> Table | None:
        return self.tables.get(name)

    def scalar(self, key: str, default: str = "") -> str:
        return self.scalars.get(key.lower(), default)

    def scalar_int(self, key: str, default: int, *, low: int = 0, high: int = 1000) -> int:
        match = re.search(r"-?\d+", self.scalar(key))
        value = int(match.group(0)) if match else default
        return max(low, min(high, value))


def _counted(lines: Sequence[str], start: int, counter: list[int]) -> Iterator[str]:
    for i in range(start, len(lines)):
        counter[0] = i - start + 1
        yield lines[i] + "\n"


def _read_table(lines: Sequence[str], start: int, name: str) -> tuple[Table | None, int]:
    """Read CSV rows from `start` to the first blank line that is not inside a quoted field."""
    consumed = [0]
    rows: list[list[str]] = []
    ended_on_header = False
    try:
        for row in csv.reader(_counted(lines, start, consumed), delimiter="|", quotechar='"'):
            if not row or all(not c.strip() for c in row):
                break
            if len(row) == 1 and _HEADER_RE.match(row[0]):
                ended_on_header = True
                break
            rows.append(row)
    except csv.Error:
        pass  # an unterminated quote: keep the rows read so far
    end = start + consumed[0] - (1 if ended_on_header else 0)
    if len(rows) < 2:
        return None, max(end, start + 1)
    header = [h.strip().lower() for h in rows[0]]
    records = []
    for row in rows[1:]:
        cells = [c.strip() for c in row] + [""] * max(0, len(header) - len(row))
        records.append(dict(zip(header, cells, strict=False)))
    return Table(name=name, columns=header, rows=records), max(end, start + 1)


def _read_text(lines: Sequence[str], start: int) -> tuple[str, int]:
    """Free text up to the next section header or scalar line."""
    end = start
    while end < len(lines) and not _HEADER_RE.match(lines[end]) and not _SCALAR_RE.match(lines[end]):
        end += 1
    return "\n".join(lines[start:end]).strip(), end


def _read_analyst(lines: Sequence[str], start: int, number: int) -> tuple[AnalystBlock, int]:
    importance = 0.0
    if start < len(lines) and (m := _IMPORTANCE_RE.match(lines[start])):
        try:
            importance = float(m.group(1))
        except ValueError:
            importance = 0.0
        start += 1
    text, end = _read_text(lines, start)
    return AnalystBlock(number=number, importance=importance, text=text), end


def parse_data(text: str, into: ParsedPrompt) -> None:
    """Add every table, analyst block, template and scalar found in `text` to `into`."""
    lines = text.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        header = _HEADER_RE.match(line)
        if header:
            name = header.group(1).strip()
            analyst = _ANALYST_RE.fullmatch(name)
            canonical = _CANONICAL.get(name.casefold())
            if analyst:
                block, i = _read_analyst(lines, i + 1, int(analyst.group(1)))
                into.analysts.append(block)
            elif canonical == "Template":
                into.template, i = _read_text(lines, i + 1)
            elif canonical:
                table, i = _read_table(lines, i + 1, canonical)
                if table is not None:
                    existing = into.tables.get(canonical)
                    if existing is not None and existing.columns == table.columns:
                        existing.rows.extend(table.rows)
                    else:
                        into.tables[canonical] = table
            else:
                i += 1
            continue
        scalar = _SCALAR_RE.match(line)
        if scalar and scalar.group(2) and scalar.group(1).lower() not in into.scalars:
            into.scalars[scalar.group(1).lower()] = scalar.group(2)
        i += 1


def _has_data(p: ParsedPrompt) -> bool:
    return bool(p.tables or p.analysts or p.template)


def _question_outside_sections(text: str) -> str:
    """When one user message carries data and question, the question is its last prose line.

    A section is skipped from its header to the next blank line (a fallback, so not quote-aware).
    """
    prose: list[str] = []
    in_section = False
    for line in text.split("\n"):
        if _HEADER_RE.match(line):
            in_section = True
        elif not line.strip():
            in_section = False
        elif not in_section and not _SCALAR_RE.match(line) and not _IMPORTANCE_RE.match(line):
            prose.append(line.strip())
    return prose[-1] if prose else ""


def _history_from_table(table: Table) -> list[tuple[str, str]]:
    role_col = table.column("turn", "role", "speaker")
    text_col = table.column("content", "text", "message") or table.columns[-1]
    out = []
    for row in table.rows:
        role = (row.get(role_col, "user") if role_col else "user").strip().lower() or "user"
        content = row.get(text_col, "").strip()
        if content:
            out.append(
                ("assistant" if role.startswith(("assistant", "system", "ai", "bot")) else "user", content)
            )
    return out


def parse_messages(messages: Sequence[Mapping[str, object]]) -> ParsedPrompt:
    """Split a chat request into question, data and scalars; never raises on odd input."""
    clean = [
        (str(m.get("role", "user")), str(m.get("content", "") or ""))
        for m in messages
        if isinstance(m, Mapping)
    ]
    last_user = max((i for i, (role, _) in enumerate(clean) if role == "user"), default=-1)
    question = clean[last_user][1].strip() if last_user >= 0 else ""
    parsed = ParsedPrompt(question=question)
    for role, content in clean:
        if role == "system":
            parse_data(content, parsed)
    if not _has_data(parsed):
        for i, (role, content) in enumerate(clean):
            if role != "system" and i != last_user:
                parse_data(content, parsed)
    if not _has_data(parsed) and last_user >= 0:
        parse_data(question, parsed)
        if _has_data(parsed):
            parsed.question = _question_outside_sections(question)
    history_table = parsed.tables.get("Conversation History")
    if history_table is not None:
        parsed.history = _history_from_table(history_table)
    else:
        parsed.history = [
            (r, c) for i, (r, c) in enumerate(clean) if r in ("user", "assistant") and i < last_user
        ]
    return parsed
