"""Excerpt blocks computed once per index (`shared_context/passages.py`): the batched table equals the
per-unit definition, round-trips through the derived store, and the array-based window selection picks
exactly what the earlier list-based one did."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shared_context import load_index
from shared_context.bm25 import BM25
from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.linking import lexical_terms
from shared_context.passages import (
    BlockTable,
    Excerpt,
    block_table,
    build_block_table,
    select_excerpts,
    unit_blocks_of,
)
from shared_context.records import Entity, TextUnit

SENTENCES = [
    "The lighthouse keeper repaired the lamp before the storm reached the harbour.",
    "Grain prices rose sharply after the flood, and the millers sold their stores.",
    "Nobody in the village remembered the chapel bell ringing at midnight!",
    "Fishermen argued about the new quay for three winters; the council said nothing.",
    "灯塔守护者在风暴来临之前修好了灯。",
    "A quiet orchard lay beyond the quarry, its apples unpicked.",
]


def _texts() -> list[str]:
    rng = np.random.default_rng(7)
    out = [" ".join(SENTENCES[i] for i in rng.integers(0, len(SENTENCES), size=int(n))) for n in rng.integers(1, 40, 30)]
    out += ["", "one short line", "x" * 900]  # empty, single block, no sentence end nor space
    return out


def _index() -> Index:
    units = [TextUnit(id=f"t{j}", short_id=str(j), text=t) for j, t in enumerate(_texts())]
    entities = [Entity(id="a", short_id="0", title="KEEPER", description="d", text_unit_ids=[u.id for u in units])]
    return index_from_records(entities=entities, relationships=[], text_units=units)


@pytest.mark.parametrize("block_tokens", [15, 100])
def test_batched_blocks_equal_the_per_unit_definition(block_tokens: int) -> None:
    index = _index()
    table = build_block_table(index.text_units, index.text_unit_tokens, block_tokens, index.tokenizer)
    for u, unit in enumerate(index.text_units):
        assert table.blocks(u) == unit_blocks_of(unit.text, int(index.text_unit_tokens[u]), block_tokens,
                                                 index.tokenizer)
    assert len(table.blocks(len(index.text_units) - 3)) == 0  # the empty unit has no block


def test_blocks_round_trip_through_the_derived_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fixture_paths import CAROL

    import shared_context.passages as passages

    monkeypatch.setenv("GRAPHROUTE_CACHE_DIR", str(tmp_path / "cache"))
    first = load_index(CAROL)
    assert first.derived_store is not None
    calls: list[int] = []
    real = passages.build_block_table
    monkeypatch.setattr(passages, "build_block_table", lambda *a: calls.append(1) or real(*a))
    built = block_table(first, 100)
    assert calls == [1]  # computed in this process (then mapped back from the store)
    calls.clear()
    second = load_index(CAROL)
    mapped = block_table(second, 100)
    assert not calls and not isinstance(mapped.vocab, dict)  # read back, not recomputed
    for u, unit in enumerate(second.text_units):  # stored blocks == computed blocks
        expected = unit_blocks_of(unit.text, int(second.text_unit_tokens[u]), 100, second.tokenizer)
        assert mapped.blocks(u) == built.blocks(u) == expected
    units = list(range(min(12, len(second.text_units))))
    for q in ("Who is the main character?", "What happened at the end of the story?"):
        assert select_excerpts(second, units, q, 1500, excerpt_tokens=200) == _reference(first, units, q, 1500, 200)


def _reference(index: Any, units: Sequence[int], query: str, budget: int, excerpt_tokens: int) -> list[Excerpt]:
    """The list-based selection `select_excerpts` replaced (weight 1, k 60, 4 tokens of row overhead)."""
    units = list(dict.fromkeys(units))
    bt = max(excerpt_tokens // 2, 1)
    per_unit = [unit_blocks_of(index.text_units[u].text, int(index.text_unit_tokens[u]), bt, index.tokenizer)
                for u in units]
    windows: list[tuple[int, int, int]] = []
    for r, blocks in enumerate(per_unit):
        if len(blocks) == 1:
            windows.append((r, 0, 0))
        windows.extend((r, b, b + 1) for b in range(len(blocks) - 1))
    if not windows or budget <= 0:
        return []
    query_terms = lexical_terms(query)
    wanted = list(dict.fromkeys(query_terms))
    kept = [[[t for t in wanted for _ in range(blk.counts.get(t, 0))] for blk in blocks] for blocks in per_unit]
    terms = [kept[r][a] + kept[r][b] if b != a else kept[r][a] for r, a, b in windows]
    lengths = [per_unit[r][a].n_terms + (per_unit[r][b].n_terms if b != a else 0) for r, a, b in windows]
    relevance = BM25(terms, lengths=lengths).scores(query_terms)
    top = float(relevance.max())
    if top > 0:
        relevance = relevance / top
    score = [float(relevance[i]) + 61 / (60 + r + 1) for i, (r, _, _) in enumerate(windows)]
    order = sorted(range(len(windows)), key=lambda i: (-score[i], windows[i][0], windows[i][1]))
    chosen: dict[int, set[int]] = {}
    first_pick: list[int] = []
    used = 0
    for i in order:
        r, a, b = windows[i]
        have = chosen.get(r, set())
        new = [x for x in (a, b) if x not in have]
        if not new:
            continue
        cost = sum(per_unit[r][x].tokens for x in dict.fromkeys(new))
        cost += 4 if not have else sum(1 for x in new if x - 1 not in have and x + 1 not in have)
        if used + cost > budget:
            continue
        used += cost
        if not have:
            first_pick.append(r)
        chosen.setdefault(r, set()).update(new)
    out = []
    for r in first_pick:
        blocks, spans = per_unit[r], []
        for b in sorted(chosen[r]):
            if spans and spans[-1][1] == blocks[b].start:
                spans[-1] = (spans[-1][0], blocks[b].end)
            else:
                spans.append((blocks[b].start, blocks[b].end))
        out.append(Excerpt(units[r], r, spans, sum(blocks[x].tokens for x in chosen[r]),
                           len(chosen[r]) == len(blocks)))
    return out


@pytest.mark.parametrize("budget", [0, 60, 300, 1200, 5000])
@pytest.mark.parametrize("excerpt_tokens", [20, 120])
def test_array_selection_equals_the_list_based_one(budget: int, excerpt_tokens: int) -> None:
    index = _index()
    rng = np.random.default_rng(budget + excerpt_tokens)
    for q in ("keeper repaired the lamp", "chapel bell orchard quarry", "灯塔 storm", "nothing matches zzz"):
        units = [int(u) for u in rng.permutation(len(index.text_units))[:15]]
        assert select_excerpts(index, units, q, budget, excerpt_tokens=excerpt_tokens) == _reference(
            index, units, q, budget, excerpt_tokens
        )


def test_frequency_scores_equal_bm25_over_term_lists() -> None:
    docs = [["a", "b", "a"], ["b"], [], ["c", "a", "d", "d"], ["b", "b", "b", "x"]]
    query = ["b", "a", "z", "b"]
    wanted = list(dict.fromkeys(query))
    tf = np.array([[d.count(t) for t in wanted] for d in docs], dtype=np.float64)
    expected = BM25(docs).scores(query)
    assert np.array_equal(BM25.frequency_scores(tf, np.array([len(d) for d in docs])), expected)


def test_a_table_read_from_arrays_answers_like_the_built_one() -> None:
    index = _index()
    built = build_block_table(index.text_units, index.text_unit_tokens, 30, index.tokenizer)
    read = BlockTable.from_arrays(built.arrays())
    assert [read.blocks(u) for u in range(len(index.text_units))] == [
        built.blocks(u) for u in range(len(index.text_units))
    ]
    for term in ("lighthous", "keeper", "灯塔", "absent-term"):
        assert read.vocab.get(term) == built.vocab.get(term)


def test_bm25_streamed_build_is_the_same_through_either_term_numbering(monkeypatch: pytest.MonkeyPatch) -> None:
    import shared_context.bm25 as bm25

    rng = np.random.default_rng(3)
    words = ["alpha", "beta", "délta", "長い", ""] + [f"w{i}" for i in range(500)]
    docs = [[words[int(i)] for i in rng.integers(0, len(words), int(n))] for n in rng.integers(0, 40, 5000)]
    small = BM25(docs)  # dict numbering
    monkeypatch.setattr(bm25, "_ARROW_TERMS", 0)
    monkeypatch.setattr(bm25, "_BM25_CHUNK", 700)
    monkeypatch.setattr(bm25, "_WEIGHT_SLICE", 1000)
    streamed = BM25(iter(docs))  # Arrow numbering, several chunks, read from an iterator
    assert streamed.vocab == small.vocab and streamed.n_docs == len(docs)
    for attr in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(streamed.matrix, attr), getattr(small.matrix, attr))


def _cuts_by_min(text: str, target_chars: int) -> list[int]:
    """The cut rule written plainly: the sentence end nearest the target length, the earlier of two."""
    from shared_context.passages import _MAX_FRACTION, _MIN_FRACTION, _SENTENCE_END

    ends, start = [], 0
    while len(text) - start > target_chars * _MAX_FRACTION:
        lo, hi = start + int(target_chars * _MIN_FRACTION), start + int(target_chars * _MAX_FRACTION)
        found = [m.end() for m in _SENTENCE_END.finditer(text, lo, hi)]
        if found:
            cut = min(found, key=lambda e: (abs(e - start - target_chars), e))
        else:
            space = text.rfind(" ", lo, start + target_chars)
            cut = space + 1 if space >= 0 else start + target_chars
        ends.append(cut)
        start = cut
    ends.append(len(text))
    return ends


def test_cuts_take_the_nearest_sentence_end_as_the_plain_rule_does() -> None:
    from shared_context.passages import _cuts

    rng = np.random.default_rng(5)
    pieces = ["word ", "a. ", "B! ", "c? ", "\n\n", "  ", "x", ".", "… ", '." ', "end.\n"]
    for _ in range(400):
        text = "".join(pieces[i] for i in rng.integers(0, len(pieces), int(rng.integers(0, 400))))
        for target in (1, 3, 10, 37, 120):
            assert _cuts(text, target) == _cuts_by_min(text, target)
    for text in _texts():
        for target in (5, 60, 400):
            assert _cuts(text, target) == _cuts_by_min(text, target)
