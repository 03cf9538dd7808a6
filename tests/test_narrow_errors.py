"""Optional signals degrade on the errors they expect and say so; a programming error surfaces."""

from __future__ import annotations

from pathlib import Path

import pytest

import shared_context.linking as linking
from router.classifier import classify
from shared_context import load_index
from shared_context.errors import IndexFormatError

QUESTION = "Who is Scrooge's nephew?"


@pytest.fixture(scope="module")
def carol(carol_path: Path):
    return load_index(carol_path)


def test_unusable_index_data_degrades_linking_to_the_wording(carol, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args, **_kwargs):
        raise IndexFormatError("no titles", file="entities.parquet", column="title")

    monkeypatch.setattr(linking, "link_entities", broken)
    decision = classify(QUESTION, carol)
    assert "linked_entities" not in decision.signals
    assert any("the index could not be probed (entities.parquet: column 'title': no titles); decided from the wording "
               "only" in r for r in decision.reasons)


def test_a_bug_in_linking_is_not_swallowed(carol, monkeypatch: pytest.MonkeyPatch) -> None:
    def buggy(*_args, **_kwargs):
        raise TypeError("a programming error")

    monkeypatch.setattr(linking, "link_entities", buggy)
    with pytest.raises(TypeError, match="a programming error"):
        classify(QUESTION, carol)


def test_not_an_index_is_named() -> None:
    with pytest.raises(TypeError, match="index must be a shared_context Index, not object"):
        classify(QUESTION, index=object())  # type: ignore[arg-type]
