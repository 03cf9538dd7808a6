"""Which documents of a collection a question names (`router.index_profile.DocumentNames`): numbered units in English and Chinese,
fiscal years and quarters in any order, documents stored in parts, distinctive title words, and families of
documents that name none in particular. Titles here are written for this test."""

from __future__ import annotations

import pytest

from router.index_profile import DocumentNames, group_key

CALLS = [f"TranscriptFY{y}Q{q}.txt" for y in range(14, 25) for q in range(1, 5)]
EPISODES = [f"Show_Episode {n}_{guest}_Transcript-part{p}.txt" for n, guest in
            ((7, "AdaLovelace"), (8, "Grace_Hopper"), (9, "Alan_Turing"), (10, "Ada_Lovelace_Again"))
            for p in (1, 2, 3)] + ["EP-11_ Show_2020-Year-In-Review.txt", "EP-12_ Show_2021-Year-In-Review.txt"]


def _named(titles: list[str], question: str) -> list[str]:
    names = DocumentNames.build(titles)
    return [names.titles[g] for g in names.named(question)]


@pytest.mark.parametrize(("question", "title"), [
    ("What did the CFO say in the FY20 Q3 call?", "TranscriptFY20Q3"),
    ("In Q3 FY20, how did cloud revenue do?", "TranscriptFY20Q3"),
    ("What revenue was reported in the third quarter of fiscal 2020?", "TranscriptFY20Q3"),
    ("fiscal year 2016's fourth quarter results", "TranscriptFY16Q4"),
    ("2023财年第二季度电话会上说了什么？", "TranscriptFY23Q2"),
])
def test_a_call_named_by_fiscal_year_and_quarter(question: str, title: str) -> None:
    assert _named(CALLS, question) == [title]


@pytest.mark.parametrize("question", [
    "What were the Q4 results?",  # every fiscal year has a fourth quarter: a family, not a name
    "How did margins change between 2016 and 2024?",  # years of the series, no quarter
    "How did revenue grow 20 percent?",
    "In the Q3 FY20 call, and the Q4 FY20 one, and the Q1 FY21 one, and the Q2 FY21 one?",  # more than three
])
def test_families_and_stray_numbers_name_no_call(question: str) -> None:
    assert _named(CALLS, question) == []


def test_two_named_calls() -> None:
    assert _named(CALLS, "Compare FY16 Q1 with FY23 Q1.") == ["TranscriptFY16Q1", "TranscriptFY23Q1"]


@pytest.mark.parametrize(("question", "title"), [
    ("What happened in episode 8?", "Show_Episode 8_Grace_Hopper_Transcript"),
    ("第9期节目讲了什么？", "Show_Episode 9_Alan_Turing_Transcript"),
    ("Summarise the conversation with Grace Hopper.", "Show_Episode 8_Grace_Hopper_Transcript"),
    ("What came up in the 2021 year in review?", "EP-12_ Show_2021-Year-In-Review"),
])
def test_an_episode_stored_in_parts_is_one_document(question: str, title: str) -> None:
    assert _named(EPISODES, question) == [title]


def test_parts_of_one_document_share_a_group() -> None:
    assert group_key("Show_Episode 8_Grace_Hopper_Transcript-part1.txt") == \
        group_key("Show_Episode 8_Grace_Hopper_Transcript-part12.txt")
    assert group_key("Show_Episode 8_x-part1.txt") != group_key("Show_Episode 9_x-part1.txt")
    names = DocumentNames.build(EPISODES)
    assert names.groups == 6 and len(names.group_of_document) == len(EPISODES)


def test_an_unnumbered_single_document_names_nothing() -> None:
    assert _named(["a-christmas-carol.txt"], "What happens in chapter 3?") == []
