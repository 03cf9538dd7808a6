"""Turn what a (local) model wrote into JSON: the pure, schema-free half of structured output.

Handles, in this order: `<think>…</think>` blocks (also an unclosed `<think>` or a lone `</think>`),
code fences, doubled template braces `{{ }}`, prose before/after the outermost object, single-quoted
strings, unescaped quotes inside strings, raw newlines in strings, Python literals (True/False/None),
unquoted keys, comments, trailing and doubled commas, and truncation (an unterminated string, object
or array is closed, either by cutting back to the last complete element or by closing in place).
`json_repair` is the last resort. `repair_candidates` returns every distinct parse, best first, so the
caller can pick the first that validates against its schema.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import json_repair

_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.S | re.I)
_THINK_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.I)
_THINK_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.I)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n?(.*?)(?:```|\Z)", re.S)
_LITERALS = {"True": "true", "False": "false", "None": "null", "true": "true", "false": "false",
             "null": "null", "NaN": "null", "Infinity": "null", "undefined": "null"}
_CLOSER = {"{": "}", "[": "]"}
_MAX_STARTS = 12  # openers tried per text; bounds the work on long reasoning dumps


class _Scan:
    """One left-to-right pass from an opening bracket, emitting normalised JSON text."""

    def __init__(self, text: str, start: int) -> None:
        self.text = text
        self.i = start
        self.out: list[str] = []
        self.stack: list[str] = []
        self.safe_len = 0  # len(out) after the last complete element inside a container
        self.safe_stack: list[str] = []
        self.complete = False
        self.open_string = False

    def _mark_safe(self) -> None:
        # Safe cut points: after a whole array element, or a whole top-level field. Never inside a
        # nested object, so a cut drops a half-written element instead of keeping it incomplete.
        if not self.stack or (self.stack[-1] != "[" and len(self.stack) > 1):
            return
        self.safe_len = len(self.out)
        self.safe_stack = list(self.stack)

    def _last_token(self) -> str:
        for piece in reversed(self.out):
            if piece.strip():
                return piece.strip()[-1]
        return ""

    def _drop_trailing_comma(self) -> None:
        for k in range(len(self.out) - 1, -1, -1):
            if not self.out[k].strip():
                continue
            if self.out[k] == ",":
                del self.out[k]
            return

    def _read_string(self) -> str:
        text, q = self.text, self.text[self.i]
        j = self.i + 1
        buf: list[str] = []
        while j < len(text):
            ch = text[j]
            if ch == "\\" and j + 1 < len(text):
                nxt = text[j + 1]
                if nxt == q or nxt == "\\" or nxt == "/":
                    buf.append(nxt)
                elif nxt in "nrtbf":
                    buf.append({"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f"}[nxt])
                elif nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[j + 2 : j + 6]):
                    buf.append(chr(int(text[j + 2 : j + 6], 16)))
                    j += 4
                else:
                    buf.append(nxt)
                j += 2
                continue
            if ch == q:
                # A quote only closes the string when JSON structure follows it; otherwise it is
                # an unescaped quote/apostrophe inside the text ("Scrooge's", "he said "no"").
                rest = text[j + 1 :].lstrip()
                if not rest or rest[0] in ",:}]":
                    self.i = j + 1
                    return json.dumps("".join(buf), ensure_ascii=False)
            buf.append(ch)
            j += 1
        self.i = len(text)
        self.open_string = True
        return json.dumps("".join(buf), ensure_ascii=False)

    def run(self) -> None:
        text = self.text
        while self.i < len(text):
            ch = text[self.i]
            if ch in "\"'":
                self.out.append(self._read_string())
                if not self.open_string and self.stack and self.stack[-1] == "[":
                    self._mark_safe()
                continue
            if ch in "{[":
                if self._last_token() in "}]\"0123456789el" and self.stack:
                    self.out.append(",")  # missing comma between elements
                self.stack.append(ch)
                self.out.append(ch)
            elif ch in "}]":
                if not self.stack:
                    break
                self._drop_trailing_comma()
                self.out.append(_CLOSER[self.stack.pop()])  # mismatched closer: use the right one
                if not self.stack:
                    self.complete = True
                    return
                self._mark_safe()
            elif ch == ",":
                if self._last_token() not in ",[{:":
                    self._mark_safe()
                    self.out.append(",")
            elif ch == ":":
                self.out.append(":")
            elif ch == "/" and text.startswith("//", self.i):
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
                continue
            elif ch == "/" and text.startswith("/*", self.i):
                end = text.find("*/", self.i + 2)
                self.i = len(text) if end < 0 else end + 2
                continue
            elif ch.isalpha() or ch == "_":
                m = re.match(r"[A-Za-z_][A-Za-z0-9_\-]*", text[self.i :])
                word = m.group(0) if m else ch
                self.out.append(_LITERALS.get(word, json.dumps(word)))
                self.i += len(word)
                if self.i < len(text) and word in _LITERALS and self.stack and self.stack[-1] == "[":
                    self._mark_safe()
                continue
            elif ch in "-+0123456789.":
                m = re.match(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text[self.i :])
                if m:
                    num = m.group(0).lstrip("+")
                    if num.startswith("."):
                        num = "0" + num
                    elif num.startswith("-."):
                        num = "-0" + num[1:]
                    if num.endswith("."):
                        num += "0"
                    self.out.append(num)
                    self.i += len(m.group(0))
                    continue
            elif ch.isspace():
                self.out.append(ch)
            self.i += 1

    def candidates(self) -> list[str]:
        """JSON texts to try: the whole thing, or for truncated input, cut-back and closed-in-place forms."""
        if self.complete:
            return ["".join(self.out)]
        cut = "".join(self.out[: self.safe_len]).rstrip().rstrip(",") + "".join(
            _CLOSER[c] for c in reversed(self.safe_stack)
        )
        body = "".join(self.out).rstrip().rstrip(",")
        closers = "".join(_CLOSER[c] for c in reversed(self.stack))
        in_place = [body + closers]
        if body.endswith(":"):
            in_place = [body + "null" + closers]
        elif self.stack and self.stack[-1] == "{" and body.endswith('"'):
            in_place.append(body + ":null" + closers)  # a dangling key
        out = [cut] if self.safe_len else []
        return out + in_place


def _strip_thinking(text: str) -> tuple[str, bool]:
    """Remove reasoning blocks. Returns (text, prefer_last) — prefer the LAST object after an unclosed block."""
    text = _THINK_BLOCK.sub("", text)
    close = list(_THINK_CLOSE.finditer(text))
    if close:  # a lone closing tag: the server dropped the opening one
        text = text[close[-1].end() :]
    opened = _THINK_OPEN.search(text)
    if opened:
        return text[: opened.start()] + text[opened.end() :], True
    return text, False


def _views(text: str) -> list[tuple[str, bool]]:
    """Texts worth scanning, most specific first, each with its prefer-last flag."""
    base, prefer_last = _strip_thinking(text)
    views: list[tuple[str, bool]] = []
    for m in _FENCE.finditer(base):
        body = m.group(1)
        if "{" in body or "[" in body:
            views.append((body, prefer_last))
    views.append((base, prefer_last))
    if "{{" in base or "}}" in base:
        views = [(v.replace("{{", "{").replace("}}", "}"), p) for v, p in views] + views
    return views


def _starts(text: str, prefer_last: bool) -> list[int]:
    objects = [m.start() for m in re.finditer(r"[{\[]", text)]
    if not objects:
        return []
    if prefer_last:
        return list(reversed(objects))[:_MAX_STARTS]
    first_brace = text.find("{")
    first = objects[0]
    # Prefer the first '{' (all our schemas are objects), but keep a leading '[' (a bare list) too.
    ordered = [first_brace] if first_brace >= 0 else []
    ordered += [p for p in objects[:_MAX_STARTS] if p not in ordered]
    if first not in ordered:
        ordered.append(first)
    return ordered


def repair_candidates(text: str) -> list[Any]:
    """Every distinct JSON value recoverable from `text`, best first (may be empty)."""
    found: list[Any] = []
    seen: set[str] = set()

    def add(value: Any) -> None:
        key = json.dumps(value, sort_keys=True, ensure_ascii=False)
        if key not in seen and isinstance(value, dict | list):
            seen.add(key)
            found.append(value)

    stripped = text.strip()
    with contextlib.suppress(ValueError):  # the common case: valid JSON already
        add(json.loads(stripped))
    for view, prefer_last in _views(text):
        for start in _starts(view, prefer_last):
            scan = _Scan(view, start)
            scan.run()
            for candidate in scan.candidates():
                try:
                    add(json.loads(candidate))
                except ValueError:
                    continue
            if found and scan.complete:
                break
    if not found:
        # json_repair is a best-effort heuristic; its failure just means "no candidate".
        with contextlib.suppress(Exception):
            add(json_repair.loads(_strip_thinking(text)[0]))
    return found


def repair_json_text(text: str) -> Any:
    """The best JSON value recoverable from a model reply; `ValueError` when there is none."""
    candidates = repair_candidates(text)
    if not candidates:
        preview = text.strip().replace("\n", " ")[:120]
        raise ValueError(f"no JSON object found in the reply (starts: {preview!r})")
    return candidates[0]
