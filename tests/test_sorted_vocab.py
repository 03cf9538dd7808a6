"""`SortedVocab.get` (the stored tables' term lookup) finds exactly what a dict of the same terms holds."""

from __future__ import annotations

import random

import numpy as np

from shared_context.lexical_store import _SAMPLE_STEP, SortedVocab


def _vocab(terms: list[str]) -> SortedVocab:
    ordered = sorted(terms)  # code-point order, as the stores write them
    encoded = [t.encode("utf-8") for t in ordered]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    data = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    columns = np.asarray([terms.index(t) for t in ordered], dtype=np.int64)
    return SortedVocab(offsets, data, columns)


def test_get_matches_a_dict_for_present_and_absent_terms() -> None:
    rng = random.Random(3)
    alphabet = "abcz\u00e9\u00df\u4e2d\u6587\U0001f600\x1f "
    terms = sorted({"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(3000)})
    rng.shuffle(terms)
    lookup = {t: i for i, t in enumerate(terms)}
    vocab = _vocab(terms)
    assert len(terms) > 20 * _SAMPLE_STEP  # several sample steps, so both search stages are exercised
    probes = terms + [t + "a" for t in terms[:300]] + [t[:-1] for t in terms[:300]]
    probes += ["", "\x00", "\uffff", "\U0010ffff", "\udc80", "zzzzzzz"]
    assert [vocab.get(p) for p in probes] == [lookup.get(p) for p in probes]


def test_get_on_tiny_and_empty_vocabularies() -> None:
    assert _vocab([]).get("a") is None
    one = _vocab(["m"])
    assert [one.get(p) for p in ("a", "m", "z", "mm")] == [None, 0, None, None]
