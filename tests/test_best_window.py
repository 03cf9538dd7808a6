"""`best_window` scores windows from one pass over the words for ASCII text: same result as re-reading each."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from shared_context.linking import lexical_terms
from shared_context.text_unit_selection import best_window


def reference(text: str, query: str, chars: int) -> tuple[int, int]:
    """The direct definition: lexical terms of every window slice."""
    if chars <= 0:
        return 0, 0
    if len(text) <= chars:
        return 0, len(text)
    wanted = set(lexical_terms(query))
    step = max(chars // 4, 1)
    best_score, best_start = -1, 0
    for start in range(0, len(text) - chars + step, step):
        start = min(start, len(text) - chars)
        score = len(wanted.intersection(lexical_terms(text[start : start + chars])))
        if score > best_score:
            best_score, best_start = score, start
    if best_start > 0:
        space = text.find(" ", best_start, best_start + 40)
        best_start = space + 1 if space >= 0 else best_start
    return best_start, min(best_start + chars, len(text))


WORDS = ["Scrooge", "scrooges", "Marley", "ghost", "ghosts", "the", "of", "Christmas", "past", "Bob", "cratchit",
         "a", "s", "ooge", "Scro", "host", "1843", "x_y", "it's", "--", ", ", ". ", "\n", "  ", "Tim", "tiny"]
text_st = st.lists(st.sampled_from(WORDS), min_size=0, max_size=80).map(lambda ws: " ".join(ws).replace("  ", " "))
query_st = st.lists(st.sampled_from([*WORDS[:12], "Tim", "tiny", "ooge", "Scro", "host"]), max_size=5).map(" ".join)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(text=text_st, query=query_st, chars=st.integers(min_value=-1, max_value=120))
def test_best_window_matches_reading_every_window(text: str, query: str, chars: int) -> None:
    assert best_window(text, query, chars) == reference(text, query, chars)


def test_non_ascii_text_takes_the_direct_path() -> None:
    text = "Der Geist der vergangenen Weihnacht zeigt Scrooge seine Schule. " * 3 + "ΣΟΦΟΣ Größe 雅各布·马利 " * 4
    for chars in (10, 33, 80):
        assert best_window(text, "Scrooge Schule 马利 Größe", chars) == reference(text, "Scrooge Schule 马利 Größe", chars)


def test_picks_the_window_with_the_question_terms() -> None:
    text = "Filler words here. " * 30 + "Tiny Tim sat by the fire with Bob Cratchit. " + "More filler now. " * 30
    start, end = best_window(text, "Who is Tiny Tim?", 60)
    assert "Tiny Tim" in text[start:end]
