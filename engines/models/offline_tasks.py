"""Structured tasks of the offline extractive model: map, rate, HyDE, DRIFT primer and follow-up.

Each function turns the typed context of a call (`task_context.TaskContext`) into the pydantic object its
engine expects (schemas in `engines/models/schemas.py`). Scores come from term coverage of the question, so they are comparable
across calls; orders are by score, then position in the context (never by hash order).
"""

from __future__ import annotations

import functools
import re

from engines.models.offline_answer import (
    Candidate,
    cite,
    compose_answer,
    gather_candidates,
    question_entities,
    rank_candidates,
    select_sentences,
)
from engines.models.offline_text import (
    BM25,
    STOPWORDS,
    answerable,
    capitalised_phrases,
    clean_sentence,
    coverage,
    display_name,
    is_cjk_text,
    is_informative,
    jaccard,
    mentions,
    names_themes,
    question_terms,
    split_sentences,
    strip_citations,
    terms,
    trim_sentence,
    word_list,
    word_stems,
)
from engines.models.schemas import FollowupResponse, MapPoint, MapResponse, PrimerResponse, RateResponse
from engines.models.task_context import TaskContext
from shared_context.tables import ContextTables, ReportRecord
from shared_context.tokens import Tokenizer

_QUESTION_WORDS = word_list("QUESTION")


def topic_phrase(question: str) -> str:
    """A short noun phrase for the question's topic, made only of the question's own words."""
    if is_cjk_text(question):
        return re.sub(r"[？?。！!\s]+$", "", question).strip() or question
    names = capitalised_phrases(question)
    if names:
        return " and ".join(dict.fromkeys(names))
    words = [w for w in re.findall(r"[A-Za-z][A-Za-z'’\-]*|\d+", question) if w.lower() not in STOPWORDS]
    words = [w for w in words if w.lower() not in _QUESTION_WORDS]
    return " ".join(words[:5]) if words else "the question"


def surface_words(question: str, wanted: list[str]) -> list[str]:
    """Question words whose index term is in `wanted`, in question order."""
    out: dict[str, None] = {}
    for w in re.findall(r"[^\W_]+", question):
        t = terms(w)
        if t and t[0] in wanted:
            out.setdefault(w, None)
    return list(out)


def _rank_norm(report: ReportRecord) -> float:
    """GraphRAG report rank (0-10) as 0-1; 0.5 when absent."""
    if report.rank is None or report.rank != report.rank:  # None or NaN
        return 0.5
    return max(0.0, min(1.0, float(report.rank) / 10.0))


def _reports(tables: ContextTables) -> list[ReportRecord]:
    return [] if tables.reports is None else [r for r in tables.reports.rows if str(r.id).strip()]


def _report_sentences(report: ReportRecord) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The report's informative sentences, each with its index terms."""
    return _analysed_text(report.content)


@functools.lru_cache(maxsize=16384)
def _analysed_text(content: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    # A pure function of the report's text, memoised: global search maps the same community reports
    # for every question, and splitting and stemming them was most of an offline map call's time.
    out = []
    for raw in split_sentences(strip_citations(content)):
        if raw.lstrip().startswith("#"):
            continue
        s = clean_sentence(raw)
        if is_informative(s):
            sentence = trim_sentence(s, 45)
            out.append((sentence, tuple(terms(sentence))))
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# Global map and rating


def global_map(tables: ContextTables, question: str) -> MapResponse:
    rows = _reports(tables)
    if not rows:
        return MapResponse(
            points=[
                MapPoint(description="No community reports were supplied, so nothing can be said.", score=0)
            ]
        )
    query, broad = question_terms(question)
    analysed = [_report_sentences(r) for r in rows]
    per_report = [[s for s, _ in a] for a in analysed]
    sentence_terms = [list(t) for a in analysed for _, t in a]
    founds = [terms(r.title) + [t for _, ts in a for t in ts] for r, a in zip(rows, analysed, strict=True)]
    if not broad and names_themes(question) and not any(coverage(query, found) for found in founds):
        # a theme question whose other words no report holds is still about the themes: an empty answer to
        # it would hide the themes the reports state
        broad = True
    # a corpus-wide question's extra sentence is looked for by what it asks ("themes"), not by the name of
    # the collection ("these calls", "the book"), which every report's sentences share
    collection = word_stems("COLLECTION")
    bm25_scores = BM25.query_scores(sentence_terms, [t for t in query if not (broad and t in collection)] or query)
    offsets = [sum(len(s) for s in per_report[:i]) for i in range(len(per_report))]
    batch_terms = [t for r in rows for t in terms(r.title)]
    batch_terms += [t for doc in sentence_terms for t in doc]
    relevant_batch = answerable(question, batch_terms)
    # one point per report: (ids, title, best sentences, their terms, score); near-duplicates share a point
    points: list[tuple[list[str], str, list[str], list[str], int]] = []
    for row, sentences, found, offset in zip(rows, per_report, founds, offsets, strict=True):
        title = row.title
        cover = coverage(query, found)
        rank = _rank_norm(row)
        if broad:
            # Corpus-wide question: the report's opening summary, plus its sentence that best matches
            # the question's own words ("themes", "overall") when it has one.
            score, best = round(20 + 60 * rank), sentences[:1]
            scores = [float(x) for x in bm25_scores[offset : offset + len(sentences)]]
            extra = max(range(1, len(sentences)), key=lambda i: (scores[i], -i), default=None)
            if extra is not None:
                best = [*best, sentences[extra if scores[extra] > 0 else 1]]
        elif cover == 0 or not relevant_batch:
            continue
        else:
            score = max(1, min(100, round(85 * cover + 15 * rank)))
            scores = [float(x) for x in bm25_scores[offset : offset + len(sentences)]]
            order = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))
            best = [sentences[i] for i in sorted(order[:2])]
        if not best:
            best = [title] if title else []
        if not best:
            continue
        best_terms = [t for s in best for t in terms(s)]
        twin = next((p for p in points if jaccard(p[3], best_terms) >= 0.8), None)
        if twin is not None:
            twin[0].append(row.id)
            continue
        points.append(([row.id], title, best, best_terms, score))
    if not points:
        return MapResponse(
            points=[MapPoint(description="None of these reports addresses the question.", score=0)]
        )
    out = []
    for ids, title, best, _terms, score in sorted(points, key=lambda p: -p[4]):
        body = " ".join(cite(s, {"Reports": ids}) for s in best)
        out.append(MapPoint(description=f"{title}: {body}" if title else body, score=score))
    return MapResponse(points=out)


def rate(tables: ContextTables, question: str) -> RateResponse:
    rows = _reports(tables)
    if not rows:
        return RateResponse(reason="No report was supplied to rate.", rating=0)
    row = rows[0]
    query, broad = question_terms(question)
    found = terms(row.title) + [t for _, ts in _report_sentences(row) for t in ts]
    if broad:
        rating = 1 + round(3 * _rank_norm(row))
        return RateResponse(
            reason="The question is about the whole dataset; rated by the report's importance rank.",
            rating=rating,
        )
    cover = coverage(query, found)
    if cover == 0:
        return RateResponse(reason="The report mentions none of the question's key terms.", rating=0)
    if not answerable(question, found):
        return RateResponse(reason="The report shares only a common word with the question.", rating=0)
    matched = surface_words(question, [t for t in query if t in set(found)])
    return RateResponse(
        reason=f"The report mentions {len(matched)} of the question's key terms: {', '.join(matched)}.",
        rating=min(5, 1 + round(4 * cover)),
    )


# ---------------------------------------------------------------------------------------------
# DRIFT


def drift_hyde(template: str, question: str) -> str:
    """A hypothetical answer with the template's shape, made only of the question's own words."""
    topic = topic_phrase(question)
    if is_cjk_text(question):
        return f"# {topic}\n\n本报告讨论：{question.strip()}\n\n## {topic}\n\n关于{topic}的要点。"
    query, _broad = question_terms(question)
    in_topic = topic.casefold().split()
    words = [w for w in surface_words(question, query) if w.casefold() not in in_topic]
    headings = [ln for ln in template.split("\n") if ln.lstrip().startswith("## ")]
    n_sections = max(1, min(len(words) or 1, len(headings) or 3))
    title = " ".join(w[:1].upper() + w[1:] for w in topic.split())
    parts = [f"# {title}", "", f"This report addresses the question: {question.strip()}"]
    for word in words[:n_sections] or [topic]:
        heading = word[:1].upper() + word[1:]
        parts += [
            "",
            f"## {heading}" if word != topic else f"## {title}",
            f"{heading} in the context of {topic}.",
        ]
    return "\n".join(parts)


_PRIMER_TEMPLATES = (
    "What role does {e} play with respect to {t}?",
    "How is {e} connected to {t}?",
    "What happens to {e} in relation to {t}?",
)
_PRIMER_TEMPLATES_ZH = ("{e}在{t}中扮演什么角色？", "{e}与{t}有什么联系？", "{e}在{t}方面发生了什么？")


def _ranked_names(cands: list[Candidate], relevant: list[Candidate], question: str) -> list[str]:
    """Names found in report text, weighted by how often they occur in question-relevant sentences.

    Names sharing a word with a name in the question are skipped ("Ebenezer Scrooge" when the
    question already says "Scrooge"): a follow-up should reach for something new.
    """
    exclude = question.casefold()
    asked_words = {w for n in capitalised_phrases(question) for w in n.casefold().split() if len(w) > 2}
    weights: dict[str, float] = {}
    surface: dict[str, str] = {}
    top = max((c.score for c in relevant), default=1.0) or 1.0
    relevance = {c.order: 1.0 + 4.0 * c.score / top for c in relevant}
    for c in cands:
        for name in capitalised_phrases(c.text):
            key = name.casefold()
            if mentions(exclude, name) or key in exclude or asked_words & set(key.split()):
                continue
            # Names in question-relevant sentences dominate; elsewhere they only break ties.
            weights[key] = weights.get(key, 0.0) + relevance.get(c.order, 0.2)
            surface.setdefault(key, name)
    first = {k: i for i, k in enumerate(surface)}
    # A short name inside a longer one ("Present" in "Ghost of Christmas Present", "Scrooge" in
    # "Ebenezer Scrooge") is folded into the heaviest longer name: one question per entity, and
    # list fragments ("Past, Present, and Yet to Come") never become questions of their own.
    for key in sorted(first, key=lambda k: (len(k.split()), first[k])):
        words = set(key.split())
        hosts = [h for h in weights if h != key and words < set(h.split())]
        if hosts:
            host = max(hosts, key=lambda h: (weights[h], -first[h]))
            weights[host] += weights.pop(key)
    return [surface[k] for k in sorted(weights, key=lambda k: (-weights[k], first[k]))]


def drift_primer(tables: ContextTables, question: str) -> PrimerResponse:
    zh = is_cjk_text(question)
    cands = gather_candidates(tables, ("Reports",))
    entities = capitalised_phrases(question)
    relevant = select_sentences(rank_candidates(cands, question, entities), 6)
    if not answerable(question, [t for c in cands for t in c.terms]):
        relevant = []
    query, broad = question_terms(question)
    heading = f"## {question.strip() or 'Question'}"
    if relevant:
        body = "\n".join(f"- {cite(c.text, c.refs)}" for c in relevant)
        score = (
            50 if broad else min(100, round(100 * coverage(query, [t for c in relevant for t in c.terms])))
        )
    else:
        body = (
            "提供的报告没有直接回答这个问题。"
            if zh
            else "The supplied reports do not address this question directly."
        )
        score = 0
    topic = topic_phrase(question)
    templates = _PRIMER_TEMPLATES_ZH if zh else _PRIMER_TEMPLATES
    followups = [
        templates[i % len(templates)].format(e=name, t=topic)
        for i, name in enumerate(_ranked_names(cands, relevant, question)[:8])
    ]
    for row in _reports(tables):
        if len(followups) >= 5:
            break
        title = row.title.strip()
        if title:
            followups.append(f"{title}的关键细节是什么？" if zh else f"What are the key details of {title}?")
    for word in surface_words(question, query) or [topic]:
        if len(followups) >= 5:
            break
        followups.append(
            f"数据中关于{word}有哪些证据？" if zh else f"What evidence in the data relates to {word}?"
        )
    # Fewer than five only when the fold names nothing and the question has few words: better an
    # honest short list than invented filler questions.
    return PrimerResponse(
        intermediate_answer=f"{heading}\n\n{body}",
        score=score,
        follow_up_queries=list(dict.fromkeys(followups)),
    )


def _words(name: str) -> set[str]:
    return {w for w in re.findall(r"[^\W_]+", name.casefold()) if len(w) > 2}


def _related_entities(tables: ContextTables, anchors: list[str], covered: str) -> list[tuple[str, str | None]]:
    """(entity, anchor it relates to) from the Relationships table first, then other Entities rows."""
    out: dict[str, str | None] = {}
    folded_anchors = {a.casefold(): a for a in anchors}
    # Other entities must bring a new name: "Mr. Scrooge" or "Scrooge's Office" add nothing when
    # Scrooge is already being asked about (a relative of the anchor, "Mrs. Cratchit" beside
    # "Bob Cratchit", is still new).
    covered_words = {w for w in re.findall(r"[^\W_]+", covered) if len(w) > 2}
    if tables.relationships is not None:
        for rel in tables.relationships.rows:
            src, tgt = rel.source.strip(), rel.target.strip()
            for here, there in ((src, tgt), (tgt, src)):
                if here.casefold() not in folded_anchors or not there or mentions(covered, there):
                    continue
                if " and " in there.casefold():
                    continue  # "SCROOGE AND MARLEY" (the firm) would read as a compound question
                anchor_words = set(re.findall(r"[^\W_]+", here.casefold()))
                if _words(there) & (covered_words - anchor_words):
                    continue
                out.setdefault(there, folded_anchors[here.casefold()])
    for entity in [] if tables.entities is None else tables.entities.rows:
        name = entity.title.strip()
        if (
            name
            and " and " not in name.casefold()
            and not mentions(covered, name)
            and not _words(name) & covered_words
        ):
            out.setdefault(name, None)
    return list(out.items())


def drift_followup(
    context: TaskContext, tokenizer: Tokenizer, *, max_sentences: int, max_tokens: int | None
) -> FollowupResponse:
    question, tables = context.question, context.tables
    zh = is_cjk_text(question)
    text, chosen = compose_answer(
        tables, question, tokenizer, max_sentences=max_sentences, max_tokens=max_tokens,
        response_type=context.response_type,
    )
    overall = context.overall_question or question
    overall_query, _ = question_terms(overall)
    score = (
        0
        if not chosen
        else min(100, round(10 + 90 * coverage(overall_query, [t for c in chosen for t in c.terms])))
    )
    k = max(0, min(20, 3 if context.max_followups is None else context.max_followups))
    anchors = question_entities(tables, f"{question} {overall}")
    covered = f"{question} {overall}".casefold()
    topic = topic_phrase(overall)
    followups = []
    for name, anchor in _related_entities(tables, anchors, covered)[:k]:
        shown, anchor_shown = display_name(name), display_name(anchor) if anchor else ""
        if zh:
            followups.append(
                f"{shown}与{anchor_shown}是什么关系？" if anchor else f"{shown}在{topic}中扮演什么角色？"
            )
        else:
            followups.append(
                f"What is the relationship between {shown} and {anchor_shown}?"
                if anchor
                else f"What role does {shown} play with respect to {topic}?"
            )
    return FollowupResponse(response=text, score=score, follow_up_queries=followups)
