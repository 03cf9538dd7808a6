"""The original keyword router baseline on written examples, English and Chinese."""

from __future__ import annotations

import pytest

from router.keyword_router import choose_search_method, keyword_route, length_units


@pytest.mark.parametrize(("question", "route"), [
    # short with a who/what/where/which/when word -> local
    ("Who is the chief financial officer?", "local"),
    ("Where was the company founded?", "local"),
    ("When did the merger close?", "local"),
    ("Which product launched first?", "local"),
    ("谁是这家公司的首席执行官？", "local"),
    ("会议在哪里举行？", "local"),
    ("这个项目何时开始？", "local"),
    # summary / analysis / trend / overview / core / main words -> global, whatever the length
    ("Summarize the collection.", "global"),
    ("Give me an overview of the podcast episodes.", "global"),
    ("What are the main risks mentioned?", "global"),
    ("Analyze the hiring trends across all the calls and tell me which teams grew the most over the years.",
     "global"),
    ("总结一下这些访谈。", "global"),
    ("这本书的核心思想是什么？", "global"),
    ("近几年的收入趋势如何？", "global"),
    # long, or joining two things -> drift
    ("What is the relationship between the supplier and the regulator?", "drift"),
    ("Who met the mayor and the police chief?", "drift"),
    ("What did the guest say about the early days of the company when it was still run out of a garage?",
     "drift"),
    ("张三和李四是什么关系？", "drift"),
    ("比较两位嘉宾对远程办公的看法有什么不同？", "drift"),
    # no rule claims it -> the design's fallback, drift
    ("How did the negotiations end?", "drift"),
    ("为何会议推迟了？", "drift"),
])
def test_keyword_route_follows_the_seed_rule(question: str, route: str) -> None:
    assert keyword_route(question) == route


def test_words_match_whole_words_only() -> None:
    # "whoever" / "somewhat" / "domain" contain rule words but are not them
    assert keyword_route("Somewhat odd: whoever signed it?") == "drift"
    assert keyword_route("Which domain expired?") == "local"


def test_length_counts_latin_words_and_cjk_characters() -> None:
    assert length_units("one two three") == 3
    assert length_units("总结一下") == 2
    assert keyword_route("What " + "very " * 20 + "big thing?") == "drift"


def test_design_name_is_the_same_rule_and_bad_input_is_clear() -> None:
    assert choose_search_method is keyword_route
    with pytest.raises(ValueError, match="empty"):
        keyword_route("   ")
    with pytest.raises(TypeError, match="str"):
        keyword_route(None)  # type: ignore[arg-type]
