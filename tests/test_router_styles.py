"""The router on question styles it was not built around, on small offline indexes of real corpora.

Indexes are built once per session from excerpts of Microsoft's podcast and earnings-call corpora
(`tests/fixtures/msft_transcripts`: four podcast episodes, four calls).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fixture_paths import FIXTURES

from router.classifier import NOT_COVERED_CEILING, Classifier, RouteDecision, classify
from router.index_probe import PROBE_NAMES
from router.router import Router
from tools.routing import train
from tools.routing.examples import CLASSES, NEW_STYLES, NEW_STYLES_2, NEW_STYLES_3, HeldOutDataError, load_own

TRANSCRIPTS = FIXTURES / "msft_transcripts"
THRESHOLD = 0.55  # the router's default confidence threshold (`[router] llm_classifier_threshold`)


def _build(documents: Path, out: Path) -> Any:
    from indexer import build_index
    from shared_context import load_index

    build_index(documents, out, progress=False)
    return load_index(out)


@pytest.fixture(scope="session")
def podcast_index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _build(TRANSCRIPTS / "podcast", tmp_path_factory.mktemp("podcast") / "index")  # episodes 29-32


@pytest.fixture(scope="session")
def calls_index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return _build(TRANSCRIPTS / "earnings_calls", tmp_path_factory.mktemp("calls") / "index")


POPULATION = [
    "What do the guests generally say about failure?",
    "Do any of the people on the show talk about their parents?",
    "How do analysts typically react to the guidance?",
    "Are there any executives who mention hiring?",
    "嘉宾们一般怎么看待失败？",
    "分析师在电话会上通常关心哪些问题？",
]
OVERVIEWS = [
    "What is this podcast about?",
    "Summarize the earnings calls in a few sentences.",
    "这个播客讲的是什么？",
    "用几句话概括一下这些电话会。",
]
ONE_DOCUMENT = [
    ("podcast", "What did Jacob Collier say about mastery in episode 29?"),
    ("podcast", "第30期节目里嘉宾聊了什么？"),
    ("calls", "In the FY15 Q1 call, what did Amy Hood say about revenue?"),
    ("calls", "FY14Q4电话会上管理层说了什么？"),
]


@pytest.mark.parametrize("question", POPULATION + OVERVIEWS)
def test_corpus_wide_questions_go_global_on_both_indexes(question: str, podcast_index: Any, calls_index: Any) -> None:
    for index in (podcast_index, calls_index):
        d = classify(question, index)
        assert d.engine == "global", (question, d.probabilities, d.reasons)
    assert classify(question).engine == "global"  # and without an index


@pytest.mark.parametrize(("which", "question"), ONE_DOCUMENT)
def test_one_document_questions_go_local(which: str, question: str, podcast_index: Any, calls_index: Any) -> None:
    d = classify(question, podcast_index if which == "podcast" else calls_index)
    assert d.engine == "local", (question, d.probabilities, d.reasons)
    assert d.signals["named_documents"] == 1
    assert any("names one document of the collection" in r for r in d.reasons)


def test_a_speaker_of_the_whole_collection_does_not_make_a_question_specific(podcast_index: Any) -> None:
    host = max(podcast_index.entities, key=lambda e: e.degree).title  # the most connected speaker
    d = classify(f"What does {host.title()} usually ask the guests?", podcast_index)
    assert d.engine == "global", (d.probabilities, d.reasons)


def test_an_index_signal_changes_a_decision_the_wording_gets_wrong(podcast_index: Any, calls_index: Any) -> None:
    question = "What were the main themes of episode 30?"  # "main themes" reads corpus-wide; it names one episode
    text_only = classify(question)
    with_index = classify(question, podcast_index)
    assert text_only.engine == "global"
    assert with_index.engine == "local" and with_index.signals["named_documents"] == 1
    assert any("names one document of the collection (Behind_the_Tech_Episode_30" in r for r in with_index.reasons)
    assert classify(question, calls_index).engine == "global"  # no episode 30 among the calls
    # two named documents of the series: a comparison across them, not a look-up
    both = classify("How did the outlook change between FY14 Q4 and FY15 Q1?", calls_index)
    assert both.signals["named_documents"] == 2 and both.engine == "drift"


@pytest.mark.parametrize("question", ["Purple monkey dishwasher?", "asdf qwerty zxcv", "Lorem ipsum dolor sit amet",
                                      "Bananas.", "紫色猴子洗碗机？", "啊啊啊啊"])
def test_odd_questions_get_low_confidence(question: str, calls_index: Any) -> None:
    d = classify(question)
    assert d.confidence < THRESHOLD, d.probabilities
    assert any(r.startswith("unsure: ") and "unfamiliar wording" in r for r in d.reasons), d.reasons
    assert classify(question, calls_index).confidence < THRESHOLD


@pytest.mark.parametrize("question", ["?", "...", "🙂🙂🙂", "？！", "who?", "And why?"])
def test_a_question_with_no_content_words_is_refused(question: str, calls_index: Any) -> None:
    with pytest.raises(ValueError, match=r"no (?:content )?words"):
        classify(question, calls_index)
    router = Router(calls_index)
    try:
        with pytest.raises(ValueError, match=r"no (?:content )?words"):
            router.ask(question)
    finally:
        router.close()


# (a Chinese one over these English calls is one the index cannot read: tests/test_router_index.py)
@pytest.mark.parametrize("question", ["Why did the zorblat fight the quindle, and how did it end?"])
def test_a_question_the_index_does_not_cover_never_goes_to_drift(question: str, calls_index: Any) -> None:
    d = classify(question, calls_index)
    assert d.signals["linked_entities"] == 0 and d.signals["named_documents"] == 0
    assert d.engine == "local" and d.method == "model+not-covered"
    assert any("links to nothing in this index" in r for r in d.reasons)
    assert d.confidence <= NOT_COVERED_CEILING  # a rule overriding the model claims no certainty


def test_a_common_noun_inside_a_name_the_index_does_not_know_names_nothing(carol: Any) -> None:
    # "River Tane" links the Carol index's RIVER (the text writes "river" in lower case): no name of this index
    question = "How did the 2021 River Tane flood affect the TT-2 tidal turbine and its partnership with Haixing Marine?"
    d = classify(question, carol)
    assert d.signals["linked_entities"] >= 1 and d.signals["specific_entities"] == 0
    assert d.signals["common_noun_entities"] >= 1
    assert d.engine == "local" and d.method == "model+not-covered"
    # a kin word before a name the text writes capitalised keeps the name specific
    assert classify("What did Uncle Scrooge eat on Christmas Eve?", carol).signals["specific_entities"] >= 1


def test_generic_nouns_of_an_offline_graph_do_not_count_as_specific(podcast_index: Any) -> None:
    from router.index_probe import probe, summarise_links
    from router.index_profile import profile
    from shared_context.linking import link_entities

    titles = [str(e.title) for e in podcast_index.entities]
    prof = profile(podcast_index)
    generic = {t for t, g in zip(titles, prof.entity_generic, strict=True) if g}
    named = {t for t, g in zip(titles, prof.entity_generic, strict=True) if not g}
    assert {"KEVIN SCOTT", "JACOB COLLIER"} <= named  # names, capitalised in the text
    common = sorted(t for t in generic if t in {"PEOPLE", "MUSIC", "GUESTS", "TRENDS", "LEADER", "TECHNOLOGY"})
    assert common, sorted(generic)[:40]
    question = f"What do the {common[0].lower()} say about it?"
    links = summarise_links(link_entities(podcast_index, question), lambda p: titles[p])
    found = probe(podcast_index, question, links)
    assert common[0] in found.common_nouns and common[0] not in found.specific


def test_case_statistics_tell_common_nouns_from_names() -> None:
    from router.index_profile import case_counts, generic_flags

    text = ("We spoke to the guests about trends. Kevin Scott asked the guests, and Kevin Scott said the "
            "business units grew. Later, the leader of the business units met the guests; trends changed and "
            "Jacob Collier played while Kevin Scott listened, as the leader watched, so Jacob Collier smiled.")
    lower, capital = case_counts([text])
    flags = generic_flags(["GUESTS", "TRENDS", "LEADER", "BUSINESS UNITS", "KEVIN SCOTT", "JACOB COLLIER", "AI",
                           "节目"], lower, capital)
    assert flags.tolist() == [1, 1, 1, 1, 0, 0, 0, 0]


def _decision(**p: float) -> RouteDecision:
    best = max(p, key=lambda e: p[e])
    return RouteDecision(engine=best, confidence=p[best], probabilities=p, reasons=["test"])  # type: ignore[arg-type]


# Compound questions about one entity stay local; when a later part needs another part of the corpus they do not.
# Written for this test.
ONE_ENTITY_COMPOUNDS = ["Who is Ben Bloomberg and why did he build instruments?",
                        "Who is Jacob Collier and what instrument does he play?",
                        "雅各布·科利尔是谁？他为什么喜欢和声？"]
SPANNING_COMPOUNDS = ["Who is Amy Hood and how did the company's margins change across all the calls?"]


@pytest.mark.parametrize("question", ONE_ENTITY_COMPOUNDS)
def test_compound_questions_about_one_entity_stay_local(question: str, podcast_index: Any) -> None:
    for d in (classify(question), classify(question, podcast_index)):
        assert d.engine == "local", (question, d.probabilities, d.reasons)


@pytest.mark.parametrize("question", SPANNING_COMPOUNDS)
def test_compound_questions_spanning_the_corpus_do_not(question: str, calls_index: Any) -> None:
    for d in (classify(question), classify(question, calls_index)):
        assert d.engine == "global", (question, d.probabilities, d.reasons)


# The kinds of question the router used to miss (written for this test, in styles of their own): which parts of
# a collection discuss something, stories about something, a change across the documents of a series, what a
# population of speakers emphasises (global); one speaker's remark about one document, asked with "how" (local).
MISSED_KINDS = [
    ("Which episodes deal mainly with education?", "global"),
    ("Are there any stories about learning an instrument as a child?", "global"),
    ("How have the revenue projections shifted over the quarters?", "global"),
    ("What do the executives emphasise about cloud growth?", "global"),
    ("哪几期节目主要在谈音乐？", "global"),
    ("这些年来高管们对云业务收入的预期有什么变化？", "global"),
    ("How did Office 365 contribute to growth, according to Satya Nadella's remarks in the FY15 Q1 call?", "local"),
    ("按照萨提亚·纳德拉在FY15 Q1电话会上的说法，Office 365是怎样带动增长的？", "local"),
    # a span of years over the series is the whole series; two named calls are a comparison between them
    ("How did the way executives talk about phones change between 2013 and 2022?", "global"),
    ("从2013年到2022年，高管们谈论手机的方式有什么变化？", "global"),
    ("How did the talk about phones change between FY14 Q4 and FY15 Q1?", "drift"),
]


@pytest.mark.parametrize(("question", "engine"), MISSED_KINDS)
def test_the_kinds_once_missed(question: str, engine: str, calls_index: Any) -> None:
    for d in (classify(question), classify(question, calls_index)):
        assert d.engine == engine, (question, d.probabilities, d.reasons)


def test_the_trainer_refuses_the_new_styles_set() -> None:
    assert NEW_STYLES.is_file()
    with pytest.raises(HeldOutDataError, match="never training data"):
        load_own(NEW_STYLES)


def test_the_trainers_refuse_the_sets_written_last() -> None:
    from tools.routing.index_fit import INDEX_EVAL_2, INDEX_EVAL_3, EvaluationDataError, load_questions

    assert NEW_STYLES_3.is_file() and INDEX_EVAL_2.is_file() and INDEX_EVAL_3.is_file()
    with pytest.raises(HeldOutDataError, match="never training data"):
        load_own(NEW_STYLES_3)
    for path in (INDEX_EVAL_2, INDEX_EVAL_3):
        with pytest.raises(EvaluationDataError, match="evaluation questions"):
            load_questions(path)
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        assert {r["kind"] for r in rows} == {"global", "one_document", "one_entity", "drift"}
        assert {r["lang"] for r in rows} == {"en", "zh"}


def test_the_trainer_refuses_the_second_new_styles_set() -> None:
    assert NEW_STYLES_2.is_file()
    with pytest.raises(HeldOutDataError, match="never training data"):
        load_own(NEW_STYLES_2)
    rows = [json.loads(line) for line in NEW_STYLES_2.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 150 and sum(r["label"] == "global" for r in rows) >= len(rows) / 3
    training = {" ".join(q.lower().split()) for q in (e.question for e in load_own())}
    assert not [r["question"] for r in rows if " ".join(r["question"].lower().split()) in training]


def test_the_index_stage_is_fitted_in_the_directions_the_design_allows() -> None:
    # the wording says local, but whenever the passages spread over many documents and nothing specific was
    # named the answer was global; a named document was always local
    spread, one_doc = PROBE_NAMES.index("unspecific_spread"), PROBE_NAMES.index("documents_1")
    rows_x, rows_y = [], []
    for label, feature in (("global", spread), ("local", one_doc)):
        probe = np.zeros(len(PROBE_NAMES))
        probe[feature] = 1.0
        for _ in range(30):
            rows_x.append(np.concatenate([np.log([0.2, 0.2, 0.6]), probe]))  # CLASSES order: drift, global, local
            rows_y.append(CLASSES.index(label))
    x, y = np.vstack(rows_x), np.array(rows_y)
    weights, bias = train.fit_offset_stage(x, y, np.ones(len(y)), penalty=0.001)
    w = weights[:, 3:]
    assert w[CLASSES.index("global"), spread] > 1.0 and w[CLASSES.index("local"), spread] <= 0.0
    assert w[CLASSES.index("local"), one_doc] >= 0.0 and w[CLASSES.index("global"), one_doc] <= 0.0
    assert np.abs(w).max() <= train.MAX_NUDGE + 1e-9 and not bias.any()
    for k in range(3):  # every weight within its allowed sign
        for j, name in enumerate(PROBE_NAMES):
            sign = train.PROBE_SIGNS[name][k]
            assert (sign == 2 and w[k, j] == 0) or (sign == 1 and w[k, j] >= 0) or (sign == -1 and w[k, j] <= 0) \
                or sign == 0
    decided = (x @ weights.T + bias).argmax(axis=1)
    assert (decided == y).all()


def test_the_packaged_model_carries_a_fitted_index_stage() -> None:
    model = Classifier.load()
    stage = model.trained_on["index_stage"]
    assert isinstance(stage, dict) and stage["questions"] > 1000
    assert set(stage["by_index"]) >= {"podcast", "earnings", "novel", "medical"}
    one_doc = np.zeros(len(PROBE_NAMES))
    one_doc[PROBE_NAMES.index("documents_1")] = 1.0
    from router.index_probe import LinkSummary, Probe

    probe = Probe(LinkSummary(), documents=("FY20 Q3",))
    assert np.array_equal(probe.vector(), one_doc + np.eye(len(PROBE_NAMES))[PROBE_NAMES.index("linked_none")] +
                          np.eye(len(PROBE_NAMES))[PROBE_NAMES.index("unit_hits_none")])
    even = np.full(3, 1 / 3)
    moved = model.index_stage(even, probe)
    order = model.classes
    assert moved[order.index("local")] > moved[order.index("global")]


# Frequency words do not make a question corpus-wide by themselves: about one thing they ask for a fact,
# about a population of speakers or documents they ask for the whole collection. Written for this test.
FREQUENCY_FACTS = ["What is the most common complication of a broken hip?", "How is Lyme disease usually diagnosed?",
                   "骨折后最常见的并发症是什么？", "这种鸟一般在哪里筑巢？"]
FREQUENCY_POPULATIONS = ["What do the callers most commonly complain about?",
                         "Do the reviewers usually mention the service?", "评论者们一般怎么评价这些餐馆？",
                         "来电的客户最常问什么？"]
ROLE_PLAY = ["You are a ship's surgeon; write a log entry about the fever outbreak on the Halcyon.",
             "请以船医的身份写一篇关于哈尔西恩号热病暴发的日志。"]


@pytest.mark.parametrize(("question", "engine"), [(q, "local") for q in FREQUENCY_FACTS]
                         + [(q, "global") for q in FREQUENCY_POPULATIONS] + [(q, "drift") for q in ROLE_PLAY])
def test_frequency_words_and_role_play_route_by_structure(question: str, engine: str) -> None:
    d = classify(question)
    assert d.engine == engine, (question, d.probabilities, d.reasons)


# Several linked things asked at once, or what something means, are scoped reasoning (DRIFT); "what are the
# X of Y" about one thing is a look-up (local); "the people we interviewed" is a population (global). Written
# for this test, not in the training set.
SCOPED_ASKS = ["Which firms lost their licences and under what circumstances?",
               "What does the empty chair at the wedding suggest about the family?",
               "大桥关闭以后，哪些公交线路改了道，为什么？"]
PLAIN_LOOKUPS = ["What are the ingredients of the house sourdough?", "What are the main side effects of the new inhaler?",
                 "这台洗衣机主要由哪些部件组成？"]
INTERVIEWED = ["What did the cyclists we interviewed say about the new lanes?", "接受调查的司机们对新路线满意吗？"]


@pytest.mark.parametrize(("question", "engine"), [(q, "drift") for q in SCOPED_ASKS]
                         + [(q, "local") for q in PLAIN_LOOKUPS] + [(q, "global") for q in INTERVIEWED])
def test_multi_part_asks_plain_lookups_and_interviewed_groups(question: str, engine: str) -> None:
    d = classify(question)
    assert d.engine == engine, (question, d.probabilities, d.reasons)


@pytest.mark.parametrize(("question", "group"), [
    ("Which clauses apply and why?", "multi_ask"),
    ("What are the causes and effects of the strike?", "multi_ask"),
    ("水坝有哪些作用？又带来了哪些问题？", "multi_ask"),
    ("What role did the harbour play in the town's growth?", "interpret"),
    ("开篇的那封信意味着什么？", "interpret"),
    ("What is the most common cause of engine stalls?", "attribute"),
    ("这种病最常见的症状是什么？", "attribute"),
    ("What did the farmers we spoke to say about prices?", "population"),
    ("受访的教师怎么看新课程？", "population"),
])
def test_cue_groups_for_asks_meanings_attributes_and_interviewed_groups(question: str, group: str) -> None:
    from router.features import match_cues

    assert group in match_cues(question), (question, match_cues(question))


@pytest.mark.parametrize(("question", "group", "fires"), [
    ("What did the second session reveal about training?", "unit", True),
    ("Summarise the budget review meeting.", "unit", True),
    ("Does the season finale mention education?", "unit", True),
    ("第二场访谈做出了什么决定？", "unit", True),
    ("六月的那次访谈讨论了什么？", "unit", True),
    ("最后一封信提到金钱了吗？", "unit", True),
    # a document noun inside a reference to one document is not a population of documents
    ("第二场访谈做出了什么决定？", "population", False),
    ("六月的那次访谈讨论了什么？", "population", False),
    ("这些访谈里大家最常谈到什么？", "population", True),
    ("What do the interviews say about rent?", "unit", False),
    ("How did the CFO justify the spending, according to her remarks on the call?", "account", True),
    ("How does the narrator describe the storm?", "account", True),
    ("按照财务总监在电话会上的说法，开支为什么增加了？", "account", True),
    ("What are the main themes of the collection?", "account", False),
])
def test_cue_groups_for_one_document_and_one_account(question: str, group: str, fires: bool) -> None:
    from router.features import match_cues

    assert (group in match_cues(question)) is fires, (question, match_cues(question))


def test_a_group_yields_only_to_the_groups_it_names(tmp_path: Path) -> None:
    from router.features import load_groups

    spec = {"groups": [{"name": "a", "reason": "", "en": ["x"], "not_inside": ["b"]},
                       {"name": "b", "reason": "", "en": ["y"], "not_inside": ["nope"]}]}
    path = tmp_path / "cues.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(ValueError, match="nope"):
        load_groups(path)


@pytest.mark.parametrize(("question", "feature", "value"), [
    ("In the episode with the chef, how does she plan a menu?", "x_how_in_one_unit", 1.0),
    ("How did the outlook in the first call compare with the last call?", "x_how_in_one_unit", 0.0),
    ("How do the guests in the episodes describe their first job?", "x_how_in_one_unit", 0.0),
    ("How did the CFO explain the write-down, according to her remarks on the call?", "x_account_of_one", 1.0),
    ("How do the analysts describe the write-down?", "x_account_of_many", 1.0),
    ("How do the analysts describe the write-down?", "x_account_of_one", 0.0),
])
def test_interactions_for_one_document_and_one_account(question: str, feature: str, value: float) -> None:
    from router.features import DENSE_NAMES, extract

    assert float(extract(question).dense[DENSE_NAMES.index(feature)]) == value, extract(question).cues
