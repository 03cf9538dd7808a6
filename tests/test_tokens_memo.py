"""Token counts of long repeated texts are memoised (global search recounts the same report batches and
prompts for every question); the memo gives the encoder's count and stays bounded."""

from __future__ import annotations

from shared_context import tokens
from shared_context.tokens import Tokenizer


def test_memoised_counts_equal_the_encoder_and_the_memo_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(tokens, "_MEMO_SIZE", 3)
    tok = Tokenizer()
    texts = [f"Report {i}: " + "the harbour trust met the council about the quay. " * 40 for i in range(5)]
    for text in texts + texts:
        assert tok.count(text) == len(tok.encode(text))
    assert len(tok._memo) == 3
    assert tok.count("short text") == len(tok.encode("short text"))
    assert "short text" not in tok._memo  # short texts are cheaper to encode than to keep


def test_a_memo_hit_does_not_encode_again(monkeypatch) -> None:
    tok = Tokenizer()
    text = "A long community report about the river and its mills. " * 50
    first = tok.count(text)
    calls = []
    real = tok._enc.encode_ordinary
    monkeypatch.setattr(tok, "_enc", type("Enc", (), {"encode_ordinary": lambda self, t: calls.append(t) or real(t)})())
    assert tok.count(str(text)) == first and calls == []
    tok.count(text + " One more sentence.")
    assert len(calls) == 1
