"""Bad input is a clear error or a degraded answer, never a traceback: history
types and sizes (checked before any linking, linking linear), invisible or invalid Unicode questions,
infinite weights and ranks, binary text columns."""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from robust_support import CAROL, carol

from engines.plan import MAX_HISTORY_MESSAGES, MAX_TURN_TOKENS, limit_history, normalise_history
from router import Router
from shared_context import IndexFormatError, load_index


@pytest.fixture(scope="module")
def router() -> Iterator[Router]:
    with Router(carol()) as r:
        yield r


@pytest.mark.parametrize("history,match", [
    ("Who is Scrooge?", "history must be a list"),
    (5, "history must be a list"),
    ([{"role": "user", "content": None}], "history item 0 content must be a string, got NoneType"),
    ([{"role": "user", "content": 3}], "content must be a string"),
    ([{"role": "robot", "content": "hi"}], "unknown role"),
    (["fine", "bad \ud800 surrogate"], r"history item 1 is not valid Unicode text: lone surrogate U\+D800"),
])
def test_bad_history_is_a_clear_error(router: Any, history: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        router.ask("Who is Bob Cratchit?", history=history)


@pytest.mark.parametrize("question", ["\x00\x00", "\u200b\u200c\u200d", "\u202e\u2066\u2069", "\ufeff \t\u2028"])
def test_invisible_questions_are_empty(router: Any, question: str) -> None:
    with pytest.raises(ValueError, match="question is empty"):
        router.ask(question)


def test_lone_surrogate_question_is_a_clear_error(router: Any) -> None:
    with pytest.raises(ValueError, match=r"question is not valid Unicode text: lone surrogate U\+DC80 at position 7"):
        router.ask("Who is \udc80 Scrooge?")


def test_oversized_history_turn_is_refused_before_linking(router: Any) -> None:
    turn = "Scrooge walked with the ghost of Marley and Bob Cratchit " * 3000  # ~30,000 words
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match="history item 0 is too long") as caught:
        router.ask("Who is he?", history=[turn])
    assert time.perf_counter() - t0 < 2.0
    assert "question" not in str(caught.value)  # the history is named, not the question


def test_long_conversations_keep_their_newest_messages(router: Any) -> None:
    history = [f"Who is Fred number {i}?" for i in range(MAX_HISTORY_MESSAGES + 20)]
    kept, note = limit_history(normalise_history(history), carol().tokenizer)
    assert len(kept) == MAX_HISTORY_MESSAGES and kept[-1]["content"] == history[-1]
    assert note is not None and f"newest {MAX_HISTORY_MESSAGES} of {len(history)}" in note
    answer = router.ask("Who is Tiny Tim?", history=history)
    assert any(d.startswith("history: only the newest") for d in answer.degraded)


def test_linking_a_long_text_is_linear() -> None:
    """Entity linking over the largest history allowed: the span-containment check was quadratic (188 s
    for one 32,000-word turn); every allowed size must link in about a second."""
    from engines import LocalSearch

    engine = LocalSearch(carol())
    words = ("Scrooge walked with the ghost of Marley through London and Bob Cratchit " * 1000).split()
    text = carol().tokenizer.truncate(" ".join(words), MAX_TURN_TOKENS)
    assert carol().tokenizer.count(text) <= MAX_TURN_TOKENS
    history = [{"role": "user", "content": text}] * 3
    t0 = time.perf_counter()
    engine.builder.build("Who is he?", history)
    assert time.perf_counter() - t0 < 8.0


def _copy(tmp_path: Path) -> Path:
    out = tmp_path / "index"
    shutil.copytree(CAROL, out)
    return out


def _set(folder: Path, file: str, column: str, values: Any) -> None:
    table = pq.read_table(folder / file)
    i = table.column_names.index(column)
    pq.write_table(table.set_column(i, column, values), folder / file)


@pytest.mark.parametrize("file,column", [("relationships.parquet", "weight"), ("community_reports.parquet", "rank")])
def test_infinite_weight_or_rank_is_refused_naming_file_and_column(tmp_path: Path, file: str, column: str) -> None:
    folder = _copy(tmp_path)
    n = pq.read_metadata(folder / file).num_rows
    _set(folder, file, column, pa.array([math.inf] + [1.0] * (n - 1), pa.float64()))
    with pytest.raises(IndexFormatError, match=f"{file}.*{column}.*infinite") as caught:
        load_index(folder)
    assert caught.value.column == column


def test_nan_weights_and_ranks_render_as_missing(tmp_path: Path) -> None:
    from engines import GlobalSearch, LocalSearch

    folder = _copy(tmp_path)
    for file, column in (("relationships.parquet", "weight"), ("community_reports.parquet", "rank")):
        n = pq.read_metadata(folder / file).num_rows
        _set(folder, file, column, pa.array([math.nan] * n, pa.float64()))
    index = load_index(folder)
    local = LocalSearch(index).builder.build("Who is Bob Cratchit?")
    batches = list(GlobalSearch(index).builder.build("What are the themes?"))
    for text in [local.text, *(b.text for b in batches)]:
        assert "nan" not in text.lower().split("|") and "inf" not in text.lower().split("|")


def test_format_value_never_raises_on_non_finite_numbers() -> None:
    import numpy as np

    from shared_context.tables import format_value

    assert [format_value(v) for v in (math.inf, -math.inf, math.nan, np.float32("inf"), 2.0, 0.123456)] == [
        "", "", "", "", "2.0", "0.1235"]


def test_binary_text_column_names_file_and_column(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    texts = pq.read_table(folder / "text_units.parquet").column("text").to_pylist()
    _set(folder, "text_units.parquet", "text", pa.array([t.encode() + b"\xff\xfe" for t in texts], pa.binary()))
    with pytest.raises(IndexFormatError, match=r"text_units.parquet.*'text'.*not UTF-8") as caught:
        load_index(folder)
    assert caught.value.column == "text"
