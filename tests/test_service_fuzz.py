"""Every field of every endpoint of `graphroute serve`, one at a time, given any JSON value (huge integers,
NaN, lone surrogates, nesting, wrong types): the answer is a 2xx or a JSON 4xx, never a 5xx.

Hypothesis with a fixed seed (`derandomize`) and a bounded number of examples per endpoint, so the run is the
same every time and takes seconds; the offline model answers, so a well-formed request costs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from router import Router
from router.service import Service, ServiceThread
from router.service.openai_compat import _BOOKKEEPING, _HONOURED, _ONLY_DEFAULT

QUESTION = "Who is Bob Cratchit?"
CHAT_BASE = {"model": "graphroute-basic", "messages": [{"role": "user", "content": QUESTION}]}
# endpoint -> (a well-formed body, every field it reads)
ENDPOINTS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "/v1/ask": ({"question": QUESTION, "mode": "basic"},
                ["question", "index", "history", "mode", "budget", "budget.max_cost", "budget.max_llm_calls",
                 "budget.deadline_s", "budget.unknown"]),
    "/v1/route": ({"question": QUESTION},
                  ["question", "index", "history", "budget", "budget.max_cost", "budget.max_llm_calls",
                   "budget.deadline_s"]),
    "/v1/chat/completions": (CHAT_BASE, ["model", "messages", "messages.0", "messages.0.role",
                                         "messages.0.content", "budget", "budget.max_llm_calls",
                                         *_HONOURED, *_ONLY_DEFAULT, *_BOOKKEEPING, "unknown_field"]),
    "/v1/indexes/carol/graph": ({"citations": [{"kind": "Entities", "id": "1"}], "neighbours": 2},
                                ["citations", "neighbours", "citations.0", "citations.0.kind", "citations.0.id",
                                 "other"]),
}

SURROGATES = st.text(alphabet=st.characters(codec=None, categories=["Cs"]), min_size=1, max_size=3)
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.integers(min_value=2**63 - 2, max_value=10**320),
    st.integers(max_value=-(2**63) + 1, min_value=-(10**320)), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), SURROGATES, st.sampled_from(["", "graphroute", "local", "user", "Entities", "text"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.one_of(st.text(max_size=6), SURROGATES), inner, max_size=3),
                      max_leaves=8)
FUZZ = settings(max_examples=60, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@pytest.fixture(scope="module")
def http(carol_path: Path) -> Iterator[httpx.Client]:
    with Router.from_index(carol_path) as router, ServiceThread(Service({"carol": router})) as svc, \
            httpx.Client(base_url=svc.url, timeout=120, headers={"Content-Type": "application/json"}) as client:
        yield client


def _with(body: dict[str, Any], dotted: str, value: Any) -> dict[str, Any]:
    """A copy of `body` with the field at the dotted path (list positions as numbers) set to `value`."""
    out = json.loads(json.dumps(body))
    *parents, last = dotted.split(".")
    target: Any = out
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target.setdefault(part, {})
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return out


def _no_server_error(resp: httpx.Response) -> None:
    assert resp.status_code < 500, (resp.status_code, resp.text[:300])
    if resp.status_code >= 400:
        assert resp.headers["content-type"] == "application/json" and resp.json()["error"]["message"]


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_any_value_of_any_field_is_never_a_5xx(http: httpx.Client, path: str) -> None:
    base, fields = ENDPOINTS[path]

    # a well-formed /v1/ask is answered in full (the offline model, a fraction of a second): fewer examples
    @settings(FUZZ, max_examples=12 if path == "/v1/ask" else 60)
    @given(field=st.sampled_from(fields), value=VALUES)
    def check(field: str, value: Any) -> None:
        body = json.dumps(_with(base, field, value), allow_nan=True)  # NaN literals and \\ud800 escapes
        _no_server_error(http.post(path, content=body))

    check()


@FUZZ
@given(kind=st.one_of(st.sampled_from(["text_units", "documents", "entities"]), st.text(max_size=8)),
       ident=st.one_of(st.text(min_size=1, max_size=30), SURROGATES, st.integers().map(str)),
       model=st.one_of(st.text(min_size=1, max_size=20), SURROGATES))
def test_any_record_or_model_id_in_a_path_is_never_a_5xx(http: httpx.Client, kind: str, ident: str,
                                                          model: str) -> None:
    def segment(text: str) -> str:
        return quote(text.encode("utf-8", "surrogatepass"), safe="")

    _no_server_error(http.get(f"/v1/indexes/carol/{segment(kind) or 'x'}/{segment(ident)}"))
    _no_server_error(http.get(f"/v1/models/{segment(model)}"))
