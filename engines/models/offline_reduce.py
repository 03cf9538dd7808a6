"""Reduce for the offline model: merge the analysts' findings, most important first, keeping their references."""

from __future__ import annotations

import re

from engines.models.offline_answer import cite, no_answer_text
from engines.models.offline_text import (
    clean_sentence,
    is_cjk_text,
    is_index_meta,
    is_informative,
    jaccard,
    merge_refs,
    names_themes,
    parse_citation,
    question_terms,
    split_sentences,
    terms,
    trim_sentence,
    word_stems,
)
from engines.models.task_context import Finding, TaskContext
from shared_context.boilerplate import is_boilerplate_sentence
from shared_context.tables import CITATION_RE
from shared_context.tokens import Tokenizer

# A response type that states no size ("multiple paragraphs", GraphRAG's default) gets this many findings:
# an answer a reader takes in at once, not the 40-60 bullets every analyst block would give.
DEFAULT_MAX_POINTS = 12
# A corpus-wide question ("what are the main themes?") gets a list of distinct themes, as many as the response
# type allows: one line per analyst block (a report's title and the block's sentence that names a theme, else
# its opening summary; only blocks that name a theme when enough do), chosen by maximal marginal
# relevance so that near-same themes from neighbouring communities do not crowd out different ones.
THEME_DIVERSITY = 0.5  # weight of a theme's overlap with those already chosen, against its importance
# Word lists (data/offline_words.txt): THEME asks for themes even beside a named scope ("the main themes of
# the whole book"); THEME_NAMING names a theme in a sentence, though a question or a quoted speaker's line
# does not name one.
_ASKS_OR_QUOTES_RE = re.compile(r"\?[.\s]*$|^\s*[^\W\d_][\w .'’-]{0,60}\bsaid:")
# A list of themes is drawn only from blocks with a sentence that names a theme when at least this many have one.
MIN_NAMED_THEMES = 3
_AT_MOST_RE = re.compile(r"\bat most (\d+)\b|最多\s*(\d+)", re.IGNORECASE)

REDUCE_LABEL_EN = "**Answer (offline extractive model; key findings merged from the supplied data):**"
REDUCE_LABEL_ZH = "**回答（离线抽取式模型，合并自所提供数据的要点）：**"
# The label of an earlier offline answer, and bold group headings, are structure, not findings.
_LABEL_RE = re.compile(r"^\s*\*\*(?:Answer|回答)[^*]*\*\*\s*")
_BOLD_LINE_RE = re.compile(r"\s*\*\*[^*]+\*\*\s*[:：]?\s*")


def cited_units(text: str) -> list[tuple[str, dict[str, list[str]]]]:
    """Sentences of one analyst text with the references they carry.

    An uncited sentence inherits the next citation in its block (analysts often cite once per
    paragraph), or the previous one at the end of the block.
    """
    refs_list: list[dict[str, list[str]]] = []

    def protect(match: re.Match[str]) -> str:
        refs_list.append(parse_citation(match.group(1)))
        return f" \x00{len(refs_list) - 1}\x00"

    units: list[tuple[str, dict[str, list[str]]]] = []
    title = ""  # a block's "Title: ..." opening whose sentence was dropped: it heads the first kept one
    for number, raw in enumerate(split_sentences(CITATION_RE.sub(protect, _LABEL_RE.sub("", text.strip())))):
        if raw.lstrip().startswith("#") or _BOLD_LINE_RE.fullmatch(raw):
            continue  # headings ("## ...", "**From the source text**") are structure, not findings
        refs: dict[str, list[str]] = {}
        for k in re.findall(r"\x00(\d+)\x00", raw):
            merge_refs(refs, refs_list[int(k)])
        sentence = re.sub(r"\s*\x00\d+\x00", "", raw)
        sentence = _LABEL_RE.sub("", clean_sentence(re.sub(r"\s+([.,;:!?。])", r"\1", sentence)))
        if is_informative(sentence) and not is_meta_or_boilerplate(sentence):
            headed = title and not units and ": " not in sentence
            units.append((trim_sentence(f"{title}: {sentence}" if headed else sentence, 80), refs))
        elif number == 0 and ": " in sentence and not units:
            title = sentence.partition(": ")[0]
    for i, (sentence, refs) in enumerate(units):
        if not refs:
            later = next((r for _, r in units[i + 1 :] if r), None)
            earlier = next((r for _, r in reversed(units[:i]) if r), None)
            inherited = later or earlier
            if inherited:
                units[i] = (sentence, {d: list(v) for d, v in inherited.items()})
    return units


def _theme_blocks(block: Finding) -> list[Finding]:
    """A partial answer of an earlier reduce level is already a list of themes: each of its lines is a block
    of its own (with the partial's score), so the final list can keep more than one of them."""
    if not _LABEL_RE.match(block.text):
        return [block]
    lines = [line[2:] for line in block.text.splitlines() if line.startswith("- ")]
    return [Finding(block.number, block.score, line) for line in lines] or [block]


def is_meta_or_boilerplate(sentence: str) -> bool:
    """A line no reader wants in an answer: the index describing itself, or licence and disclaimer matter."""
    body = sentence.split(": ", 1)[-1]  # an analyst line may open with its report's title ("Title: ...")
    return is_index_meta(sentence) or is_boilerplate_sentence(sentence) or is_boilerplate_sentence(body)


def asks_for_themes(question: str) -> bool:
    """A corpus-wide question, or one that names themes or topics outright."""
    return question_terms(question)[1] or names_themes(question)


def max_points(response_type: str) -> int:
    """How many findings the answer may list: the "at most N" of the response type, else the default."""
    match = _AT_MOST_RE.search(response_type or "")
    if match:
        return max(1, int(match.group(1) or match.group(2)))
    return DEFAULT_MAX_POINTS


def word_limit_tokens(words: int | None) -> int | None:
    """A limit of `words` words, as tokens (about 4 tokens per 3 words)."""
    return None if words is None else words * 4 // 3


def compose_reduce(context: TaskContext, tokenizer: Tokenizer, max_tokens: int | None) -> str:
    """One answer from the analyst findings, most important first, duplicates merged, within budget.

    Budget is shared in two passes: first the opening sentences of every block (in importance
    order), then the rest of each block, so a long first finding cannot crowd out the others and
    a partial answer from an earlier reduce level keeps more than its first lines when room allows.
    """
    question = context.question
    blocks = sorted((b for b in context.findings if b.text.strip()), key=lambda b: (-b.score, b.number))
    if asks_for_themes(question):  # partial answers come best first, and so do their lines
        blocks = [line for b in blocks for line in _theme_blocks(b)]
    kept: list[list[tuple[str, dict[str, list[str]]]]] = []
    opens_own: list[bool] = []  # the block's opening line survived (was not merged into an earlier block's)
    seen: list[tuple[list[str], dict[str, list[str]]]] = []
    for block in blocks:
        sentences: list[tuple[str, dict[str, list[str]]]] = []
        first = True
        for sentence, refs in cited_units(block.text):
            sentence_terms = terms(sentence, keep_stopwords=True)
            twin = next((r for t, r in seen if jaccard(t, sentence_terms) >= 0.7), None)
            if twin is not None:
                merge_refs(twin, refs)
                first = False if not sentences else first
                continue
            seen.append((sentence_terms, refs))
            if not sentences:
                opens_own.append(first)
            sentences.append((sentence, refs))
        if sentences:
            kept.append(sentences)
    if not kept:
        return no_answer_text(question)
    if asks_for_themes(question):
        themes = [group for group, own in zip(kept, opens_own, strict=True) if own] or kept
        named = [group for group in themes if names_a_theme(group)]
        kept = distinct_themes(named if len(named) >= MIN_NAMED_THEMES else themes, max_points(context.response_type))
    label = REDUCE_LABEL_ZH if is_cjk_text(question) else REDUCE_LABEL_EN
    limits = [t for t in (max_tokens, word_limit_tokens(context.word_limit)) if t is not None]
    budget = min(limits) if limits else 2000
    points = max_points(context.response_type)
    used = tokenizer.count(label) + 2
    taken = [0] * len(kept)
    for first_pass in (True, False):
        full = False
        for b, group in enumerate(kept):
            stop = min(len(group), 3) if first_pass else len(group)
            while taken[b] < stop:
                if sum(taken) >= points:
                    full = True
                    break
                sentence, refs = group[taken[b]]
                cost = tokenizer.count(cite(sentence, refs)) + 3  # "- " and the line break
                if used + cost > budget:
                    full = True
                    break
                used += cost
                taken[b] += 1
            if full:
                break  # never let a less important block jump ahead of a more important one
        if full:
            break
    lines = [f"- {cite(s, r)}" for b, group in enumerate(kept) for s, r in group[: taken[b]]]
    if not lines:
        lines = [f"- {cite(*kept[0][0])}"]
    text = "\n".join([label, "", *lines])
    if tokenizer.count(text) > budget:
        text = tokenizer.truncate(text, budget)
        cut = text.rfind("[Data:")
        if cut != -1 and "]" not in text[cut:]:
            text = text[:cut].rstrip()
    return text


def distinct_themes(
    blocks: list[list[tuple[str, dict[str, list[str]]]]], limit: int
) -> list[list[tuple[str, dict[str, list[str]]]]]:
    """The theme line (`theme_line`) of up to `limit` blocks (most important first), picked by maximal marginal
    relevance: importance by the block's place in the order, redundancy by word overlap with the themes already
    picked."""
    firsts = [theme_line(group) for group in blocks]
    words = [terms(sentence) for sentence, _ in firsts]
    chosen: list[int] = []
    left = list(range(len(firsts)))
    while left and len(chosen) < limit:
        def value(i: int) -> float:
            importance = 1.0 - i / len(firsts)
            overlap = max((jaccard(words[i], words[j]) for j in chosen), default=0.0)
            return (1 - THEME_DIVERSITY) * importance - THEME_DIVERSITY * overlap

        best = max(left, key=lambda i: (value(i), -i))
        chosen.append(best)
        left.remove(best)
    return [[firsts[i]] for i in sorted(chosen)]


def theme_line(group: list[tuple[str, dict[str, list[str]]]]) -> tuple[str, dict[str, list[str]]]:
    """The block's line for a list of themes: its first sentence that names a theme ("themes of redemption
    and generosity"), else its opening line; under the report title the block opens with ("Title: ..."), so
    the reader still sees where it comes from."""
    pick = _theme_sentence(group)
    if pick is None or pick == 0:
        return group[0]
    title = group[0][0].partition(": ")[0] if ": " in group[0][0] else ""
    body = group[pick][0]
    return (f"{title}: {body}" if title else body), group[pick][1]


def names_a_theme(group: list[tuple[str, dict[str, list[str]]]]) -> bool:
    return _theme_sentence(group) is not None


def _theme_sentence(group: list[tuple[str, dict[str, list[str]]]]) -> int | None:
    """The place of the block's first sentence that names a theme, if any (the report title is not read)."""
    first = group[0][0]
    bodies = [first.partition(": ")[2] if ": " in first else first, *(sentence for sentence, _ in group[1:])]
    naming = word_stems("THEME_NAMING")
    return next((i for i, body in enumerate(bodies)
                 if not _ASKS_OR_QUOTES_RE.search(body) and any(t in naming for t in terms(body))), None)
