"""The machine-readable mark an answer carries when its context does not answer the question.

GraphRAG's answer prompts only ask the model to say so in words, which software cannot read reliably in every
language. The local and basic prompts also ask for `INSUFFICIENT_MARKER` on a line of its own; the engines take it
out of the answer (and out of its stream, where it may arrive split over several deltas) and record it as
`SearchResult.insufficient`, which the router escalates on. A custom prompt without the instruction never gets
the mark, so then only an empty answer escalates. The offline model writes it from how much of the question's
content the context covers. It lives in the model layer because the offline model writes it.
"""

from __future__ import annotations

INSUFFICIENT_MARKER = "[[CONTEXT_INSUFFICIENT]]"

# What the built-in answer prompts add to their "say so plainly" rule (worded for the model, not for users).
INSUFFICIENT_INSTRUCTION = (
    f"In that case, and only then, end the answer with the line {INSUFFICIENT_MARKER} exactly as written: software "
    "reads it to look further."
)


def asks_for_marker(system_prompt: str) -> bool:
    """Whether a prompt asks the model to mark an insufficient context (a custom prompt may not)."""
    return INSUFFICIENT_MARKER in system_prompt


def split_marker(text: str) -> tuple[str, bool]:
    """The answer without the mark, and whether the mark was there (anywhere: models do not always end with it)."""
    if INSUFFICIENT_MARKER not in text:
        return text, False
    return text.replace(INSUFFICIENT_MARKER, "").rstrip(), True


class MarkerFilter:
    """Takes the mark out of a streamed answer, whatever the deltas it is split over.

    Text that could be the start of the mark is held back until it either completes the mark (dropped) or
    cannot (passed on); everything else goes out at once, so a stream without the mark is delayed by nothing.
    """

    def __init__(self) -> None:
        self._held = ""
        self.found = False

    def feed(self, piece: str) -> str:
        text = self._held + piece
        if INSUFFICIENT_MARKER in text:
            self.found = True
            text = text.replace(INSUFFICIENT_MARKER, "")
        keep = _partial_tail(text)
        self._held = text[len(text) - keep:] if keep else ""
        return text[: len(text) - keep]

    def flush(self) -> str:
        """What is still held back when the stream ends (a start of the mark that never completed)."""
        out, self._held = self._held, ""
        return out


def _partial_tail(text: str) -> int:
    """Length of the longest end of `text` that is a proper start of the mark."""
    for n in range(min(len(text), len(INSUFFICIENT_MARKER) - 1), 0, -1):
        if INSUFFICIENT_MARKER.startswith(text[-n:]):
            return n
    return 0
