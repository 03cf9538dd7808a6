"""Property-based robustness: whatever the input — arbitrary Unicode questions
and histories, budget and configuration values inside and outside their bounds, a fault at any model stage
of any engine, a corrupted index — each case ends in an answer, a degraded answer or a documented error
type, never another exception, and never past its deadline.

Bounded in `make test` (a few examples per property, derandomised so CI is repeatable); set
GRAPHROUTE_HYPOTHESIS_PROFILE=long (`make test-long`) for the full stage x fault and corruption matrices and many
more examples; a normal run takes a sample of each matrix with a fixed seed (`matrix_sample.py`; the seed is in
pytest's header).
"""

from __future__ import annotations

import asyncio
import math
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st
from matrix_sample import sample
from robust_support import CAROL, carol, loopback_router, responder

from engines.errors import EngineError
from engines.models.errors import ModelError
from router import Budget, BudgetError, Router
from testing.model_server import Fault, LoopbackServer, Reply

# The documented outcomes besides an answer: bad input or budget (ValueError, incl. BudgetError and
# IndexFormatError), a failed engine or a passed deadline (EngineError, incl. DeadlineExceeded), a model
# failure (ModelError). Anything else is a bug.
DOCUMENTED = (ValueError, EngineError, ModelError)
GRACE = 2.5  # see test_robust_deadlines: uninterruptible CPU work on a loaded machine


@pytest.fixture(scope="module")
def offline_router() -> Iterator[Router]:
    with Router(carol()) as router:
        yield router


# ---------------------------------------------------------------------------- questions and histories

questions = st.one_of(
    st.text(max_size=60),
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "Zs", "Zl", "Zp"]), max_size=8),
    st.text(alphabet=st.characters(codec=None, categories=["Cs"]), min_size=1, max_size=3).map(lambda s: "Who " + s),
    st.sampled_from(["Who is Scrooge?", "What are the main themes?", "斯克鲁奇是谁？", "Scrooge " * 3000]),
)
messages = st.fixed_dictionaries({
    "role": st.one_of(st.sampled_from(["user", "assistant", "system"]), st.text(max_size=5), st.none()),
    "content": st.one_of(st.text(max_size=40), st.none(), st.integers()),
})
histories = st.one_of(
    st.none(), st.text(max_size=20), st.integers(),
    st.lists(st.one_of(st.text(max_size=40), messages), max_size=4),
)


def _outcome(router: Any, question: Any, **kw: Any) -> Any:
    try:
        return router.ask(question, **kw)
    except DOCUMENTED as err:
        return err


@given(question=questions, history=histories)
def test_any_question_and_history_ends_in_an_answer_or_a_documented_error(
    offline_router: Router, question: str, history: Any
) -> None:
    outcome = _outcome(offline_router, question, history=history, mode="local")
    if not isinstance(outcome, BaseException):
        assert isinstance(outcome.text, str) and (outcome.text.strip() or outcome.degraded)


# ---------------------------------------------------------------------------- budgets

budget_values = st.one_of(
    st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 10**6), st.booleans(),
    st.text(max_size=4),
)


@given(max_cost=budget_values, max_calls=budget_values, deadline=budget_values)
def test_any_budget_is_met_or_refused_clearly(offline_router: Router, max_cost: Any, max_calls: Any,
                                              deadline: Any) -> None:
    try:
        budget = Budget(max_cost, max_calls, deadline)
    except BudgetError as err:
        assert "budget" in str(err)
        return
    started = time.perf_counter()
    outcome = _outcome(offline_router, "Who is Bob Cratchit?", budget=budget)
    if budget.deadline_s is not None:
        assert time.perf_counter() - started < budget.deadline_s + GRACE
    if not isinstance(outcome, BaseException) and budget.max_llm_calls is not None:
        assert outcome.usage.total.llm_calls <= budget.max_llm_calls


# ---------------------------------------------------------------------------- configuration

config_values = st.one_of(
    st.none(), st.integers(-5, 10**7), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.text(max_size=6),
)
CONFIG_KEYS = [
    ("local", "max_context_tokens"), ("local", "top_k_mapped_entities"), ("local", "text_unit_prop"),
    ("local", "temperature"), ("basic", "k"), ("basic", "max_context_tokens"), ("router", "deadline_s"),
    ("router", "max_cost"), ("router", "max_llm_calls"), ("router", "llm_classifier_threshold"),
    ("global_search", "data_max_tokens"), ("drift", "k_followups"),
]


@given(key=st.sampled_from(CONFIG_KEYS), value=config_values)
def test_any_config_value_loads_or_is_refused_naming_its_key(key: tuple[str, str], value: Any) -> None:
    from engines.config import config_from_mapping

    section, name = key
    try:
        config = config_from_mapping({section: {name: value}})
    except ValueError as err:
        raise AssertionError(f"config errors are ConfigError, got {type(err).__name__}: {err}") from err
    except ModelError as err:
        assert name in str(err) or section in str(err), err
        return
    if section in ("local", "basic", "router"):  # cheap engines: the accepted value must also answer
        router = Router(carol(), config=config)
        outcome = _outcome(router, "Who is Bob Cratchit?", mode="basic" if section == "basic" else "local")
        if config.router.deadline_s is not None and not isinstance(outcome, BaseException):
            assert outcome.seconds < config.router.deadline_s + GRACE


# ---------------------------------------------------------------------------- stage x fault over every engine

STAGES = {  # the model stages each engine (and the router) calls
    "local": ["local_answer", "rewrite", "route"],
    "basic": ["basic_answer"],
    "global": ["global_map", "global_reduce"],
    "drift": ["drift_hyde", "drift_primer", "drift_followup", "drift_reduce"],
}
FAULTS = ["429", "500", "timeout", "invalid json", "truncated", "empty", "think block"]
MATRIX = [(engine, stage, fault) for engine, stages in STAGES.items() for stage in stages for fault in FAULTS]
DEADLINE_S = 8.0


def _think(body: dict[str, Any], offline: Any = responder()) -> Reply:
    return Reply("<think>Let me reason about this first.</think>\n" + offline(body))


def _script(server: LoopbackServer, stage: str, fault: str) -> None:
    from robust_support import MARKERS

    marker = MARKERS[stage]
    kinds = {"429": Fault("rate_limit", retry_after=0), "500": Fault("server_error"),
             "timeout": Fault("hang", hang_s=4), "invalid json": Fault("malformed"),
             "truncated": Fault("truncate", keep=0.4), "empty": Fault("empty")}
    if fault == "think block":
        server.add_rule(None, system=marker, reply=_think)
    elif fault == "invalid json":
        server.add_rule(None, system=marker, reply="Sorry, I cannot answer in JSON. {oops")
    else:
        server.add_rule(None, system=marker, fault=kinds[fault], reply=responder())


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    with LoopbackServer(default_reply=responder()) as srv:
        yield srv


@pytest.fixture(scope="module")
def matrix_router(server: LoopbackServer) -> Iterator[Router]:
    """One router for every case (a router is built once in real use too: cases time questions, not set-up)."""
    router = loopback_router(server, warm=(), timeout_s=1.5, llm_classifier_threshold=1.0)
    router.config.drift.k_followups, router.config.drift.n_depth = 2, 1  # keep DRIFT to a handful of calls
    for name in ("local", "basic", "global", "drift"):  # built before any case is timed
        router.engine(name)
    yield router
    router.close()


def _run_case(server: LoopbackServer, router: Router, engine: str, stage: str, fault: str) -> None:
    server.reset()
    _script(server, stage, fault)
    history = ["Who is Ebenezer Scrooge?"] if stage == "rewrite" else None
    mode = "auto" if stage == "route" else engine
    question = "And what about his nephew?" if stage == "rewrite" else "How does Scrooge treat Bob Cratchit?"

    async def ask() -> Any:
        try:
            return await router.aask(question, history=history, mode=mode, budget=Budget(deadline_s=DEADLINE_S))
        except DOCUMENTED as err:
            return err
        finally:
            await router.models.aclose()

    started = time.perf_counter()
    outcome = asyncio.run(ask())
    assert time.perf_counter() - started < DEADLINE_S + GRACE
    if isinstance(outcome, BaseException):
        assert getattr(outcome, "usage", None) is not None, f"{type(outcome).__name__} carries no usage"
        return
    assert "<think>" not in outcome.text and "Let me reason" not in outcome.text
    if not outcome.text.strip():
        assert outcome.degraded, "an empty answer must say why"


@pytest.mark.parametrize("case", sample(MATRIX, 6, "stage-fault"), ids="-".join)
def test_stage_fault_matrix(server: LoopbackServer, matrix_router: Router, case: tuple[str, str, str]) -> None:
    _run_case(server, matrix_router, *case)


# ---------------------------------------------------------------------------- corrupted indexes

def _drop(table: pa.Table, column: str) -> pa.Table:
    return table.drop_columns([column]) if column in table.column_names else table


def _replace(table: pa.Table, column: str, values: pa.Array) -> pa.Table:
    if column not in table.column_names:
        return table
    return table.set_column(table.column_names.index(column), column, values)


CORRUPTIONS: dict[str, Any] = {
    "drop column": lambda t, c: _drop(t, c),
    "all null": lambda t, c: _replace(t, c, pa.nulls(len(t), t.schema.field(c).type)) if c in t.column_names else t,
    "wrong type": lambda t, c: _replace(t, c, pa.array([[1, 2]] * len(t))),
    "strings": lambda t, c: _replace(t, c, pa.array(["x"] * len(t))),
    "infinite": lambda t, c: _replace(t, c, pa.array([math.inf] * len(t))),
    "nan": lambda t, c: _replace(t, c, pa.array([math.nan] * len(t))),
    "binary": lambda t, c: _replace(t, c, pa.array([b"\xff\xfe\x00"] * len(t), pa.binary())),
    "empty table": lambda t, c: t.slice(0, 0),
    "duplicate rows": lambda t, c: pa.concat_tables([t, t]),
}
TABLE_COLUMNS = {
    "entities.parquet": ["id", "title", "description", "human_readable_id", "text_unit_ids"],
    "relationships.parquet": ["source", "target", "weight", "combined_degree", "description"],
    "community_reports.parquet": ["community", "rank", "full_content", "level"],
    "text_units.parquet": ["id", "text", "n_tokens", "document_ids"],
    "communities.parquet": ["community", "level", "parent", "entity_ids"],
}
INDEX_MATRIX = [(f, c, k) for f, cols in TABLE_COLUMNS.items() for c in cols for k in CORRUPTIONS]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("corrupt")


def _corrupt_case(scratch: Path, file: str, column: str, kind: str) -> None:
    from shared_context import load_index

    folder = scratch / "index"
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(CAROL, folder)
    table = pq.read_table(folder / file)
    try:
        corrupted = CORRUPTIONS[kind](table, column)
    except (pa.ArrowInvalid, pa.ArrowTypeError, KeyError):
        return  # this corruption cannot be expressed for this column's type
    pq.write_table(corrupted, folder / file)
    try:
        index = load_index(folder)
    except ValueError as err:  # IndexFormatError is a ValueError: it must name the file
        assert file in str(err) or file.split(".")[0] in str(err), err
        return
    outcome = _outcome(Router(index), "Who is Bob Cratchit?", mode="local", budget=Budget(deadline_s=DEADLINE_S))
    if not isinstance(outcome, BaseException):
        assert isinstance(outcome.text, str)


@pytest.mark.parametrize("case", sample(INDEX_MATRIX, 3, "corrupted-index"), ids="-".join)
def test_corrupted_index_matrix(scratch: Path, case: tuple[str, str, str]) -> None:
    _corrupt_case(scratch, *case)


# Corruptions a sampled run once failed on: always run, whatever the sample.
FOUND_BY_SAMPLING = [("communities.parquet", "parent", "empty table")]


@pytest.mark.parametrize("case", FOUND_BY_SAMPLING, ids="-".join)
def test_corruptions_found_by_sampling(scratch: Path, case: tuple[str, str, str]) -> None:
    assert case in INDEX_MATRIX
    _corrupt_case(scratch, *case)
