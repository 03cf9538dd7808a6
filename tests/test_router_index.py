"""Routing with an index: what the index probe finds changes decisions the wording alone gets wrong, generic nouns
never count as names, a question that names nothing goes where the index's evidence for it lies, and a question the
index cannot read is not called uncovered (English and Chinese).

A small Chinese index is built once from four short hand-written episode transcripts; the English index is the
Christmas Carol index of the shared data folder.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

import router.classifier as classifier_module
from router.classifier import (
    CONTESTED_CEILING,
    NAMES_NOTHING,
    NOT_COVERED,
    NOT_COVERED_CEILING,
    ONE_DOCUMENT,
    classify,
)
from router.index_probe import UNIT_DEPTH, LinkSummary, Probe
from router.index_profile import profile, question_scripts, script_shares

# four episodes of a made-up Chinese podcast about tea (the file names number the episodes)
_EPISODES = {
    "episode_01.txt": "本期节目的嘉宾是茶农王建国。王建国在杭州龙井村种茶三十年。他说，春天的第一批茶叶最珍贵，采茶要在清明"
                      "之前完成。王建国认为，好茶离不开好土壤和好天气。他的茶园在山坡上，每年雨水充足。王建国还讲到，年轻人越来越"
                      "少愿意留在村里种茶，这让他很担心。主持人李明问他对未来的看法，王建国希望政府能够支持小茶园。",
    "episode_02.txt": "本期节目的嘉宾是陶艺家陈静。陈静在宜兴制作紫砂壶已经二十年。她说，一把好壶需要好泥料，也需要耐心。陈静每天"
                      "在工作室里工作十个小时。她认为，手工制作的茶壶和机器生产的茶壶完全不同。主持人李明问她如何学习制壶，陈静说"
                      "她的老师是一位老艺人，教她先学做泥坯。陈静还谈到，网上销售让更多年轻人认识了紫砂壶。",
    "episode_03.txt": "本期节目的嘉宾是茶叶商人赵海。赵海在上海经营一家茶叶店，主要销售普洱茶和乌龙茶。他说，茶叶市场这几年变化很"
                      "大，网上销售越来越重要。赵海认为，品牌和质量同样重要。主持人李明问他如何挑选供应商，赵海说他每年都去云南和"
                      "福建的茶园看货。赵海还提到，出口到欧洲的茶叶需要通过严格的检测。",
    "episode_04.txt": "本期节目的嘉宾是茶艺老师孙丽。孙丽在北京开设茶艺课程，教学生泡茶和品茶。她说，水温对绿茶的味道影响很大，泡"
                      "绿茶的水不能太热。孙丽认为，茶艺不只是技术，也是一种生活态度。主持人李明问她学生们最常犯的错误，孙丽说很多"
                      "人泡茶时间太长。孙丽还介绍了几种适合初学者的茶具。",
}


@pytest.fixture(scope="module")
def tea_index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from indexer import build_index
    from shared_context import load_index

    folder = tmp_path_factory.mktemp("tea")
    (folder / "docs").mkdir()
    for name, text in _EPISODES.items():
        (folder / "docs" / name).write_text(text * 2, encoding="utf-8")
    build_index(folder / "docs", folder / "index", progress=False)
    return load_index(folder / "index")


def test_scripts_of_a_text_and_of_a_question() -> None:
    assert script_shares(["Scrooge said no."]).tolist() == [1.0, 0.0]
    assert script_shares([]).tolist() == [0.0, 0.0]
    zh = script_shares(["王建国在杭州种茶 since 1990"]).tolist()
    assert zh[1] > zh[0] > 0
    assert question_scripts("领英的收购是如何影响营业费用的？") == {"cjk"}
    assert question_scripts("FY17Q1电话会上说了什么？") == {"latin", "cjk"}  # "FY" is a Latin word
    assert question_scripts("Who is Marley?") == {"latin"}


def test_an_index_knows_the_script_of_its_text(carol: Any, tea_index: Any) -> None:
    assert profile(carol).scripts == {"latin"}
    assert profile(tea_index).scripts == {"cjk"}


@pytest.mark.parametrize(("which", "question"), [
    ("carol", "王建国的茶园为什么减产了，又是如何恢复的？"),  # Chinese over an English book
    ("tea", "Why did the zorblat fight the quindle, and how did it end?"),  # English over Chinese transcripts
])
def test_a_question_the_index_cannot_read_is_not_called_uncovered(which: str, question: str, carol: Any,
                                                                   tea_index: Any) -> None:
    index = carol if which == "carol" else tea_index
    d = classify(question, index)
    assert d.signals["question_script_in_index"] == 0.0
    assert d.signals["linked_entities"] == 0 and d.signals["unit_hits"] == 0
    assert d.method not in (NOT_COVERED, NAMES_NOTHING)
    # the wording's engine, nothing says otherwise; but in a one-document index DRIFT's evidence is in one place
    assert d.engine == ("local" if d.signals["document_groups"] == 1 else "drift"), (d.probabilities, d.reasons)
    assert any("script this index's text does not use" in r for r in d.reasons)
    assert not any("links to nothing in this index" in r for r in d.reasons)


@pytest.mark.parametrize(("which", "question"), [
    ("tea", "紫色猴子洗碗机为什么会生气，后来又怎么和解了？"),
    ("carol", "Why did the zorblat fight the quindle, and how did it end?"),
])
def test_a_question_the_index_can_read_but_does_not_cover_never_goes_to_drift(which: str, question: str, carol: Any,
                                                                               tea_index: Any) -> None:
    d = classify(question, carol if which == "carol" else tea_index)
    assert classify(question).engine == "drift"  # the wording alone
    assert d.signals["question_script_in_index"] == 1.0 and d.signals["linked_entities"] == 0
    assert d.engine == "local" and d.method == NOT_COVERED and d.fallbacks == ("basic",)
    assert d.confidence <= NOT_COVERED_CEILING


def _spread_probe(hits: int, reports: int) -> Probe:
    """What a question that names nothing finds in a 40-document collection: `hits` best passages over 15 documents
    and `reports` top-level reports sharing a word with it."""
    return Probe(LinkSummary(), groups=40, groups_measured=True, unit_hits=hits, unit_groups=min(hits, 15),
                 unit_group_spread=0.6 if hits else 0.0, unit_best_group_share=0.15 if hits else 0.0,
                 unit_communities=6 if hits else 0, unit_community_spread=0.3 if hits else 0.0,
                 unit_peak=0.07 if hits else 0.0, top_level=30, report_touched=reports,
                 report_spread=0.3 if reports else 0.0)


@pytest.mark.parametrize("question", ["Why does ambition cause burnout, and how can it be avoided?",
                                      "雄心和倦怠之间有什么关系？"])
def test_a_question_that_names_nothing_goes_where_the_index_has_it(question: str, carol: Any,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The wording says DRIFT, but the index names nothing DRIFT could start from: passages spread over the
    collection make it corpus-wide (global); a few passages and no report make it a question the index does not
    cover (local)."""
    assert classify(question).engine == "drift"
    monkeypatch.setattr(classifier_module, "_probe", lambda *_: (_spread_probe(UNIT_DEPTH, 8), ""))
    spread = classify(question, carol)
    assert spread.engine == "global" and spread.method == NAMES_NOTHING, (spread.probabilities, spread.reasons)
    assert spread.probabilities["drift"] == 0.0 and spread.confidence <= NOT_COVERED_CEILING
    assert "spread over the collection (15 of 40 documents)" in spread.reasons[0]
    monkeypatch.setattr(classifier_module, "_probe", lambda *_: (_spread_probe(3, 0), ""))
    thin = classify(question, carol)
    assert thin.engine == "local" and thin.method == NOT_COVERED
    unread = replace(_spread_probe(0, 0), readable=False)
    monkeypatch.setattr(classifier_module, "_probe", lambda *_: (unread, ""))
    assert classify(question, carol).method not in (NOT_COVERED, NAMES_NOTHING)


def test_the_index_moves_a_chinese_question_the_wording_gets_wrong(tea_index: Any) -> None:
    question = "第2期节目的主要主题是什么？"  # "main themes" reads corpus-wide; it names one episode
    assert classify(question).engine == "global"
    d = classify(question, tea_index)
    assert d.engine == "local" and d.signals["named_documents"] == 1
    assert d.signals["question_script_in_index"] == 1.0
    assert any("names one document of the collection (episode_02)" in r for r in d.reasons)


def test_generic_nouns_in_a_chinese_question_do_not_count_as_specific(carol: Any, tea_index: Any) -> None:
    titles = [str(e.title) for e in carol.entities]
    generic = {t for t, g in zip(titles, profile(carol).entity_generic, strict=True) if g}
    word = next(t for t in ("PEOPLE", "CHURCH", "STREET", "NATURE") if t in generic)
    d = classify(f"书里的 {word.lower()} 是什么样的？", carol)
    assert d.signals["common_noun_entities"] >= 1 and d.signals["specific_entities"] == 0, d.reasons
    # a noun every episode uses (嘉宾, the guest) is collection-wide, not specific; a guest's name is specific
    wide = classify("嘉宾们一般怎么看待年轻人？", tea_index)
    assert wide.signals["collection_wide_entities"] >= 1 and wide.signals["specific_entities"] == 0
    assert wide.engine == "global"
    one = classify("王建国是谁？", tea_index)
    assert one.signals["specific_entities"] == 1 and one.engine == "local"


@pytest.mark.parametrize("question", ["What are the overall themes and recurring trends across episode 2?",
                                      "第2期节目的总体主题和趋势是什么？", "第2期节目反复出现的主题有哪些？"])
def test_a_confident_corpus_wide_wording_about_one_named_document_goes_local(question: str, tea_index: Any) -> None:
    """However sure the wording is that a question is corpus-wide, naming one document of the collection makes it a
    question about that document (the override the wording's confidence cannot block)."""
    text_only = classify(question)
    assert text_only.engine == "global" and text_only.confidence >= 0.8, text_only.probabilities
    d = classify(question, tea_index)
    assert d.signals["named_documents"] == 1
    assert d.engine == "local" and d.method == ONE_DOCUMENT, (d.probabilities, d.reasons)
    assert d.probabilities["global"] == 0.0 and d.confidence <= CONTESTED_CEILING
    assert d.reasons[0].startswith("asks about one document (episode_02), not the whole collection")
    # without a named document the same wording stays global
    assert classify("第几期节目的总体主题和趋势是什么？", tea_index).engine == "global"


@pytest.mark.parametrize(("method", "asked"), [(NAMES_NOTHING, False), (NOT_COVERED, False), ("model", True)])
def test_no_second_opinion_can_send_a_question_that_names_nothing_to_drift(method: str, asked: bool, carol: Any,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Below the threshold the router asks the chat model for a second opinion, except for a decision moved off DRIFT
    because the question names nothing in the index: no vote can give DRIFT something to start from."""
    from engines.models.base import Usage
    from router.classifier import RouteDecision
    from router.router import Router
    from router.routing import RoutingPolicy

    unsure = RouteDecision(engine="global", confidence=0.45, probabilities={"global": 0.45, "local": 0.4, "drift": 0.15},
                           reasons=["test"], signals={"linked_entities": 0.0}, method=method)
    monkeypatch.setattr(classifier_module, "classify", lambda *_a, **_k: unsure)
    calls: list[str] = []

    async def second_opinion(self: Any, asked: Any, decision: RouteDecision, *_: Any) -> RouteDecision:
        calls.append(asked.text)
        return decision

    monkeypatch.setattr(RoutingPolicy, "_second_opinion", second_opinion)
    from engines.models.factory import Models

    monkeypatch.setattr(Models, "offline", property(lambda _self: False))  # read once, when the Router is made
    router = Router(carol)
    try:
        router.run(router.routing.route("What do they say about it?", None, "auto", None, Usage(), [], started=0.0))
    finally:
        router.close()
    assert bool(calls) is asked
