"""Answer grading against gold answers and evidence (used by `route-bench --grade`).

Two kinds of measure:

- **offline, always**: token F1 and answer recall against the gold answer (stemmed content terms, data
  references removed), evidence recall (share of the gold evidence's content terms present in the records
  the model was given) and citation validity (share of citations whose id exists and was in that context);
- **LLM judge, with a real model**: a verdict against the gold answer (correct / partially / incorrect and a
  short reason), faithfulness (share of answer sentences the cited records support, judged per sentence)
  and context precision / recall against the gold evidence. The judge is a model task like any other
  (prompts in `engines/prompts.py`, schemas in `engines/schemas.py`); its calls are counted in their own
  `Usage` (stage `judge`), never mixed with the answer's. The offline extractive model cannot judge, so a
  `Judge` refuses it with `NeedsRealModel` instead of producing numbers that mean nothing.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engines import prompts
from engines.citations import Citation, record_text
from engines.models.base import Usage
from engines.models.errors import ModelError, StructuredOutputError
from engines.models.offline_text import clean_sentence, is_informative, split_sentences, terms
from engines.schemas import AnswerVerdict, ContextVerdict, FaithfulnessVerdict
from shared_context.tables import CITATION_RE, join_sections, render_table

if TYPE_CHECKING:
    from engines.models.base import ChatModel, Message
    from shared_context.index import Index
    from shared_context.tokens import Tokenizer

JUDGE_STAGE = "judge"
VERDICT_SCORES = {"correct": 1.0, "partially": 0.5, "incorrect": 0.0}
_BOLD_LABEL_RE = re.compile(r"^\s*\*\*[^*\n]+\*\*\s*$", re.MULTILINE)  # "**Answer (...):**" heading lines

Record = tuple[str, str, str]  # (kind, id, text)


class NeedsRealModel(ValueError):
    """The LLM judge was asked to run on the offline extractive model, which cannot judge."""


# ---- offline measures ---------------------------------------------------------------------------


def answer_terms(text: str) -> list[str]:
    """Content terms of an answer as a reader sees it: data references and heading labels removed."""
    return terms(_BOLD_LABEL_RE.sub(" ", CITATION_RE.sub(" ", text or "")))


def token_f1(answer: str, gold: str) -> float:
    """SQuAD-style token F1 over stemmed content terms (CJK as character bigrams)."""
    pred, ref = Counter(answer_terms(answer)), Counter(answer_terms(gold))
    common = sum((pred & ref).values())
    if not common:
        return 0.0
    precision, recall = common / sum(pred.values()), common / sum(ref.values())
    return 2 * precision * recall / (precision + recall)


def answer_recall(answer: str, gold: str) -> float | None:
    """Share of the gold answer's terms the answer contains (long answers are not penalised for length)."""
    ref = Counter(answer_terms(gold))
    if not ref:
        return None
    return sum((Counter(answer_terms(answer)) & ref).values()) / sum(ref.values())


def evidence_recall(evidence: Sequence[str], context: str) -> float | None:
    """Share of the gold evidence's distinct content terms present in `context` (None without evidence)."""
    wanted = set(terms(" ".join(evidence)))
    if not wanted:
        return None
    return len(wanted & set(terms(context))) / len(wanted)


def citation_validity(citations: Sequence[Citation]) -> tuple[int, int]:
    """(citations, valid ones): valid = the id exists and was in the context given to the model."""
    return len(citations), sum(1 for c in citations if c.resolved)


def context_records(index: Index, ids: Sequence[tuple[str, str]]) -> list[Record]:
    """The records behind (kind, id) pairs, in order, with their text (unknown ids are skipped)."""
    out = []
    for kind, ident in ids:
        text = record_text(index, kind, ident)
        if text is not None:
            out.append((kind, ident, text))
    return out


def offline_grade(index: Index, result: Any, gold_answer: str | None, evidence: Sequence[str]) -> dict[str, Any]:
    """Every offline measure of one engine result (`SearchResult`) against the gold answer and evidence."""
    records = context_records(index, result.context_ids)
    n_cited, n_valid = citation_validity(result.citations)
    return {
        "f1": token_f1(result.response, gold_answer) if gold_answer else None,
        "answer_recall": answer_recall(result.response, gold_answer) if gold_answer else None,
        "evidence_recall": evidence_recall(evidence, "\n".join(t for _, _, t in records)) if evidence else None,
        "context_records": len(records),
        "citations": n_cited,
        "citations_valid": n_valid,
        "citation_validity": n_valid / n_cited if n_cited else None,
    }


# ---- LLM judge ----------------------------------------------------------------------------------


@dataclass
class JudgeGrade:
    verdict: str | None = None
    reason: str = ""
    score: float | None = None  # correct 1, partially 0.5, incorrect 0
    faithfulness: float | None = None
    sentences_judged: int = 0
    context_precision: float | None = None
    context_recall: float | None = None
    usage: Usage = field(default_factory=Usage)
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        total = self.usage.total
        return {"verdict": self.verdict, "reason": self.reason, "score": self.score,
                "faithfulness": self.faithfulness, "sentences_judged": self.sentences_judged,
                "context_precision": self.context_precision, "context_recall": self.context_recall,
                "judge_calls": total.llm_calls, "judge_prompt_tokens": total.prompt_tokens,
                "judge_output_tokens": total.output_tokens, "judge_cost": total.cost, "errors": list(self.errors)}


class Judge:
    """Grades answers with a real chat model; each `grade` makes up to three calls (verdict, faithfulness,
    context), counted in the returned grade's own usage."""

    def __init__(self, model: ChatModel, tokenizer: Tokenizer, *, record_tokens: int = 250,
                 max_records: int = 30, max_sentences: int = 30) -> None:
        if getattr(model, "offline", False):
            raise NeedsRealModel("the LLM judge needs a real model (configure an OpenAI-compatible endpoint, e.g. "
                                 "route-bench --model openai); the offline extractive model cannot judge answers")
        self.model = model
        self.tokenizer = tokenizer
        self.record_tokens = record_tokens
        self.max_records = max_records
        self.max_sentences = max_sentences

    async def grade(self, question: str, answer: str, *, gold_answer: str | None, evidence: Sequence[str],
                    cited: Sequence[Record], context: Sequence[Record]) -> JudgeGrade:
        grade = JudgeGrade()
        if gold_answer:
            verdict = await self._ask(grade, prompts.JUDGE_ANSWER, "judge_answer", question, AnswerVerdict, [
                render_table("Gold Answer", ("id", "answer"), [(1, gold_answer)]),
                render_table("Candidate Answer", ("id", "answer"), [(1, without_references(answer))]),
            ])
            if isinstance(verdict, AnswerVerdict):
                grade.verdict, grade.reason = verdict.verdict, verdict.reason
                grade.score = VERDICT_SCORES[verdict.verdict]
        await self._faithfulness(grade, question, answer, cited)
        if evidence and context:
            await self._context(grade, question, evidence, context)
        return grade

    async def _faithfulness(self, grade: JudgeGrade, question: str, answer: str, cited: Sequence[Record]) -> None:
        sentences = answer_sentences(answer)[: self.max_sentences]
        grade.sentences_judged = len(sentences)
        if not sentences:
            return
        if not cited:
            grade.faithfulness = 0.0  # nothing cited, so nothing supports any sentence
            return
        out = await self._ask(grade, prompts.JUDGE_FAITHFULNESS, "judge_faithfulness", question,
                              FaithfulnessVerdict, [
                                  render_table("Answer Sentences", ("id", "sentence"),
                                               [(i + 1, s) for i, s in enumerate(sentences)]),
                                  render_table("Cited Records", ("id", "record"), self._rows(cited)),
                              ])
        if isinstance(out, FaithfulnessVerdict):
            supported = {s.id for s in out.sentences if s.supported and 1 <= s.id <= len(sentences)}
            grade.faithfulness = len(supported) / len(sentences)

    async def _context(self, grade: JudgeGrade, question: str, evidence: Sequence[str],
                       context: Sequence[Record]) -> None:
        rows = self._rows(context)
        out = await self._ask(grade, prompts.JUDGE_CONTEXT, "judge_context", question, ContextVerdict, [
            render_table("Gold Evidence", ("id", "claim"), [(i + 1, e) for i, e in enumerate(evidence)]),
            render_table("Context Records", ("id", "record"), rows),
        ])
        if isinstance(out, ContextVerdict):
            found = {i for i in out.evidence_found if 1 <= i <= len(evidence)}
            relevant = {i for i in out.relevant_records if 1 <= i <= len(rows)}
            grade.context_recall = len(found) / len(evidence)
            grade.context_precision = len(relevant) / len(rows)

    def _rows(self, records: Sequence[Record]) -> list[tuple[int, str]]:
        return [(i + 1, self.tokenizer.truncate(f"{kind} {ident}: {text}", self.record_tokens))
                for i, (kind, ident, text) in enumerate(records[: self.max_records])]

    async def _ask(self, grade: JudgeGrade, template: str, task: str, question: str, schema: Any,
                   tables: list[str]) -> Any:
        from engines.models.structured import complete_json

        messages: list[Message] = [
            {"role": "system", "content": template.format(grading_data=join_sections(tables))},
            {"role": "user", "content": question},
        ]
        try:
            parsed, completions = await complete_json(self.model, messages, schema, task=task, temperature=0.0)
        except StructuredOutputError as err:
            for c in err.completions:
                grade.usage.add_completion(JUDGE_STAGE, c)
            grade.errors.append(f"{task}: unusable reply ({err})")
            return None
        except ModelError as err:
            grade.errors.append(f"{task}: {err}")
            return None
        for c in completions:
            grade.usage.add_completion(JUDGE_STAGE, c)
        return parsed


def without_references(text: str) -> str:
    """`text` without its `[Data: ...]` references (and the space they leave before punctuation)."""
    return re.sub(r"[ \t]+([.,;:!?。])", r"\1", CITATION_RE.sub("", text or "")).strip()


def answer_sentences(answer: str) -> list[str]:
    """The sentences a reader takes as claims: references, headings and label lines removed."""
    text = _BOLD_LABEL_RE.sub("", without_references(answer))
    out = []
    for raw in split_sentences(text):
        if raw.lstrip().startswith("#"):
            continue
        sentence = clean_sentence(raw)
        if is_informative(sentence):
            out.append(sentence)
    return out
