"""Chinese questions: corpus-wide wording is recognised, and Latin/digit runs never swallow CJK text."""

from __future__ import annotations

from engines.models.offline_text import question_terms, terms


def test_chinese_theme_question_is_corpus_wide() -> None:
    _, broad = question_terms("这些文件的主要主题是什么？")
    assert broad
    content, broad = question_terms("李文是谁？")
    assert not broad and "李文" in content


def test_mixed_digits_latin_and_chinese_split_into_words_and_bigrams() -> None:
    out = terms("2021年洪水如何影响了海星公司的TT-2交付时间？")
    assert "2021" in out and "洪水" in out and "海星" in out and "tt" in out and "交付" in out
    assert not any(len(t) > 8 for t in out)
