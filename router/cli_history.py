"""`--history` of `graphroute ask` and `graphroute questions`: one form for both.

Each value is one of: a file holding a JSON list of earlier turns, an inline JSON list of turns, or an earlier
question as plain text. A JSON list holds `{"role": "user" | "assistant", "content": ...}` messages or plain
strings (earlier questions); values are read in order, oldest first, and joined into one history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: `graphroute --help` reads HELP and stays fast
    from engines.models.base import Message

HELP = ("earlier turns, oldest first: questions as plain text (several may follow the flag), an inline JSON "
        "list of turns ('[{\"role\": \"user\", \"content\": \"...\"}, ...]' or '[\"question\", ...]'), or a "
        "file holding such a list")


class HistoryError(ValueError):
    """A --history value that is neither a readable file, valid JSON turns nor a question."""


def read_history(values: Sequence[str] | None) -> list[Message]:
    """The history the `--history` values give (module docstring); HistoryError names the bad value."""
    from engines.plan import normalise_history

    turns: list[str | Mapping[str, object]] = []
    for value in values or []:
        turns.extend(_turns(value))
    try:
        return normalise_history(turns)
    except ValueError as exc:
        raise HistoryError(f"--history: {exc}") from None


def _turns(value: str) -> list[str | Mapping[str, object]]:
    text = value.strip()
    source = "inline JSON"
    if not text.startswith(("[", "{")):
        path = Path(value).expanduser()
        if not path.is_file():
            if path.suffix.lower() == ".json":  # looks like a file the user meant: say it is missing
                raise HistoryError(f"--history {value}: no such file")
            return [value] if text else []
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise HistoryError(f"--history {value}: cannot read the file ({exc})") from None
        source = f"the file {value}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HistoryError(f"--history: {source} is not valid JSON ({exc})") from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise HistoryError(f"--history: {source} must be a JSON list of turns, got {type(data).__name__}")
    turns: list[str | Mapping[str, object]] = data
    return turns
