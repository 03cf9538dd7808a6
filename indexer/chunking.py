"""Token-window chunking (GraphRAG's `tokens` strategy: 1200 tokens, 100 overlap, o200k_base) whose cuts
fall on the text's own boundaries.

Each chunk ends at the strongest boundary in the last half of its window: a paragraph break, else a line
break (so table rows and list items stay whole), else a sentence end (Latin and CJK punctuation), else
the window's edge. A chunk never ends on a Markdown heading: the heading moves to the next chunk, with
the text it introduces. The overlap starts at a boundary too, so the repeated text is whole sentences or
lines. A single unit longer than the window is cut at the window's edge.

Each chunk is a slice of the original text between the character offsets of its first and one-past-last
tokens (never decoded token slices, which can cut a multi-byte character in half), so chunks never
contain U+FFFD and map back to exact character spans. Work is linear in the text: one tokenisation,
one regex pass for boundaries, a binary search per chunk.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

import numpy as np

from indexer.reader import SourceDocument, sha512_hex
from shared_context.tokens import get_encoding

# boundary kinds, strongest first; each pattern matches the position where the next unit starts
_PARAGRAPH = re.compile(r"\n[ \t]*\n\s*")
_LINE = re.compile(r"\n")
_SENTENCE = re.compile(r"(?<=[.!?;])[\"'”’)\]]*(?=\s)|(?<=[。！？；])")  # ends where the space before the next begins
_HEADING = re.compile(r"^#{1,6}\s+\S.*$", re.MULTILINE)


@dataclass(frozen=True)
class Chunk:
    id: str  # sha512 hex of the text, as in GraphRAG
    text: str
    n_tokens: int
    document_id: str
    char_start: int
    char_end: int


SEGMENT_CHARS = 1_000_000  # tokenised piece by piece: flat memory (a 100 MB text as one token list is ~1 GB)


def token_char_offsets(text: str, encoding_name: str) -> np.ndarray:
    """Character offset where each token of `text` starts (int64, one entry per token).

    The text is tokenised in pieces of about `SEGMENT_CHARS`, cut at a line break or space, which is
    where tiktoken's pre-tokenizer splits anyway. Offsets come from token byte lengths (looked up once
    per distinct token) and the text's UTF-8 bytes, so no per-token Python work is done.
    """
    enc = get_encoding(encoding_name)
    cuts = _segment_starts(text)
    pieces = [text[a:b] for a, b in itertools.pairwise([*cuts, len(text)])]
    parts = []
    for piece, piece_start, tokens in zip(pieces, cuts, enc.encode_ordinary_batch(pieces, num_threads=2), strict=True):
        ids = np.asarray(tokens, dtype=np.int64)
        if not len(ids):
            continue
        distinct = np.unique(ids)
        widths = np.fromiter((len(enc.decode_single_token_bytes(int(t))) for t in distinct), dtype=np.int64,
                             count=len(distinct))
        lengths = widths[np.searchsorted(distinct, ids)]
        byte_starts = np.cumsum(lengths) - lengths
        raw = np.frombuffer(piece.encode("utf-8"), dtype=np.uint8)
        char_index = np.cumsum((raw & 0xC0) != 0x80, dtype=np.int64) - 1  # char holding each byte
        parts.append(char_index[byte_starts] + piece_start)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _segment_starts(text: str) -> list[int]:
    starts = [0]
    while len(text) - starts[-1] > SEGMENT_CHARS:
        limit = starts[-1] + SEGMENT_CHARS
        cut = text.rfind("\n", starts[-1] + SEGMENT_CHARS // 2, limit)
        if cut < 0:
            cut = text.rfind(" ", starts[-1] + SEGMENT_CHARS // 2, limit)
        starts.append(cut + 1 if cut >= 0 else limit)
    return starts


def _boundary_tokens(text: str, offsets: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Sorted token indices where a unit starts, per kind (paragraph, line, sentence); and heading starts."""
    n = len(offsets)

    def tokens_at(chars: list[int]) -> np.ndarray:
        # the first token starting at or after each position (tokens may swallow the break itself)
        idx = np.searchsorted(offsets, np.asarray(chars, dtype=np.int64), side="left")
        return np.unique(idx[(idx > 0) & (idx < n)])

    kinds = [tokens_at([m.end() for m in pattern.finditer(text)]) for pattern in (_PARAGRAPH, _LINE, _SENTENCE)]
    headings = tokens_at([m.start() for m in _HEADING.finditer(text)])
    return kinds, headings


def _last_in(sorted_idx: np.ndarray, low: int, high: int) -> int | None:
    """The largest value v with low < v <= high, if any."""
    pos = int(np.searchsorted(sorted_idx, high, side="right")) - 1
    if pos >= 0 and sorted_idx[pos] > low:
        return int(sorted_idx[pos])
    return None


def _first_in(sorted_idx: np.ndarray, low: int, high: int) -> int | None:
    """The smallest value v with low <= v < high, if any."""
    pos = int(np.searchsorted(sorted_idx, low, side="left"))
    if pos < len(sorted_idx) and sorted_idx[pos] < high:
        return int(sorted_idx[pos])
    return None


def _only_heading(tail: str) -> bool:
    return sum(1 for line in tail.splitlines() if line.strip()) <= 1


def _spans(text: str, offsets: np.ndarray, chunk_size: int, overlap: int) -> list[tuple[int, int]]:
    n = len(offsets)
    kinds, headings = _boundary_tokens(text, offsets)
    any_kind = np.unique(np.concatenate(kinds)) if n else np.zeros(0, np.int64)
    spans: list[tuple[int, int]] = []
    start = 0
    while True:
        limit = start + chunk_size
        if limit >= n:
            spans.append((start, n))
            return spans
        end = limit
        for kind in kinds:  # strongest boundary in the window's second half
            found = _last_in(kind, start + chunk_size // 2, limit)
            if found is not None:
                end = found
                break
        heading = _last_in(headings, start + chunk_size // 4, end - 1)
        if heading is not None and _only_heading(text[int(offsets[heading]) : int(offsets[end])]):
            end = heading  # the window would end on a heading: it opens the next chunk instead
        spans.append((start, end))
        nxt = end - overlap
        if overlap:
            aligned = _first_in(any_kind, end - overlap, end)
            nxt = aligned if aligned is not None else nxt
        start = nxt if nxt > start else end


Span = tuple[int, int, int]  # a chunk's character start, character end and token count in its document


def document_spans(text: str, *, chunk_size: int, overlap: int, encoding_name: str) -> list[Span]:
    """Where `text` is cut: one (char start, char end, tokens) per chunk, whitespace-only ones included."""
    offsets = token_char_offsets(text, encoding_name)
    n = len(offsets)
    if n == 0:
        return []
    return [
        (int(offsets[start]), int(offsets[end]) if end < n else len(text), end - start)
        for start, end in _spans(text, offsets, chunk_size, overlap)
    ]


def chunk_documents(
    documents: list[SourceDocument],
    *,
    chunk_size: int,
    overlap: int,
    encoding_name: str,
    spans: dict[str, list[Span]] | None = None,
) -> list[Chunk]:
    """Chunk every document; a chunk whose exact text was already produced is kept once (same id).

    `spans`, when given, is a cache keyed by the sha512 of a document's text (for these chunking
    settings): a document found there is cut where it was cut before without tokenising it again (an
    update re-chunks only new documents), and the spans of the others are added to it.
    """
    chunks: list[Chunk] = []
    seen: set[str] = set()
    for doc in documents:
        key = sha512_hex(doc.text) if doc.explicit_id else doc.id
        cuts = spans.get(key) if spans is not None else None
        if cuts is None or not _valid_spans(cuts, len(doc.text)):
            cuts = document_spans(doc.text, chunk_size=chunk_size, overlap=overlap, encoding_name=encoding_name)
            if spans is not None:
                spans[key] = cuts
        doc_id = doc.id
        for c0, c1, n_tokens in cuts:
            text = doc.text[c0:c1]
            if text.strip():
                cid = sha512_hex(text)
                if cid not in seen:
                    seen.add(cid)
                    chunks.append(Chunk(cid, text, n_tokens, doc_id, c0, c1))
    return chunks


def _valid_spans(cuts: list[Span], length: int) -> bool:
    """Stored spans fit the text (a damaged or hand-edited state file is recomputed, never trusted)."""
    return all(0 <= c0 < c1 <= length and n > 0 for c0, c1, n in cuts) and all(
        a[0] < b[0] for a, b in itertools.pairwise(cuts)
    )
