"""The offline model's report, reduce, DRIFT, rewrite and routing tasks, Chinese text, and odd input.

Report batches come from `CommunityContextBuilder` on the Christmas Carol index; small contexts made in code
cover edge cases and Chinese. The model gets typed contexts (`TaskContext`), as the engines hand them; every
structured output is validated against its schema in `engines/schemas.py`.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from fixture_paths import CAROL
from pydantic import BaseModel, Field

from engines.models.base import Message
from engines.models.offline import OfflineChatModel
from engines.models.offline_text import capitalised_phrases
from engines.models.task_context import Finding, TaskContext
from engines.schemas import (
    FollowupResponse,
    MapResponse,
    PrimerResponse,
    QuestionList,
    RateResponse,
    RewriteResponse,
    RouteResponse,
)
from router.rewrite import history_context
from shared_context.history import HISTORY_COLUMNS, HISTORY_SECTION
from shared_context.index import Index
from shared_context.tables import (
    Column,
    ContextTables,
    EntityRecord,
    HistoryRecord,
    ReportRecord,
    Section,
    SourceRecord,
    columns,
)

CITATION = re.compile(r"\[Data:\s*([^\]]*)\]")


def report_ids(text: str) -> set[str]:
    ids: set[str] = set()
    for body in CITATION.findall(text):
        for ref in re.findall(r"Reports \(([^)]*)\)", body):
            ids.update(i.strip() for i in ref.split(",") if i.strip() != "+more")
    return ids


def cited_ids(text: str) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for body in CITATION.findall(text):
        for dataset, ids in re.findall(r"([A-Za-z]+) \(([^)]*)\)", body):
            out.update((dataset, i.strip()) for i in ids.split(",") if i.strip() != "+more")
    return out


async def run(context: TaskContext, task: str, **kw: Any) -> str:
    """The model's reply to a call that shows `context` (the prompt's wording does not matter to it)."""
    msgs: list[Message] = [{"role": "system", "content": "(the engine's prompt)"},
                           {"role": "user", "content": context.question}]
    return (await OfflineChatModel().complete(msgs, task=task, context=context, **kw)).text


@pytest.fixture(scope="module")
def index() -> Index:
    from shared_context import load_index

    return load_index(CAROL)


def reports_table(index: Index, communities: list[int]) -> ContextTables:
    by_number = {r.community: r for r in index.community_reports}
    rows = [ReportRecord(str(c), by_number[c].title, by_number[c].full_content, by_number[c].rank) for c in communities]
    return ContextTables(reports=Section("Reports", columns("id", "title", "content"), rows))


# ------------------------------------------------------------------------------------------ global map / rate


async def test_global_map_scores_relevant_reports_and_cites_only_the_batch(index: Any) -> None:
    from shared_context import CommunityContextBuilder

    question = "What does Marley's ghost warn Scrooge about?"
    batches = CommunityContextBuilder(index).build(question)
    texts = [await run(TaskContext(question, b.tables), "global_map") for b in batches]
    scored = 0
    for batch, text in zip(batches, texts, strict=True):
        out = MapResponse.model_validate_json(text)
        scores = [p.score for p in out.points]
        assert scores == sorted(scores, reverse=True)
        batch_ids = {str(c) for c in batch.communities}
        for point in out.points:
            if point.score > 0:
                scored += 1
                assert report_ids(point.description) and report_ids(point.description) <= batch_ids
    assert scored >= 3
    best = max((p for t in texts for p in MapResponse.model_validate_json(t).points), key=lambda p: p.score)
    assert "marley" in best.description.lower() and "warn" in best.description.lower()


async def test_global_map_gives_zero_to_an_unrelated_question(index: Any) -> None:
    from shared_context import CommunityContextBuilder

    question = "How do quantum computers factor large integers?"
    batch = CommunityContextBuilder(index).build(question)[0]
    out = MapResponse.model_validate_json(await run(TaskContext(question, batch.tables), "global_map"))
    assert all(p.score == 0 for p in out.points)


async def test_global_map_answers_corpus_wide_questions_from_every_report(index: Any) -> None:
    tables = reports_table(index, [1, 4, 30])
    out = MapResponse.model_validate_json(await run(TaskContext("What are the main themes?", tables), "global_map"))
    assert len(out.points) == 3 and all(p.score > 0 for p in out.points)


async def test_rate_prefers_the_report_about_the_question(index: Any) -> None:
    question = "What does Marley's ghost warn Scrooge about?"
    by_title = {r.title: r.community for r in index.community_reports}
    gutenberg = next(c for t, c in by_title.items() if "Gutenberg" in t)
    ratings = {}
    for community in (1, gutenberg):
        out = RateResponse.model_validate_json(await run(TaskContext(question, reports_table(index, [community])), "rate"))
        assert out.reason
        ratings[community] = out.rating
    assert ratings[1] >= 3 > ratings[gutenberg]


# ------------------------------------------------------------------------------------------ reduce

_BLOCKS = [
    (1, 40, "Fezziwig threw a Christmas ball for his apprentices [Data: Reports (7)]."),
    (
        2,
        90,
        "Marley's ghost warned Scrooge that his chains were forged in life [Data: Reports (3, 5)]. "
        "He foretold three spirits [Data: Reports (3)].",
    ),
    (3, 90, "Marley's ghost warned Scrooge that his chains were forged in life [Data: Reports (9)]."),
]


def analysts(question: str, blocks: list[tuple[int, int, str]], **fields: Any) -> TaskContext:
    findings = tuple(Finding(n, s, t) for n, s, t in blocks)
    return TaskContext(question, findings=findings, response_type="multiple paragraphs", **fields)


@pytest.mark.parametrize("task", ["global_reduce", "drift_reduce"])
async def test_reduce_merges_in_importance_order_and_keeps_references(task: str) -> None:
    text = await run(analysts("What happened to Scrooge?", _BLOCKS), task)
    assert text.index("chains were forged") < text.index("Fezziwig")
    assert text.count("chains were forged") == 1  # the duplicate point is merged ...
    assert report_ids(text) == {"3", "5", "7", "9"}  # ... and keeps both references


async def test_reduce_gives_every_block_its_opening_before_any_block_its_tail() -> None:
    scenes = [
        "his lonely school",
        "Fezziwig's ball",
        "Belle leaving him",
        "the Cratchit dinner",
        "Fred's party",
        "the thieves in Joe's shop",
        "his own neglected grave",
    ]
    long_first = " ".join(
        f"In vision {i} Scrooge saw {scene} [Data: Reports ({i})]." for i, scene in enumerate(scenes, 1)
    )
    blocks = [
        (1, 90, long_first),
        (2, 60, "Fred invited Scrooge to dinner every Christmas [Data: Reports (20)]."),
    ]
    context = analysts("What did Scrooge see?", blocks)
    roomy = await run(context, "global_reduce")
    assert report_ids(roomy) == {*(str(i) for i in range(1, 8)), "20"}
    tight = await run(context, "global_reduce", max_tokens=150)
    assert tight == await run(analysts("What did Scrooge see?", blocks, word_limit=113), "global_reduce")  # 113 words: 150 tokens
    assert "20" in report_ids(tight) and "7" not in report_ids(tight)
    assert tight.index("vision 3") < tight.index("Fred invited")


async def test_drift_reduce_of_offline_answers_keeps_findings_not_their_headings() -> None:
    answer = (
        "**Answer (offline extractive model; sentences quoted from the supplied data):** "
        "Fred is Scrooge's cheerful nephew [Data: Entities (12)].\n\n**From the knowledge graph**\n"
        "- Fred invites Scrooge to Christmas dinner every year [Data: Relationships (589)].\n\n"
        "**Fred and Scrooge**\n- Scrooge refuses the invitation with a scowl [Data: Claims (65)]."
    )
    text = await run(analysts("Who is Fred?", [(1, 80, answer)]), "drift_reduce")
    assert "From the knowledge graph" not in text and "Fred and Scrooge" not in text
    assert text.count("**Answer") == 1 and text.count("\n- ") == 3
    assert cited_ids(text) == {("Entities", "12"), ("Relationships", "589"), ("Claims", "65")}


async def test_reduce_respects_max_tokens_and_says_when_there_is_nothing() -> None:
    long_blocks = [
        (i, 50, f"Point {i} says that Scrooge met spirit number {i} at night [Data: Reports ({i})].")
        for i in range(1, 60)
    ]
    msgs: list[Message] = [{"role": "user", "content": "Spirits?"}]
    out = await OfflineChatModel().complete(msgs, task="global_reduce", max_tokens=120,
                                            context=analysts("Spirits?", long_blocks))
    assert out.output_tokens <= 120 and report_ids(out.text)
    assert "[Data:" not in CITATION.sub("", out.text)  # no cut reference
    empty = await run(TaskContext("What happened?"), "global_reduce")
    assert "does not answer" in empty


# ------------------------------------------------------------------------------------------ DRIFT


async def test_drift_hyde_follows_the_template_without_new_names(index: Any) -> None:
    template = index.community_reports[0].full_content
    question = "What does Marley warn Scrooge about?"
    text = await run(TaskContext(question, template=template), "drift_hyde")
    assert text.startswith("# ") and "\n## " in text
    allowed = {w.casefold() for w in re.findall(r"\w+", question)} | {
        "this",
        "report",
        "how",
        "in",
        "the",
        "of",
    }
    names = {w.casefold() for n in capitalised_phrases(text) for w in n.split()}
    assert names <= allowed, names - allowed


async def test_drift_primer_answers_from_the_fold_and_asks_about_its_entities(index: Any) -> None:
    question = "How does Scrooge change after the ghosts visit him?"
    fold = [1, 4, 30, 55]
    text = await run(TaskContext(question, reports_table(index, fold)), "drift_primer")
    out = PrimerResponse.model_validate_json(text)
    assert out.intermediate_answer.startswith("## ")
    assert report_ids(out.intermediate_answer) and report_ids(out.intermediate_answer) <= {
        str(c) for c in fold
    }
    assert 0 < out.score <= 100
    assert len(out.follow_up_queries) >= 5
    fold_text = " ".join(r.full_content for r in index.community_reports if r.community in fold).casefold()
    for q in out.follow_up_queries:
        assert q.endswith("?") and q.count("?") == 1 and " and what " not in q.lower()
    named = [
        n
        for q in out.follow_up_queries
        for n in capitalised_phrases(q)
        if n.casefold() not in question.casefold()
    ]
    assert sum(n.casefold() in fold_text for n in named) >= 5
    assert text == await run(TaskContext(question, reports_table(index, fold)), "drift_primer")


async def test_drift_followup_without_context_degrades_honestly() -> None:
    out = FollowupResponse.model_validate_json(
        await run(TaskContext("Who?", overall_question="Why?", max_followups=2), "drift_followup")
    )
    assert out.score == 0 and out.follow_up_queries == [] and "does not answer" in out.response


# ------------------------------------------------------------------------------------------ rewrite and route


def history(*turns: str) -> ContextTables:
    rows = [HistoryRecord(f"turn-{i}", "user", t, i) for i, t in enumerate(turns, start=1)]
    return ContextTables(history=Section(HISTORY_SECTION, HISTORY_COLUMNS, rows))


@pytest.mark.parametrize(
    ("turns", "question", "must", "must_not"),
    [
        (["Who is Scrooge?"], "What about his nephew?", ["Scrooge", "nephew"], ["his"]),
        (["Tell me about Bob Cratchit."], "Where does he work?", ["Bob Cratchit", "work"], ["he"]),
        (["Who is Scrooge?"], "Who was Marley?", ["Marley"], ["Scrooge"]),
        (["斯克鲁奇是谁？"], "他的外甥是谁？", ["斯克鲁奇", "外甥"], ["他"]),
        (["斯克鲁奇是谁？"], "那马利呢？", ["马利是谁"], ["呢"]),
        (["Who is Scrooge?"], "Is it true that Marley died?", ["Is it true that Marley died?"], ["Scrooge"]),
        (
            ["What did Scrooge see with the Ghost of Christmas Past?"],
            "What about the second spirit?",
            ["What did Scrooge see with the second spirit?"],
            ["Ghost"],
        ),
        (["Who is Scrooge?"], "Tell me more.", ["Tell me more about Scrooge"], []),
    ],
)
async def test_rewrite_makes_the_question_standalone(
    turns: list[str], question: str, must: list[str], must_not: list[str]
) -> None:
    out = RewriteResponse.model_validate_json(await run(TaskContext(question, history(*turns)), "rewrite"))
    for word in must:
        assert word in out.question, out.question
    for word in must_not:
        assert not re.search(rf"(?<!\w){word}(?!\w)", out.question), out.question


async def test_rewrite_reads_the_conversation_the_router_hands_it() -> None:
    conversation: list[Message] = [
        {"role": "user", "content": "Who is Jacob Marley?"},
        {"role": "assistant", "content": "Scrooge's late partner."},
    ]
    context = history_context("When did he die?", conversation)
    assert context.tables.history is not None
    assert [(r.role, r.turn) for r in context.tables.history.rows] == [("user", 1), ("assistant", 1)]
    text = await run(context, "rewrite")
    assert RewriteResponse.model_validate_json(text).question == "When did Jacob Marley die?"


@pytest.mark.parametrize(
    ("question", "engine"),
    [
        ("What are the main themes of the story?", "global"),
        ("Compare Scrooge and Fred's views of Christmas.", "drift"),
        ("Why does Scrooge change?", "drift"),
        ("Who is Bob Cratchit?", "local"),
        ("这个故事的主要主题是什么？", "global"),
    ],
)
async def test_route_fallback_follows_simple_cues(question: str, engine: str) -> None:
    msgs: list[Message] = [{"role": "system", "content": "Engines: local, global, drift"},
                           {"role": "user", "content": question}]
    text = (await OfflineChatModel().complete(msgs, task="route")).text  # no typed context: the question alone
    out = RouteResponse.model_validate_json(text)
    assert out.engine == engine and out.reason


# ------------------------------------------------------------------------------------------ Chinese

_ZH_CONTEXT = ContextTables(
    entities=Section("Entities", (Column("id", "id"), Column("entity", "title"), Column("description", "description")), [
        EntityRecord("11", "斯克鲁奇", "斯克鲁奇是一个吝啬的老商人。他在伦敦经营一家账房。"),
        EntityRecord("12", "马利", "马利是斯克鲁奇已故的合伙人。马利的鬼魂在圣诞夜拜访了斯克鲁奇。"),
        EntityRecord("13", "鲍勃", "鲍勃是斯克鲁奇的职员，家境贫寒。"),
    ]),
    sources=Section("Sources", columns("id", "text"), [
        SourceRecord("5", "马利的鬼魂警告斯克鲁奇，他将被三个幽灵拜访。斯克鲁奇非常害怕。"),
        SourceRecord("6", "圣诞节早晨，斯克鲁奇变得慷慨大方。他给鲍勃加了薪水。"),
    ]),
)


async def test_chinese_question_is_answered_from_chinese_text_with_citations() -> None:
    text = await run(TaskContext("马利的鬼魂警告了斯克鲁奇什么？", _ZH_CONTEXT, response_type="multiple paragraphs"),
                     "local_answer")
    assert text.startswith("**回答")
    first = text.split("\n")[0]
    assert "马利" in first and "鬼魂" in first
    refs = set(re.findall(r"(Entities|Sources) \(([^)]*)\)", text))
    assert refs and refs <= {
        ("Entities", "11"),
        ("Entities", "12"),
        ("Entities", "13"),
        ("Sources", "5"),
        ("Sources", "6"),
    }
    irrelevant = await run(TaskContext("量子计算机的原理是什么？", _ZH_CONTEXT), "local_answer")
    assert "无法回答" in irrelevant


async def test_chinese_questions_and_followups_are_in_chinese() -> None:
    out = QuestionList.model_validate_json(
        await run(TaskContext("斯克鲁奇是谁？", _ZH_CONTEXT, question_count=3), "questions")
    )
    assert len(out.questions) == 3 and all(q.endswith("？") for q in out.questions)


# ------------------------------------------------------------------------------------------ parsing and odd input


_EMPTY_SOURCES = Section("Sources", columns("id", "text"), [SourceRecord("", "no id"), SourceRecord("3", "")])


@pytest.mark.parametrize(
    ("msgs", "context"),
    [
        ([], None),
        ([{"role": "user", "content": ""}], None),
        ([{"role": "user", "content": "What?"}], TaskContext("What?")),
        ([{"role": "user", "content": "Anything?"}], TaskContext("Anything?", ContextTables(
            reports=Section("Reports", columns("id", "title", "content"), []), sources=_EMPTY_SOURCES))),
        (["not a message", {"role": "system", "content": None}, {"content": "Who is Scrooge?"}], None),
        ([{"role": "user", "content": "Who?"}], TaskContext("", findings=(Finding(1, 0.0, "   "),))),
    ],
)
@pytest.mark.parametrize(
    "task", ["local_answer", "global_map", "rate", "drift_primer", "questions", "rewrite", "global_reduce"]
)
async def test_odd_input_never_raises_and_still_validates(msgs: list[Any], context: TaskContext | None,
                                                          task: str) -> None:
    schemas: dict[str, type[BaseModel]] = {
        "global_map": MapResponse,
        "rate": RateResponse,
        "drift_primer": PrimerResponse,
        "questions": QuestionList,
        "rewrite": RewriteResponse,
    }
    text = (await OfflineChatModel().complete(msgs, task=task, context=context)).text
    if task in schemas:
        schemas[task].model_validate_json(text)
    else:
        assert "does not answer" in text


class _Custom(BaseModel):
    summary: str
    confidence: float = Field(ge=0.5, le=1.0)
    tags: list[str]
    verdict: bool


async def test_unknown_schema_gets_a_minimal_valid_object_carrying_the_answer() -> None:
    tables = ContextTables(sources=Section("Sources", columns("id", "text"),
                                           [SourceRecord("4", "Scrooge kept a counting-house in London.")]))
    text = await run(TaskContext("Where was Scrooge's counting-house?", tables), "something_new", json_schema=_Custom)
    obj = _Custom.model_validate_json(text)
    assert "counting-house" in obj.summary and "[Data: Sources (4)]" in obj.summary
    assert obj.confidence == 0.5 and obj.tags == [] and obj.verdict is False


async def test_known_schema_selects_its_task_even_under_the_default_task(index: Any) -> None:
    text = await run(TaskContext("What does Marley warn Scrooge about?", reports_table(index, [1])), "answer",
                     json_schema=RateResponse)
    assert RateResponse.model_validate_json(text).rating >= 3
    assert json.loads(text).keys() == {"reason", "rating"}


def test_a_records_sentences_are_read_once_and_cited_with_each_row() -> None:
    # a record's sentences depend only on its table, subjects and text: the answer and its sufficiency check,
    # and a later question showing the record again, read them once; each row still cites its own id
    from engines.models.offline_answer import gather_candidates, record_sentences

    description = "Fred is Scrooge's cheerful nephew. He invites Scrooge to Christmas dinner every year."
    tables = ContextTables(entities=Section(
        "Entities", (Column("id", "id"), Column("entity", "title"), Column("description", "description")),
        [EntityRecord("7", "FRED", description), EntityRecord("8", "FRED", description)]))
    record_sentences.cache_clear()
    first = gather_candidates(tables)
    again = gather_candidates(tables)
    info = record_sentences.cache_info()
    assert info.misses == 1 and info.hits == 3
    assert [(c.text, c.refs, c.order, c.position) for c in first] == [(c.text, c.refs, c.order, c.position) for c in again]
    assert [c.refs for c in first] == [{"Entities": ["7"]}, {"Entities": ["7"]}, {"Entities": ["8"]}, {"Entities": ["8"]}]
    assert first[0].terms is not first[2].terms  # each candidate owns its terms list
