"""Token-window chunking like GraphRAG's `tokens` strategy (default 1200 tokens, 100 overlap, o200k_base).

Unlike decoding token slices (which can cut a multi-byte character in half — a real problem for
Chinese), each chunk is a slice of the original text between the character offsets of its first
and one-past-last tokens, so chunks never contain U+FFFD and map back to exact character spans.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from indexer.reader import SourceDocument, sha512_hex
from shared_context.tokens import get_encoding


@dataclass(frozen=True)
class Chunk:
    id: str  # sha512 hex of the text, as in GraphRAG
    text: str
    n_tokens: int
    document_id: str
    char_start: int
    char_end: int


def token_char_offsets(text: str, tokens: list[int], encoding_name: str) -> np.ndarray:
    """Character offset where each token starts (vectorised over UTF-8 bytes)."""
    enc = get_encoding(encoding_name)
    token_bytes = enc.decode_tokens_bytes(tokens)
    lengths = np.fromiter((len(b) for b in token_bytes), dtype=np.int64, count=len(token_bytes))
    raw = np.frombuffer(b"".join(token_bytes), dtype=np.uint8)
    is_char_start = (raw & 0xC0) != 0x80
    char_index = np.cumsum(is_char_start) - 1  # char containing each byte
    byte_starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if len(lengths) else np.zeros(0, np.int64)
    result: np.ndarray = np.maximum(char_index[byte_starts], 0) if len(raw) else np.zeros(0, np.int64)
    return result


def chunk_documents(
    documents: list[SourceDocument], *, chunk_size: int, overlap: int, encoding_name: str
) -> list[Chunk]:
    """Chunk every document; a chunk whose exact text was already produced is kept once (same id)."""
    enc = get_encoding(encoding_name)
    texts = [d.text for d in documents]
    all_tokens = enc.encode_ordinary_batch(texts, num_threads=2)
    step = chunk_size - overlap
    chunks: list[Chunk] = []
    seen: set[str] = set()
    for doc, tokens in zip(documents, all_tokens, strict=True):
        n = len(tokens)
        if n == 0:
            continue
        offsets = token_char_offsets(doc.text, tokens, encoding_name)
        start = 0
        while True:
            end = min(start + chunk_size, n)
            c0 = int(offsets[start])
            c1 = int(offsets[end]) if end < n else len(doc.text)
            text = doc.text[c0:c1]
            if text.strip():
                cid = sha512_hex(text)
                if cid not in seen:
                    seen.add(cid)
                    chunks.append(Chunk(cid, text, end - start, doc.id, c0, c1))
            if end >= n:
                break
            start += step
    return chunks
