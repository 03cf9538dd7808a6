"""The offline extractive model on real local contexts from the Christmas Carol index.

Contexts come from `LocalContextBuilder(load_index(path)).build(question)`, and the model gets what the
engines give it: the rendered prompt and, beside it, the typed context (`TaskContext`). These tests check that
answers cite only ids present in the context, are deterministic (also across processes with different hash
seeds), stream the same text, respect `max_tokens`, say plainly when the data does not answer, and come
from the typed records alone (a context with no rendered text, a custom prompt that shows no data).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fixture_paths import CAROL

from engines import prompts
from engines.models.base import Completion, Message
from engines.models.offline import OfflineChatModel, split_deltas
from engines.models.offline_text import capitalised_phrases
from engines.models.structured import complete_json
from engines.models.task_context import TaskContext
from engines.schemas import FollowupResponse, QuestionList
from shared_context.local_context import LocalContext, LocalContextBuilder
from shared_context.tables import (
    Column,
    ContextTables,
    EntityRecord,
    RelationshipRecord,
    Section,
    SourceRecord,
    columns,
)
from shared_context.tokens import get_tokenizer

REPO = Path(__file__).resolve().parents[1]

CITATION = re.compile(r"\[Data:\s*([^\]]*)\]")
REF = re.compile(r"([A-Za-z][A-Za-z ]*?)\s*\(([^)]*)\)")


# ------------------------------------------------------------------------------------------ helpers


def context_ids(context: str) -> dict[str, set[str]]:
    """Ids per table, read with csv from the rendered text, independently of the model."""
    out: dict[str, set[str]] = {}
    for match in re.finditer(r"^-----([A-Za-z ]+)-----\n", context, flags=re.MULTILINE):
        rows = csv.reader(io.StringIO(context[match.end() :]), delimiter="|", quotechar='"')
        header = next(rows)
        ids: set[str] = set()
        for row in rows:
            if not row:
                break
            ids.add(row[header.index("id") if "id" in header else 0])
        out[match.group(1)] = ids
    return out


def cited(text: str) -> list[tuple[str, str]]:
    """Every (dataset, id) cited in `text`, '+more' markers left out."""
    pairs: list[tuple[str, str]] = []
    for body in CITATION.findall(text):
        for dataset, ids in REF.findall(body):
            pairs.extend((dataset.strip(), i.strip()) for i in ids.split(",") if i.strip() != "+more")
    return pairs


def assert_cites_only_context(text: str, context: str) -> None:
    ids = context_ids(context)
    refs = cited(text)
    assert refs, f"no citation in: {text[:300]}"
    for dataset, rid in refs:
        assert rid in ids.get(dataset, set()), f"{dataset} ({rid}) is not in the context"
    for body in CITATION.findall(text):
        for _dataset, id_list in REF.findall(body):
            shown = [i.strip() for i in id_list.split(",")]
            assert len([i for i in shown if i != "+more"]) <= 5, body


def call(ctx: LocalContext, question: str, **fields: Any) -> tuple[list[Message], TaskContext]:
    """The local answer prompt with `ctx` rendered in it, and the typed context beside it."""
    system = prompts.LOCAL_ANSWER.format(citation_rules=prompts.CITATION_RULES,
                                         response_type=fields.get("response_type", "multiple paragraphs"),
                                         context_data=ctx.text)
    messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    return messages, TaskContext(question, ctx.tables, **fields)


async def run(ctx: LocalContext, question: str, task: str, **fields: Any) -> str:
    messages, context = call(ctx, question, **fields)
    return (await OfflineChatModel().complete(messages, task=task, context=context)).text


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def builder() -> LocalContextBuilder:
    from shared_context import load_index

    return LocalContextBuilder(load_index(CAROL))


SCROOGE_AND_MARLEY = "What was the relationship between Scrooge and Marley?"


@pytest.fixture(scope="module")
def scrooge_context(builder: LocalContextBuilder) -> LocalContext:
    return builder.build(SCROOGE_AND_MARLEY)


# ------------------------------------------------------------------------------------------ answers


@pytest.mark.parametrize(
    "question",
    [
        "What was the relationship between Scrooge and Marley?",
        "What happens to Tiny Tim?",
        "Who is Fezziwig and how does he treat his apprentices?",
        "What does the Ghost of Christmas Yet to Come show Scrooge?",
    ],
)
async def test_local_answer_cites_only_ids_present_in_the_context(builder: LocalContextBuilder, question: str) -> None:
    ctx = builder.build(question)
    text = await run(ctx, question, "local_answer", response_type="multiple paragraphs")
    assert text.startswith("**Answer (offline extractive model")
    assert_cites_only_context(text, ctx.text)
    # every statement carries a citation: the opening line and every bullet
    statements = [ln for ln in text.split("\n") if ln.startswith(("**Answer", "- "))]
    assert len(statements) >= 3
    assert all(CITATION.search(ln) for ln in statements), text


async def test_answer_about_scrooge_and_marley_quotes_sentences_about_them(scrooge_context: LocalContext) -> None:
    text = await run(scrooge_context, SCROOGE_AND_MARLEY, "local_answer")
    statements = [ln.lower() for ln in text.split("\n") if CITATION.search(ln)]
    assert all("scrooge" in s or "marley" in s for s in statements), text
    assert any("scrooge" in s and "marley" in s for s in statements), text


async def test_irrelevant_question_says_the_data_does_not_answer(builder: LocalContextBuilder) -> None:
    question = "What is the boiling point of liquid nitrogen in kelvin?"
    text = await run(builder.build(question), question, "local_answer")
    assert "does not answer" in text
    assert not CITATION.search(text)


async def test_basic_answer_cites_sources_only(builder: LocalContextBuilder) -> None:
    question = "What did Bob Cratchit do on Christmas Eve?"
    ctx = builder.build(question)
    text = await run(ctx, question, "basic_answer")
    assert_cites_only_context(text, ctx.text)
    assert {d for d, _ in cited(text)} == {"Sources"}


async def test_answer_respects_max_tokens_without_cutting_a_citation(scrooge_context: LocalContext) -> None:
    msgs, context = call(scrooge_context, SCROOGE_AND_MARLEY)
    full = await OfflineChatModel().complete(msgs, task="local_answer", context=context)
    short = await OfflineChatModel().complete(msgs, task="local_answer", max_tokens=80, context=context)
    assert short.output_tokens <= 80 < full.output_tokens
    assert short.text.count("[Data:") == len(CITATION.findall(short.text)) >= 1


async def test_the_answer_comes_from_the_typed_context_not_the_prompt(builder: LocalContextBuilder) -> None:
    """A custom prompt that shows no data, or none at all: the same answer, from the records alone."""
    question = "What happens to Tiny Tim?"
    ctx = builder.build(question)
    msgs, context = call(ctx, question)
    expected = (await OfflineChatModel().complete(msgs, task="local_answer", context=context)).text
    assert "tiny tim" in expected.lower()
    assert_cites_only_context(expected, ctx.text)
    pirate: list[Message] = [{"role": "system", "content": "Answer like a pirate, arr."},
                             {"role": "user", "content": question}]
    assert (await OfflineChatModel().complete(pirate, task="local_answer", context=context)).text == expected
    bare: list[Message] = [{"role": "user", "content": question}]
    assert (await OfflineChatModel().complete(bare, task="local_answer", context=context)).text == expected


async def test_a_context_built_by_hand_with_no_rendered_text_is_answered_from_its_records() -> None:
    """Records made in code (no index, no builder, no rendered table anywhere): the answer quotes them and
    cites their ids."""
    entities = Section("Entities", (Column("id", "id"), Column("entity", "title"), Column("description", "description")),
                       [EntityRecord("e7", "ADA QUILL", "Ada Quill is the lighthouse keeper of Gullrock.")])
    relationships = Section("Relationships", columns("id", "source", "target", "description"),
                            [RelationshipRecord("r3", "ADA QUILL", "GULLROCK",
                                                "Ada Quill rescued the crew of the Petrel off Gullrock in 1911.")])
    sources = Section("Sources", columns("id", "text"),
                      [SourceRecord("s12", "Every night Ada Quill climbed the ninety steps to light the lamp.")])
    context = TaskContext("Who is Ada Quill?", ContextTables(entities=entities, relationships=relationships,
                                                             sources=sources))
    question: list[Message] = [{"role": "user", "content": "Who is Ada Quill?"}]
    text = (await OfflineChatModel().complete(question, task="local_answer", context=context)).text
    assert "lighthouse keeper" in text
    assert set(cited(text)) <= {("Entities", "e7"), ("Relationships", "r3"), ("Sources", "s12")}
    assert ("Entities", "e7") in cited(text)
    basic = (await OfflineChatModel().complete(question, task="basic_answer", context=context)).text
    assert cited(basic) == [("Sources", "s12")] and "ninety steps" in basic


# ------------------------------------------------------------------------------------------ determinism, usage, streaming


async def test_same_input_gives_identical_output_and_exact_usage(scrooge_context: LocalContext) -> None:
    msgs, context = call(scrooge_context, SCROOGE_AND_MARLEY)
    model = OfflineChatModel()
    first = await model.complete(msgs, task="local_answer", context=context)
    second = await OfflineChatModel().complete(msgs, task="local_answer", context=context)
    assert first.text == second.text
    tok = get_tokenizer()
    assert first.prompt_tokens == sum(tok.count(m["content"]) for m in msgs)
    assert first.output_tokens == tok.count(first.text)
    assert (first.model, first.cost, first.usage_estimated, first.cached) == (
        "offline-extractive",
        0.0,
        False,
        False,
    )


_SUBPROCESS = """
import asyncio, json, sys
from engines.models.offline import OfflineChatModel
from engines.models.task_context import TaskContext
from shared_context import LocalContextBuilder, load_index
question = sys.argv[2]
ctx = LocalContextBuilder(load_index(sys.argv[1])).build(question)
context = TaskContext(question, ctx.tables, overall_question="How does Scrooge change?", max_followups=4,
                      question_count=6)
model = OfflineChatModel()
msgs = [{"role": "user", "content": question}]
out = [asyncio.run(model.complete(msgs, task=task, context=context)).text for task in sys.argv[3:]]
sys.stdout.write(json.dumps(out))
"""


async def test_output_is_identical_across_processes_with_different_hash_seeds(scrooge_context: LocalContext) -> None:
    tasks = ["local_answer", "questions", "drift_followup", "rewrite"]
    context = TaskContext(SCROOGE_AND_MARLEY, scrooge_context.tables, overall_question="How does Scrooge change?",
                          max_followups=4, question_count=6)
    msgs: list[Message] = [{"role": "user", "content": SCROOGE_AND_MARLEY}]
    outputs = []
    for seed in ("1", "987"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _SUBPROCESS, str(CAROL), SCROOGE_AND_MARLEY, *tasks],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        outputs.append(json.loads(done.stdout))
    here = [(await OfflineChatModel().complete(msgs, task=t, context=context)).text for t in tasks]
    assert outputs[0] == outputs[1] == here


async def test_stream_deltas_reassemble_to_the_complete_text(scrooge_context: LocalContext) -> None:
    msgs, context = call(scrooge_context, SCROOGE_AND_MARLEY)
    model = OfflineChatModel(words_per_delta=3)
    deltas: list[str] = []
    final: list[Completion] = []
    async for item in model.stream(msgs, task="local_answer", context=context):
        (final if isinstance(item, Completion) else deltas).append(item)  # type: ignore[arg-type]
    complete = await model.complete(msgs, task="local_answer", context=context)
    assert len(final) == 1 and len(deltas) > 10
    assert "".join(deltas) == final[0].text == complete.text
    assert final[0].output_tokens == complete.output_tokens


@pytest.mark.parametrize("text", ["", "one", "  lead and trail  ", "a\n\nb  c\n", "中文没有空格。第二句。"])
def test_split_deltas_keeps_every_character(text: str) -> None:
    assert "".join(split_deltas(text, 2)) == text


# ------------------------------------------------------------------------------------------ context-table tasks


async def test_drift_followup_answers_scores_and_proposes_new_entities(builder: LocalContextBuilder) -> None:
    question = "Who is Fred?"
    ctx = builder.build(question)
    overall = "How does Scrooge's family treat him?"
    out = FollowupResponse.model_validate_json(
        await run(ctx, question, "drift_followup", overall_question=overall, max_followups=3))
    assert_cites_only_context(out.response, ctx.text)
    assert 0 < out.score <= 100
    assert 1 <= len(out.follow_up_queries) <= 3
    asked = f"{question} {overall}".casefold()
    for q in out.follow_up_queries:
        assert q.endswith("?") and q.count("?") == 1
        # each names an entity that neither the follow-up nor the overall question covered
        assert any(n.casefold() not in asked for n in capitalised_phrases(q)), q


async def test_drift_followup_scores_zero_when_nothing_is_relevant(builder: LocalContextBuilder) -> None:
    question = "What is the boiling point of liquid nitrogen?"
    out = FollowupResponse.model_validate_json(await run(
        builder.build(question), question, "drift_followup", overall_question="What is cryogenics?", max_followups=2))
    assert out.score == 0 and "does not answer" in out.response


async def test_questions_are_distinct_entity_questions_without_table_names(builder: LocalContextBuilder) -> None:
    question = "What happens to Tiny Tim?"
    out = QuestionList.model_validate_json(await run(builder.build(question), question, "questions", question_count=7))
    assert len(out.questions) == 7
    assert len({q.casefold() for q in out.questions}) == 7
    assert all(q.endswith("?") for q in out.questions)
    banned = re.compile(r"\b(Entities|Relationships|Sources|Claims|Reports|table|column)\b")
    assert not any(banned.search(q) for q in out.questions), out.questions
    assert any("Tiny Tim" in q for q in out.questions)


async def test_questions_name_every_entity_the_user_named(builder: LocalContextBuilder) -> None:
    question = "How are Scrooge and Bob Cratchit related?"
    out = QuestionList.model_validate_json(await run(builder.build(question), question, "questions", question_count=5))
    assert len(out.questions) == 5
    assert all("Scrooge" in q and "Bob Cratchit" in q for q in out.questions), out.questions


async def test_unknown_task_is_answered_like_answer(scrooge_context: LocalContext) -> None:
    assert await run(scrooge_context, SCROOGE_AND_MARLEY, "no_such_task") == await run(
        scrooge_context, SCROOGE_AND_MARLEY, "answer")


async def test_json_task_passes_through_the_structured_output_layer(scrooge_context: LocalContext) -> None:
    msgs, context = call(scrooge_context, "Who is Marley?", question_count=4)
    parsed, completions = await complete_json(OfflineChatModel(), msgs, QuestionList, task="questions",
                                              context=context)
    assert len(parsed.questions) == 4 and len(completions) == 1
