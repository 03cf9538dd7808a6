"""Question-side tasks of the offline model: candidate questions, standalone rewrites, routing cues."""

from __future__ import annotations

import re

from engines.models.offline_answer import question_entities
from engines.models.offline_text import CJK_RE, capitalised_phrases, display_name, is_cjk_text, quoted_terms
from engines.models.schemas import QuestionList, RewriteResponse, RouteResponse
from shared_context.tables import ContextTables

# ---------------------------------------------------------------------------------------------
# Candidate questions

_TYPE_TEMPLATES = {
    "person": "What role does {e} play in the events described?",
    "geo": "What happens at {e}?",
    "location": "What happens at {e}?",
    "organization": "What does {e} do, according to the records?",
    "event": "What happens during {e}?",
}
_UNTYPED_TEMPLATES = (
    "What is the significance of {e}?",
    "What role does {e} play in the events described?",
    "What is known about {e}?",
)
_GROUP_TEMPLATES = (
    "How are {j} connected?",
    "What events involve {j}?",
    "How does the relationship between {j} change over time?",
)


def _distinct(names: list[str]) -> list[str]:
    """Drop a name whose words are a subset of an earlier one's ('Tim' after 'Tiny Tim')."""
    kept: list[str] = []
    for name in names:
        words = set(name.casefold().split())
        if not any(words <= set(k.casefold().split()) or set(k.casefold().split()) <= words for k in kept):
            kept.append(name)
    return kept


def _entity_rows(tables: ContextTables) -> list[tuple[str, str]]:
    """(name, type) of every entity row, in table order (the builder's relevance order)."""
    rows = [] if tables.entities is None else tables.entities.rows
    return [(r.title, r.type) for r in rows if r.title]


def _pairs(tables: ContextTables) -> list[tuple[str, str]]:
    rows = [] if tables.relationships is None else tables.relationships.rows
    return [(r.source, r.target) for r in rows if r.source and r.target]


def _claim_subjects(tables: ContextTables) -> list[tuple[str, str]]:
    rows = [] if tables.claims is None else tables.claims.rows
    return [(r.subject, r.type) for r in rows if r.subject]


def _source_text(tables: ContextTables) -> str:
    return "" if tables.sources is None else "\n".join(r.text for r in tables.sources.rows)


def is_fragment(name: str, text: str) -> bool:
    """A name that is not a usable subject: one or two characters, or a single word the source text
    uses mostly in lower case ("Key" from "Key findings ...": a common word an extractor capitalised)."""
    if CJK_RE.search(name):
        return False  # two CJK characters are a whole name (马利), and CJK has no letter case to judge by
    if len(name.strip()) <= 2:
        return True
    if len(name.split()) != 1:
        return False
    low = name.lower()
    lower_uses = len(re.findall(rf"(?<![^\W_]){re.escape(low)}(?![^\W_])", text))
    all_uses = len(re.findall(rf"(?<![^\W_]){re.escape(low)}(?![^\W_])", text, re.IGNORECASE))
    return lower_uses > 0 and lower_uses * 2 >= all_uses


def _interleave(*streams: list[str]) -> list[str]:
    out: list[str] = []
    longest = max((len(s) for s in streams), default=0)
    for i in range(longest):
        out.extend(s[i] for s in streams if i < len(s))
    return out


def generate_questions(tables: ContextTables, question: str, count: int | None) -> QuestionList:
    n = max(1, min(50, 5 if count is None else count))
    zh = is_cjk_text(question) or is_cjk_text(" ".join(e for e, _ in _entity_rows(tables)[:5]))
    asked = question_entities(tables, question) if question else []
    types = {display_name(e): t.lower() for e, t in _entity_rows(tables)}
    source = _source_text(tables)
    names = [n for n in _distinct([*types, *(display_name(x) for pair in _pairs(tables) for x in pair)])
             if not is_fragment(n, source)]
    entities = [(e, types.get(e, "")) for e in names]
    unordered: dict[frozenset[str], tuple[str, str]] = {}
    for a, b in ((display_name(a), display_name(b)) for a, b in _pairs(tables)):
        if a in names and b in names and a != b:
            unordered.setdefault(frozenset((a, b)), (a, b))  # A-B and B-A are one relationship question
    pairs = list(unordered.values())
    claims = [(display_name(e), t.lower().replace("_", " ")) for e, t in _claim_subjects(tables)
              if t and not is_fragment(display_name(e), source)]
    if len(asked) >= 2:
        # The user's question names several entities: every candidate must name all of them.
        shown = [display_name(a) for a in asked]
        joined = "、".join(shown) if zh else " and ".join(shown)
        group = (
            [
                f"{joined}之间有什么联系？",
                f"哪些事件同时涉及{joined}？",
                f"{joined}之间的关系如何随时间变化？",
            ]
            if zh
            else [t.format(j=joined) for t in _GROUP_TEMPLATES]
        )
        others = [
            e for e in names if not any(set(e.casefold().split()) & set(s.casefold().split()) for s in shown)
        ]
        role = [
            f"{e}在{joined}之间起什么作用？" if zh else f"What role does {e} play for {joined}?"
            for e in others
        ]
        candidates = group[:1] + _interleave(role, group[1:])
    else:
        if zh:
            ent_q = [f"{e}在所描述的事件中起什么作用？" for e, _ in entities]
            pair_q = [f"{a}和{b}之间是什么关系？" for a, b in pairs]
            claim_q = [f"关于{e}的{t}有哪些已知信息？" for e, t in claims]
            broad = [f"连接{'、'.join(names[:3])}的主要主题是什么？"] if len(names) >= 3 else []
        else:
            ent_q = [
                _TYPE_TEMPLATES.get(t, _UNTYPED_TEMPLATES[i % len(_UNTYPED_TEMPLATES)]).format(e=e)
                for i, (e, t) in enumerate(entities)
            ]
            pair_q = [f"What is the relationship between {a} and {b}?" for a, b in pairs if a != b]
            claim_q = [f"What do the records claim about {e} concerning {t}?" for e, t in claims]
            broad = []
            if len(names) >= 3:
                broad.append(f"What are the main themes connecting {names[0]}, {names[1]} and {names[2]}?")
            if len(names) >= 2:
                broad.append(f"How do {names[0]} and {names[1]} influence each other?")
        mixed = _interleave(ent_q, pair_q, claim_q)
        candidates = mixed[:2] + broad[:1] + mixed[2:] + broad[1:]
    seen: dict[str, str] = {}
    for q in candidates:
        seen.setdefault(q.casefold(), q)
    return QuestionList(questions=list(seen.values())[:n])


# ---------------------------------------------------------------------------------------------
# Rewrite

_ELLIPSIS_EN = re.compile(
    r"^\s*(?:and\s+)?(?:what|how)\s+about\s+(.+?)\s*[?.!]*\s*$|^\s*and\s+(.+?)\s*\?\s*$", re.IGNORECASE
)
_ELLIPSIS_ZH = re.compile(r"^\s*(?:那么?|还有)?(.+?)呢\s*[？?]?\s*$")
_POSSESSIVE = re.compile(r"\b(his|her|its|their)\b", re.IGNORECASE)
# "it" in "is it true that ..." / "it is possible that ..." refers to nothing: leave it alone.
_PERSONAL = re.compile(
    r"\b(?:he|she|him|they|them|it(?!\s+(?:is\s+|was\s+)?(?:true|possible|likely|known|the case)\b))\b",
    re.IGNORECASE,
)
_MORE_RE = re.compile(
    r"^\s*(?:tell me more|more details|go on|elaborate|explain more|continue)\s*[.!?]*\s*$", re.I
)
_DEMONSTRATIVE_TARGET = re.compile(r"^(?:that|this|these|those|the same)\b", re.IGNORECASE)
_DEMONSTRATIVE = re.compile(r"\b(that|this)(?=\s*[?.!,]|\s*$)", re.IGNORECASE)
_THERE = re.compile(r"\bthere(?=\s*[?.!,]|\s*$)", re.IGNORECASE)
_ZH_PRONOUNS = re.compile(r"他们|她们|它们|他|她|它|这件事|那件事|这个|那个")
_ZH_QUESTION_BITS = re.compile(
    r"是谁|谁是|是什么|什么是|为什么|怎么样|怎么|如何|哪些|什么|请|介绍一下|介绍|告诉我|关于|吗|呢|[？?。！!，,\s]"
)


def _subject(text: str) -> str | None:
    """The named subject of an earlier user turn: a quoted term, else its first capitalised phrase."""
    quoted = quoted_terms(text)
    if quoted:
        return quoted[0]
    names = capitalised_phrases(text)
    if names:
        return names[0]
    if is_cjk_text(text):
        chunks = [c for c in _ZH_QUESTION_BITS.split(text) if len(c) >= 2]
        return chunks[0] if chunks else None
    return None


_SUBJECT_PRONOUN = re.compile(r"\b(?:he|she|they)\b", re.IGNORECASE)
_OBJECT_PRONOUN = re.compile(r"\b(?:him|them)\b|\bher\b(?=\s*(?:[?.!,;]|$|about|to|for|with|from|at|on|of|"
                             r"that|and|or|if|when|why|how|again)\b|\s*[?.!,;]|\s*$)", re.IGNORECASE)


_ZH_JOINERS = re.compile(r"[和与跟及、]|他们|她们|它们|[他她它]")


def _zh_names(text: str) -> list[str]:
    """Chinese text's candidate names in order: what is left between question words, joiners and pronouns."""
    if not is_cjk_text(text):
        return []
    chunks = (c for part in _ZH_QUESTION_BITS.split(text) for c in _ZH_JOINERS.split(part))
    return [c for c in chunks if len(c) >= 2]


def _antecedents(previous: str, later: list[str]) -> list[str]:
    """Who a follow-up's pronouns may point to: the names of the earlier question (its subject first), then
    names from the turns after it (an answer), each once."""
    names = [*quoted_terms(previous), *capitalised_phrases(previous), *_zh_names(previous)]
    for turn in later:
        names += capitalised_phrases(turn) + _zh_names(turn)
    out: list[str] = []
    for name in names:
        key = name.casefold()
        if not any(key in k.casefold() or k.casefold() in key for k in out):
            out.append(name)
    return out


def _resolve_pronouns(question: str, subject: str, others: list[str] | None = None) -> str:
    """Replace the pronouns of a follow-up by what they refer to.

    The subject pronoun (he/she/they) and possessives point to `subject`. An object pronoun (him/her/them)
    in a question whose subject is already that antecedent cannot point to it too ("What does he warn him
    about?": a pronoun object is never its own clause's subject), so it takes the next antecedent in `others`;
    with none, it stays as written rather than making the question about the subject twice. Chinese: the
    first 他/她/它 is the subject, a later one the next antecedent.
    """
    others = [o for o in (others or []) if o.casefold() != subject.casefold()]
    if is_cjk_text(question):
        seen = [0]

        def zh(match: re.Match[str]) -> str:
            seen[0] += 1
            if seen[0] == 1 or match.group(0) in ("这件事", "那件事", "这个", "那个"):
                return subject
            return others[0] if others else match.group(0)

        return _ZH_PRONOUNS.sub(zh, question)
    held: list[str] = []  # object pronouns set aside while the subject's pronouns are replaced

    def hold(match: re.Match[str]) -> str:
        held.append(others[0] if others else match.group(0))
        return f"\x00{len(held) - 1}\x00"

    if _SUBJECT_PRONOUN.search(question) or subject.casefold() in question.casefold():
        question = _OBJECT_PRONOUN.sub(hold, question)
    out = _POSSESSIVE.sub(lambda _m: f"{subject}'s", question)
    out = _PERSONAL.sub(subject, out)
    out = _DEMONSTRATIVE.sub(subject, out)
    out = _THERE.sub(f"in {subject}", out)
    return re.sub(r"\x00(\d+)\x00", lambda m: held[int(m.group(1))], out)


def _replace_name(previous: str, target: str, zh: bool) -> str | None:
    """Put `target` where the previous question named the thing it replaces.

    The replaced name is the one sharing a word with the target, else the last one named
    ("What did Scrooge see with the Ghost of Christmas Past?" + "what about the second spirit?").
    """
    names = [n for n in capitalised_phrases(previous) if n in previous]
    if zh or not names:
        return None
    target_words = {w.casefold() for w in re.findall(r"[^\W_]+", target) if len(w) > 2}
    sharing = [n for n in names if target_words & {w.casefold() for w in n.split()}]
    name = sharing[0] if sharing else names[-1]
    pos = previous.find(name)
    before, after = previous[:pos], previous[pos + len(name) :]
    if before.lower().endswith("the ") and target.lower().startswith("the "):
        before = before[:-4]
    return before + target + after


def rewrite(tables: ContextTables, question: str) -> RewriteResponse:
    """Make the last user message standalone by substituting the subject of earlier user turns."""
    turns = [] if tables.history is None else tables.history.rows
    earlier = [t.content for t in turns if t.role == "user" and t.content.strip() != question.strip()]
    previous, subject = None, None
    for turn in reversed(earlier):
        subject = _subject(turn)
        if subject:
            previous = turn
            break
    if not subject or previous is None:
        return RewriteResponse(question=question)
    contents = [t.content for t in turns]  # every message of the conversation, answers included
    after = contents[contents.index(previous) + 1 :] if previous in contents else []
    others = _antecedents(previous, [t for t in after if t.strip() != question.strip()])
    zh = is_cjk_text(question)
    if not zh and _MORE_RE.match(question):
        return RewriteResponse(question=f"Tell me more about {subject}.")
    ellipsis = (_ELLIPSIS_ZH if zh else _ELLIPSIS_EN).match(question)
    if not ellipsis:
        return RewriteResponse(question=_resolve_pronouns(question, subject, others))
    target = next(g for g in ellipsis.groups() if g)
    if not zh and _DEMONSTRATIVE_TARGET.match(target):
        return RewriteResponse(question=f"What about {subject}?")  # "that project" is the subject itself
    target = _resolve_pronouns(target, subject)
    # "What about his nephew?" after "Who is Scrooge?" -> "Who is Scrooge's nephew?"
    replaced = _replace_name(previous, target, zh)
    if replaced is not None:
        return RewriteResponse(question=replaced)
    if subject in previous:
        pos = previous.find(subject)
        return RewriteResponse(question=previous[:pos] + target + previous[pos + len(subject) :])
    return RewriteResponse(question=previous.rstrip("?？ ") + (f"，{target}？" if zh else f", and {target}?"))


# ---------------------------------------------------------------------------------------------
# Route (only a fallback: the router's classifier decides normally)

_GLOBAL_CUES = (
    r"\b(main|key|major|overall|common|recurring|central)\s+(themes?|topics?|ideas?|trends?|issues?|points?)\b",
    r"\bsummar(y|ise|ize)\b",
    r"\boverview\b",
    r"\bacross (the|all)\b",
    r"\b(whole|entire) (story|dataset|corpus|book|collection)\b",
    r"\bmost (common|frequent|important)\b",
    r"\b(kinds|types) of\b",
    r"\bhistory of\b",
    r"\btrends?\b",
    r"主题|总体|整体|概括|总结|概述|趋势",
)
_DRIFT_CUES = (
    r"\bcompar(e|ison|ing)\b",
    r"\bdiffer(ence|ent|s)?\b",
    r"\bversus\b|\bvs\.?\b",
    r"\brelationship between\b",
    r"\bwhy\b",
    r"\b(cause|caused|lead to|led to|impact|influence|effect)s?\b",
    r"比较|区别|为什么|影响|原因|关系",
)


def route(question: str) -> RouteResponse:
    text = question.casefold()
    names = capitalised_phrases(question)
    for cue in _DRIFT_CUES:
        if re.search(cue, text):
            return RouteResponse(
                engine="drift", reason=f"offline heuristic: comparison or causal cue ({cue})"
            )
    if len(names) >= 2:
        return RouteResponse(
            engine="drift", reason=f"offline heuristic: several entities named ({', '.join(names[:3])})"
        )
    for cue in _GLOBAL_CUES:
        # one capitalised word is usually the sentence's first ("Summarize ..."), not a named entity
        if re.search(cue, text) and len(names) <= 1:
            return RouteResponse(engine="global", reason=f"offline heuristic: corpus-wide cue ({cue})")
    return RouteResponse(engine="local", reason="offline heuristic: a specific question about named things")
