"""Cost estimates without any model call: pure arithmetic on the context the builders would produce.

The router uses them to step down to a cheaper engine under a budget. Call counts are exact for local,
basic and static/pre-ranked global (batches are built for real, with no model involved) and an upper
bound for DRIFT; output tokens are typical lengths, not measurements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Protocol

from engines import prompts
from engines.latency import LATENCY, latency_key
from engines.plan import Prebuilt, Question

if TYPE_CHECKING:
    from engines.config import BasicSearchConfig, DriftSearchConfig, GlobalSearchConfig, LocalSearchConfig
    from engines.models.base import JSONObject
    from engines.prompts import PromptTemplate
    from engines.run import ModelSet
    from engines.steps import CommunityContextSource, LocalContextSource
    from shared_context.index import Index
    from shared_context.local_context import LocalContext


class EstimatedEngine(Protocol):
    """What an estimate reads from an engine (a protocol, so this module imports no engine: engines call
    these functions from their `estimate` method)."""

    index: Index
    models: ModelSet


class LocalEstimated(EstimatedEngine, Protocol):
    """Local search as its estimate reads it: its name (the plan's key), settings and context builder."""

    @property
    def config(self) -> LocalSearchConfig: ...

    @property
    def name(self) -> str: ...

    @property
    def builder(self) -> LocalContextSource: ...


class BasicEstimated(EstimatedEngine, Protocol):
    @property
    def config(self) -> BasicSearchConfig: ...


class DriftEstimated(EstimatedEngine, Protocol):
    @property
    def config(self) -> DriftSearchConfig: ...


class GlobalEstimated(EstimatedEngine, Protocol):
    """Global search as its estimate reads it: its settings and the builder of its map batches."""

    @property
    def config(self) -> GlobalSearchConfig: ...

    @property
    def builder(self) -> CommunityContextSource: ...


# Typical output sizes (tokens) per task, from the prompts' length instructions.
OUTPUT_GUESS = {
    "local_answer": 600, "basic_answer": 500, "global_map": 400, "global_reduce": 800, "rate": 60,
    "drift_hyde": 300, "drift_primer": 700, "drift_followup": 500, "drift_reduce": 800,
}
# Latency model for seconds_guess: a hosted model (first token + generation), or the offline model.
CALL_LATENCY_S = 1.0
OUTPUT_TOKENS_PER_S = 60.0
OFFLINE_CALL_S = 0.02




@dataclass(frozen=True)
class CostEstimate:
    llm_calls: int
    prompt_tokens: int
    output_tokens: int
    cost: float
    seconds_guess: float
    latency_known: bool = True  # False: seconds_guess uses default latencies, no call was observed yet
    # the context this estimate built, for the answer to reuse (`Question.with_context`); not a figure
    prebuilt: Prebuilt | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> JSONObject:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "prebuilt"}


def question_text(question: str | Question) -> str:
    """The text an estimate prices: a checked question's (a follow-up's standalone form), else the string."""
    return question.text if isinstance(question, Question) else question


class _Tally:
    def __init__(self, engine: EstimatedEngine, question: str | Question) -> None:
        self.engine = engine
        self.tok = engine.index.tokenizer
        self.q_tokens = self.tok.count(question_text(question)) + 10  # + message framing
        self.calls = 0
        self.prompt = 0
        self.output = 0
        self.cost = 0.0
        self.seconds = 0.0
        self.latency_known = True

    def calls_of(self, stage: str, task: str, system_tokens: int, n: int = 1, *, waves: int | None = None,
                 output: int | None = None) -> None:
        if n <= 0:
            return
        out = OUTPUT_GUESS.get(task, 500) if output is None else output
        prompt = system_tokens + self.q_tokens
        self.calls += n
        self.prompt += n * prompt
        self.output += n * out
        self.cost += n * self.engine.models.cost(stage, prompt, out)
        self.seconds += (n if waves is None else waves) * self.per_call(stage, out)

    def per_call(self, stage: str, output_tokens: float) -> float:
        """Seconds of one call: offline constant, else the endpoint's observed latency, else the default."""
        model = self.engine.models.chat(stage)
        if model.offline:
            return OFFLINE_CALL_S
        observed = LATENCY.predict(latency_key(model), output_tokens)
        if observed is not None:
            return observed
        self.latency_known = False
        return CALL_LATENCY_S + output_tokens / OUTPUT_TOKENS_PER_S

    def result(self, prebuilt: Prebuilt | None = None) -> CostEstimate:
        return CostEstimate(self.calls, self.prompt, self.output, round(self.cost, 6), round(self.seconds, 3),
                            self.latency_known, prebuilt)


def _template_tokens(engine: EstimatedEngine, configured: PromptTemplate | None, stage: str) -> int:
    """Tokens of the stage's prompt without its slots (the configured prompt, else the built-in one)."""
    return int(engine.index.tokenizer.count(prompts.template(configured, stage).literal_text))


def estimate_local(engine: LocalEstimated, question: str | Question) -> CostEstimate:
    """Builds the context the engine would (no history, no query vector) on the question's linking, and
    returns it with the estimate (`CostEstimate.prebuilt`) for the answer to reuse."""
    t = _Tally(engine, question)
    if not isinstance(question, Question):
        ctx = engine.builder.build(question)
        return _local_calls(engine, t, ctx).result()
    asked = question
    kept = asked.context_for(engine.name, asked.link_text)
    ctx = kept if kept is not None else engine.builder.build(asked.link_text,
                                                             linker=lambda k: asked.linked(engine.index, k))
    return _local_calls(engine, t, ctx).result(Prebuilt(engine.name, question.link_text, ctx))


def _local_calls(engine: LocalEstimated, t: _Tally, ctx: LocalContext) -> _Tally:
    t.calls_of("answer", "local_answer", ctx.tokens + _template_tokens(engine, engine.config.prompt, "local")
               + int(engine.index.tokenizer.count(prompts.CITATION_RULES)),
               output=engine.config.max_answer_tokens or OUTPUT_GUESS["local_answer"])
    return t


def estimate_basic(engine: BasicEstimated, question: str | Question, section_tokens: int) -> CostEstimate:
    """`section_tokens`: size of the Sources section the engine would send (it builds it, not this module)."""
    t = _Tally(engine, question)
    t.calls_of("answer", "basic_answer", section_tokens + _template_tokens(engine, engine.config.prompt, "basic"))
    return t.result()


def estimate_global(engine: GlobalEstimated, question: str | Question) -> CostEstimate:
    t = _Tally(engine, question)
    cfg = engine.config
    if not engine.index.community_reports:
        return t.result()
    if cfg.dynamic_community_selection:
        # Ratings: the root level in full plus, typically, one level of children; map over what is kept.
        levels = sorted(engine.index.reports_by_level)
        rated = sum(len(engine.index.reports_by_level[lv]) for lv in levels[:2])
        t.calls_of("rate", "rate", 800, rated * cfg.dynamic_num_repeats,
                   waves=math.ceil(rated / cfg.concurrency) * cfg.dynamic_num_repeats)
    batches = list(engine.builder.build(question_text(question)))
    if cfg.max_map_calls is not None:
        batches = batches[: cfg.max_map_calls]
    if cfg.dynamic_community_selection:
        batches = batches[: max(1, math.ceil(len(batches) / 2))]
    map_system = _template_tokens(engine, cfg.map_prompt, "global_map")
    n = len(batches)
    if n:
        for b in batches:
            t.calls_of("map", "global_map", map_system + b.tokens, 1, waves=0)
        t.seconds += math.ceil(n / cfg.concurrency) * t.per_call("map", OUTPUT_GUESS["global_map"])
        points_tokens = n * OUTPUT_GUESS["global_map"]
        reduce_calls = 1
        if points_tokens > cfg.data_max_tokens:  # batched reduce: partial answers, then a final merge
            reduce_calls = math.ceil(points_tokens / cfg.data_max_tokens) + 1
        reduce_system = _template_tokens(engine, cfg.reduce_prompt, "global_reduce")
        per_reduce_input = min(points_tokens, cfg.data_max_tokens)
        t.calls_of("reduce", "global_reduce", reduce_system + per_reduce_input, reduce_calls,
                   waves=2 if reduce_calls > 1 else 1)
    return t.result()


def estimate_drift(engine: DriftEstimated, question: str | Question) -> CostEstimate:
    """Upper bound: every fold and every follow-up slot is used."""
    t = _Tally(engine, question)
    cfg = engine.config
    t.calls_of("primer", "drift_hyde", 1500 + _template_tokens(engine, cfg.hyde_prompt, "drift_hyde"))
    tokens = engine.index.report_tokens
    k = min(cfg.primer_top_k_reports, len(engine.index.community_reports))
    if k:
        mean_report = float(tokens.mean()) if len(tokens) else 0.0
        folds = min(cfg.primer_folds, k)
        fold_tokens = int(mean_report * k / folds) + _template_tokens(engine, cfg.primer_prompt, "drift_primer")
        t.calls_of("primer", "drift_primer", fold_tokens, folds, waves=math.ceil(folds / cfg.concurrency))
        follow_system = cfg.local_search.max_context_tokens + _template_tokens(engine, cfg.followup_prompt,
                                                                                "drift_followup")
        for _ in range(cfg.n_depth):
            t.calls_of("followups", "drift_followup", follow_system, cfg.k_followups,
                       waves=math.ceil(cfg.k_followups / cfg.concurrency))
    t.calls_of("reduce", "drift_reduce", min(cfg.reduce_max_tokens, 600 * (1 + cfg.n_depth * cfg.k_followups)))
    return t.result()
