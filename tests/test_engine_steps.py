"""An engine answers in three visible steps, each injectable: `builder.build(...)` (any object with the
protocol's call, no base class), `formatter.render(context, question)` (the messages the model is sent), then
generating from them; an empty result says why it is empty."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from engines import BasicSearch, LocalSearch
from engines.models.base import Message
from engines.models.config import ModelEndpoint, PriceTable
from engines.models.limiter import LimiterRegistry
from engines.models.offline import OfflineChatModel
from engines.models.openai_backend import OpenAIChatModel
from engines.plan import prepare_question
from router.classifier import classify
from shared_context.basic_context import BasicContext
from shared_context.index import Index
from shared_context.linking import LinkResult
from shared_context.local_context import LocalContext, LocalContextBuilder, LocalContextParams
from testing.model_server import LoopbackServer

QUESTION = "Who is Scrooge?"


class WrappingBuilder:
    """A third-party builder: no base class, only the protocol's `build`; records how it was called."""

    def __init__(self, index: Index) -> None:
        self.inner = LocalContextBuilder(index, LocalContextParams(max_context_tokens=1200))
        self.links: list[LinkResult] = []

    def build(self, query: str, history: Sequence[Mapping[str, object]] | None = None, /, *,
              query_vector: np.ndarray | None = None,
              linker: Callable[[int], LinkResult] | None = None) -> LocalContext:
        if linker is not None:
            self.links.append(linker(3))  # its own number of entities, on the caller's lexical pass
        return self.inner.build(query, history, query_vector=query_vector, linker=linker)


class TablesLast:
    """A formatter that puts the question first and the tables in the user message."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def render(self, context: LocalContext | BasicContext, question: str) -> list[Message]:
        self.seen.append(context.text)
        return [{"role": "system", "content": f"Answer: {question}"}, {"role": "user", "content": context.text}]


def test_a_builder_without_a_base_class_links_on_the_routers_question(carol: Index) -> None:
    asked = prepare_question(QUESTION, carol).with_linking(carol, k=10)
    classify(asked.text, carol, linker=asked.linker(carol))
    builder = WrappingBuilder(carol)
    result = asyncio.run(LocalSearch(carol, OfflineChatModel(), builder=builder).search(asked))
    assert len(builder.links) == 1  # linked once, on the question's lexical pass
    assert builder.links[0].titles == asked.linked(carol, 3).titles
    assert "SCROOGE" in builder.links[0].titles
    assert carol.tokenizer.count(result.context_text) <= 1200  # the injected builder's budget
    assert result.details["link_mode"] == builder.links[0].mode


def test_the_model_is_sent_what_the_formatter_rendered(carol: Index) -> None:
    async def ask(engine_of: Callable[[OpenAIChatModel, TablesLast], LocalSearch | BasicSearch]) -> None:
        with LoopbackServer(default_reply="Scrooge is a miser [Data: Entities (1)].") as srv:
            endpoint = ModelEndpoint(provider="openai", model="gpt-4.1-mini", base_url=srv.base_url,
                                     api_key="sk-test", max_retries=0)
            model = OpenAIChatModel(endpoint, PriceTable(), limiter_registry=LimiterRegistry())
            formatter = TablesLast()
            try:
                result = await engine_of(model, formatter).search(QUESTION)
            finally:
                await model.aclose()
            sent = srv.chat_requests[-1].body["messages"]
        assert formatter.seen == [result.context_text] and result.context_text
        assert sent == [{"role": "system", "content": f"Answer: {QUESTION}"},
                        {"role": "user", "content": result.context_text}]
        assert result.response == "Scrooge is a miser [Data: Entities (1)]."

    asyncio.run(ask(lambda model, formatter: LocalSearch(carol, model, formatter=formatter)))
    asyncio.run(ask(lambda model, formatter: BasicSearch(carol, model, formatter=formatter)))


def test_an_empty_result_says_why(carol: Index) -> None:
    result = asyncio.run(LocalSearch(carol, OfflineChatModel()).search("Qwzx vbnmt plorf?"))
    assert result.empty
    assert result.empty_reason == "no entity of the index matches the question by name or words"
    assert result.to_dict()["empty_reason"] == result.empty_reason
    found = asyncio.run(LocalSearch(carol, OfflineChatModel()).search(QUESTION))
    assert not found.empty and found.empty_reason == ""
