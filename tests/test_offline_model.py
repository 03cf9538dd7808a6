"""The offline extractive model on real local contexts from the Christmas Carol index.

Contexts come from `LocalContextBuilder(load_index(path)).build(question).text`, so these tests check
the model against exactly what the engines send it: answers cite only ids present in the context,
are deterministic (also across processes with different hash seeds), stream the same text, respect
`max_tokens`, and say plainly when the data does not answer.
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

from engines.models.base import Completion
from engines.models.offline import OfflineChatModel, split_deltas
from engines.models.offline_names import capitalised_phrases
from engines.schemas import FollowupResponse, QuestionList
from shared_context.tokens import get_tokenizer

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CAROL = DATA / "christmas_carol_graphrag_index"
REPO = Path(__file__).resolve().parents[1]

CITATION = re.compile(r"\[Data:\s*([^\]]*)\]")
REF = re.compile(r"([A-Za-z][A-Za-z ]*?)\s*\(([^)]*)\)")


# ------------------------------------------------------------------------------------------ helpers


def context_ids(context: str) -> dict[str, set[str]]:
    """Ids per table, read with csv independently of the model's own parser."""
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


def messages(context: str, question: str, **scalars: Any) -> list[dict[str, str]]:
    lines = [f"{k.replace('_', ' ').capitalize()}: {v}" for k, v in scalars.items()]
    system = "Answer from the data tables below.\n\n" + "\n".join(lines) + "\n\nData tables:\n\n" + context
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


async def run(msgs: list[dict[str, str]], task: str, **kw: Any) -> str:
    return (await OfflineChatModel().complete(msgs, task=task, **kw)).text  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def builder() -> Any:
    if not CAROL.exists():
        pytest.skip("shared Christmas Carol index is absent")
    from shared_context import LocalContextBuilder, load_index

    return LocalContextBuilder(load_index(CAROL))


@pytest.fixture(scope="module")
def scrooge_context(builder: Any) -> str:
    return str(builder.build("What was the relationship between Scrooge and Marley?").text)


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
async def test_local_answer_cites_only_ids_present_in_the_context(builder: Any, question: str) -> None:
    context = builder.build(question).text
    text = await run(messages(context, question, response_type="multiple paragraphs"), "local_answer")
    assert text.startswith("**Answer (offline extractive model")
    assert_cites_only_context(text, context)
    # every statement carries a citation: the lead line and every bullet
    statements = [ln for ln in text.split("\n") if ln.startswith(("**Answer", "- "))]
    assert len(statements) >= 3
    assert all(CITATION.search(ln) for ln in statements), text


async def test_answer_about_scrooge_and_marley_quotes_sentences_about_them(scrooge_context: str) -> None:
    text = await run(
        messages(scrooge_context, "What was the relationship between Scrooge and Marley?"), "local_answer"
    )
    statements = [ln.lower() for ln in text.split("\n") if CITATION.search(ln)]
    assert all("scrooge" in s or "marley" in s for s in statements), text
    assert any("scrooge" in s and "marley" in s for s in statements), text


async def test_irrelevant_question_says_the_data_does_not_answer(builder: Any) -> None:
    question = "What is the boiling point of liquid nitrogen in kelvin?"
    text = await run(messages(builder.build(question).text, question), "local_answer")
    assert "does not answer" in text
    assert not CITATION.search(text)


async def test_basic_answer_cites_sources_only(builder: Any) -> None:
    question = "What did Bob Cratchit do on Christmas Eve?"
    context = builder.build(question).text
    text = await run(messages(context, question), "basic_answer")
    assert_cites_only_context(text, context)
    assert {d for d, _ in cited(text)} == {"Sources"}


async def test_answer_respects_max_tokens_without_cutting_a_citation(scrooge_context: str) -> None:
    msgs = messages(scrooge_context, "What was the relationship between Scrooge and Marley?")
    full = await OfflineChatModel().complete(msgs, task="local_answer")  # type: ignore[arg-type]
    short = await OfflineChatModel().complete(msgs, task="local_answer", max_tokens=80)  # type: ignore[arg-type]
    assert short.output_tokens <= 80 < full.output_tokens
    assert short.text.count("[Data:") == len(CITATION.findall(short.text)) >= 1


async def test_real_engine_prompt_is_parsed(builder: Any) -> None:
    prompts = pytest.importorskip("engines.prompts")
    question = "What happens to Tiny Tim?"
    context = builder.build(question).text
    system = prompts.LOCAL_ANSWER.format(
        citation_rules=prompts.CITATION_RULES, response_type="multiple paragraphs", context_data=context
    )
    text = await run(
        [{"role": "system", "content": system}, {"role": "user", "content": question}], "local_answer"
    )
    assert "tiny tim" in text.lower()
    assert_cites_only_context(text, context)


# ------------------------------------------------------------------------------------------ determinism, usage, streaming


async def test_same_input_gives_identical_output_and_exact_usage(scrooge_context: str) -> None:
    msgs = messages(scrooge_context, "What was the relationship between Scrooge and Marley?")
    model = OfflineChatModel()
    first = await model.complete(msgs, task="local_answer")  # type: ignore[arg-type]
    second = await OfflineChatModel().complete(msgs, task="local_answer")  # type: ignore[arg-type]
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
msgs = json.load(open(sys.argv[1]))
model = OfflineChatModel()
out = [asyncio.run(model.complete(msgs, task=task)).text for task in sys.argv[2:]]
sys.stdout.write(json.dumps(out))
"""


async def test_output_is_identical_across_processes_with_different_hash_seeds(
    scrooge_context: str, tmp_path: Path
) -> None:
    tasks = ["local_answer", "questions", "drift_followup", "rewrite"]
    msgs = messages(
        scrooge_context,
        "What was the relationship between Scrooge and Marley?",
        overall_question="How does Scrooge change?",
        max_follow_ups=4,
        number_of_questions=6,
    )
    path = tmp_path / "msgs.json"
    path.write_text(json.dumps(msgs))
    outputs = []
    for seed in ("1", "987"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _SUBPROCESS, str(path), *tasks],
            env=env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1] == [await run(msgs, task) for task in tasks]


async def test_stream_deltas_reassemble_to_the_complete_text(scrooge_context: str) -> None:
    msgs = messages(scrooge_context, "What was the relationship between Scrooge and Marley?")
    model = OfflineChatModel(words_per_delta=3)
    deltas: list[str] = []
    final: list[Completion] = []
    async for item in model.stream(msgs, task="local_answer"):  # type: ignore[arg-type]
        (final if isinstance(item, Completion) else deltas).append(item)  # type: ignore[arg-type]
    complete = await model.complete(msgs, task="local_answer")  # type: ignore[arg-type]
    assert len(final) == 1 and len(deltas) > 10
    assert "".join(deltas) == final[0].text == complete.text
    assert final[0].output_tokens == complete.output_tokens


@pytest.mark.parametrize("text", ["", "one", "  lead and trail  ", "a\n\nb  c\n", "中文没有空格。第二句。"])
def test_split_deltas_keeps_every_character(text: str) -> None:
    assert "".join(split_deltas(text, 2)) == text


# ------------------------------------------------------------------------------------------ context-table tasks


async def test_drift_followup_answers_scores_and_proposes_new_entities(builder: Any) -> None:
    question = "Who is Fred?"
    context = builder.build(question).text
    overall = "How does Scrooge's family treat him?"
    msgs = messages(context, question, overall_question=overall, max_follow_ups=3)
    out = FollowupResponse.model_validate_json(await run(msgs, "drift_followup"))
    assert_cites_only_context(out.response, context)
    assert 0 < out.score <= 100
    assert 1 <= len(out.follow_up_queries) <= 3
    asked = f"{question} {overall}".casefold()
    for q in out.follow_up_queries:
        assert q.endswith("?") and q.count("?") == 1
        # each names an entity that neither the follow-up nor the overall question covered
        assert any(n.casefold() not in asked for n in capitalised_phrases(q)), q


async def test_drift_followup_scores_zero_when_nothing_is_relevant(builder: Any) -> None:
    question = "What is the boiling point of liquid nitrogen?"
    msgs = messages(
        builder.build(question).text, question, overall_question="What is cryogenics?", max_follow_ups=2
    )
    out = FollowupResponse.model_validate_json(await run(msgs, "drift_followup"))
    assert out.score == 0 and "does not answer" in out.response


async def test_questions_are_distinct_entity_questions_without_table_names(builder: Any) -> None:
    question = "What happens to Tiny Tim?"
    msgs = messages(builder.build(question).text, question, number_of_questions=7)
    out = QuestionList.model_validate_json(await run(msgs, "questions"))
    assert len(out.questions) == 7
    assert len({q.casefold() for q in out.questions}) == 7
    assert all(q.endswith("?") for q in out.questions)
    banned = re.compile(r"\b(Entities|Relationships|Sources|Claims|Reports|table|column)\b")
    assert not any(banned.search(q) for q in out.questions), out.questions
    assert any("Tiny Tim" in q for q in out.questions)


async def test_questions_name_every_entity_the_user_named(builder: Any) -> None:
    question = "How are Scrooge and Bob Cratchit related?"
    msgs = messages(builder.build(question).text, question, number_of_questions=5)
    out = QuestionList.model_validate_json(await run(msgs, "questions"))
    assert len(out.questions) == 5
    assert all("Scrooge" in q and "Bob Cratchit" in q for q in out.questions), out.questions


async def test_unknown_task_is_answered_like_answer(scrooge_context: str) -> None:
    msgs = messages(scrooge_context, "What was the relationship between Scrooge and Marley?")
    assert await run(msgs, "no_such_task") == await run(msgs, "answer")


async def test_json_task_passes_through_the_structured_output_layer(scrooge_context: str) -> None:
    structured = pytest.importorskip("engines.models.structured")
    msgs = messages(scrooge_context, "Who is Marley?", number_of_questions=4)
    parsed, completions = await structured.complete_json(
        OfflineChatModel(), msgs, QuestionList, task="questions"
    )
    assert len(parsed.questions) == 4 and len(completions) == 1
