"""The offline model's answer to a corpus-wide question: a short list of distinct themes."""

from __future__ import annotations

from engines.models.offline_reduce import DEFAULT_MAX_POINTS, compose_reduce
from engines.models.task_context import Finding, TaskContext
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
