"""Prompts: the built-in template of every stage, and how a template is read, checked and filled.

Rules every built-in template keeps (the offline model and humans rely on them): the question is the last
user message; data (context tables or analyst blocks) sits in the system message; scalar inputs are
single `Key: value` lines; the instruction text never contains lines shaped like a table title
(five dashes, a name, five dashes) or an analyst header, so only real data has that shape.
`template(configured, stage)` is the prompt a stage uses: the one configured (graphroute.toml or the GraphRAG
project's settings), else the built-in one here.

A template is text with slots written `{name}`; a literal brace is doubled (`{{`, `}}`), as in GraphRAG's
prompt files, so those files load unchanged. Filling never uses `str.format`: only plain slot names are
recognised and each is replaced by its value as plain text, so a prompt file cannot reach an attribute or an
item of anything (`{x.__class__}`, `{x[0]}` and format specs are refused when the template is loaded), and
a value that itself contains braces (context tables quote documents) is never parsed again.

Each stage declares the slots it fills (`STAGES`): a template missing a required slot, or using a slot the
stage does not fill, is refused when it is loaded with an error naming the file and the slot.
"""


from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo, model_validator

from engines.models.base import INSUFFICIENT_INSTRUCTION
from engines.prompt_files import PromptFileError, inside, read_prompt_file

# A prompt file larger than this is a mistake (a context dump, a binary), not a prompt.
MAX_PROMPT_CHARS = 200_000

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|\{|\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class StageSlots:
    """The slots one stage fills. Each entry of `required` is a group of names meaning the same value
    (GraphRAG's name and ours): the template must use at least one name of every group."""

    label: str
    required: tuple[tuple[str, ...], ...] = ()
    optional: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for group in self.required for n in group) + self.optional


STAGES: dict[str, StageSlots] = {
    "local": StageSlots("local search answer", (("context_data",), ("response_type",)), ("citation_rules",)),
    "basic": StageSlots("basic search answer", (("context_data",), ("response_type",))),
    "global_map": StageSlots("global search map", (("context_data",),), ("max_length",)),
    "global_reduce": StageSlots(
        "global search reduce", (("report_data",), ("response_type",)), ("max_length", "general_knowledge")
    ),
    "global_knowledge": StageSlots("global search general-knowledge instruction"),
    "rate": StageSlots("community rating (dynamic community selection)", (("context_data",),)),
    "drift_hyde": StageSlots("DRIFT hypothetical answer", (("template",),)),
    "drift_primer": StageSlots("DRIFT primer", (("context_data", "community_reports"),), ("query",)),
    "drift_followup": StageSlots(
        "DRIFT follow-up", (("context_data",), ("global_query",)), ("response_type", "k_followups", "followups")
    ),
    "drift_reduce": StageSlots("DRIFT reduce", (("report_data", "context_data"), ("response_type",))),
    "questions": StageSlots("question generation", (("context_data",), ("question_count",))),
    "rewrite": StageSlots("follow-up rewrite", (("history",),)),
}


class PromptError(ValueError):
    """A prompt template is unreadable, malformed or has the wrong slots; the message names its source."""


def _braces(names: tuple[str, ...] | list[str]) -> str:
    return ", ".join("{" + n + "}" for n in names) or "none"


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


@functools.lru_cache(maxsize=256)
def parse(text: str, source: str = "prompt") -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(literal pieces, slot names): pieces[0] slot[0] pieces[1] slot[1] ... pieces[-1]. PromptError on a
    single brace or a field that is not a plain name."""
    pieces: list[str] = []
    slots: list[str] = []
    current: list[str] = []
    last = 0
    for m in _TOKEN.finditer(text):
        current.append(text[last:m.start()])
        last = m.end()
        token = m.group(0)
        if token in ("{{", "}}"):
            current.append(token[0])
            continue
        line = _line_of(text, m.start())
        if token in ("{", "}"):
            raise PromptError(
                f"{source}: line {line}: a single {token!r} (write {token * 2!r} for a literal brace)"
            )
        name = m.group(1)
        if not _NAME.fullmatch(name):
            raise PromptError(
                f"{source}: line {line}: {token} is not a slot: a slot is a plain name such as {{context_data}} "
                "(attribute, index and format fields are not allowed; double the braces for literal text)"
            )
        pieces.append("".join(current))
        current = []
        slots.append(name)
    current.append(text[last:])
    pieces.append("".join(current))
    return tuple(pieces), tuple(slots)


class PromptTemplate(BaseModel):
    """One stage's prompt: its text, where it came from, and its checked slots."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    stage: str
    text: str
    source: str = "built-in"

    @model_validator(mode="after")
    def _check(self) -> PromptTemplate:
        spec = STAGES.get(self.stage)
        if spec is None:
            raise PromptError(f"unknown prompt stage {self.stage!r} (known: {', '.join(STAGES)})")
        if len(self.text) > MAX_PROMPT_CHARS:
            raise PromptError(f"{self.source}: {len(self.text):,} characters; a prompt holds at most {MAX_PROMPT_CHARS:,}")
        _, slots = parse(self.text, self.source)
        for name in slots:
            if name not in spec.names:
                raise PromptError(
                    f"{self.source}: unknown slot {{{name}}} in the {spec.label} prompt "
                    f"(its slots: {_braces(spec.names)})"
                )
        for group in spec.required:
            if not any(n in slots for n in group):
                need = " or ".join("{" + n + "}" for n in group)
                raise PromptError(
                    f"{self.source}: the {spec.label} prompt has no {need} slot "
                    f"(required: {', '.join(' or '.join('{' + n + '}' for n in g) for g in spec.required)})"
                )
        return self

    @classmethod
    def checked(cls, stage: str, text: str, source: str = "built-in") -> PromptTemplate:
        """The template, or PromptError with the plain message (not pydantic's wrapping)."""
        try:
            return cls(stage=stage, text=text, source=source)
        except ValidationError as err:
            first = err.errors()[0]
            cause = (first.get("ctx") or {}).get("error")
            raise PromptError(str(cause) if cause is not None else f"{source}: {first['msg']}") from None

    @classmethod
    def from_file(cls, stage: str, path: str | Path) -> PromptTemplate:
        file = Path(path)
        try:  # a regular file, read no further than the limit (prompt_files)
            raw = read_prompt_file(file, 4 * MAX_PROMPT_CHARS)
        except PromptFileError as exc:
            raise PromptError(str(exc)) from None
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise PromptError(f"{file}: the prompt file is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        return cls.checked(stage, text, str(file))

    @property
    def slots(self) -> tuple[str, ...]:
        return parse(self.text, self.source)[1]

    def has_slot(self, name: str) -> bool:
        return name in self.slots

    def fill(self, **values: str) -> str:
        """The prompt with every slot replaced by its value (plain text, inserted once). A slot without a
        value is a bug in the engine that fills it: KeyError names it."""
        pieces, slots = parse(self.text, self.source)
        out = [pieces[0]]
        for name, piece in zip(slots, pieces[1:], strict=True):
            out.append(str(values[name]))
            out.append(piece)
        return "".join(out)

    def around(self, slot: str, **values: str) -> tuple[str, ...]:
        """The prompt with every slot but `slot` filled: the text between its occurrences, so that
        `value.join(pieces)` equals `fill(slot=value, **values)`. Why: an engine's prompt differs per question
        only in its context, so the rest is filled once, when the engine is built, not for every question."""
        pieces, slots = parse(self.text, self.source)
        out = [pieces[0]]
        for name, piece in zip(slots, pieces[1:], strict=True):
            if name == slot:
                out.append(piece)
            else:
                out[-1] += str(values[name]) + piece
        return tuple(out)

    @property
    def literal_text(self) -> str:
        """The text without its slots (what a cost estimate counts before the context is known)."""
        return "".join(parse(self.text, self.source)[0])


def coerce_prompt(stage: str, value: object, info: ValidationInfo) -> PromptTemplate | None:
    """A prompt setting as written in graphroute.toml or settings.yaml: a file path (relative to the
    configuration file's folder, `base_dir` in the validation context), `{file = "..."}`, or
    `{text = "..."}` for an inline prompt."""
    if value is None or isinstance(value, PromptTemplate):
        if isinstance(value, PromptTemplate) and value.stage != stage:
            raise PromptError(f"{value.source}: a {value.stage} prompt where a {stage} prompt is expected")
        return value
    context = info.context if isinstance(info.context, Mapping) else {}
    base = Path(context.get("base_dir") or ".")
    outside = bool(context.get("allow_prompt_outside"))
    if isinstance(value, Mapping) and set(value) == {"file"} and isinstance(value["file"], str):
        value = value["file"]
    if isinstance(value, str):  # a relative path stays in the configuration's folder; an absolute one is explicit
        try:
            file = inside(base, value, allow_outside=outside or Path(value).expanduser().is_absolute())
        except PromptFileError as exc:
            raise PromptError(str(exc)) from None
        return PromptTemplate.from_file(stage, file)
    if isinstance(value, Mapping):
        keys = set(value)
        if keys == {"text"} and isinstance(value["text"], str):
            return PromptTemplate.checked(stage, value["text"], "inline text")
    raise PromptError('a prompt is a file path, {file = "path"} or {text = "the prompt"}')


def _setting(stage: str) -> BeforeValidator:
    return BeforeValidator(functools.partial(coerce_prompt, stage))


# The type of each prompt setting (None: the built-in prompt below).
LocalPrompt = Annotated[PromptTemplate | None, _setting("local")]
BasicPrompt = Annotated[PromptTemplate | None, _setting("basic")]
MapPrompt = Annotated[PromptTemplate | None, _setting("global_map")]
ReducePrompt = Annotated[PromptTemplate | None, _setting("global_reduce")]
KnowledgePrompt = Annotated[PromptTemplate | None, _setting("global_knowledge")]
RatePrompt = Annotated[PromptTemplate | None, _setting("rate")]
HydePrompt = Annotated[PromptTemplate | None, _setting("drift_hyde")]
PrimerPrompt = Annotated[PromptTemplate | None, _setting("drift_primer")]
FollowupPrompt = Annotated[PromptTemplate | None, _setting("drift_followup")]
DriftReducePrompt = Annotated[PromptTemplate | None, _setting("drift_reduce")]
QuestionsPrompt = Annotated[PromptTemplate | None, _setting("questions")]
RewritePrompt = Annotated[PromptTemplate | None, _setting("rewrite")]

PROMPT_HELP = ('a file path (relative to the configuration file), {file = "path"}, or {text = "..."} inline; '
               "unset: the built-in prompt")


# ---------------------------------------------------------------------------- built-in prompts

CITATION_RULES = """Citations:
- Support every statement with a data reference in this form: [Data: <dataset name> (record ids)].
  Dataset names are the table names: Sources, Entities, Relationships, Reports, Claims.
- Use the values of the id column of each table, never row numbers.
- List at most 5 ids in one reference; if more records support the point, list the 5 most relevant and add "+more".
  Example: "Scrooge refuses to donate to charity [Data: Sources (3, 7); Entities (12); Relationships (40, 41, 42, 43, 44, +more)]."
- Leave out any statement for which the data gives no support."""

LOCAL_ANSWER = """You are a careful research assistant answering a question about the data tables below.

Goal: answer the user's question using only the information in the data tables, at the length and in the format given by the response type. Summarise what the tables say that is relevant, and combine facts from different tables where they agree.
If the tables do not contain the answer, say plainly that the provided data does not answer the question, and say what the data does cover that is closest. """ + INSUFFICIENT_INSTRUCTION + """ Do not make anything up and do not add knowledge from outside the tables.

{citation_rules}

Style the answer in markdown, with sections and commentary as the length and format call for.

Response type: {response_type}

Data tables:

{context_data}
"""

BASIC_ANSWER = """You are a careful research assistant answering a question from the text passages below.

Goal: answer the user's question using only the passages, at the length and in the format given by the response type. If the passages do not contain the answer, say plainly that the provided data does not answer the question. """ + INSUFFICIENT_INSTRUCTION + """ Do not add knowledge from outside the passages.

Citations: support every statement with [Data: Sources (ids)], using the values of the id column, at most 5 ids per reference then "+more". Leave out any statement the passages do not support.

Response type: {response_type}

Data tables:

{context_data}
"""

GLOBAL_MAP = """You are an analyst reading a batch of community reports from a knowledge graph to answer the user's question.

Produce a list of key points that help answer the question. Each point has:
- "description": a comprehensive description of the point, ending with its report references, e.g. "... [Data: Reports (2, 7, 64, +more)]" (at most 5 ids per reference, ids from the id column);
- "score": an integer from 0 to 100 for how important the point is to answering the question. A point that only says the reports do not answer the question scores 0.
Use only the reports. Keep the original meaning of modal verbs such as "shall", "may" or "will". Limit the whole answer to {max_length} words.
If nothing in the reports is relevant, return {{"points": []}}.

Reply with JSON only, in this shape: {{"points": [{{"description": "point text [Data: Reports (ids)]", "score": 80}}]}}

Data tables:

{context_data}
"""

GLOBAL_REDUCE = """You are an editor merging the findings of several analysts into one answer to the user's question.

Each analyst block below starts with the analyst number and an importance score; blocks come in descending order of importance.
Remove what is irrelevant to the question, merge the rest into one answer at the length and in the format of the response type, styled in markdown, and keep every data reference ([Data: Reports (ids)] and any other [Data: ...] reference) exactly as given, at most 5 ids per reference then "+more".
Do not mention the analysts or their scores. Keep the original meaning of modal verbs such as "shall", "may" or "will". Limit the answer to {max_length} words.
If the analyst findings do not answer the question, say so plainly.
{general_knowledge}
Response type: {response_type}

Analyst findings:

{report_data}
"""

NO_GENERAL_KNOWLEDGE = "Use only the analysts' findings; do not add outside knowledge.\n"

GENERAL_KNOWLEDGE = (
    "You may add relevant general knowledge from outside the findings, but tag every such statement "
    "with [LLM: verify] so the reader can check it.\n"
)

NO_FINDINGS = "(No analyst found information relevant to the question in the community reports.)"

NO_DATA_ANSWER = "I am sorry but I am unable to answer this question given the provided data."

NO_REPORTS_ANSWER = (
    "Global search needs community reports, and this index has none (it was built without community "
    "detection or report summarisation). Use local, DRIFT or basic search on this index instead."
)

RATE = """You rate how relevant a community report is to the user's question.

Give a rating from 0 to 5: 0 means the report is unrelated, 1 that it is marginally related, 3 that it helps answer part of the question, and 5 that it answers the question directly. Rate it relevant even if it only helps with part of the question.
Reply with JSON only, in this shape: {{"reason": "one sentence", "rating": 3}}

Data tables:

{context_data}
"""

DRIFT_HYDE = """Write a hypothetical answer to the user's question, shaped like the template report below: similar structure, sections and length.
Do not introduce named entities (people, places, organisations) that are not in the question; the answer is a search probe, not a fact.
Reply with the hypothetical answer only.

-----Template-----
{template}
"""

DRIFT_PRIMER = """You are exploring a knowledge graph to answer the user's question, starting from the community reports below (the most similar to the question).

Reply with JSON only, with these keys:
- "intermediate_answer": a markdown answer of about 2000 characters from these reports alone, beginning with a header that ties it to the question, citing reports as [Data: Reports (ids)];
- "score": an integer from 0 to 100 for how well the intermediate answer addresses the question;
- "follow_up_queries": at least 5 single, non-compound questions about specific entities, events or relationships that would help answer the question in more depth.
Example shape: {{"intermediate_answer": "## ...", "score": 60, "follow_up_queries": ["Who is ...?"]}}

Data tables:

{context_data}
"""

DRIFT_FOLLOWUP = """You are answering one follow-up question that is part of a larger investigation of an overall question, using the data tables below. Pay particular attention to the Sources table and keep its details.

Reply with JSON only, with these keys:
- "response": a markdown answer to the follow-up question (the user's message), from the tables only, citing records as [Data: <dataset name> (ids)] with at most 5 ids then "+more". Do not try to answer the overall question here.
- "score": an integer from 0 to 100 for how useful this answer is to the overall question.
- "follow_up_queries": up to the maximum number of new single, non-compound questions worth asking next (an empty list when none is needed).
Example shape: {{"response": "...", "score": 50, "follow_up_queries": ["..."]}}

Overall question: {global_query}
Max follow-ups: {k_followups}

Data tables:

{context_data}
"""

DRIFT_REDUCE = """You write the final answer to the user's question from the intermediate findings of a graph exploration below. Each analyst block starts with its number and a score; blocks come in descending order of score.
Be specific, accurate and concise, at the length and in the format of the response type, in markdown. Keep the [Data: ...] references of the findings you use, at most 5 ids per reference then "+more". Use only the findings; if they do not answer the question, say so plainly. Do not mention the analysts.

Response type: {response_type}

Findings:

{report_data}
"""

QUESTIONS = """You suggest the next questions a user could ask about the data tables below, given the questions asked so far (the last one is the user's message; earlier ones are in the tables when present).

Write the requested number of questions. Each must be important or urgent given the data, answerable from the tables, and must not mention table names or data fields. If the user's questions name several entities, each suggested question should name all of them.
Reply with JSON only, in this shape: {{"questions": ["...", "..."]}}

Number of questions: {question_count}

Data tables:

{context_data}
"""


REWRITE = """You rewrite the user's latest message into a standalone question.
Use the conversation below to resolve pronouns, ellipsis and references ("he", "that project",
"what about X?") so the question can be understood without the conversation. Keep the user's
language and intent; do not answer it. If it is already standalone, return it unchanged.
Return JSON: {{"question": "<standalone question>"}}

{history}
"""

# The built-in prompt of every stage a configuration may replace (STAGES above).
BUILTIN: dict[str, str] = {
    "local": LOCAL_ANSWER,
    "basic": BASIC_ANSWER,
    "global_map": GLOBAL_MAP,
    "global_reduce": GLOBAL_REDUCE,
    "global_knowledge": GENERAL_KNOWLEDGE,
    "rate": RATE,
    "drift_hyde": DRIFT_HYDE,
    "drift_primer": DRIFT_PRIMER,
    "drift_followup": DRIFT_FOLLOWUP,
    "drift_reduce": DRIFT_REDUCE,
    "questions": QUESTIONS,
    "rewrite": REWRITE,
}


@functools.cache
def builtin(stage: str) -> PromptTemplate:
    return PromptTemplate.checked(stage, BUILTIN[stage])


def template(configured: PromptTemplate | None, stage: str) -> PromptTemplate:
    """The prompt `stage` uses: the configured one, else the built-in one."""
    return configured if configured is not None else builtin(stage)


def reduce_system(reduce: PromptTemplate, knowledge: str | None, **values: str) -> str:
    """A reduce prompt filled; `knowledge` (the general-knowledge instruction, or None when it is not
    allowed) fills the template's {general_knowledge} slot, or is appended when the template has none, as
    GraphRAG appends its knowledge prompt."""
    if reduce.has_slot("general_knowledge"):
        return reduce.fill(general_knowledge=knowledge or NO_GENERAL_KNOWLEDGE, **values)
    text = reduce.fill(**values)
    return f"{text}\n{knowledge}" if knowledge else text


# ---- grading (route-bench --grade): judge tasks. They need a real model; the offline model does not judge.

JUDGE_ANSWER = """You are grading an answer to a question against the gold answer written by the question's author.
Judge only whether the answer states what the gold answer states; ignore length, style and data references such as [Data: ...]. An answer that contains the gold answer among other correct material is correct. One that gets part of it, or hedges between the gold answer and something else, is partially correct. One that misses it, contradicts it or says it cannot answer is incorrect.
Reply with JSON only, in this shape: {{"verdict": "correct" | "partially" | "incorrect", "reason": "one short sentence"}}

{grading_data}
"""

JUDGE_FAITHFULNESS = """You are checking whether each numbered sentence of an answer is supported by the cited records the answer was written from.
A sentence is supported when the records state it or it follows directly from them; general knowledge does not count. Judge every sentence.
Reply with JSON only, in this shape: {{"sentences": [{{"id": 1, "supported": true}}, ...]}}

{grading_data}
"""

JUDGE_CONTEXT = """You are checking a retrieved context against the gold evidence for a question.
For each gold evidence claim, decide whether the context records state it. For each context record, decide whether it states any of the gold evidence.
Reply with JSON only, in this shape: {{"evidence_found": [ids of evidence claims the context states], "relevant_records": [ids of context records that state some evidence]}}

{grading_data}
"""


def analyst_block(number: int, score: int | float, text: str) -> str:
    """One analyst block of the reduce input, exactly as the contract names it."""
    shown = int(score) if float(score).is_integer() else round(float(score), 1)
    return f"----Analyst {number}----\nImportance Score: {shown}\n{text.strip()}"


# One phrase only each task's system prompt contains: lets a loopback test server or a benchmark script
# its replies per task (kept here so it changes with the prompts).
TASK_MARKERS = {
    "global_map": r"You are an analyst reading a batch of community reports",
    "global_reduce": r"merging the findings of several analysts",
    "rate": r"You rate how relevant a community report",
    "drift_hyde": r"-----Template-----",
    "drift_primer": r"You are exploring a knowledge graph",
    "drift_followup": r"You are answering one follow-up question",
    "drift_reduce": r"from the intermediate findings of a graph exploration",
    "local_answer": r"answering a question about the data tables below",
    "basic_answer": r"from the text passages below",
    "questions": r"You suggest the next questions",
    "judge_answer": r"You are grading an answer to a question against the gold answer",
    "judge_faithfulness": r"You are checking whether each numbered sentence of an answer is supported",
    "judge_context": r"You are checking a retrieved context against the gold evidence",
}
