"""A follow-up's pronouns are resolved to what the grammar lets them mean: in "What does he warn him about?" the
object is never the subject's own antecedent, so after a question naming two people each pronoun gets one of
them, and with only one person named the object pronoun stays as written (the offline model's rewrite, driven
through its chat interface as the router calls it)."""

from __future__ import annotations

import json

import pytest

from engines.models.base import Message
from engines.models.offline import OfflineChatModel
from router.rewrite import history_context


async def _rewrite(*turns: tuple[str, str]) -> str:
    messages: list[Message] = [{"role": role, "content": content} for role, content in turns]
    *earlier, last = messages
    context = history_context(last["content"], earlier)  # the typed conversation the router hands the model
    text = (await OfflineChatModel().complete(messages, task="rewrite", context=context)).text
    return str(json.loads(text)["question"])


@pytest.mark.parametrize(("turns", "expected"), [
    ([("user", "Who is Jacob Marley and what was his relationship to Scrooge?"),
      ("assistant", "Jacob Marley was Scrooge's business partner."), ("user", "What does he warn him about?")],
     "What does Jacob Marley warn Scrooge about?"),
    ([("user", "Who is Belle and how does she know Scrooge?"), ("user", "Why did she leave him?")],
     "Why did Belle leave Scrooge?"),
    ([("user", "Who is Bob Cratchit?"), ("user", "How does Scrooge treat him?")],
     "How does Scrooge treat Bob Cratchit?"),
    ([("user", "Who is Jacob Marley?"), ("assistant", "The late partner of Ebenezer Scrooge; his ghost visits him."),
      ("user", "What does he warn him about?")], "What does Jacob Marley warn Ebenezer Scrooge about?"),
    ([("user", "Who is Jacob Marley?"), ("user", "What does he warn him about?")],
     "What does Jacob Marley warn him about?"),
    ([("user", "马利是谁？他和斯克鲁奇是什么关系？"), ("user", "他警告了他什么？")], "马利警告了斯克鲁奇什么？"),
    ([("user", "斯克鲁奇是谁？"), ("user", "他的外甥叫什么？")], "斯克鲁奇的外甥叫什么？"),
])
async def test_each_pronoun_gets_the_antecedent_the_grammar_allows(turns: list[tuple[str, str]], expected: str) -> None:
    assert await _rewrite(*turns) == expected
