"""bpe-openai's Rust count (`tokens.native_counter`) gives exactly tiktoken's counts, in both encodings, on
text built to stress the pre-tokeniser (letter cases and categories, marks, contractions, digits in every
script, whitespace runs, CR LF, CJK, emoji with joiners, special-token text, very long words, lone
surrogates) and on real corpora; a load counts the same with it as without it."""

from __future__ import annotations

import random
import types
from collections.abc import Callable

import pyarrow.parquet as pq
import pytest
from fixture_paths import FIXTURES

from shared_context import token_counts, tokens
from shared_context.records import TextUnit
from shared_context.tokens import Tokenizer, get_encoding, get_tokenizer, native_counter

ENCODINGS = ["o200k_base", "cl100k_base"]
PIECES = [
    "a", "Z", "é", "ß", "İ", "ǅ", "Σ", "ς", "中", "日本語", "한국어", "😀", "👍🏽", "👨\u200d👩\u200d👧", "\u0301", "\u200d",
    "\ufeff", " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\x0b", "\x0c", "\x85", "'s", "'S", "'t",
    "'re", "'VE", "'m", "'ll", "'d", "’s", "'", '"', "0", "12", "123", "1234", "١٢٣", "½", "²", "Ⅻ", ".", ",", "!?",
    "...", "--", "__", "$", "€", "<|endoftext|>", "<|fim_prefix|>", "hello", "Hello", "HELLO", "helloWorld", "x" * 50,
    "ab" * 300, " " * 40, "\n" * 30, "http://x.y/z?q=1", "foo_bar", "Ωmega", "ﬁ", "ǈ", "ⓐ", "𝔘𝔫𝔦", "\ud800", "\udfff",
]  # fmt: skip
LONG = ["a" * 100_000, "1" * 10_000, " " * 10_000, "\r\n" * 3_000, " \n" * 3_000, "😀" * 3_000, "中" * 20_000, "x y" * 10_000]


def _random_texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 40)))
        if rng.random() < 0.3:  # any code point outside the surrogates (those are in PIECES)
            text += "".join(chr(rng.choice([rng.randint(0, 0xD7FF), rng.randint(0xE000, 0x2FFFF)]))
                            for _ in range(rng.randint(0, 10)))  # fmt: skip
        out.append(text)
    return out


def _corpus_texts() -> list[str]:
    out: list[str] = []
    for file in sorted(FIXTURES.glob("**/*.parquet"))[:12]:
        table = pq.read_table(file)
        for name in table.column_names:
            if str(table.schema.field(name).type) in ("string", "large_string"):
                out += [t for t in table.column(name).to_pylist()[:50] if t]
    return out


def _native(name: str) -> Callable[[str], int]:
    count = native_counter(name)
    if count is None:
        pytest.skip("bpe-openai's binding is not installed")
    return count


@pytest.mark.parametrize("name", ENCODINGS)
def test_native_counts_equal_tiktoken_on_adversarial_text(name: str) -> None:
    count, encode = _native(name), get_encoding(name).encode_ordinary
    texts = [*_random_texts(3000, seed=7), *LONG, ""]
    assert [count(t) for t in texts] == [len(encode(t)) for t in texts]


@pytest.mark.parametrize("name", ENCODINGS)
def test_native_counts_equal_tiktoken_on_corpora(name: str) -> None:
    texts = _corpus_texts()
    count, encode = _native(name), get_encoding(name).encode_ordinary
    assert [count(t) for t in texts] == [len(encode(t)) for t in texts]


def test_unsupported_encoding_has_no_native_counter() -> None:
    assert native_counter("no_such_encoding") is None


def test_a_binding_without_the_calls_used_gives_no_native_counter(monkeypatch) -> None:
    # the extension is bpe-openai's private module: another release may lack what we call
    monkeypatch.setattr(tokens, "_bpe_bindings", lambda: types.SimpleNamespace(supported_encodings=lambda: ["o200k_base"]))
    assert native_counter("o200k_base") is None
    assert get_tokenizer("o200k_base").native_counter() is None


def test_load_counts_are_the_same_without_the_binding(monkeypatch) -> None:
    tok = get_tokenizer()
    # a loaded text is valid UTF-8 (no lone surrogates, which the anchored path's encode_to_numpy refuses)
    texts = [t for t in _random_texts(300, seed=3) if not any("\ud800" <= c <= "\udfff" for c in t)]
    units = [TextUnit(id=str(i), short_id=str(i), text=t) for i, t in enumerate(texts)]
    monkeypatch.setattr(token_counts, "_CHUNK_ROWS", 16)  # many chunks: every worker takes some of each kind
    fields = [(units, "text"), (units, "text")]
    with_native = token_counts.count_texts(tok, fields, anchored=[1])
    native_plain, native_anchored = with_native.result()
    monkeypatch.setattr(Tokenizer, "native_counter", lambda self: None)
    without = token_counts.count_texts(tok, fields, anchored=[1])
    plain, anchored = without.result()
    expected = [tok.count(t) for t in texts]
    assert native_plain.tolist() == plain.tolist() == expected
    assert native_anchored.tolist() == anchored.tolist() == expected
    for a, b in zip(vars(with_native.anchors[1]).values(), vars(without.anchors[1]).values(), strict=True):
        assert a.tolist() == b.tolist()
