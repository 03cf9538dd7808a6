"""The one typed configuration of graphroute: `graphroute.toml` + environment, validated in one place.

Sections: `[models]` (delegated to `engines.models.config`), `[local]`, `[global_search]`, `[drift]`,
`[basic]`, `[questions]`, `[router]`, `[serve]` (the HTTP service), `[search]` (search backends by size).
Every section forbids unknown keys, and every error names the file and the dotted key, e.g. ``graphroute.toml: global_search.concurrency: must be >= 1 (got 0)``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engines.models.config import (
    ModelsConfig,
    find_config_file,
    format_validation_error,
    models_config_from_mapping,
    read_toml,
)
from engines.models.errors import ModelConfigError
from engines.prompts import (
    PROMPT_HELP,
    BasicPrompt,
    DriftReducePrompt,
    FollowupPrompt,
    HydePrompt,
    KnowledgePrompt,
    LocalPrompt,
    MapPrompt,
    PrimerPrompt,
    QuestionsPrompt,
    RatePrompt,
    ReducePrompt,
    RewritePrompt,
)
from shared_context.local_budget import REFINEMENTS
from shared_context.local_context import LocalContextParams
from shared_context.search_backend import SearchParams


class ConfigError(ModelConfigError):
    """A graphroute.toml setting is invalid; `key` is the dotted key."""


class _Section(BaseModel):
    # strict: `prerank = "yes"` or `n = "5"` is an error naming the key, not silently coerced
    # defer_build: validators are built on first use, not when `import router` defines the class (import time)
    model_config = ConfigDict(extra="forbid", validate_assignment=True, strict=True, defer_build=True)


class LocalContextSettings(LocalContextParams):
    """The local context builder's own parameters (`shared_context.LocalContextParams`: GraphRAG's names,
    defaults and checks), made settable from graphroute.toml. Values that would defeat the context are
    rejected here (the builder itself accepts 0 for tests of its edges)."""

    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=True, strict=True, defer_build=True)

    max_context_tokens: int = Field(default=12_000, ge=100, description="an empty budget builds no context")
    top_k_mapped_entities: int = Field(default=10, ge=1, description="0 would link no entity at all")

    def builder_fields(self) -> dict[str, object]:
        """The builder's fields that were set (in graphroute.toml, settings.yaml or a section's own defaults):
        left out, a field takes the builder's default, and a default Sources share yields to a larger
        community_prop instead of failing the check of the two."""
        fields = LocalContextParams.model_fields
        return {name: getattr(self, name) for name in fields if name in self.model_fields_set}


def _nested_local_context(data: object, prefix: str, defaults: Mapping[str, object]) -> object:
    """Fold flat `<prefix>X` keys (the older spelling, e.g. `local_search_max_context_tokens`) into the
    nested `local_search` table, over the section's own defaults."""
    if not isinstance(data, Mapping):
        return data
    out = dict(data)
    nested = out.get("local_search", {})
    if not isinstance(nested, Mapping):
        return data  # validation names the key
    flat = {k[len(prefix):]: out.pop(k) for k in list(out) if prefix and k.startswith(prefix)}
    user = flat | dict(nested)
    # a default refinement yields to the GraphRAG setting it refines when the user set that one
    kept = {k: v for k, v in defaults.items() if not (k in REFINEMENTS and REFINEMENTS[k] in user)}
    reports = user.get("community_prop")
    if isinstance(reports, int | float) and not isinstance(reports, bool):
        for key in _SOURCES_SHARES:  # a default Sources share yields to a larger community_prop the user set
            share = kept.get(key)
            if isinstance(share, float) and key not in user and share + reports > 1:
                kept[key] = max(1.0 - reports, 0.0)
    out["local_search"] = kept | user
    return out


_SOURCES_SHARES = ("text_unit_prop", "weak_link_text_unit_prop")


# A batched reduce writes partial answers of at least 64 tokens (engines.reduce) and must fit two of them in
# one reduce call to make progress: below twice that it can never converge.
MIN_REDUCE_TOKENS = 128


class LocalSearchConfig(LocalContextSettings):
    # the answer's length and form, as GraphRAG's response_type (e.g. "multiple paragraphs", "a single
    # sentence")
    response_type: str = Field(default="multiple paragraphs", min_length=1)
    max_answer_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=0.0, ge=0, le=2)
    prompt: LocalPrompt = Field(
        default=None, description="the answer prompt (slots {context_data}, {response_type}; optional "
        "{citation_rules}): " + PROMPT_HELP)


class GlobalSearchConfig(_Section):
    max_context_tokens: int = Field(default=12_000, ge=200, description="tokens per map batch")
    data_max_tokens: int = Field(default=12_000, ge=MIN_REDUCE_TOKENS, description="tokens of analyst points per reduce call")
    map_max_length: int = Field(default=1000, ge=10, description="words per map answer (in the prompt)")
    reduce_max_length: int = Field(default=2000, ge=10, description="words of the final answer (in the prompt)")
    concurrency: int = Field(default=25, ge=1, le=1024)
    # the answer's length and form, as GraphRAG's response_type (e.g. "multiple paragraphs", "a single
    # sentence")
    response_type: str = Field(default="multiple paragraphs", min_length=1)
    # let global search's answer add knowledge from outside the index, as GraphRAG's setting
    allow_general_knowledge: bool = False
    community_level: int | None = Field(default=None, ge=0)
    # rate community reports with the model and map only the relevant ones, level by level, as GraphRAG's
    # dynamic selection
    dynamic_community_selection: bool = False
    dynamic_threshold: int = Field(default=1, ge=0, le=5)
    # dynamic selection: keep a parent community whose children were also selected
    dynamic_keep_parent: bool = False
    dynamic_max_level: int = Field(default=2, ge=0)
    dynamic_num_repeats: int = Field(default=1, ge=1, le=10)
    # pre-rank the reports by the question (no model call) and map only the most relevant share
    prerank: bool = False
    # With prerank and no explicit budget: read the most relevant share of all report tokens (>= one batch).
    # Over several indexes, each index reads its own share; their batches are mapped together, with one reduce.
    prerank_share: float | None = Field(default=0.1, gt=0, le=1)
    # At most this many map calls per question; a question's call budget caps them too. A question that fans out
    # over several indexes with global search maps the best batches of every index, in turn, within the cap.
    max_map_calls: int | None = Field(default=None, ge=1)
    max_context_tokens_total: int | None = Field(default=None, ge=100)
    # shuffle the reports before they are cut into map batches, as GraphRAG does
    shuffle_data: bool = True
    # the seed of the report shuffle
    random_state: int = 86
    max_reduce_levels: int = Field(default=6, ge=1, description="safety bound on recursive reduce depth")
    # Map points scored below this are dropped before the reduce (counted in details). 0 keeps
    # GraphRAG's rule: only points scored 0 ("no answer") are dropped.
    min_score: float = Field(default=0, ge=0, le=100)
    temperature: float | None = Field(default=0.0, ge=0, le=2)
    map_prompt: MapPrompt = Field(
        default=None, description="the map prompt (slot {context_data}; optional {max_length}): " + PROMPT_HELP)
    reduce_prompt: ReducePrompt = Field(
        default=None, description="the reduce prompt (slots {report_data}, {response_type}; optional "
        "{max_length}, {general_knowledge}): " + PROMPT_HELP)
    knowledge_prompt: KnowledgePrompt = Field(
        default=None, description="the instruction added to the reduce prompt when allow_general_knowledge is "
        "set (no slots): " + PROMPT_HELP)
    rate_prompt: RatePrompt = Field(
        default=None, description="the report rating prompt of dynamic community selection (slot "
        "{context_data}): " + PROMPT_HELP)


# GraphRAG's shares set here are the section's, not the user's: the refinements stay on beside them
_DRIFT_LOCAL: dict[str, object] = {"text_unit_prop": 0.6, "community_prop": 0.1,
                                   **{name: LocalContextParams.model_fields[name].default for name in REFINEMENTS}}
_QUESTIONS_LOCAL: dict[str, object] = {"max_context_tokens": 8_000}


class DriftSearchConfig(_Section):
    """DRIFT defaults chosen so a query costs at most 1 + 5 + 2·7 + 1 = 21 model calls (GraphRAG: 67).

    GraphRAG runs 3 rounds of 20 follow-ups picked at random; we run 2 rounds of the 7 best-scored
    follow-ups, which keeps the depth that matters (the primer's best leads and their children) at a
    third of the cost. With concurrency 8, each round is one wave of calls, so a query takes about
    5 model latencies (HyDE, primer, 2 rounds, reduce) instead of 21 sequential ones. The reduce is one
    call while the findings fit `reduce_max_tokens`; beyond that it is batched (global search's reduce),
    adding calls rather than dropping findings, so `max_llm_calls` counts the one-call case.
    """

    primer_folds: int = Field(default=5, ge=1, le=50)
    primer_top_k_reports: int = Field(default=20, ge=1)
    n_depth: int = Field(default=2, ge=0, le=10)
    k_followups: int = Field(default=7, ge=1, le=100)
    concurrency: int = Field(default=8, ge=1, le=1024)
    # The follow-ups' local context ([drift.local_search]). GraphRAG's 0.9 / 0.1 leaves 0 for entities and
    # relationships (bug 8); keep 30 % for them.
    local_search: LocalContextSettings = Field(default_factory=lambda: LocalContextSettings.model_validate(_DRIFT_LOCAL))
    reduce_max_tokens: int = Field(default=12_000, ge=MIN_REDUCE_TOKENS, description="tokens of intermediate answers in the reduce")
    # the answer's length and form, as GraphRAG's response_type (e.g. "multiple paragraphs", "a single
    # sentence")
    response_type: str = Field(default="multiple paragraphs", min_length=1)
    # the seed of DRIFT's template choice, so runs repeat
    seed: int = 0
    temperature: float | None = Field(default=0.0, ge=0, le=2)
    hyde_prompt: HydePrompt = Field(
        default=None, description="the hypothetical-answer prompt (slot {template}): " + PROMPT_HELP)
    primer_prompt: PrimerPrompt = Field(
        default=None, description="the primer prompt (slot {context_data} or {community_reports}; optional "
        "{query}): " + PROMPT_HELP)
    followup_prompt: FollowupPrompt = Field(
        default=None, description="the follow-up prompt, GraphRAG's drift_search.prompt (slots {context_data}, "
        "{global_query}; optional {response_type}, {followups}): " + PROMPT_HELP)
    reduce_prompt: DriftReducePrompt = Field(
        default=None, description="the reduce prompt (slots {context_data} or {report_data}, "
        "{response_type}): " + PROMPT_HELP)

    @model_validator(mode="before")
    @classmethod
    def _flat_local_search_keys(cls, data: object) -> object:
        return _nested_local_context(data, "local_search_", _DRIFT_LOCAL)

    @property
    def max_llm_calls(self) -> int:
        return 1 + self.primer_folds + self.n_depth * self.k_followups + 1

    def local_context(self) -> LocalContextSettings:
        return self.local_search


class BasicSearchConfig(_Section):
    """Basic search: one Sources table of the text units that best match the question
    (`shared_context.basic_context`)."""

    mode: Literal["hybrid", "vector", "lexical"] = Field(default="hybrid", description=(
        "how units are ranked: 'hybrid' fuses BM25 and vector rankings by reciprocal rank and shows "
        "question-relevant excerpts until the budget is full; 'lexical' uses BM25 alone; 'vector' is GraphRAG's "
        "basic search (the k nearest units, whole)"))
    k: int = Field(default=10, ge=1, description="units in the context in 'vector' mode (GraphRAG's k)")
    excerpt_tokens: int = Field(default=200, ge=0, description=(
        "'hybrid' and 'lexical' modes: tokens per excerpt window; 0 shows whole units in the fused order"))
    rrf_k: int = Field(default=60, ge=0, description="the reciprocal-rank fusion constant of 'hybrid' mode")
    max_context_tokens: int = Field(default=12_000, ge=100)
    # the answer's length and form, as GraphRAG's response_type (e.g. "multiple paragraphs", "a single
    # sentence")
    response_type: str = Field(default="multiple paragraphs", min_length=1)
    max_answer_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=0.0, ge=0, le=2)
    prompt: BasicPrompt = Field(
        default=None, description="the answer prompt (slots {context_data}, {response_type}): " + PROMPT_HELP)


class QuestionGenConfig(_Section):
    n: int = Field(default=5, ge=1, le=50)
    # the local context the questions are drawn from ([questions.local_search]; flat keys such as
    # `max_context_tokens` are read into it too)
    local_search: LocalContextSettings = Field(default_factory=lambda: LocalContextSettings.model_validate(_QUESTIONS_LOCAL))
    temperature: float | None = Field(default=0.0, ge=0, le=2)
    prompt: QuestionsPrompt = Field(
        default=None, description="the question generation prompt (slots {context_data}, {question_count}): "
        + PROMPT_HELP)

    @model_validator(mode="before")
    @classmethod
    def _flat_local_search_keys(cls, data: object) -> object:
        if isinstance(data, Mapping):
            moved = {k: data[k] for k in data if k in LocalContextParams.model_fields}
            data = {k: v for k, v in data.items() if k not in moved}
            nested = data.get("local_search", {})
            if isinstance(nested, Mapping):
                data = data | {"local_search": moved | dict(nested)}
        return _nested_local_context(data, "", _QUESTIONS_LOCAL)

    def local_context(self) -> LocalContextSettings:
        return self.local_search


class RouterConfig(_Section):
    # the engine used when none is asked for: auto (the router decides) or a fixed engine
    default_mode: Literal["auto", "local", "global", "drift", "basic"] = "auto"
    max_cost: float | None = Field(default=None, ge=0)
    max_llm_calls: int | None = Field(default=None, ge=1)
    deadline_s: float | None = Field(default=None, gt=0)
    # the lowest confidence at which the router commits to DRIFT or global search without a second look
    llm_classifier_threshold: float = Field(default=0.55, ge=0, le=1)
    # An engine costing r times local search on this index is committed to only at confidence >= 1 - slack / r
    # (never below llm_classifier_threshold, never above commit_ceiling); below it the chat model is asked once,
    # or offline the question starts with local search and escalates (`router.commitment`).
    commit_cost_slack: float = Field(default=2.0, gt=0)
    commit_ceiling: float = Field(default=0.9, ge=0, le=1)
    # commit to DRIFT whatever its confidence when the index shows it is needed: the question names two or more
    # things of the index and their evidence spreads over several documents (`router.evidence_spread.drift_needed`)
    commit_drift_on_index_evidence: bool = True
    # when an engine finds nothing, try the next engine (global -> local -> basic)
    escalate_on_empty: bool = True
    # when local or basic search marks its context as not answering the question, try DRIFT or global search
    escalate_on_insufficient: bool = True
    # rewrite a follow-up question into a standalone one, using the conversation
    rewrite_followups: bool = True
    rewrite_prompt: RewritePrompt = Field(
        default=None, description="the prompt that rewrites a follow-up into a standalone question (slot "
        "{history}): " + PROMPT_HELP)


class ServeConfig(_Section):
    """`graphroute serve`: where it listens, who may call it and how much it takes at once.

    API keys also come from `$GRAPHROUTE_API_KEYS` (comma-separated) and `--api-key`; budgets here are the
    server-wide defaults for a request that sets none (else `[router]`'s apply).
    """

    host: str = Field(default="127.0.0.1", description=(
        "Address to listen on (`--host`). Loopback unless the operator says otherwise; the command warns when "
        "it listens beyond loopback without an API key."))
    port: int = Field(default=8000, ge=0, le=65535, description=(
        "Port to listen on (`--port`; 0 picks a free one). The port is bound before the address is printed: a "
        "port in use is one error line and exit code 2."))
    api_keys: list[str] = Field(default_factory=list, description=(
        "API keys callers send as `Authorization: Bearer KEY` or `X-API-Key: KEY` (with `--api-key` and "
        "`$GRAPHROUTE_API_KEYS`). Empty: no key needed, for loopback use."))
    max_body_bytes: int = Field(default=256_000, ge=1_024, description=(
        "Largest request body, however it is sent (with a Content-Length or chunked); a larger one gets a "
        "JSON 413."))
    max_question_chars: int = Field(default=16_000, ge=1, description="Longest question; a longer one gets a JSON 413.")
    max_concurrency: int = Field(default=32, ge=1, description=(
        "Requests in flight over the whole server (over all workers); beyond it a JSON 429 with Retry-After "
        "that names this setting."))
    max_concurrency_per_key: int | None = Field(default=None, ge=1, description=(
        "Requests in flight for one API key; beyond it a JSON 429 with Retry-After that names the limit. "
        "Default: with one key or none, `max_concurrency` (one client that fans out uses the whole server); "
        "with several keys, a fair share, `max_concurrency` divided by the number of keys, rounded up."))
    cors_origins: list[str] = Field(default_factory=list, description=(
        "Origins allowed to call the API from a browser page (`--cors-origin`). Empty: CORS is off."))
    allowed_hosts: list[str] = Field(default_factory=list, description=(
        "Without API keys the server answers only requests whose Host header is a loopback address; these "
        "host names (`NAME` for any port, `NAME:PORT`) are answered too (`--allowed-host`)."))
    max_cost: float | None = Field(default=None, ge=0, description=(
        "Default budget, in dollars, of a request that sets none (else `[router] max_cost`)."))
    max_llm_calls: int | None = Field(default=None, ge=1, description=(
        "Default number of model calls a request may make when it sets no budget (else `[router]`'s)."))
    deadline_s: float | None = Field(default=None, gt=0, description=(
        "Default deadline, in seconds, of a request that sets none (else `[router] deadline_s`)."))
    shutdown_grace_s: float = Field(default=30.0, ge=0, description=(
        "On SIGINT/SIGTERM, how long in-flight requests may take to finish while new ones get a JSON 503."))
    warm_rows: int = Field(default=50_000, ge=0, description=(
        "Local-context rows rendered and counted before listening (the highest-degree entities' first); "
        "each costs its line's memory."))
    workers: int = Field(default=1, ge=1, le=64, description=(
        "Worker processes sharing the port (`--workers`). One process runs every request's Python under one "
        "GIL, so it tops out at one core; raise this to the cores the service may use. Each worker loads the "
        "indexes itself, and the `[models]` concurrency limits are divided among them."))
    # They hold the GIL for most of their work, so more threads only interleave the questions (each finishing
    # late, all together, their model calls starting late); one thread takes them in order of arrival.
    cpu_threads: int = Field(default=1, ge=1, le=64, description=(
        "Threads for the CPU steps of a request (building contexts, classifying, planning). One takes them "
        "in order of arrival, so the first model calls start while later questions are still built; a "
        "service that mixes very long steps (a global batch build on a very large index) with short ones "
        "should raise it, as a long step holds back the questions behind it."))
    # Replicas behind a load balancer (docs/guides/deployment.md): what they must share lives in one Redis.
    redis_url: str | None = Field(default=None, description=(
        "Redis shared by every replica (`redis://host:6379/0`, `rediss://` for TLS): the 429 limits and the "
        "daily spending limits count across replicas, and a model call one replica paid for is a cache hit on "
        "the others. Unset: everything counts in this server alone, as before. Redis unreachable: each replica "
        "keeps answering under its own limits and without the shared cache (`/healthz` and the log say so) "
        "until Redis answers again."))
    redis_prefix: str = Field(default="graphroute", min_length=1, description=(
        "Prefix of every Redis key this deployment writes; deployments sharing one Redis need different ones."))
    redis_lease_s: float = Field(default=15.0, ge=1.0, le=3600.0, description=(
        "How long a replica's admission slots and spending reservations outlive it: a replica renews them "
        "every third of this; when it dies, they come back to the others after at most this long."))
    redis_cache_ttl_s: float | None = Field(default=7 * 86400, gt=0, description=(
        "How long a model call stays in the shared cache (None: until Redis evicts it)."))
    max_cost_per_day: float | None = Field(default=None, ge=0, description=(
        "Dollars one API key may spend on model calls per day (UTC). A question is refused (JSON 429 saying "
        "when the limit resets) unless its estimate fits what is left; what it really cost is counted after. "
        "Across replicas with `redis_url`. None: no limit."))
    require_prepared: bool = Field(default=False, description=(
        "Serve only indexes whose derived store `graphroute prepare` built for their tables as they are now: an "
        "index whose store is missing or stale is not loaded (its first open would build the store under "
        "load, minutes on a large index); `/readyz` names it and its requests get a 503. With no index left "
        "the command stops with the reason."))
    max_calls_per_day: int | None = Field(default=None, ge=1, description=(
        "Model calls one API key may make per day (UTC; cache hits are not counted), enforced as "
        "`max_cost_per_day`. None: no limit."))
    key_indexes: dict[str, list[str]] = Field(default_factory=dict, description=(
        "API keys bound to indexes (`\"KEY\" = [\"index\", ...]`): such a key sees only those indexes, on every "
        "endpoint; any other index is a 404 that does not confirm its name exists, and index routing considers "
        "only its indexes. The keys are API keys too. A key not bound here sees every index."))
    keys_file: str | None = Field(default=None, description=(
        "A TOML file of key bindings kept out of graphroute.toml: a `[keys]` table of `\"KEY\" = [\"index\", ...]`, "
        "added to `key_indexes`."))


class SearchConfig(SearchParams):
    """`[search]`: which backend serves lexical and vector search, by size (`shared_context.search_backend`).
    Small indexes stay exact in memory; the defaults put LanceDB FTS / ANN only where memory needs it."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, defer_build=True)


class GraphrouteConfig(_Section):
    models: ModelsConfig = Field(default_factory=ModelsConfig)
    local: LocalSearchConfig = Field(default_factory=LocalSearchConfig)
    global_search: GlobalSearchConfig = Field(default_factory=GlobalSearchConfig)
    drift: DriftSearchConfig = Field(default_factory=DriftSearchConfig)
    basic: BasicSearchConfig = Field(default_factory=BasicSearchConfig)
    questions: QuestionGenConfig = Field(default_factory=QuestionGenConfig)
    router: RouterConfig = Field(default_factory=RouterConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    search: SearchConfig = Field(default_factory=SearchConfig)


_SECTIONS = ("local", "global_search", "drift", "basic", "questions", "router", "serve", "search")


def config_from_mapping(
    data: Mapping[str, object] | None,
    env: Mapping[str, str] | None = None,
    *,
    source: str = "graphroute.toml",
    base_dir: str | Path | None = None,
    allow_prompt_outside: bool = False,
) -> GraphrouteConfig:
    """Validate a parsed `graphroute.toml` (plus the environment for `[models]`). Prompt file paths are
    relative to `base_dir` (the configuration file's folder; default the working directory) and stay inside
    it unless `allow_prompt_outside` (an absolute path is the user's explicit choice)."""
    env = os.environ if env is None else env
    raw = dict(data or {})
    unknown = sorted(set(raw) - {"models", *_SECTIONS})
    if unknown:
        raise ConfigError(
            f"{source}: {unknown[0]}: unknown section (known: models, {', '.join(_SECTIONS)})", key=unknown[0]
        )
    models_raw = raw.get("models", {})
    if not isinstance(models_raw, Mapping):
        raise ConfigError(f"{source}: models: must be a table", key="models")
    models = models_config_from_mapping(models_raw, env, source=source)
    sections: dict[str, Any] = {}
    for name in _SECTIONS:
        value = raw.get(name, {})
        if not isinstance(value, Mapping):
            raise ConfigError(f"{source}: {name}: must be a table", key=name)
        sections[name] = value
    try:
        return GraphrouteConfig.model_validate(
            {"models": models, **sections},
            context={"base_dir": base_dir, "source": source, "allow_prompt_outside": allow_prompt_outside}
        )
    except ValidationError as err:
        first = err.errors()[0]["loc"]
        raise ConfigError(
            format_validation_error(err, source, ""), key=".".join(str(p) for p in first)
        ) from None


def load_config(path: str | Path | None = None, env: Mapping[str, str] | None = None, *,
                allow_prompt_outside: bool = False) -> GraphrouteConfig:
    """Read `graphroute.toml` (the given path, `$GRAPHROUTE_CONFIG`, or `./graphroute.toml`) and the environment."""
    env = os.environ if env is None else env
    file = Path(path) if path is not None else find_config_file(env)
    data = read_toml(file) if file is not None else {}
    return config_from_mapping(data, env, source=file.name if file is not None else "environment",
                               base_dir=file.parent if file is not None else None,
                               allow_prompt_outside=allow_prompt_outside)
