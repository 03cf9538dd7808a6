"""Extractive answers: rank the context's sentences against the question and cite every one.

Used by the answer tasks (local, basic) and the DRIFT follow-up; `offline_reduce` merges answers. The
sentences come from the typed records of the context tables (`shared_context.tables`), each cited
with its record's id.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from engines.models.offline_text import (
    BM25,
    answerable,
    capitalised_phrases,
    clean_sentence,
    coverage,
    display_name,
    format_citation,
    is_cjk_text,
    is_index_meta,
    is_informative,
    jaccard,
    mentions,
    merge_refs,
    question_terms,
    split_sentences,
    strip_citations,
    terms,
    trim_sentence,
    word_list,
)
from shared_context.boilerplate import is_boilerplate_sentence
from shared_context.tables import (
    ClaimRecord,
    ContextRecord,
    ContextTables,
    EntityRecord,
    RelationshipRecord,
    ReportRecord,
    SourceRecord,
)
from shared_context.tokens import Tokenizer

ANSWER_DATASETS = ("Entities", "Relationships", "Claims", "Sources", "Reports")
LABEL_EN = "**Answer (offline extractive model; sentences quoted from the supplied data):**"
LABEL_ZH = "**回答（离线抽取式模型，句子摘自所提供的数据）：**"
_END_PUNCT = ".!?。！？"
# Words that relate two names without saying anything about them: "A is a member of B", "A is connected
# to B". A sentence made only of its subjects' names and these words is a tautology.
_GENERIC_RELATION_WORDS = word_list("GENERIC_RELATION")
# A Markdown heading mark inside a sentence: a heading run into the text around it ("... # Title, part 2 ...").
# A contents-list entry: words then a bare page number, no closing punctuation ("... dance with Mrs. X 54").
_CONTENTS_ENTRY_RE = re.compile(r"[^\W\d_]\s+\d{1,4}$")
_INLINE_HEADING_RE = re.compile(r"(?:^|\s)#{1,6}\s+\S")


@dataclass
class Candidate:
    text: str
    terms: list[str]
    refs: dict[str, list[str]]
    dataset: str
    order: int  # position in the context: the final tie-break, so ranking never depends on hashing
    position: int  # sentence index inside its row (earlier sentences of a description matter more)
    subjects: tuple[str, ...] = ()
    score: float = 0.0
    mentioned: tuple[str, ...] = field(default_factory=tuple)


def no_answer_text(question: str, reason: str = "") -> str:
    if is_cjk_text(question):
        return "提供的数据无法回答这个问题：在所提供的记录中找不到相关信息。"
    detail = f" {reason}" if reason else ""
    return f"The provided data does not answer this question: I could not find information about it in the supplied records.{detail}"


def cite(text: str, refs: dict[str, list[str]]) -> str:
    """Attach a citation before the sentence's final punctuation, GraphRAG style."""
    citation = format_citation(refs)
    if not citation:
        return text
    if text and text[-1] in _END_PUNCT:
        return f"{text[:-1]} {citation}{text[-1]}"
    if re.search(r"[.!?。！？][\"'”’)\]」』]+$", text):
        return f"{text} {citation}"  # keep a closing quote where the source put it
    return f"{text} {citation}."


def record_subjects(record: ContextRecord) -> tuple[str, ...]:
    """The entities a record is about: an entity's title, a relationship's ends, a claim's subject and object."""
    if isinstance(record, EntityRecord):
        names = [record.title]
    elif isinstance(record, RelationshipRecord):
        names = [record.source, record.target]
    elif isinstance(record, ClaimRecord):
        names = [record.subject, record.object]
    else:
        return ()
    kept = [n.strip() for n in names if n and n.strip() and n.strip().upper() != "NONE"]
    return tuple(dict.fromkeys(kept))


def record_text(record: ContextRecord) -> str:
    """The record's evidence text: a description, a unit's shown text, a report's content."""
    if isinstance(record, EntityRecord | RelationshipRecord | ClaimRecord):
        return record.description
    if isinstance(record, SourceRecord):
        return record.text
    if isinstance(record, ReportRecord):
        return record.content
    return record.content  # a conversation turn


def table_rows(tables: ContextTables, name: str) -> list[ContextRecord]:
    """The rows shown of the table `name` ([] when the context has none)."""
    section = tables.section(name)
    return [] if section is None else list(section.rows)


def _prefix(table_name: str, subjects: tuple[str, ...], sentence: str) -> str:
    """Name the subject when a description sentence does not ("Is Scrooge's clerk." -> "Bob Cratchit: ...")."""
    folded = sentence.casefold()
    if not subjects or any(mentions(folded, s) or mentions(folded, display_name(s)) for s in subjects):
        return sentence
    if table_name == "Relationships" and len(subjects) >= 2:
        return f"{display_name(subjects[0])} – {display_name(subjects[1])}: {sentence}"
    return f"{display_name(subjects[0])}: {sentence}"


def is_tautology(sentence: str, subjects: tuple[str, ...]) -> bool:
    """The sentence only restates its subjects' names joined by a generic relation ("Belle's daughter is a
    member of Belle's family"): every content word is a word of a subject's name or a generic relation word."""
    if not subjects:
        return False
    named = {t for s in subjects for t in terms(s)} | {t for s in subjects for t in terms(display_name(s))}
    generic = {t for w in _GENERIC_RELATION_WORDS for t in terms(w)}
    words = terms(sentence)
    return bool(words) and all(t in named or t in generic for t in words)


def gather_candidates(tables: ContextTables, datasets: tuple[str, ...] = ANSWER_DATASETS) -> list[Candidate]:
    """Every informative sentence of the supplied tables, with the row id it must cite."""
    out: list[Candidate] = []
    for name in datasets:
        for record in table_rows(tables, name):
            row_id = str(record.id).strip()
            if not row_id:
                continue
            subjects = record_subjects(record)
            for position, text, words in record_sentences(name, subjects, record_text(record)):
                out.append(Candidate(text, list(words), {name: [row_id]}, name, len(out), position, subjects))
    return out


# A record's sentences depend only on its table, subjects and text, which an index never changes: kept per
# record so a question reads them once (the answer and its sufficiency check share them) and a record shown
# again by a later question is not split and filtered again. Bounded: a record is a few sentences.
@lru_cache(maxsize=16384)
def record_sentences(name: str, subjects: tuple[str, ...], text: str) -> tuple[tuple[int, str, tuple[str, ...]], ...]:
    """The informative sentences of one record's text: (position in the text, shown text, its terms)."""
    out: list[tuple[int, str, tuple[str, ...]]] = []
    for position, raw in enumerate(split_sentences(strip_citations(text))):
        if raw.lstrip().startswith("#"):
            continue  # report titles are not evidence
        sentence = clean_sentence(raw)
        if not is_informative(sentence) or _INLINE_HEADING_RE.search(sentence):
            continue  # a heading run into the text is markup, not a sentence a reader can use
        if is_tautology(sentence, subjects) or is_boilerplate_sentence(sentence) or is_index_meta(sentence):
            continue
        if name == "Sources" and _CONTENTS_ENTRY_RE.search(sentence):
            continue  # a contents or index line, not a sentence of the text
        shown = trim_sentence(_prefix(name, subjects, sentence))
        out.append((position, shown, tuple(terms(shown))))
    return tuple(out)


def known_names(tables: ContextTables) -> list[str]:
    """Entity names the tables know: entity titles, relationship ends, claim subjects (table order)."""
    known: dict[str, None] = {}
    for name in ("Entities", "Relationships", "Claims"):
        for record in table_rows(tables, name):
            for subject in record_subjects(record):
                known.setdefault(subject, None)
    return list(known)


def question_entities(tables: ContextTables, question: str, *, tables_only: bool = False) -> list[str]:
    """Names the question mentions, longest first where they overlap.

    Names come from the tables; when none matches (and `tables_only` is off) the question's own
    capitalised phrases stand in, so sentences naming them still rank first in a Sources-only context.
    """
    folded = question.casefold()
    found = [n for n in known_names(tables) if mentions(folded, n)]
    if not found and not tables_only:
        found = capitalised_phrases(question)
    found.sort(key=lambda n: (folded.find(n.casefold()), -len(n), n))
    kept: list[str] = []
    for n in sorted(found, key=lambda n: (-len(n), n)):
        # "Marley" inside "Ghost of Jacob Marley" is the same mention; inside the firm "Scrooge and
        # Marley" it may be the person, so names joined by "and" keep their parts.
        if not any(n.casefold() in k.casefold() and " and " not in k.casefold() for k in kept):
            kept.append(n)
    return [n for n in found if n in kept]


def rank_candidates(cands: list[Candidate], question: str, entities: list[str]) -> list[Candidate]:
    """BM25 against the question, boosted for sentences about (several of) the question's entities."""
    query, _broad = question_terms(question)
    if not query or not cands:
        return []
    bm25_scores = BM25.query_scores([c.terms for c in cands], query)
    folded_entities = [e.casefold() for e in entities]
    ranked = []
    for i, c in enumerate(cands):
        score = float(bm25_scores[i])
        if score <= 0:
            continue
        folded = c.text.casefold()
        subjects = [s.casefold() for s in c.subjects]
        c.mentioned = tuple(
            e
            for e, fe in zip(entities, folded_entities, strict=True)
            if mentions(folded, e) or fe in subjects
        )
        score *= 1 + 0.6 * len(c.mentioned)
        if len(c.mentioned) >= 2:
            score *= 1.3
        if c.dataset == "Entities" and any(s in folded_entities for s in subjects):
            # the entity's own description, and most of all its opening (defining) sentence
            score *= 1.8 if c.position == 0 else 1.2
        # A sentence that covers the whole question beats one that repeats part of it.
        score *= 0.25 + 0.75 * coverage(query, c.terms)
        if len(c.terms) < 5:
            score *= 0.6  # fragments of dialogue ("'And your brother, Tiny Tim?") say little on their own
        c.score = score * (1 - 0.03 * min(c.position, 10))
        ranked.append(c)
    ranked.sort(key=lambda c: (-c.score, c.order))
    return ranked


def select_sentences(ranked: list[Candidate], max_sentences: int) -> list[Candidate]:
    """Best sentences, near-duplicates merged into the one kept (their citations joined)."""
    chosen: list[Candidate] = []
    if not ranked:
        return chosen
    floor = ranked[0].score * 0.15
    for c in ranked[:300]:
        if len(chosen) >= max_sentences or (len(chosen) >= 3 and c.score < floor):
            break
        twin = next((k for k in chosen if jaccard(k.terms, c.terms) >= 0.6 or c.text in k.text), None)
        if twin is not None:
            merge_refs(twin.refs, c.refs)
            continue
        chosen.append(
            Candidate(
                c.text,
                c.terms,
                {d: list(v) for d, v in c.refs.items()},
                c.dataset,
                c.order,
                c.position,
                c.subjects,
                c.score,
                c.mentioned,
            )
        )
    return chosen


def lead_with_description(
    chosen: list[Candidate], cands: list[Candidate], entities: list[str], max_sentences: int
) -> list[Candidate]:
    """Put the asked entity's own description (its opening sentence) first, so the answer says who or what
    it is before the facts; taken from the context when ranking left it out. A question about several
    entities is about what joins them, so its best fact stays first."""
    if len(entities) != 1 or not chosen:
        return chosen
    asked = entities[0].casefold()

    def describes(c: Candidate) -> bool:
        return c.dataset == "Entities" and c.position == 0 and any(s.casefold() == asked for s in c.subjects)

    opening = next((c for c in chosen if describes(c)), None) or next((c for c in cands if describes(c)), None)
    if opening is None:
        return chosen
    rest = [c for c in chosen if c is not opening and c.text != opening.text]
    return [opening, *rest][:max_sentences]


def _group_key(c: Candidate, entities: list[str], zh: bool) -> str:
    if len(entities) >= 2:
        if not c.mentioned:
            return "其他相关内容" if zh else "Other relevant details"
        shown = [
            m for m in c.mentioned if not any(m != o and m.casefold() in o.casefold() for o in c.mentioned)
        ]
        if zh:
            return "、".join(shown)
        joiner = "; " if any(" and " in m.casefold() for m in shown) else " and "
        return joiner.join(display_name(m) for m in shown)
    if c.dataset == "Sources":
        return "来自原文" if zh else "From the source text"
    if c.dataset == "Reports":
        return "来自社区报告" if zh else "From the community reports"
    return "来自知识图谱" if zh else "From the knowledge graph"


def render_answer(chosen: list[Candidate], entities: list[str], question: str, response_type: str) -> str:
    zh = is_cjk_text(question)
    label = LABEL_ZH if zh else LABEL_EN
    opening, rest = chosen[0], chosen[1:]
    if "paragraph" in response_type.lower() and "multiple" not in response_type.lower():
        return " ".join([label, *(cite(c.text, c.refs) for c in chosen)])
    lines = [f"{label} {cite(opening.text, opening.refs)}"]
    groups: dict[str, list[Candidate]] = {}
    for c in rest:
        groups.setdefault(_group_key(c, entities, zh), []).append(c)
    for heading, members in groups.items():
        lines.append("")
        lines.append(f"**{heading}**")
        lines.extend(f"- {cite(c.text, c.refs)}" for c in members)
    return "\n".join(lines)


def _missing_words(question: str, pool: list[Candidate]) -> tuple[list[str], float]:
    """Question words no supplied record contains, and the share of question terms that are present."""
    query, broad = question_terms(question)
    if broad or not query:
        return [], 1.0
    found = {t for c in pool for t in c.terms}
    words = [w for w in re.findall(r"[^\W_]+", question) if w.isascii()]
    missing = [w for w in words if (t := terms(w)) and t[0] in query and t[0] not in found]
    return list(dict.fromkeys(missing)), coverage(query, found)


# Share of the question's content terms the supplied records must hold for the offline model to call its context
# sufficient (`covers_question`): half, as `answerable` asks before quoting anything. Each insufficient answer
# costs an escalation, so the offline model asks no more than it asks before quoting.
MIN_COVERAGE = 0.5


def covers_question(tables: ContextTables, question: str, datasets: tuple[str, ...] = ANSWER_DATASETS) -> bool:
    """Whether the records hold enough of the question's content to answer it: at least `MIN_COVERAGE` of its
    content terms. A question of broad words only ("the main themes") asks about the whole collection, which a
    context of a few records does not cover."""
    query, broad = question_terms(question)
    if broad or not query:
        return False
    found = {t for c in gather_candidates(tables, datasets) for t in c.terms}
    return coverage(query, found) >= MIN_COVERAGE


def fit_tokens(
    chosen_in: list[Candidate],
    render: Callable[[list[Candidate]], str],
    max_tokens: int | None,
    tokenizer: Tokenizer,
) -> str:
    """Render, then drop the weakest sentences until the text fits `max_tokens` (never cutting a citation)."""
    chosen = list(chosen_in)
    text = render(chosen)
    if max_tokens is None:
        return text
    while tokenizer.count(text) > max_tokens and len(chosen) > 1:
        chosen.pop()
        text = render(chosen)
    if tokenizer.count(text) > max_tokens:
        text = tokenizer.truncate(text, max_tokens)
        cut = text.rfind("[Data:")
        if cut != -1 and "]" not in text[cut:]:
            text = text[:cut].rstrip()
    return text


def compose_answer(
    tables: ContextTables,
    question: str,
    tokenizer: Tokenizer,
    *,
    max_sentences: int = 6,
    max_tokens: int | None = None,
    datasets: tuple[str, ...] = ANSWER_DATASETS,
    response_type: str = "",
) -> tuple[str, list[Candidate]]:
    """The markdown answer and the sentences it quotes (empty when the data does not answer)."""
    cands = gather_candidates(tables, datasets)
    if not cands:
        return no_answer_text(question, "No context data was supplied."), []
    entities = question_entities(tables, question)
    missing, present = _missing_words(question, cands)
    missing_text = f"The data does not mention: {', '.join(missing)}." if missing else ""
    # A stray shared word ("point" in "boiling point of nitrogen") is not an answer: most of the
    # question's terms, or an entity the tables know, must be there.
    pool_terms = [t for c in cands for t in c.terms]
    if not answerable(question, pool_terms) and not question_entities(tables, question, tables_only=True):
        return no_answer_text(question, missing_text), []
    chosen = select_sentences(rank_candidates(cands, question, entities), max_sentences)
    chosen = lead_with_description(chosen, cands, entities, max_sentences)
    if not chosen:
        return no_answer_text(question, missing_text), []
    response_type = response_type or "multiple paragraphs"
    # A missing question verb ("connected") is not worth a note when most terms are covered.
    note = f"\n\n_{missing_text}_" if missing_text and present <= 0.5 else ""

    def render(sel: list[Candidate]) -> str:
        return render_answer(sel, entities, question, response_type) + note

    return fit_tokens(chosen, render, max_tokens, tokenizer), chosen
