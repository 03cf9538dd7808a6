"""The offline model's answer to a corpus-wide question: a short list of distinct themes."""

from __future__ import annotations

from engines.models.offline_reduce import DEFAULT_MAX_POINTS, compose_reduce
from engines.models.task_context import Finding, TaskContext
from shared_context.index import Index
from shared_context.tokens import get_tokenizer


def _finding(n: int, title: str, summary: str, extra: str) -> Finding:
    return Finding(n, 90 - n, f"{title}: {summary} [Data: Reports ({n})]. {extra} [Data: Reports ({n})].")


def test_a_themes_answer_lists_distinct_themes_one_line_each() -> None:
    findings = (
        _finding(1, "Harbour trade", "The harbour guilds control the grain and salt trade", "Ships dock weekly."),
        _finding(2, "Harbour trade and guilds", "The harbour guilds control the grain and salt trade of the town",
                 "Guild fees rise."),
        _finding(3, "Religious festivals", "Festivals of the old temple bring the villages together each spring",
                 "Pilgrims arrive."),
        _finding(4, "Border conflict", "Raids along the northern border shape the lords' alliances",
                 "Forts are rebuilt."),
    )
    text = compose_reduce(TaskContext("What are the main themes?", findings=findings), get_tokenizer(), None)
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    assert [line.split(":")[0] for line in lines] == ["- Harbour trade", "- Religious festivals", "- Border conflict"]
    assert "Ships dock weekly" not in text  # one line per theme: its title and opening summary


def test_a_specific_question_keeps_the_findings_in_full() -> None:
    findings = (
        _finding(1, "Harvests", "Grain prices rose after three failed harvests", "Millers hoarded flour in the cellars."),
        _finding(2, "Taxes", "A new salt tax squeezed the farmers", "Tax collectors seized carts at the bridge."),
    )
    text = compose_reduce(TaskContext("Why did grain prices rise?", findings=findings), get_tokenizer(), None)
    assert "Millers hoarded flour" in text and "Tax collectors seized carts" in text


def test_themes_follow_the_answer_length() -> None:
    findings = tuple(_finding(n, f"Theme{n} word{n}", f"Distinct subject{n} matter{n} here{n}", "More.")
                     for n in range(1, 20))
    def themes(response_type: str) -> int:
        context = TaskContext("What are the main themes?", findings=findings, response_type=response_type)
        return sum(1 for line in compose_reduce(context, get_tokenizer(), None).splitlines() if line.startswith("- "))

    assert themes("multiple paragraphs") == DEFAULT_MAX_POINTS and themes("at most 3 bullet points") == 3


def test_a_themes_answer_leaves_out_licence_lines_and_the_index_describing_itself() -> None:
    findings = (
        _finding(1, "Edition matter", "Copyright and licence terms govern the redistribution of this file",
                 "The licence is included."),
        _finding(2, "Mill workers", "This level-1 community of 25 entities (20 person, 5 geo) centres on MILL",
                 "The mill workers strike over wages and hours."),
        _finding(3, "Seafaring", "Fishermen risk the winter storms to feed their families", "Boats are lost."),
    )
    text = compose_reduce(TaskContext("What are the main themes?", findings=findings), get_tokenizer(), None)
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    assert lines and not any("licence" in line.lower() or "copyright" in line.lower() for line in lines)
    assert "community of" not in text and "strike over wages" in text and "Fishermen risk" in text
    assert len({line.split("[")[0] for line in lines}) == len(lines)  # distinct themes


def test_themes_named_beside_a_scope_still_get_a_theme_list() -> None:
    findings = (
        _finding(1, "Harbour trade", "The harbour guilds control the grain and salt trade", "Ships dock weekly."),
        _finding(2, "Border conflict", "Raids along the northern border shape alliances", "Forts are rebuilt."),
    )
    context = TaskContext("What are the main themes of the whole book?", findings=findings)
    text = compose_reduce(context, get_tokenizer(), None)
    assert "Ships dock weekly" not in text and "Raids along the northern border" in text


def test_a_forward_looking_statements_disclaimer_is_not_a_finding() -> None:
    findings = (
        _finding(1, "Call opening", "These statements are based on current expectations and assumptions that are "
                 "subject to risks and uncertainties", "Actual results could materially differ, see our Form 10-K."),
        _finding(2, "Cloud growth", "Cloud revenue grew faster than the rest of the business", "Margins improved."),
    )
    text = compose_reduce(TaskContext("What risks does management discuss?", findings=findings), get_tokenizer(), None)
    assert "uncertainties" not in text and "Form 10-K" not in text and "Cloud revenue grew" in text


def test_a_theme_line_is_the_sentence_that_names_a_theme_under_its_report_title() -> None:
    findings = (
        _finding(1, "The miller's family", "This community centers on the miller and his three sons",
                 "Their quarrels carry the book's themes of greed and forgiveness"),
        _finding(2, "The river town", "This community centers on the town by the river",
                 "The flood brings out the theme of shared hardship"),
        _finding(3, "The old church", "This community centers on the church and its bell",
                 "The bell rings the motif of time running out"),
        _finding(4, "The printer", "This community centers on the printer of this edition", "It was printed in 1890."),
    )
    text = compose_reduce(TaskContext("What are the main themes of the whole book?", findings=findings),
                          get_tokenizer(), None)
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    assert lines == [
        "- The miller's family: Their quarrels carry the book's themes of greed and forgiveness [Data: Reports (1)].",
        "- The river town: The flood brings out the theme of shared hardship [Data: Reports (2)].",
        "- The old church: The bell rings the motif of time running out [Data: Reports (3)].",
    ]  # with enough blocks naming a theme, a block that names none (the printer) is not a theme


def test_a_question_or_a_quoted_speaker_does_not_name_a_theme() -> None:
    findings = (
        _finding(1, "Analysts", "Analysts ask about cloud margins", "Is there an industry theme behind the deals?"),
        _finding(2, "Guidance", "Revenue guidance rises for the cloud segment",
                 "JANE DOE said: my theme today is growth."),
    )
    text = compose_reduce(TaskContext("What are the main themes?", findings=findings), get_tokenizer(), None)
    assert "industry theme" not in text and "my theme today" not in text
    assert "Analysts ask about cloud margins" in text and "Revenue guidance rises" in text


def test_a_report_title_survives_when_its_opening_sentence_is_dropped() -> None:
    findings = (Finding(1, 80, "AZURE, TEAMS and COPILOT and related entities: This level-1 community of 12 "
                               "entities (9 concept, 3 organization) centres on AZURE [Data: Reports (7)]. "
                               "Azure revenue grew with demand for AI services [Data: Reports (7)]."),)
    text = compose_reduce(TaskContext("What are the main themes?", findings=findings), get_tokenizer(), None)
    assert "- AZURE, TEAMS and COPILOT and related entities: Azure revenue grew with demand for AI services" in text
    assert "community of" not in text


def test_the_collection_named_by_its_kind_of_document_is_a_corpus_wide_question() -> None:
    from engines.models.offline_text import question_terms

    for question in ("What are the main themes of the whole book?", "What is discussed across these calls?",
                     "What are the recurring topics of the episodes?"):
        assert question_terms(question)[1], question
    assert not question_terms("What does the book say about the miller?")[1]


def test_the_carol_themes_answer_names_themes_and_no_edition_matter(carol: Index) -> None:
    import asyncio
    import re

    from engines import GlobalSearch
    from engines.models.offline import OfflineChatModel
    from shared_context.boilerplate_marks import boilerplate_shares

    result = asyncio.run(GlobalSearch(carol, OfflineChatModel()).search("What are the main themes of the whole book?"))
    lines = [line for line in result.response.splitlines() if line.startswith("- ")]
    assert len(lines) >= 5
    assert all(re.search(r"\b(?:theme|themes|motif|motifs)\b", line) for line in lines), lines
    shares = boilerplate_shares(carol)
    position = {str(report.community): pos for pos, report in enumerate(carol.community_reports)}
    cited = [n for line in lines for n in re.findall(r"\d+", line.rsplit("[Data: Reports (", 1)[1])]
    assert cited and all(float(shares.reports[position[n]]) < 0.1 for n in cited)  # no publisher or licence report


def test_a_final_reduce_keeps_several_themes_of_each_partial_answer() -> None:
    from engines.models.offline_reduce import REDUCE_LABEL_EN

    partials = (
        Finding(1, 90, f"{REDUCE_LABEL_EN}\n\n- Harbour: the themes of trade and debt [Data: Reports (1)].\n"
                       "- Temple: the theme of faith in hard years [Data: Reports (2)]."),
        Finding(2, 80, f"{REDUCE_LABEL_EN}\n\n- Border: the theme of loyalty between rival lords [Data: Reports (3)].\n"
                       "- Mill: the theme of labour and wages [Data: Reports (4)]."),
    )
    text = compose_reduce(TaskContext("What are the main themes?", findings=partials), get_tokenizer(), None)
    lines = [line for line in text.splitlines() if line.startswith("- ")]
    assert [line.split(":")[0] for line in lines] == ["- Harbour", "- Temple", "- Border", "- Mill"]
