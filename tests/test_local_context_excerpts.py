"""Excerpt mode of the hybrid Sources (`shared_context/passages.py`): the question-relevant windows of many
units instead of a few whole ones, within budget, marked truncated with exact offsets, records saying why."""

from __future__ import annotations

from pathlib import Path

import pytest

from shared_context.index import Index
from shared_context.index_build import index_from_records
from shared_context.local_context import LocalContext, LocalContextBuilder
from shared_context.passages import select_excerpts, unit_blocks
from shared_context.records import Entity, TextUnit
from shared_context.tables import SourceRecord

FILLER = "The market town kept its weekly fair and the farmers sold their grain there. "


def _long_unit(j: int, fact: str, where: int) -> str:
    """About 600 tokens of filler with `fact` as one sentence near position `where` (of 40)."""
    sentences = [f"Part {j} line {i}. {FILLER}" for i in range(40)]
    sentences[where] = fact + " "
    return "".join(sentences)


def _index() -> Index:
    """Eight long units linked to ALPHA; each hides one fact about a different rare object, deep inside."""
    objects = ["lighthouse", "windmill", "granary", "chapel", "harbour", "orchard", "quarry", "ferry"]
    units = [
        TextUnit(id=f"t{j}", short_id=str(j), text=_long_unit(j, f"Alpha repaired the old {obj} at dawn.", 5 + 4 * j))
        for j, obj in enumerate(objects)
    ]
    entities = [Entity(id="a", short_id="0", title="ALPHA", description="a mender",
                       text_unit_ids=[u.id for u in units])]
    return index_from_records(entities=entities, relationships=[], text_units=units)


QUESTION = "Which did Alpha repair: the lighthouse, the windmill, the granary, the chapel, the harbour or the orchard?"
PARAMS = {"text_unit_strategy": "hybrid", "max_context_tokens": 1500, "community_prop": 0.0, "text_unit_prop": 0.9}


def _sources(ctx: LocalContext) -> list[SourceRecord]:
    section = ctx.tables.sources
    return [] if section is None else list(section.rows)


def test_excerpts_show_more_distinct_evidence_than_whole_units() -> None:
    index = _index()
    whole = LocalContextBuilder(index).build(QUESTION, **PARAMS)
    parts = LocalContextBuilder(index).build(QUESTION, **PARAMS, excerpt_tokens=120)
    facts = [f"the old {o} at dawn" for o in ("lighthouse", "windmill", "granary", "chapel", "harbour", "orchard")]
    shown_whole = sum(f in whole.text for f in facts)
    shown_parts = sum(f in parts.text for f in facts)
    assert shown_parts == len(facts) > shown_whole  # the budget holds ~2 whole units, but 6 excerpts


@pytest.mark.parametrize("budget", [200, 500, 900, 1500, 4000, 12000])
def test_excerpts_stay_within_budget_and_carry_exact_offsets(budget: int) -> None:
    index = _index()
    ctx = LocalContextBuilder(index).build(QUESTION, **(PARAMS | {"max_context_tokens": budget}),
                                           excerpt_tokens=120)
    assert ctx.tokens == index.tokenizer.count(ctx.text) <= budget
    sources = ctx.tables.sources
    assert sources is not None and sources.tokens <= sources.budget
    for r in sources.rows:
        unit_text = index.text_units[r.position].text
        assert r.reasons and r.entity == "ALPHA"  # records say why the unit is there
        if not r.truncated:
            assert r.text == unit_text
            continue
        spans = r.excerpts
        assert spans and all(0 <= a < b <= len(unit_text) for a, b in spans)
        assert all(spans[i][1] < spans[i + 1][0] for i in range(len(spans) - 1))  # disjoint, in text order
        for a, b in spans:
            assert unit_text[a:b].strip() in r.text  # the offsets name exactly what is shown
        assert "…" in r.text  # the cut is visible to the model


def test_a_unit_whose_every_block_is_chosen_is_shown_whole() -> None:
    index = _index()
    ctx = LocalContextBuilder(index).build(QUESTION, **(PARAMS | {"max_context_tokens": 20000}), excerpt_tokens=120)
    records = _sources(ctx)
    assert len(records) == 8 and not any(r.truncated for r in records)


def test_blocks_cover_the_unit_and_end_at_sentences() -> None:
    index = _index()
    text = index.text_units[0].text
    blocks = unit_blocks(index, 0, 60)
    assert blocks[0].start == 0 and blocks[-1].end == len(text)
    assert all(blocks[i].end == blocks[i + 1].start for i in range(len(blocks) - 1))
    assert all(text[b.end - 2] == "." for b in blocks[:-1])
    assert all(30 <= b.tokens <= 90 for b in blocks[:-1])


def test_selection_prefers_a_relevant_window_of_a_lower_unit_and_is_deterministic() -> None:
    index = _index()
    # unit 0 is ranked first, but the question is about unit 5's orchard
    picked = select_excerpts(index, [0, 1, 2, 3, 4, 5], "Alpha orchard", 200, excerpt_tokens=120)
    assert picked[0].unit == 5
    assert picked == select_excerpts(index, [0, 1, 2, 3, 4, 5], "Alpha orchard", 200, excerpt_tokens=120)
    with pytest.raises(ValueError, match="excerpt_tokens"):
        select_excerpts(index, [0], "q", 100, excerpt_tokens=0)


def test_evidence_benchmark_credits_exactly_the_excerpts_shown() -> None:
    from benchmarks.evidence_recall import context_ranges, span_hit

    index = _index()
    ctx = LocalContextBuilder(index).build(QUESTION, **PARAMS, excerpt_tokens=120)
    # pretend the units are laid end to end in one book, 10,000 characters apart
    units = {p: ("book", 10_000 * p, 10_000 * p + len(u.text)) for p, u in enumerate(index.text_units)}
    ranges = context_ranges(ctx, units)
    for r in _sources(ctx):
        p, text = r.position, index.text_units[r.position].text
        fact = text.index("Alpha repaired")
        assert span_hit(("book", 10_000 * p + fact, 10_000 * p + fact + 30), ranges)  # the fact is shown
        if r.truncated:
            hidden = next(i for i in range(0, len(text), 50)
                          if all(b <= i or i + 20 <= a for a, b in r.excerpts))
            assert not span_hit(("book", 10_000 * p + hidden, 10_000 * p + hidden + 20), ranges)


def test_evidence_benchmark_separates_spans_in_front_or_back_matter() -> None:
    from benchmarks.evidence_recall import outside_matter

    matter = {"book": [(0, 500), (9_000, 9_800)]}  # contents at the start, an index at the end
    contents, straddling, story, index_entry = ("book", 100, 300), ("book", 450, 700), ("book", 600, 900), \
        ("book", 9_100, 9_200)
    other = ("other", 100, 300)  # a book without front or back matter
    assert outside_matter([contents, straddling, story, index_entry, other], matter) == [story, other]


def test_excerpt_mode_is_the_default_and_settable_in_graphroute_toml(tmp_path: Path) -> None:
    from engines.config import ConfigError, load_config

    index = _index()
    ctx = LocalContextBuilder(index).build(QUESTION, max_context_tokens=1500)
    assert any(r.truncated and r.excerpts for r in _sources(ctx))
    cfg_file = tmp_path / "graphroute.toml"
    cfg_file.write_text("[local]\nexcerpt_tokens = 300\nexcerpt_weight = 0.5\n[drift]\nlocal_search_excerpt_tokens = 150\n")
    cfg = load_config(cfg_file, env={})
    assert (cfg.local.excerpt_tokens, cfg.local.excerpt_weight) == (300, 0.5)
    assert cfg.drift.local_context().excerpt_tokens == 150
    cfg_file.write_text("[local]\nexcerpt_tokens = 0\n")  # 0: whole units
    assert load_config(cfg_file, env={}).local.excerpt_tokens == 0
    cfg_file.write_text("[local]\nexcerpt_tokens = -5\n")
    with pytest.raises(ConfigError, match="excerpt_tokens"):
        load_config(cfg_file, env={})


def test_row_overhead_is_asked_only_for_units_a_window_of_which_fits() -> None:
    index = _index()
    asked: list[int] = []

    def overhead(unit: int) -> int:
        asked.append(unit)
        return 4  # the default's value: the same selection as without it

    units = [0, 1, 2, 3, 4, 5, 6, 7]
    picked = select_excerpts(index, units, "Alpha orchard", 200, excerpt_tokens=120, row_overhead=overhead)
    assert picked == select_excerpts(index, units, "Alpha orchard", 200, excerpt_tokens=120)
    # one window (~120 tokens) fills most of the 200: no other unit's window fits what is left, so no
    # other unit's id (what a row's overhead is counted from) is read
    assert sorted(set(asked)) == sorted(e.unit for e in picked) and len(asked) == len(set(asked))
    with pytest.raises(ValueError, match="row_overhead"):
        select_excerpts(index, units, "Alpha orchard", 200, excerpt_tokens=120, row_overhead=lambda _u: -1)
