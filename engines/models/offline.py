"""The offline extractive chat model: the default when no API key is configured.

It reads the typed context of each call (`task_context.TaskContext`: the builders' context tables, the
reduce's findings, the scalar inputs), never the prompt's text, so a custom prompt changes nothing for it.
Without any network or randomness: answers are sentences quoted from the supplied records, each cited with
ids of records in that context; scores come from term coverage; follow-up and candidate questions are
built from the entities in the data. Same input, same bytes out. A call without a context (a route
question) reads its question from the last user message.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ValidationError

from engines.models.base import INSUFFICIENT_MARKER, Completion, Message, asks_for_marker
from engines.models.offline_answer import compose_answer, covers_question, no_answer_text
from engines.models.schemas import (
    FollowupResponse,
    MapResponse,
    PrimerResponse,
    QuestionList,
    RateResponse,
    RewriteResponse,
    RouteResponse,
)
from engines.models.task_context import TaskContext
from shared_context.tokens import get_tokenizer

if TYPE_CHECKING:
    from engines.models.base import JSON

MODEL_NAME = "offline-extractive"
_ANSWER_TASKS = frozenset({"answer", "local_answer", "basic_answer"})
_REDUCE_TASKS = frozenset({"global_reduce", "drift_reduce", "reduce"})
# A JSON schema passed without a known task still selects the matching behaviour.
_TASK_BY_SCHEMA = {
    MapResponse.__name__: "global_map",
    RateResponse.__name__: "rate",
    PrimerResponse.__name__: "drift_primer",
    FollowupResponse.__name__: "drift_followup",
    QuestionList.__name__: "questions",
    RewriteResponse.__name__: "rewrite",
    RouteResponse.__name__: "route",
}
_JSON_TASKS = frozenset(_TASK_BY_SCHEMA.values())


class OfflineChatModel:
    """Deterministic, network-free extractive model implementing the `ChatModel` protocol."""

    name: str = MODEL_NAME
    offline: bool = True

    def __init__(
        self, *, max_sentences: int = 6, followup_sentences: int = 5, words_per_delta: int = 4
    ) -> None:
        if max_sentences < 1 or followup_sentences < 1 or words_per_delta < 1:
            raise ValueError("max_sentences, followup_sentences and words_per_delta must be at least 1")
        self.max_sentences = max_sentences
        self.followup_sentences = followup_sentences
        self.words_per_delta = words_per_delta
        self._tokenizer = get_tokenizer()

    # ----------------------------------------------------------------------------- protocol

    async def complete(
        self,
        messages: list[Message],
        *,
        task: str = "answer",
        json_schema: type[BaseModel] | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,  # accepted for the protocol; extraction is deterministic
        context: TaskContext | None = None,
    ) -> Completion:
        start = time.perf_counter()
        text = self.respond(messages, task=task, json_schema=json_schema, max_tokens=max_tokens, context=context)
        return self._completion(messages, text, time.perf_counter() - start)

    async def stream(
        self,
        messages: list[Message],
        *,
        task: str = "answer",
        max_tokens: int | None = None,
        temperature: float | None = None,
        context: TaskContext | None = None,
    ) -> AsyncIterator[str | Completion]:
        """Yield groups of `words_per_delta` words (whitespace kept, so they join to the text), then the Completion."""
        start = time.perf_counter()
        text = self.respond(messages, task=task, max_tokens=max_tokens, context=context)
        for delta in split_deltas(text, self.words_per_delta):
            yield delta
        yield self._completion(messages, text, time.perf_counter() - start)

    # ----------------------------------------------------------------------------- behaviour

    def respond(
        self,
        messages: Sequence[Message],
        *,
        task: str = "answer",
        json_schema: type[BaseModel] | None = None,
        max_tokens: int | None = None,
        context: TaskContext | None = None,
    ) -> str:
        """The reply text for one request (what `complete` returns, without the usage)."""
        if context is None:
            context = TaskContext(_last_user_message(messages))
        task = self._effective_task(task, json_schema)
        if task in _JSON_TASKS:
            obj = self._structured(task, context, max_tokens)
            if json_schema is not None and not _same_schema(json_schema, type(obj)):
                obj = _fill_schema(json_schema, self._text(context, "answer", max_tokens))
            return json.dumps(obj.model_dump(), ensure_ascii=False)
        text = self._text(context, task, max_tokens)
        if task in _ANSWER_TASKS and json_schema is None and _asked_for_marker(messages) and \
                not covers_question(context.tables, context.question, _answer_datasets(task)):
            text = f"{text}\n\n{INSUFFICIENT_MARKER}"
        if json_schema is not None:
            return json.dumps(_fill_schema(json_schema, text).model_dump(), ensure_ascii=False)
        return text

    def _effective_task(self, task: str, json_schema: type[BaseModel] | None) -> str:
        if task in _JSON_TASKS or task in _REDUCE_TASKS or task == "drift_hyde":
            return task
        if json_schema is not None and json_schema.__name__ in _TASK_BY_SCHEMA:
            return _TASK_BY_SCHEMA[json_schema.__name__]
        return task if task in _ANSWER_TASKS else "answer"

    def _text(self, context: TaskContext, task: str, max_tokens: int | None) -> str:
        # each task's module is imported for its first request only: an answer loads none of the others
        question = context.question
        if task in _REDUCE_TASKS:
            from engines.models.offline_reduce import compose_reduce

            return compose_reduce(context, self._tokenizer, max_tokens)
        if task == "drift_hyde":
            from engines.models.offline_tasks import drift_hyde

            return drift_hyde(context.template, question)
        datasets = _answer_datasets(task)
        if not question.strip():
            return no_answer_text(question, "No question was given.")
        text, _chosen = compose_answer(
            context.tables,
            question,
            self._tokenizer,
            max_sentences=self.max_sentences,
            max_tokens=max_tokens,
            datasets=datasets,
            response_type=context.response_type,
        )
        return text

    def _structured(self, task: str, context: TaskContext, max_tokens: int | None) -> BaseModel:
        question, tables = context.question, context.tables
        if task in ("questions", "rewrite", "route"):
            from engines.models import offline_questions

            if task == "questions":
                return offline_questions.generate_questions(tables, question, context.question_count)
            if task == "rewrite":
                return offline_questions.rewrite(tables, question)
            return offline_questions.route(question)
        from engines.models import offline_tasks

        if task == "global_map":
            return offline_tasks.global_map(tables, question)
        if task == "rate":
            return offline_tasks.rate(tables, question)
        if task == "drift_primer":
            return offline_tasks.drift_primer(tables, question)
        if task == "drift_followup":
            return offline_tasks.drift_followup(context, self._tokenizer, max_sentences=self.followup_sentences,
                                                max_tokens=max_tokens)
        from engines.models.offline_questions import route

        return route(question)

    def _completion(self, messages: Sequence[Message], text: str, seconds: float) -> Completion:
        prompt_tokens = sum(
            self._tokenizer.count(str(m.get("content", "") or "")) for m in messages if isinstance(m, Mapping)
        )
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            output_tokens=self._tokenizer.count(text),
            model=self.name,
            seconds=seconds,
            usage_estimated=False,  # these are this model's exact counts (o200k_base)
            cached=False,
            cost=0.0,
        )


def _answer_datasets(task: str) -> tuple[str, ...]:
    return ("Sources",) if task == "basic_answer" else ("Entities", "Relationships", "Claims", "Sources", "Reports")


def _asked_for_marker(messages: Sequence[Message]) -> bool:
    """The prompt asks for the insufficient-context mark (a custom prompt may not: then, like a real model, the
    offline model does not write it)."""
    return any(isinstance(m, Mapping) and m.get("role") == "system" and asks_for_marker(str(m.get("content") or ""))
               for m in messages)


def _last_user_message(messages: Sequence[Message]) -> str:
    """The question of a call that brings no typed context: its last user message."""
    users = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "user"]
    return str(users[-1].get("content") or "").strip() if users else ""


def split_deltas(text: str, words_per_delta: int) -> list[str]:
    """Cut `text` into word groups whose concatenation is exactly `text`."""
    pieces = re.findall(r"\s*\S+", text)
    tail = text[len("".join(pieces)) :]
    deltas = ["".join(pieces[i : i + words_per_delta]) for i in range(0, len(pieces), words_per_delta)]
    if tail:
        deltas.append(tail)
    return deltas


def _same_schema(a: type[BaseModel], b: type[BaseModel]) -> bool:
    return a is b or (a.__name__ == b.__name__ and set(a.model_fields) == set(b.model_fields))


def _placeholder(annotation: object, text: str, metadata: Sequence[object]) -> JSON:
    """An honest minimal value of a field's type: the answer text for strings, lower bounds for numbers."""
    origin = get_origin(annotation)
    if origin is Literal:
        first: JSON = get_args(annotation)[0]  # a Literal's values are str, int, bool or None
        return first
    if origin in (list, set, tuple, frozenset):
        return []
    if origin is dict:
        return {}
    if origin is not None:  # Optional / Union: use the first usable member
        members = [a for a in get_args(annotation) if a is not type(None)]
        return _placeholder(members[0], text, metadata) if members else None
    if annotation is str:
        return text
    if annotation is bool:
        return False
    if annotation in (int, float):
        bounds = [getattr(m, "ge", None) for m in metadata] + [getattr(m, "gt", None) for m in metadata]
        low = next((b for b in bounds if isinstance(b, int | float)), 0)
        return float(low) if annotation is float else int(low)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _fill_schema(annotation, text).model_dump()
    return None


def _fill_schema(schema: type[BaseModel], text: str) -> BaseModel:
    """A minimal valid object of an unknown schema whose string fields carry the extractive answer."""
    values: dict[str, Any] = {  # Any: model_construct takes its fields as keyword arguments
        name: _placeholder(info.annotation, text, info.metadata)
        for name, info in schema.model_fields.items()
        if info.is_required()
    }
    try:
        return schema.model_validate(values)
    except ValidationError:
        return schema.model_construct(**values)
