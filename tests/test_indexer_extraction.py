"""Offline extraction quality rules: speakers, fillers, contractions, noun filters, descriptions without repeats."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from indexer import IndexerConfig, SourceDocument
from indexer import lexicon as lx
from indexer.extract_offline import OfflineExtractor, speaker_turns
from indexer.graph import merge_offline
from indexer.pipeline import build_index_from_documents

TRANSCRIPT = """Quarterly Call
Title: results

JANE ROE: Thank you. Yeah, I'm pleased with the Lumen Suite and the demand.
Operator: Next question comes from Rafe Okoro.
RAFE OKORO: Thanks Jane. How is the Lumen Suite doing in Vostra Bay?
JANE ROE: Okay. The demand for the Lumen Suite keeps growing.
"""


def test_speaker_turns_ignore_roles_and_fields() -> None:
    turns = speaker_turns(TRANSCRIPT)
    assert [s for s, _t in turns] == ["", "", "JANE ROE", "", "RAFE OKORO", "JANE ROE"]
    assert turns[3][1].startswith("Next question")


def test_transcript_speakers_become_people_who_said_things() -> None:
    ext = OfflineExtractor().extract(TRANSCRIPT)
    m = ext.mentions
    assert m["JANE ROE"].type_votes.get("PERSON", 0) >= 5 and m["RAFE OKORO"].type_votes.get("PERSON", 0) >= 5
    assert "OPERATOR" not in m and "TITLE" not in m
    # fillers and contractions are never names, nor part of one
    assert not {"THANK", "YEAH", "I'M", "OKAY", "THANKS JANE", "THANKS"} & set(m)
    said = ext.pairs[("JANE ROE", "LUMEN SUITE")].sentence
    assert said.startswith("JANE ROE said: ")
    assert ("LUMEN SUITE", "RAFE OKORO") in ext.pairs


def test_merge_filters_sentence_initial_words_and_settles_person_names() -> None:
    ext = OfflineExtractor()
    texts = [
        "Come here, said Bob Cratchit to the clerk. The clerk will come to the Harbour Cloud office.",
        "Bob Cratchit asked the clerk. Harbour Cloud sells cloud storage, and the cloud is cheap.",
        "Nobody would come near Bob Cratchit. He met the clerk at Harbour Cloud.",
    ]
    extractions = {str(i): ext.extract(t) for i, t in enumerate(texts)}
    ents, _rels = merge_offline(list(extractions), extractions, min_phrase_chunks=3)
    types = {e.title: e.type for e in ents}
    assert "COME" not in types  # capitalised only where a sentence starts, lower case elsewhere
    assert types["BOB CRATCHIT"] == "PERSON"
    assert types["HARBOUR CLOUD"] != "PERSON"  # "cloud" is an ordinary word in this corpus
    assert types["CLERK"] == "CONCEPT"  # a noun after a determiner in 3 chunks


def test_descriptions_do_not_repeat_overlapping_chunk_text(tmp_path: Path) -> None:
    sentences = [
        "Mira Tallis of the Orrin Guild inspected the old bridge at dawn.",
        "Later that week Mira Tallis argued with Calder Mill about the granary roof.",
        "The Orrin Guild paid Calder Mill for new timber and two carts of slate.",
        "Rain flooded the wharf, so Mira Tallis moved the guild ledgers upstairs.",
        "By midsummer Calder Mill had rebuilt the chapel for the Orrin Guild.",
        "Mira Tallis wrote that the weir would need another season of repairs.",
        "Traders from Calder Mill praised the tannery that Mira Tallis had saved.",
        "In autumn the Orrin Guild elected Mira Tallis warden of the river works.",
    ]
    doc = SourceDocument(title="guild.txt", text=" ".join(sentences))
    for size, overlap in ((30, 15), (25, 20)):  # sentences cut at chunk edges and repeated by the overlap
        out = tmp_path / f"index-{size}"
        config = IndexerConfig(chunk_size=size, chunk_overlap=overlap)
        build_index_from_documents([doc], out, config=config, progress=False)
        ents = pd.read_parquet(out / "entities.parquet")
        assert {"MIRA TALLIS", "ORRIN GUILD", "CALDER MILL"} <= set(ents["title"])
        for title, description in zip(ents["title"], ents["description"], strict=True):
            words = description.lower().split()
            grams = [tuple(words[i : i + 6]) for i in range(len(words) - 5)]
            assert len(grams) == len(set(grams)), f"{title}: repeated text in {description!r}"


def test_lexicon_is_data_with_provenance() -> None:
    for name in ("lexicon_en.txt", "lexicon_zh.txt", "stop_phrases.txt"):
        text = (lx.DATA_DIR / name).read_text(encoding="utf-8")
        assert "Provenance:" in text
    assert {"thank", "yeah", "okay"} <= lx.FILLERS and "operator" in lx.SPEAKER_ROLES
    assert lx.read_lists("lexicon_zh.txt")["ORG_SUFFIXES"][0] == "公司"
