"""Licence and edition boilerplate at a document's ends (`shared_context.boilerplate`), on texts written here."""

from __future__ import annotations

import re

from shared_context.boilerplate import MARKED_SHARE, boilerplate_spans, part_shares, part_spans, span_shares

HEADER = """The Open Shelf eBook of The Lantern Keeper

This ebook is for the use of anyone anywhere at no cost and with almost no
restrictions whatsoever. You may copy it, give it away or re-use it under the
terms of the Open Shelf License included with this ebook or online at
www.openshelf.example.org.

Title: The Lantern Keeper

Author: Miriam Holt

Release date: March 3, 2011 [eBook #4242]

Language: English

*** START OF THE OPEN SHELF EBOOK THE LANTERN KEEPER ***

Produced by Ada Finch and the Distributed Proofreading Team at
http://www.proofers.example.net

  THE LANTERN KEEPER

  BY

  MIRIAM HOLT

  LONDON: GREY AND SONS, 1902

  FIRST PUBLISHED 1902

  CONTENTS

  I. THE TOWER                                        1
  II. THE STORM                                      19
  III. THE RESCUE                                    41
"""

STORY = """I. THE TOWER

Tobias Wren had kept the light on Carrow Point for thirty years, and in all that time
he had never once let it fail. The village below trusted the lamp as it trusted the
tide, without thinking of it at all, and Tobias liked it that way. Each evening he
climbed the hundred and twelve steps, trimmed the wick, polished the great lens and
watched the boats come home across the grey water of the bay.

His daughter Nell brought his supper at seven. She was a quick, silent girl who could
read the weather better than any fisherman, and she told her father plainly when a
storm was coming, whether he wished to hear it or not. That autumn she told him often.

II. THE STORM

The gale came on the third night of October. It tore slates from the chapel roof and
drove the sea over the harbour wall, and the lamp shook in its frame until Tobias
feared the glass would go. Out beyond the reef a schooner was running for shelter with
her topsail in rags, and Nell, watching from the gallery, saw her strike.

III. THE RESCUE

They took the old rowing boat down to the cove at midnight. Nobody in the village
thought they would come back, but at dawn the boat grounded on the shingle with seven
half-drowned sailors in her, and Tobias and Nell between them at the oars.
"""

FOOTER = """

*** END OF THE OPEN SHELF EBOOK THE LANTERN KEEPER ***

Updated editions will replace the previous one. Creating the works from print
editions not protected by copyright law means that no one owns a copyright in these
works, so the Open Shelf Archive can copy and distribute it without permission and
without paying copyright royalties.

Section 1. General Terms of Use and Redistributing Open Shelf electronic works

By reading or using any part of this electronic work, you indicate that you have
read, understand, agree to and accept all the terms of this license and intellectual
property (trademark/copyright) agreement. If you do not agree to abide by all the terms
of this agreement, you must cease using and return or destroy all copies of the ebook.

The Open Shelf Archive is a non-profit corporation, and donations to it are tax
deductible to the full extent permitted by law. Contributions help keep the collection
free.

Most people start at our website: www.openshelf.example.org.
"""


def _only(spans: list[tuple[int, int]], text: str) -> list[str]:
    return [text[a:b] for a, b in spans]


def test_licence_header_title_page_contents_and_footer_are_found_and_the_story_is_not() -> None:
    text = HEADER + "\n\n" + STORY + FOOTER
    spans = boilerplate_spans(text)
    assert len(spans) == 2
    (front_start, front_end), (back_start, back_end) = spans
    assert front_start == 0
    # the contents list, and the first chapter's heading right after it, are front matter
    assert text[:front_end].rstrip().endswith("III. THE RESCUE                                    41\n\n\nI. THE TOWER")
    assert back_start == text.index("*** END OF THE OPEN SHELF")
    assert back_end == len(text)
    story = text[front_end:back_start]
    assert "Tobias Wren had kept the light" in story
    assert "seven\nhalf-drowned sailors" in story


def test_without_line_breaks_the_ends_are_still_found() -> None:
    """Corpora often store books with their whitespace collapsed: no paragraphs, no lines."""
    credits = ("Produced by Ada Finch and the Online Distributed Proofreading Team at http://www.proofers.example.net "
               "(This file was produced from page images generously made available.) Transcriber's Note: "
               "Typographical errors have been silently corrected. ")
    closing = " End of the Open Shelf EBook of The Lantern Keeper, by Miriam Holt "
    text = re.sub(r"\s+", " ", credits + "THE LANTERN KEEPER BY MIRIAM HOLT " + STORY) + closing
    spans = boilerplate_spans(text)
    assert spans[0][0] == 0
    assert "Transcriber's Note" in text[: spans[0][1]]
    assert "Tobias Wren had kept" not in text[: spans[0][1]]
    assert text[spans[-1][0]:].strip() == closing.strip()


def test_a_preface_between_the_title_page_and_the_contents_is_the_author_s_text() -> None:
    preface = ("PREFACE\n\nThese chapters were written in the winter I spent on the coast, among people who keep "
               "lights and mend nets, and whose courage I have tried to set down without ornament. If the story "
               "pleases, the credit is theirs; its faults are mine alone, and I ask the reader's patience with "
               "them. I have changed the names of the living and kept those of the dead.\n\n")
    header = HEADER.replace("  CONTENTS\n", preface + "  CONTENTS\n")
    text = header + "\n\n" + STORY + FOOTER
    found = _only(boilerplate_spans(text), text)
    assert not any("I have changed the names of the living" in s for s in found)
    assert any("II. THE STORM" in s and "THE RESCUE" in s for s in found)  # the contents list
    assert any(s.startswith("The Open Shelf eBook") for s in found)


def test_documents_without_boilerplate_have_no_span() -> None:
    transcript = (
        "ANNA REYES: Welcome back. Today we talk about software licences and why the licence you pick matters.\n\n"
        "TOM BLAKE: Right. Copyright is automatic, so without a license nobody may redistribute your code. "
        "That surprises people.\n\n" + "ANNA REYES: Tell me more about your first company and how it grew.\n\n" * 30
        + "TOM BLAKE: We ran it as a nonprofit for a year, then as a company. The end result was the same.\n\n"
        "END\n"
    )
    assert boilerplate_spans(transcript) == []
    call = ("Quarterly Conference Call\nAnna Reyes, chief financial officer\n\nANNA REYES: Good afternoon. "
            "During this call we will make forward-looking statements about our licensing revenue. " + STORY)
    assert boilerplate_spans(call) == []
    assert boilerplate_spans(STORY) == []
    assert boilerplate_spans("") == []


def test_a_licence_word_deep_in_prose_opens_no_region() -> None:
    """Evidence must come before more than a few hundred characters of prose: the story's own mention of a
    publisher or a copyright is not front matter."""
    text = STORY + "\n\nHe later sold the copyright of his memoir to a publisher, printed in London. " + STORY
    assert boilerplate_spans(text) == []


def test_closing_formula_only_when_it_names_the_work() -> None:
    text = STORY + "\n\nThe end result was a quieter village.\n"
    assert boilerplate_spans(text) == []
    closed = STORY + "\n\nTHE END\n\nEnd of the Open Shelf EBook of The Lantern Keeper, by Miriam Holt\n"
    spans = boilerplate_spans(closed)
    assert [s.strip() for s in _only(spans, closed)] == [
        "THE END\n\nEnd of the Open Shelf EBook of The Lantern Keeper, by Miriam Holt"
    ]


def test_part_shares_of_overlapping_units() -> None:
    text = HEADER + "\n\n" + STORY * 6 + FOOTER
    size, step = 900, 800  # overlapping parts, as an index's text units
    starts = list(range(0, len(text), step))
    parts = [text[a : a + size] for a in starts]
    shares = part_shares(parts)
    want = span_shares(boilerplate_spans(text), [(a, min(a + size, len(text))) for a in starts])
    assert shares[0] > 0.9 and shares[-1] == 1.0
    assert all(s == 0.0 for s in shares[3:-3])
    assert [s >= MARKED_SHARE for s in shares] == [w >= MARKED_SHARE for w in want]
    spans = part_spans(parts)
    assert spans[0] == [(0, parts[0].index("Tobias Wren") - 2)]
    assert spans[len(parts) // 2] == []


def test_long_documents_are_read_from_their_ends_only() -> None:
    """Far more parts than are scanned whole: the scan still finds both ends, and the middle stays clean."""
    paragraphs = [f"Chapter {i}. " + STORY.replace("\n\n", " ") for i in range(120)]
    parts = [HEADER, *paragraphs, FOOTER]
    shares = part_shares(parts)
    assert shares[0] == 1.0
    assert shares[-1] > 0.9
    assert shares[1] < 0.02  # only the first chapter's heading, right after the contents
    assert max(shares[2:-1]) == 0.0
