"""Exact token counts of rendered sections from their rows' own counts, without encoding them whole.

tiktoken splits text into pieces by a regex and encodes each piece alone. A piece can only run from one line
into the next across the newline when the next line starts with whitespace or "/", so a section's count is
the sum of its rows' `count(row + "\\n")` less what the last row's missing line end is worth, and a joined
text's count is the sum of its sections' plus what each join adds or saves. `tests/test_tables_count.py`
compares these with counting the whole text.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Protocol

from shared_context.tokens import Tokenizer

__all__ = ["CountedText", "head_tokens", "joined_tokens", "line_end_tokens", "stable_tail"]


class CountedText(Protocol):
    """A rendered section and its exact token count (a `tables.ContextSection`)."""

    @property
    def text(self) -> str: ...

    @property
    def tokens(self) -> int: ...


def joined_tokens(tokenizer: Tokenizer, sections: Sequence[CountedText]) -> int:
    """Exact token count of `join_sections` of already counted sections, without re-encoding them.

    tiktoken's pre-tokeniser never lets a piece run across a line break into the next line's text
    (newlines end a piece, or trail a punctuation piece), so the count of the joined text is the sum of
    the section counts plus, at each join, what encoding the two lines around the join together adds
    or saves. The tests compare this with counting the whole text.
    """
    parts = [s for s in sections if s.text]
    total = sum(s.tokens for s in parts)
    for left, right in itertools.pairwise(parts):
        # only the last line's final piece(s) can merge with what follows (see `stable_tail`); a last line
        # with no such start that begins with whitespace or "/" may itself merge with the line before
        last = left.text.rsplit("\n", 1)[-1]
        tail = stable_tail(last)
        if tail == last and (not last or last[0].isspace() or last[0] == "/"):
            tail = left.text
        head = right.text.split("\n", 1)[0]
        total += tokenizer.count(tail + "\n\n" + head) - tokenizer.count(tail) - tokenizer.count(head)
    return total


def stable_tail(line: str) -> str:
    """The end of `line` from its last space that is followed by a non-space character (all of it when
    there is none).

    Such a space always starts a piece (it can only be the optional first character of a word or
    punctuation piece, or a lone-space piece), so the text before it is split the same way whatever
    follows: count(line + x) - count(line) == count(tail + x) - count(tail) for any x.
    """
    cut = len(line) - 1
    while True:
        cut = line.rfind(" ", 0, cut)
        if cut < 0 or not line[cut + 1].isspace():
            break
    return line[max(cut, 0):]


def line_end_tokens(tokenizer: Tokenizer, line: str) -> int:
    """count(line + "\\n") - count(line), encoding only the line's last piece(s) (`stable_tail`)."""
    tail = stable_tail(line)
    return tokenizer.count(tail + "\n") - tokenizer.count(tail)


_head_cache: dict[tuple[str, str], int] = {}


def head_tokens(tokenizer: Tokenizer, head: str) -> int:
    """Token count of a section title + header (a handful of distinct strings per process)."""
    key = (tokenizer.encoding_name, head)
    n = _head_cache.get(key)
    if n is None:
        n = tokenizer.count(head)
        if len(_head_cache) < 4096:
            _head_cache[key] = n
    return n
