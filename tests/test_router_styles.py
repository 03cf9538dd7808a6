"""The router on question styles it was not built around, on small offline indexes of real corpora.

Indexes are built once per session from a few documents of the podcast and earnings-call corpora in
`../shared/data/msft_graphrag_benchmarks/corpus` (read with pandas into temporary .txt files).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from router.classifier import Classifier, RouteDecision, classify
from router.index_scope import CLASSES, DEFAULT_WEIGHTS, SITUATIONS, IndexScope, adjust
from router.router import Router
from tools.routing import scope_fit
from tools.routing.train import NEW_STYLES, NEW_STYLES_2, HeldOutDataError, load_own

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "msft_graphrag_benchmarks" / "corpus"
THRESHOLD = 0.55  # the router's default confidence threshold (`[router] llm_classifier_threshold`)


def _build(folder: Path, docs: list[tuple[str, str]]) -> Any:
    from indexer import build_index
    from shared_context import load_index

    src = folder / "docs"
    src.mkdir(parents=True)
    for name, text in docs:
        (src / name).write_text(text, encoding="utf-8")
    build_index(src, folder / "index", progress=False)
    return load_index(folder / "index")


@pytest.fixture(scope="session")
def podcast_index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if not CORPUS.is_dir():
        pytest.skip("shared podcast corpus absent")
    import pandas as pd

    parts = pd.read_parquet(CORPUS / "kevin_scott_podcast_parts.parquet")
    docs = []
    for episode in sorted(parts["episode"].unique())[:4]:  # episodes 29-32
        first = parts[parts["episode"] == episode].sort_values("part").head(1)
        docs.append((episode.replace(" ", "_") + ".txt", "\n".join(first["text"])))
    return _build(tmp_path_factory.mktemp("podcast"), docs)


@pytest.fixture(scope="session")
def calls_index(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if not CORPUS.is_dir():
        pytest.skip("shared earnings-call corpus absent")
    import pandas as pd

    calls = pd.read_parquet(CORPUS / "msft_earnings_call_transcripts.parquet").sort_values("file").head(4)
    docs = [(f, t[:5000]) for f, t in zip(calls["file"], calls["text"], strict=True)]
    return _build(tmp_path_factory.mktemp("calls"), docs)


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


def test_index_signals_change_a_decision_the_wording_leaves_open(calls_index: Any) -> None:
    question = "FY15Q3电话会讨论了什么？"  # a file-style name the wording alone cannot place
    text_only = classify(question)
    with_index = classify(question, calls_index)
    assert text_only.confidence < THRESHOLD and text_only.engine != "local"
    assert with_index.engine == "local" and with_index.confidence >= THRESHOLD
    assert any("TranscriptFY15Q3" in r for r in with_index.reasons)
    # two named documents of the series: a comparison across them, not a look-up
    both = classify("How did the outlook change between FY14 Q4 and FY15 Q1?", calls_index)
    assert both.signals["named_documents"] == 2 and both.engine == "drift"


@pytest.mark.parametrize("question", ["Purple monkey dishwasher?", "asdf qwerty zxcv", "Lorem ipsum dolor sit amet",
                                      "🙂🙂🙂", "Bananas.", "紫色猴子洗碗机？", "啊啊啊啊"])
def test_odd_questions_get_low_confidence(question: str, calls_index: Any) -> None:
    d = classify(question)
    assert d.confidence < THRESHOLD, d.probabilities
    assert any("unfamiliar wording" in r for r in d.reasons)
    assert classify(question, calls_index).confidence < 0.8


def _decision(**p: float) -> RouteDecision:
    best = max(p, key=lambda e: p[e])
    return RouteDecision(engine=best, confidence=p[best], probabilities=p, reasons=["test"])  # type: ignore[arg-type]


def test_cost_aware_default_below_the_threshold(calls_index: Any) -> None:
    router = Router(calls_index)
    question = "Anything on Windows?"
    close = _decision(drift=0.40, **{"global": 0.38}, local=0.22)
    chosen = router._cost_aware_default(question, close)
    est = {e: router.engine(e).estimate(question) for e in ("global", "drift")}
    cheaper = min(est, key=lambda e: (est[e].cost, est[e].llm_calls, e))
    assert chosen.engine == cheaper and "cheaper on this index" in chosen.reasons[-1]
    local_first = router._cost_aware_default(question, _decision(drift=0.41, local=0.39, **{"global": 0.20}))
    assert local_first.engine == "local" and local_first.fallbacks == ("drift",)
    clear = _decision(drift=0.70, local=0.20, **{"global": 0.10})
    assert router._cost_aware_default(question, clear) is clear


def test_the_trainer_refuses_the_new_styles_set() -> None:
    assert NEW_STYLES.is_file()
    with pytest.raises(HeldOutDataError, match="never training data"):
        load_own(NEW_STYLES)


def test_the_trainer_refuses_the_second_new_styles_set() -> None:
    assert NEW_STYLES_2.is_file()
    with pytest.raises(HeldOutDataError, match="never training data"):
        load_own(NEW_STYLES_2)
    rows = [json.loads(line) for line in NEW_STYLES_2.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 150 and sum(r["label"] == "global" for r in rows) >= len(rows) / 3
    training = {" ".join(q.lower().split()) for q in (e.question for e in load_own())}
    assert not [r["question"] for r in rows if " ".join(r["question"].lower().split()) in training]


def _measured(label: str, proba: tuple[float, float, float], situation: str) -> scope_fit.Measured:
    found = np.array([s == situation for s in SITUATIONS], dtype=float)
    return scope_fit.Measured("q", label, f"t-{label}-{situation}-{proba}", np.array(proba), found)


def test_scope_nudges_are_fitted_in_the_direction_the_data_shows() -> None:
    # the wording says local, but whenever the words spread thinly over the index the answer was global
    rows = [_measured("global", (0.6, 0.3, 0.1), "thin_spread")] * 20 + \
           [_measured("local", (0.6, 0.3, 0.1), "one_document")] * 20 + \
           [_measured("local", (0.7, 0.2, 0.1), "one_specific_entity")] * 20
    weights = scope_fit.fit_weights(rows, penalty=0.01)
    thin = weights[SITUATIONS.index("thin_spread")]
    assert thin[CLASSES.index("global")] > thin[CLASSES.index("local")] + 0.3
    assert np.abs(weights).max() <= scope_fit.MAX_NUDGE + 1e-9
    assert (weights[scope_fit.SIGNS > 0] >= 0).all() and (weights[scope_fit.SIGNS < 0] <= 0).all()
    assert scope_fit._accuracy(rows, weights) == 1.0 and scope_fit._accuracy(rows, None) < 1.0


def test_the_packaged_model_carries_fitted_scope_nudges() -> None:
    model = Classifier.load()
    assert model.scope_weights is not None and model.scope_weights.shape == (len(SITUATIONS), len(CLASSES))
    assert not np.allclose(model.scope_weights, DEFAULT_WEIGHTS)  # fitted, not the hand-set starting point
    bonus, _ = adjust(IndexScope(documents=("Episode_29",)), model.scope_weights)
    assert bonus[CLASSES.index("local")] > bonus[CLASSES.index("global")]


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
    from router.cues import match_cues

    assert group in match_cues(question), (question, match_cues(question))
