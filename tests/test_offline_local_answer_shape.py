"""The offline model's local answer reads well: the asked entity's description first, no sentence that only
restates two names with a generic relation, no Markdown heading run into a sentence, no sentence twice."""

from __future__ import annotations

from engines.models.base import Message
from engines.models.offline import OfflineChatModel
from engines.models.task_context import TaskContext
from shared_context.tables import (
    Column,
    ContextTables,
    EntityRecord,
    RelationshipRecord,
    ReportRecord,
    Section,
    SourceRecord,
    columns,
)

QUESTION = "Who is Ada Quill?"


def _context() -> TaskContext:
    entities = Section(
        "Entities",
        (Column("id", "id"), Column("entity", "title"), Column("description", "description")),
        [
            EntityRecord("e1", "ADA QUILL'S BROTHER", "Ada Quill's brother mends nets for Ada Quill in the harbour."),
            EntityRecord("e7", "ADA QUILL", "Ada Quill is the lighthouse keeper of Gullrock."),
        ],
    )
    relationships = Section(
        "Relationships",
        columns("id", "source", "target", "description"),
        [
            RelationshipRecord("r1", "ADA QUILL'S BROTHER", "ADA QUILL'S FAMILY",
                               "Ada Quill's brother is a member of Ada Quill's family."),
            RelationshipRecord("r2", "ADA QUILL", "GULLROCK",
                               "Ada Quill rescued the crew of the Petrel off Gullrock in 1911 # Gullrock, part 2 "
                               "Ada Quill was given a medal."),
            RelationshipRecord("r3", "ADA QUILL", "PETREL", "Ada Quill rescued the crew of the Petrel in a storm."),
        ],
    )
    sources = Section("Sources", columns("id", "text"),
                      [SourceRecord("s12", "Every night Ada Quill climbed the ninety steps to light the lamp."),
                       SourceRecord("s1", "Ada Quill lights the lamp for the last time 54"),
                       SourceRecord("s2", "Ada Quill: copyright and licence terms of this edition apply."),
                       SourceRecord("s3", "TOM REED: Right. … ADA QUILL: Absolutely")])
    reports = Section("Reports", columns("id", "title", "content"),
                      [ReportRecord("4", "ADA QUILL and GULLROCK",
                                    "Its strongest ties are between ADA QUILL and GULLROCK (6), ADA QUILL and PETREL "
                                    "(4). They are mentioned together with weight 6 in 5 text units.")])
    tables = ContextTables(reports=reports, entities=entities, relationships=relationships, sources=sources)
    return TaskContext(QUESTION, tables)


async def _answer() -> str:
    messages: list[Message] = [{"role": "user", "content": QUESTION}]
    return (await OfflineChatModel().complete(messages, task="local_answer", context=_context())).text


async def test_the_answer_opens_with_the_asked_entitys_description() -> None:
    text = await _answer()
    body = text.split("**", 2)[-1].strip()
    assert body.startswith("Ada Quill is the lighthouse keeper of Gullrock")


async def test_a_sentence_that_only_restates_two_names_is_left_out() -> None:
    text = await _answer()
    assert "member of Ada Quill's family" not in text
    assert "rescued the crew of the Petrel" in text  # a relationship that says something stays


async def test_no_heading_fragment_and_no_sentence_twice() -> None:
    text = await _answer()
    assert "#" not in text and "part 2" not in text
    sentences = [s.split("[Data:")[0].strip() for s in text.replace("\n", " ").split(". ") if s.strip()]
    assert len(sentences) == len(set(sentences))


async def test_contents_entries_and_licence_lines_are_not_quoted() -> None:
    text = await _answer()
    assert "for the last time 54" not in text and "licence" not in text
    assert "ninety steps" in text or "lighthouse keeper" in text


async def test_the_index_describing_itself_and_bare_speaker_turns_are_not_quoted() -> None:
    text = await _answer()
    assert "strongest ties" not in text and "mentioned together with weight" not in text
    assert "Absolutely" not in text  # two speaker labels around two words
