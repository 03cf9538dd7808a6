"""One home for text processing: tokenising, stopwords, stemming, sentence splitting and the lexical
terms BM25 (`shared_context.bm25`) indexes, per text (`lexical_terms`) and per column (`lexical_term_ids`).

Used by entity linking (`shared_context.linking`), the offline extractive model (`engines/models/offline_*`)
and the indexer. Everything is deterministic: no randomness, no clock, no iteration over sets of strings
where the order can reach the output. The stopword list is data (`shared_context/data/stopwords.txt`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, cast

import numpy as np

if TYPE_CHECKING:  # imported where used: loading the module stays cheap
    import pyarrow as pa

__all__ = [
    "CJK",
    "CJK_RE",
    "STOPWORDS",
    "TOKEN_RE",
    "LazyPattern",
    "TermIds",
    "WordIds",
    "lexical_term_ids",
    "lexical_terms",
    "plural_stem",
    "read_word_lists",
    "split_sentences",
    "stem",
    "tokens",
    "word_list",
    "word_terms",
]


class LazyPattern:
    """A regular expression compiled on first use, with the methods of `re.Pattern` that the code uses.

    Why: compiling at import made `import router` pay for every pattern of every module, used or not; a
    character class over the CJK ranges alone costs about 2 ms (the compiler walks its ~40,000 code points),
    and the cue lexicons are a few hundred alternatives each. The first use of a method compiles the pattern
    and binds every method to the compiled pattern's own, so later calls go straight to `re` with no Python
    call in between (hot loops search the same patterns tens of thousands of times per question). Two threads
    racing to the first use both compile the same pattern, which is harmless.
    """

    __slots__ = ("_compiled", "_flags", "findall", "finditer", "fullmatch", "match", "pattern", "search",
                 "split", "sub", "subn")
    _METHODS = frozenset({"findall", "finditer", "fullmatch", "match", "search", "split", "sub", "subn"})

    # Bound to the compiled pattern's methods on first use (`__getattr__`); same signatures as `re.Pattern`'s.
    search: Callable[..., re.Match[str] | None]
    match: Callable[..., re.Match[str] | None]
    fullmatch: Callable[..., re.Match[str] | None]
    findall: Callable[..., list[Any]]
    finditer: Callable[..., Iterator[re.Match[str]]]
    split: Callable[..., list[str | Any]]
    sub: Callable[..., str]
    subn: Callable[..., tuple[str, int]]

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self._flags)
        return self._compiled

    def __getattr__(self, name: str) -> Callable[..., object]:
        # Only reached while a method slot is still unset, i.e. at the first use of that method.
        if name not in LazyPattern._METHODS:
            raise AttributeError(name)
        compiled = self.compiled
        for slot in LazyPattern._METHODS:
            setattr(self, slot, getattr(compiled, slot))
        method: Callable[..., object] = getattr(compiled, name)
        return method


# Ideographs, kana and hangul are written without spaces; consumers index them as characters or bigrams.
CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
CJK_RE = LazyPattern(f"[{CJK}]")
TOKEN_RE = LazyPattern(f"[{CJK}]+|[^\\W_{CJK}]+")  # a Latin/digit run never swallows CJK text
# "Scrooge's" -> "Scrooge", "the Cratchits' house" -> "the Cratchits house"
POSSESSIVE_RE = LazyPattern(r"['’]s\b|(?<=s)['’](?=\s|$)", re.IGNORECASE)

_DATA = Path(__file__).resolve().parent / "data"


def word_list(name: str) -> frozenset[str]:
    """The words of a list in `shared_context/data/` (whitespace-separated, "#" lines are comments)."""
    lines = (_DATA / name).read_text(encoding="utf-8").splitlines()
    return frozenset(w for line in lines if not line.lstrip().startswith("#") for w in line.split())


STOPWORDS = word_list("stopwords.txt")


def read_word_lists(path: Path) -> dict[str, tuple[str, ...]]:
    """`[SECTION]`-headed word lists of one data file, by section name; words separated by spaces or line
    breaks, in file order, each once ("#" lines are comments). A word before the first header is an error."""
    lists: dict[str, list[str]] = {}
    current: list[str] | None = None
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = lists.setdefault(line[1:-1], [])
        elif current is None:
            raise ValueError(f"{path}:{number}: words before the first [SECTION] header")
        else:
            current.extend(line.split())
    return {name: tuple(dict.fromkeys(words)) for name, words in lists.items()}


def tokens(text: str) -> list[str]:
    """Word runs (letters/digits) and CJK runs, possessives removed; case is kept."""
    return TOKEN_RE.findall(POSSESSIVE_RE.sub("", text))


# ---------------------------------------------------------------------------- stemming

_IRREGULAR = dict(pair.split(":", 1) for pair in word_list("irregular_forms.txt"))


def plural_stem(word: str) -> str:
    """Plural endings only, so names stay recognisable ("Cratchits" -> "cratchit"); for entity linking."""
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "shes", "ches", "xes", "zes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def stem(word: str) -> str:
    """Light suffix stripping of a lower-case word; it only has to map inflections of one word to one key."""
    w = _IRREGULAR.get(word, word)
    if len(w) <= 3:
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ness") and len(w) > 6:
        w = w[:-4]
    elif w.endswith("ing") and len(w) > 5:
        w = w[:-3]
    elif (
        (w.endswith("ed") and len(w) > 4)
        or (w.endswith("ly") and len(w) > 5)
        or (w.endswith("er") and len(w) > 5)
    ):
        w = w[:-2]  # "leader" -> "lead", "manager" -> "manag" (as "manage")
    elif w.endswith("s") and not w.endswith("ss") and len(w) > 3:
        w = w[:-1]
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    return w


# ---------------------------------------------------------------------------- lexical terms (BM25)

_WORD_ONLY_RE = LazyPattern(r"[^\W_]+")
# a separator between joined texts (`_python_term_ids`) is a token of its own, so each text's run is known
_JOINED_TOKEN_RE = LazyPattern(f"[{CJK}]+|[^\\W_{CJK}]+|\x00")
# word -> lexical term ("" for stopwords); a plain dict is much faster than lru_cache in the hot loop
_TERM_OF: dict[str, str] = {}
_TERM_CACHE_MAX = 300_000  # bounds memory on huge vocabularies; misses are just recomputed


def _term(word: str) -> str:
    term = _TERM_OF.get(word)
    if term is None:
        term = "" if word in STOPWORDS else plural_stem(word)
        if len(_TERM_OF) < _TERM_CACHE_MAX:
            _TERM_OF[word] = term
    return term


def word_terms(words: list[str]) -> list[str]:
    """The lexical term of each lower-cased, non-CJK word ("" for a stopword), aligned with `words`."""
    get = _TERM_OF.get
    # `is not None`, not `or`: a stopword's cached term is "" and must not be recomputed every time
    return [t if (t := get(w)) is not None else _term(w) for w in words]


def _run_terms(run: str) -> list[str]:
    """The terms of one lower-cased token run: CJK character bigrams (a lone character as itself), else
    the word's term (none for a stopword)."""
    if CJK_RE.match(run):
        return [run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)]
    term = _term(run)
    return [term] if term else []


def lexical_terms(text: str) -> list[str]:
    """Tokens for BM25: stemmed non-stopwords, and character bigrams of CJK runs.

    Possessives need no special case here: "scrooge's" splits into "scrooge" and the stopword "s".
    This is the definition; `lexical_term_ids` computes the same terms for whole columns at once.
    """
    lowered = text.lower()
    if not CJK_RE.search(lowered):  # fast path for the common all-alphabetic text
        return [t for t in word_terms(_WORD_ONLY_RE.findall(lowered)) if t]
    out: list[str] = []
    for run in TOKEN_RE.findall(lowered):
        out.extend(_run_terms(run))
    return out


TermIds = tuple["np.ndarray", "np.ndarray"]  # (terms per text, their vocabulary ids in text order)
_TEXT_CHUNK_BYTES = 8 << 20  # text per step of `lexical_term_ids`: bounds its temporary arrays
_TEXT_CHUNK_ROWS = 65_536


def _ascii_tables() -> tuple[bytes, bytes]:
    """`bytes.translate` tables: ASCII word bytes ([A-Za-z0-9]) -> 1 else 0; upper case -> lower case."""
    word = bytearray(256)
    for lo, hi in (("0", "9"), ("A", "Z"), ("a", "z")):
        word[ord(lo) : ord(hi) + 1] = b"\x01" * (ord(hi) - ord(lo) + 1)
    lower = bytes(range(256)).replace(bytes(range(65, 91)), bytes(range(97, 123)))
    return bytes(word), lower


_ASCII_WORD, _ASCII_LOWER = _ascii_tables()


def _offsets(arr: pa.Array) -> np.ndarray:
    """An Arrow (large) string array's value offsets as int64 positions in its data buffer."""
    import pyarrow as pa

    dtype = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    raw: np.ndarray = np.frombuffer(arr.buffers()[1], dtype=dtype)[arr.offset : arr.offset + len(arr) + 1]
    return raw.astype(np.int64)


class WordIds:
    """Word -> id in `vocab` of the word's term (-1 for a stopword), for `lexical_term_ids` passes over
    one vocabulary: Arrow looks up the words already met, so each distinct word meets Python once."""

    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab
        self.ids = np.zeros(0, dtype=np.int64)  # id of the i-th word met
        self._parts: list[Any] = []  # Arrow arrays of the words met, in order
        self._known: Any = None  # their concatenation, made when a lookup needs it

    def of(self, distinct: pa.Array) -> np.ndarray:
        """Ids of the words of `distinct` (an Arrow string array without repeats)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        distinct = distinct.cast(pa.large_string())
        if self._known is None:
            self._known = pa.concat_arrays(self._parts) if self._parts else distinct.slice(0, 0)
        found = pc.index_in(distinct, value_set=self._known)
        slots = np.frombuffer(found.buffers()[1], dtype=np.int32)[found.offset : found.offset + len(found)]
        slots = slots.astype(np.int64)
        if found.null_count:
            valid = found.is_valid()
            missing = np.flatnonzero(~_bools(valid))
            fresh = distinct.filter(pc.invert(valid))  # the words at `missing`, in order
            vocab = self.vocab
            add = np.empty(len(fresh), dtype=np.int64)
            for j, word in enumerate(fresh.to_pylist()):
                term = _term(word)
                add[j] = vocab.setdefault(term, len(vocab)) if term else -1
            slots[missing] = len(self.ids) + np.arange(len(fresh))
            self.ids = np.concatenate([self.ids, add])
            self._parts.append(fresh)
            self._known = None
        out: np.ndarray = self.ids[slots]
        return out


def _bools(arr: pa.Array) -> np.ndarray:
    """An Arrow boolean array (no nulls) as numpy bools, without pyarrow's `to_numpy`."""
    bits = np.unpackbits(np.frombuffer(arr.buffers()[1], dtype=np.uint8), bitorder="little")
    out: np.ndarray = bits[arr.offset : arr.offset + len(arr)].astype(bool)
    return out


def _ascii_term_ids(arr: pa.Array, words: WordIds) -> TermIds:
    """`lexical_term_ids` of ASCII-only texts, on their bytes: an ASCII text has no CJK and lower-cases
    byte for byte, and Python's `[^\\W_]` is `[A-Za-z0-9]` there, so its words are the maximal runs of
    those bytes within the text. Arrow hashes the words; only new distinct words meet Python."""
    import pyarrow as pa

    n = len(arr)
    offsets = _offsets(arr)
    first, size = int(offsets[0]), int(offsets[-1] - offsets[0])
    if not size:
        return np.zeros(n, dtype=np.int64), np.zeros(0, dtype=np.int64)
    raw = bytes(memoryview(arr.buffers()[2])[first : first + size])
    word = np.frombuffer(raw.translate(_ASCII_WORD), dtype=np.int8)
    edges = np.diff(word, prepend=np.int8(0), append=np.int8(0))  # +1 where a run starts, -1 past its end
    is_start, is_end = edges == 1, edges == -1
    inner = offsets[1:-1] - first  # a run that goes on into the next text ends and starts again there
    inner = inner[(inner > 0) & (inner < size)]
    split = inner[(word[inner] & word[inner - 1]).astype(bool)]
    is_start[split] = True
    is_end[split] = True
    starts, ends = np.flatnonzero(is_start), np.flatnonzero(is_end)
    if not len(starts):
        return np.zeros(n, dtype=np.int64), np.zeros(0, dtype=np.int64)
    letters = np.frombuffer(raw.translate(_ASCII_LOWER), dtype=np.uint8)[word.view(bool)]
    word_offsets = np.zeros(len(starts) + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=word_offsets[1:])
    kind, ends_type = (pa.large_string(), np.int64) if word_offsets[-1] >= 2**31 else (pa.string(), np.int32)
    runs = pa.Array.from_buffers(
        kind, len(starts), [None, pa.py_buffer(word_offsets.astype(ends_type)), pa.py_buffer(letters)]
    )
    encoded = runs.dictionary_encode()
    codes = np.frombuffer(encoded.indices.buffers()[1], dtype=np.int32)[: len(starts)]
    ids = words.of(encoded.dictionary)[codes]
    keep = ids >= 0
    rows = np.searchsorted(offsets - first, starts[keep], side="right") - 1
    return np.bincount(rows, minlength=n).astype(np.int64), ids[keep]


def _python_term_ids(texts: list[str], vocab: dict[str, int]) -> TermIds:
    """`lexical_term_ids` of any texts: one regular-expression pass over the texts joined by NUL (a
    separator token; lower-casing the join is lower-casing each text, since NUL is neither cased nor
    case-ignorable), the distinct runs turned into terms once. Texts holding a NUL go one at a time."""
    n = len(texts)
    if any("\x00" in t for t in texts):
        per_text = [[vocab.setdefault(t, len(vocab)) for t in lexical_terms(text)] for text in texts]
        sizes = np.fromiter(map(len, per_text), dtype=np.int64, count=n)
        return sizes, np.fromiter((i for ids in per_text for i in ids), dtype=np.int64, count=int(sizes.sum()))
    runs = _JOINED_TOKEN_RE.findall("\x00".join(texts).lower())
    local: dict[str, int] = {}
    codes = np.fromiter((local.setdefault(r, len(local)) for r in runs), dtype=np.int64, count=len(runs))
    expansions = [[] if run == "\x00" else [vocab.setdefault(t, len(vocab)) for t in _run_terms(run)]
                  for run in local]  # fmt: skip
    sizes_of = np.fromiter(map(len, expansions), dtype=np.int64, count=len(expansions))
    starts_of = np.cumsum(sizes_of) - sizes_of
    flat = np.fromiter((i for e in expansions for i in e), dtype=np.int64, count=int(sizes_of.sum()))
    separator = local.get("\x00", -1)
    text_of = np.cumsum(codes == separator)  # a separator ends a text (and has no terms)
    lengths = sizes_of[codes]
    at = np.repeat(starts_of[codes] - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()))
    return np.bincount(np.repeat(text_of, lengths), minlength=n).astype(np.int64), flat[at]


class ArrowTexts(Protocol):
    """Texts read in place from an Arrow column (`records.TextColumn`)."""

    @property
    def arrow(self) -> pa.ChunkedArray: ...


# what `lexical_term_ids` reads: an Arrow string column, an object holding one, or Python strings (None: no text)
Texts: TypeAlias = "pa.Array | pa.ChunkedArray | ArrowTexts | Sequence[str | None]"


def _string_chunks(texts: Texts) -> Iterator[pa.Array]:
    """Arrow string arrays of consecutive runs of `texts` (an Arrow array or chunked array, an object
    with an `.arrow` chunked array, or a sequence of str / None), of at most `_TEXT_CHUNK_BYTES` of text
    (a longer text is a chunk of its own) and `_TEXT_CHUNK_ROWS` rows."""
    import pyarrow as pa

    column = getattr(texts, "arrow", texts)
    if isinstance(column, pa.ChunkedArray | pa.Array):
        chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
        for chunk in chunks:
            ends = np.cumsum(np.diff(_offsets(chunk)))
            lo = 0
            while lo < len(chunk):
                done = int(ends[lo - 1]) if lo else 0
                hi = int(np.searchsorted(ends, done + _TEXT_CHUNK_BYTES, side="right"))
                hi = min(max(hi, lo + 1), lo + _TEXT_CHUNK_ROWS)
                yield chunk.slice(lo, hi - lo)
                lo = hi
        return
    from shared_context.records import string_array

    strings = cast("Sequence[str | None]", column)  # neither Arrow nor holding Arrow: Python strings
    for lo in range(0, len(strings), _TEXT_CHUNK_ROWS // 16):
        yield string_array([t or "" for t in strings[lo : lo + _TEXT_CHUNK_ROWS // 16]])


def lexical_term_ids(texts: Texts, vocab: dict[str, int] | WordIds) -> Iterator[TermIds]:
    """The `lexical_terms` of every text, as vocabulary ids, a run of consecutive texts at a time: yields
    (number of terms of each text, the ids of their terms in text order); new terms are added to
    `vocab` (term -> id; or a `WordIds` over it, to keep its word lookups across calls). A missing text
    (None) has no terms.

    ASCII texts are split with numpy over the column's bytes, the others with one regular-expression
    pass per run (`_python_term_ids`); only the distinct words of a run are stemmed and looked up. The
    terms are those of `lexical_terms` text by text (tests compare them on real and edge-case corpora)."""
    import pyarrow.compute as pc

    words = vocab if isinstance(vocab, WordIds) else WordIds(vocab)
    for chunk in _string_chunks(texts):
        if chunk.null_count:
            chunk = pc.fill_null(chunk, "")
        is_ascii = pc.string_is_ascii(chunk)
        ascii_rows = _bools(is_ascii)
        if ascii_rows.all():
            yield _ascii_term_ids(chunk, words)
            continue
        if not ascii_rows.any():
            yield _python_term_ids(chunk.to_pylist(), words.vocab)
            continue
        where_ascii, where_other = np.flatnonzero(ascii_rows), np.flatnonzero(~ascii_rows)
        a_sizes, a_ids = _ascii_term_ids(chunk.filter(is_ascii), words)
        o_sizes, o_ids = _python_term_ids(chunk.filter(pc.invert(is_ascii)).to_pylist(), words.vocab)
        sizes = np.zeros(len(chunk), dtype=np.int64)
        sizes[where_ascii], sizes[where_other] = a_sizes, o_sizes
        text_of = np.concatenate([np.repeat(where_ascii, a_sizes), np.repeat(where_other, o_sizes)])
        yield sizes, np.concatenate([a_ids, o_ids])[np.argsort(text_of, kind="stable")]


# ---------------------------------------------------------------------------- sentences

# A sentence ends at . ! ? (plus closing quotes/brackets) before whitespace and a capital, digit or
# CJK character; CJK full stops end a sentence without any space.
# A protected citation placeholder (\x00n\x00, see offline_answer.cited_units) may sit after the stop.
# One leading character class keeps the scan fast (an alternation at the start defeats the regex
# engine's prefix search); Latin stops are then checked for the following capital in Python.
_BOUNDARY_RE = LazyPattern(r"[.!?。！？；][\"'”’)\]」』）]*(?:\s*\x00\d+\x00)*")
_NEXT_SENTENCE_RE = LazyPattern(r"\s+[\"'“‘(\[]?[A-Z0-9" + CJK + r"]")
_MARKDOWN_BLOCK_RE = LazyPattern(r"\n(?=\s*(?:#{1,6}\s|[-*•]\s|\d+[.)]\s))")
_CJK_NEWLINE_RE = LazyPattern(f"(?<=[{CJK}])\\s*\\n\\s*(?=[{CJK}])")
_ABBREVIATIONS = word_list("abbreviations.txt")


def _ends_with_abbreviation(fragment: str) -> bool:
    last = fragment.rstrip().rsplit(" ", 1)[-1].lower().strip("\"'“‘(").rstrip(".")
    return last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())


def split_sentences(text: str) -> list[str]:
    """Split prose or markdown into sentences, whitespace collapsed; headings and list items are their own
    units, a full stop after an abbreviation or an initial ("Dr.", "J. R.") does not end a sentence."""
    out: list[str] = []
    text = _CJK_NEWLINE_RE.sub("", text.replace("\r", ""))
    for paragraph in re.split(r"\n\s*\n", text):
        for block in _MARKDOWN_BLOCK_RE.split(paragraph):
            flat = re.sub(r"\s+", " ", block).strip()
            if not flat:
                continue
            pieces, last = [], 0
            for m in _BOUNDARY_RE.finditer(flat):
                if m.group(0)[0] in ".!?" and not _NEXT_SENTENCE_RE.match(flat, m.end()):
                    continue
                pieces.append(flat[last : m.end()])
                last = m.end()
            pieces.append(flat[last:])
            merged: list[str] = []
            for piece in (p.strip() for p in pieces if p.strip()):
                if merged and _ends_with_abbreviation(merged[-1]):
                    merged[-1] = f"{merged[-1]} {piece}"
                else:
                    merged.append(piece)
            out.extend(merged)
    return out
