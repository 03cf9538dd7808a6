"""Prompt templates with named slots: read once, checked against their stage's slots, filled safely.

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
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError, ValidationInfo, model_validator

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
        try:
            raw = file.read_bytes()
        except FileNotFoundError:
            raise PromptError(f"{file}: prompt file not found") from None
        except OSError as exc:
            raise PromptError(f"{file}: cannot read the prompt file ({exc.strerror or exc})") from None
        if len(raw) > 4 * MAX_PROMPT_CHARS:
            raise PromptError(f"{file}: {len(raw):,} bytes; a prompt holds at most {MAX_PROMPT_CHARS:,} characters")
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

    @property
    def literal_text(self) -> str:
        """The text without its slots (what a cost estimate counts before the context is known)."""
        return "".join(parse(self.text, self.source)[0])


def coerce_prompt(stage: str, value: Any, info: ValidationInfo) -> PromptTemplate | None:
    """A prompt setting as written in graphroute.toml or settings.yaml: a file path (relative to the
    configuration file's folder, `base_dir` in the validation context), `{file = "..."}`, or
    `{text = "..."}` for an inline prompt."""
    if value is None or isinstance(value, PromptTemplate):
        if isinstance(value, PromptTemplate) and value.stage != stage:
            raise PromptError(f"{value.source}: a {value.stage} prompt where a {stage} prompt is expected")
        return value
    context = info.context if isinstance(info.context, Mapping) else {}
    base = Path(context.get("base_dir") or ".")
    if isinstance(value, str):
        return PromptTemplate.from_file(stage, base / Path(value).expanduser())
    if isinstance(value, Mapping):
        keys = set(value)
        if keys == {"file"} and isinstance(value["file"], str):
            return PromptTemplate.from_file(stage, base / Path(value["file"]).expanduser())
        if keys == {"text"} and isinstance(value["text"], str):
            return PromptTemplate.checked(stage, value["text"], "inline text")
    raise PromptError('a prompt is a file path, {file = "path"} or {text = "the prompt"}')


def _setting(stage: str) -> BeforeValidator:
    return BeforeValidator(functools.partial(coerce_prompt, stage))


# The type of each prompt setting (None: the built-in prompt of `engines.prompts`).
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
