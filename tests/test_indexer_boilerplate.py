"""`graphroute index` keeps licence and front/back matter in the documents but extracts nothing from it, and
marks it in the text-unit table (read back at query time by `shared_context.boilerplate_marks`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from indexer import IndexBuildReport, IndexerConfig, SourceDocument
from indexer.pipeline import build_index_from_documents
from indexer.unit_marks import mark_units
from shared_context import load_index
from shared_context.boilerplate_marks import boilerplate_shares

FRONT = """The Quillfeather eBook of Harbour Lights

This ebook is for the use of anyone anywhere at no cost and with almost no restrictions
whatsoever. You may copy it, give it away or re-use it under the terms of the Quillfeather
License included with this ebook or online at www.quillfeather.example.org.

Title: Harbour Lights

Author: Edith Marr

*** START OF THE QUILLFEATHER EBOOK HARBOUR LIGHTS ***

Produced by Jonas Pell and the Distributed Proofreading Team

  HARBOUR LIGHTS

  BY EDITH MARR

  CONTENTS

  I. THE QUAY                                   1
  II. THE FAIR                                 23
"""

STORY = """I. THE QUAY

Captain Ivo Sterling came ashore at Penmorrow on a wet morning in March. Martha Quayle, who kept the
chandlery on the quay, watched him cross the cobbles with his sea-chest on his shoulder and decided at
once that she did not like him. Ivo Sterling asked for lodgings, and Martha Quayle sent him up the hill
to the widow Pascoe, who took anyone.

II. THE FAIR

By midsummer the whole town had changed its mind about Ivo Sterling. He mended the lifeboat's hull for
nothing, he taught the Pascoe boys to splice rope, and at the Lammas fair he danced with Martha Quayle
twice. The widow Pascoe said she had always known he was a good man, which was not true.
"""

BACK = """

*** END OF THE QUILLFEATHER EBOOK HARBOUR LIGHTS ***

Section 1. General Terms of Use and Redistributing Quillfeather electronic works. By using this
electronic work you accept all the terms of this license and intellectual property (trademark/copyright)
agreement. The Fennimore Literary Trust is a non-profit corporation; donations to the Fennimore Literary
Trust are tax deductible. Contact the Fennimore Literary Trust for permission to redistribute.

The Fennimore Literary Trust owns a compilation copyright in the collection. Volunteers of the
Fennimore Literary Trust expend considerable effort to transcribe and proofread public domain works.
"""

PLAIN = """Minutes of the harbour committee. Martha Quayle opened the meeting and thanked Ivo Sterling for the repairs
to the lifeboat. The committee agreed to paint the quay railings before the fair and to ask the widow Pascoe
to bake for the stall. Ivo Sterling proposed a new bell for the breakwater; Martha Quayle seconded it.
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, IndexBuildReport]:
    out = tmp_path_factory.mktemp("boilerplate") / "index"
    docs = [SourceDocument("harbour-lights.txt", FRONT + "\n" + STORY + BACK), SourceDocument("minutes.txt", PLAIN)]
    report = build_index_from_documents(docs, out, config=IndexerConfig(chunk_size=120, chunk_overlap=10), progress=False)
    return out, report


def test_nothing_is_extracted_from_the_licence(built: tuple[Path, IndexBuildReport]) -> None:
    out, report = built
    titles = set(pd.read_parquet(out / "entities.parquet")["title"])
    assert {"IVO STERLING", "MARTHA QUAYLE"} <= titles  # the story's people
    # named only in the licence and the production credits: not entities, not in any relationship or report
    for name in ("FENNIMORE LITERARY TRUST", "JONAS PELL", "QUILLFEATHER"):
        assert not any(name in t for t in titles), name
        reports = pd.read_parquet(out / "community_reports.parquet")
        assert not reports["full_content"].str.upper().str.contains(name).any(), name
    relationships = pd.read_parquet(out / "relationships.parquet")
    assert not relationships["description"].str.contains("Fennimore").any()
    assert report.boilerplate_units >= 2
    assert f"{report.boilerplate_units} chunks of licence or front/back matter kept but not extracted" in report.summary()


def test_text_units_keep_the_matter_and_mark_it(built: tuple[Path, IndexBuildReport]) -> None:
    out, report = built
    units = pd.read_parquet(out / "text_units.parquet")
    docs = pd.read_parquet(out / "documents.parquet").set_index("title")
    # kept: the documents and their units hold every character
    assert docs.loc["harbour-lights.txt", "text"] == FRONT + "\n" + STORY + BACK
    licence = units[units["text"].str.contains("Fennimore Literary Trust is a non-profit")]
    assert len(licence) >= 1 and (licence["boilerplate"] >= 0.5).all()
    # its entities come from the story part of it only
    entities = pd.read_parquet(out / "entities.parquet").set_index("id")["title"]
    named = {entities[e] for ids in licence["entity_ids"] for e in ids}
    assert named and all(t in STORY.upper() for t in named)
    only_licence = units[units["boilerplate"] == 1.0]
    assert len(only_licence) >= 2 and (only_licence["entity_ids"].map(len) == 0).all()
    story = units[units["text"].str.contains("Lammas fair")]
    assert (story["boilerplate"] < 0.5).all() and (story["entity_ids"].map(len) > 0).all()
    minutes = units[units["document_id"] == docs.loc["minutes.txt", "id"]]
    assert (minutes["boilerplate"] == 0.0).all()
    assert int((units["boilerplate"] >= 0.5).sum()) == report.boilerplate_units


def test_query_time_reads_the_column(built: tuple[Path, IndexBuildReport]) -> None:
    out, _ = built
    index = load_index(out)
    shares = boilerplate_shares(index)
    column = pd.read_parquet(out / "text_units.parquet")["boilerplate"].to_numpy(dtype=np.float32)
    assert np.array_equal(shares.units, column)
    # nothing was extracted from boilerplate, so no entity is supported only by it
    assert not shares.entities.any()


def test_unit_marks_cut_the_matter_out_of_what_extraction_reads() -> None:
    from indexer.chunking import chunk_documents

    doc = SourceDocument("harbour-lights.txt", FRONT + "\n" + STORY + BACK)
    chunks = chunk_documents([doc], chunk_size=120, overlap=10, encoding_name="o200k_base")
    marks = mark_units([doc], chunks)
    first, last = chunks[0], chunks[-1]
    assert marks[first.id].share == 1.0 and marks[first.id].text == ""
    assert marks[last.id].share == 1.0 and marks[last.id].text == ""
    mixed = [c for c in chunks if c.id in marks and 0 < marks[c.id].share < 1]
    for c in mixed:
        assert "Fennimore" not in marks[c.id].text and "Quillfeather" not in marks[c.id].text
    clean = [c for c in chunks if "Lammas fair" in c.text and c.id not in marks]
    assert clean, "a unit of story only carries no mark"
    assert mark_units([SourceDocument("minutes.txt", PLAIN)], chunk_documents(
        [SourceDocument("minutes.txt", PLAIN)], chunk_size=120, overlap=10, encoding_name="o200k_base")) == {}
