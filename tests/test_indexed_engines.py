"""Every engine answers on indexes graphroute built itself: the sample corpus and a slice of a novel (the book of
the Christmas Carol index fixture)."""

from __future__ import annotations

import asyncio
import re

import pandas as pd
import pytest
from fixture_paths import CAROL
from fixture_paths import SAMPLE_CORPUS as SAMPLE

from engines import BasicSearch, DriftSearch, GlobalSearch, LocalSearch, QuestionGenerator
from engines.models.offline import OfflineChatModel
from indexer import IndexerConfig, SourceDocument, build_index, build_index_from_documents
from shared_context import load_index

CITATION = re.compile(r"\[Data: [^\]]+\]")


@pytest.fixture(scope="module")
def sample_index(tmp_path_factory: pytest.TempPathFactory) -> object:
    out = tmp_path_factory.mktemp("sample") / "index"
    build_index(SAMPLE, out, progress=False)
    return load_index(out)


@pytest.fixture(scope="module")
def novel_index(tmp_path_factory: pytest.TempPathFactory) -> object:
    book = pd.read_parquet(CAROL / "documents.parquet").iloc[0]
    doc = SourceDocument(title=str(book["title"]), text=str(book["text"])[:40_000])
    out = tmp_path_factory.mktemp("novel") / "index"
    build_index_from_documents([doc], out, config=IndexerConfig(chunk_size=600, chunk_overlap=50), progress=False)
    return load_index(out)


def _ask(engine: object, question: str) -> object:
    return asyncio.run(engine.search(question))  # type: ignore[attr-defined]


@pytest.mark.parametrize("engine_cls", [LocalSearch, GlobalSearch, DriftSearch, BasicSearch])
def test_every_engine_answers_on_the_sample_index(sample_index: object, engine_cls: type) -> None:
    question = {
        LocalSearch: "Who leads the Saltbridge Battery Project?",
        GlobalSearch: "What are the main themes across the cooperative's documents?",
        DriftSearch: "How did the 2021 flood affect the TT-2 turbine and Haixing Marine Engineering?",
        BasicSearch: "What happened at the Brackwater Substation?",
    }[engine_cls]
    result = _ask(engine_cls(sample_index, OfflineChatModel()), question)
    assert not result.empty, result.response
    assert CITATION.search(result.response)
    assert result.citations and all(c.resolved for c in result.citations)
    assert result.document_ids
    assert result.usage.total.llm_calls == sum(s.llm_calls for s in result.usage.stages.values()) >= 1


@pytest.mark.parametrize("engine_cls", [LocalSearch, GlobalSearch, DriftSearch, BasicSearch])
def test_every_engine_answers_on_a_novel_slice(novel_index: object, engine_cls: type) -> None:
    index = novel_index
    top = max(index.entities, key=lambda e: e.degree)  # type: ignore[attr-defined]
    question = f"What does the story tell us about {top.title.title()}?"
    result = _ask(engine_cls(index, OfflineChatModel()), question)
    assert result.response.strip()
    assert not result.empty, result.response
    assert result.citations


def test_question_generation_on_the_sample_index(sample_index: object) -> None:
    gen = QuestionGenerator(sample_index, OfflineChatModel())
    result = asyncio.run(gen.generate(["Who is Amara Osei?"], n=4))
    assert 1 <= len(result.questions) <= 4
    assert all(q.text.endswith("?") for q in result.questions)
