"""Question generation: candidate next questions from the local context of the conversation so far.

As GraphRAG's `LocalQuestionGen`: the last question drives the context (earlier ones are history; with
no history the builder falls back to the best-connected entities). Unlike it, the output is a clean list
(no bullets or blank lines), every call is counted, and some suggestions are corpus-wide: one in four (at
least one when four or more are asked, or two or more with no history) comes from the titles of the
index's top-level community reports, so a user also sees the questions global search is for.

Each question is labelled by the `labeller` the caller injects (the router passes its classifier; engines
never import the router). Without one, questions carry no label and a note says so.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Protocol

from engines import prompts
from engines.base import ConfigLike
from engines.config import GraphrouteConfig, QuestionGenConfig
from engines.local import context_records, link_vector, local_builder
from engines.models.base import Embedder, Message, Usage
from engines.models.factory import ModelLike
from engines.models.offline_text import is_cjk_text
from engines.models.task_context import TaskContext
from engines.plan import Question, normalise_history
from engines.run import ModelSet, QueryRun
from engines.schemas import QuestionList
from shared_context.boilerplate_marks import boilerplate_weights

if TYPE_CHECKING:
    from engines.models.base import JSONObject
    from shared_context.index import Index

_BULLET = re.compile(r"^\s*(?:[-*•]+|\d+[.)]|Q\d*[:.])\s*")
NO_HISTORY_PROMPT = "What are the most important questions to ask about this data?"
NO_LABELLER_NOTE = "no route labeller was given, so the questions carry no engine label"
CORPUS_WIDE_EN = "What is the overall picture of {title} across the whole corpus?"
CORPUS_WIDE_ZH = "在整个语料中，关于{title}的总体情况是什么？"
CORPUS_WIDE_FALLBACK = "What are the main themes across the whole corpus?"
_MAX_TITLE_WORDS = 12  # a longer title reads as a sentence, not a topic

class RouteLabel(Protocol):
    """What a labeller says of a question: the engine it would take and how sure it is."""

    @property
    def engine(self) -> str: ...

    @property
    def confidence(self) -> float: ...


Labeller = Callable[[str], RouteLabel]  # question -> its label (the router passes its classifier)


@dataclass(frozen=True)
class GeneratedQuestion:
    text: str
    engine: str | None = None  # "local" | "global" | "drift" as the router would route it
    confidence: float | None = None


@dataclass
class QuestionResult:
    questions: list[GeneratedQuestion]
    usage: Usage = field(default_factory=Usage)
    context_text: str = ""
    context_records: dict[str, list[dict[str, object]]] = field(default_factory=dict)
    model: str = ""
    offline: bool = False
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # e.g. why questions carry no engine label

    def to_dict(self) -> JSONObject:
        return {"questions": [asdict(q) for q in self.questions], "usage": self.usage.to_dict(),
                "context_text": self.context_text, "model": self.model, "offline": self.offline,
                "seconds": self.seconds, "notes": list(self.notes)}


def clean_questions(raw: Sequence[str], n: int) -> list[str]:
    """Strip bullets/numbering/quotes, drop blanks and duplicates, keep at most n."""
    out: list[str] = []
    seen: set[str] = set()
    for item in raw:
        for line in str(item).splitlines():
            text = _BULLET.sub("", line).strip().strip('"“”\'').strip()
            key = text.lower()
            if text and key not in seen:
                seen.add(key)
                out.append(text)
    return out[:n]


def corpus_wide_count(n: int, has_history: bool) -> int:
    """How many of `n` suggestions are corpus-wide (see the module docstring)."""
    if n >= 4:
        return max(1, n // 4)
    return 1 if n >= 2 and not has_history else 0


def corpus_wide_questions(index: Index, k: int) -> list[str]:
    """`k` corpus-wide questions from the top-level reports' titles, best-ranked first."""
    if k < 1:
        return []
    reports = list(index.community_reports)
    if not reports:
        return [CORPUS_WIDE_FALLBACK][:k]
    top = min(r.level for r in reports)
    weights = boilerplate_weights(index)  # reports built mostly from licence text rank low

    def weight(pos: int) -> float:
        return 1.0 if weights is None else float(weights.reports[pos])

    ranked = [
        reports[pos]
        for pos in sorted(
            (pos for pos, r in enumerate(reports) if r.level == top),
            key=lambda pos: (-float(reports[pos].rank or 0.0) * weight(pos), str(reports[pos].short_id)),
        )
    ]
    out: list[str] = []
    for report in ranked:
        title = " ".join(str(report.title).split()).rstrip(".?!。？")
        if not title or len(title.split()) > _MAX_TITLE_WORDS:
            continue
        out.append((CORPUS_WIDE_ZH if is_cjk_text(title) else CORPUS_WIDE_EN).format(title=title))
        if len(out) == k:
            break
    return out or [CORPUS_WIDE_FALLBACK][:k]


class QuestionGenerator:
    def __init__(self, index: Index, model: ModelLike = None, *, embedder: Embedder | None = None,
                 config: ConfigLike = None,
                 labeller: Labeller | None = None):
        self.index = index
        self.labeller = labeller
        full = config if isinstance(config, GraphrouteConfig) else None
        if config is None:
            self.config = QuestionGenConfig()
        elif isinstance(config, GraphrouteConfig):
            self.config = config.questions
        elif isinstance(config, QuestionGenConfig):
            self.config = config
        else:
            raise TypeError(f"QuestionGenerator config must be a QuestionGenConfig or GraphrouteConfig, "
                            f"got {type(config).__name__}")
        self.models = ModelSet(index, model, embedder, full.models if full is not None else None)
        self.builder = local_builder(index, self.config.local_context())

    async def generate(self, history: Sequence[str] | Sequence[Message] | None = None, n: int | None = None
                       ) -> QuestionResult:
        count = self.config.n if n is None else n
        if count < 1:
            raise ValueError("n must be >= 1")
        messages = normalise_history(history)
        user_turns = [m for m in messages if m["role"] == "user"]
        question = user_turns[-1]["content"].strip() if user_turns else ""
        earlier = messages[: messages.index(user_turns[-1])] if user_turns else []

        async def ignore(_: object) -> None:
            return None

        wide = corpus_wide_count(count, bool(user_turns))
        count -= wide
        # the last user turn as it is (it may be empty: the index's own overview questions are then asked for)
        run = QueryRun("questions", Question(text=question, link_text=question), self.models, ignore)
        qv = await link_vector(run, self.index, question) if question else None
        with run.timed("build_context"):
            ctx = await asyncio.to_thread(self.builder.build, question, earlier or None, query_vector=qv)
        system = prompts.template(self.config.prompt, "questions").fill(
            question_count=str(count), context_data=ctx.text)
        chat: list[Message] = [{"role": "system", "content": system},
                               {"role": "user", "content": question or NO_HISTORY_PROMPT}]
        with run.timed("answer"):
            context = TaskContext(question or NO_HISTORY_PROMPT, ctx.tables, question_count=count)
            parsed = await run.complete_json("answer", "questions", chat, QuestionList,
                                             temperature=self.config.temperature, context=context)
        label, note = self.labeller, (None if self.labeller is not None else NO_LABELLER_NOTE)
        out: list[GeneratedQuestion] = []
        texts = clean_questions(parsed.questions, count)
        seen = {t.casefold() for t in texts}
        texts += [q for q in corpus_wide_questions(self.index, wide) if q.casefold() not in seen]
        for text in texts:
            decision = None
            if label is not None:
                try:
                    decision = label(text)
                except Exception as err:  # labels are optional: a classifier that cannot load must not fail this
                    label, note = None, f"router classifier unavailable: {err}"
            out.append(GeneratedQuestion(text, decision.engine if decision is not None else None,
                                         decision.confidence if decision is not None else None))
        answer_model = self.models.chat("answer")

        return QuestionResult(out, run.usage, ctx.text, context_records(ctx), answer_model.name,
                              answer_model.offline, time.perf_counter() - run.started,
                              [note] if note else [])
