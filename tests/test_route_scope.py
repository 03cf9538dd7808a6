"""`/v1/route` takes the scope `/v1/ask` takes: index routing considers only the indexes holding documents in it,
the engine is routed on the chosen index cut to the scope, and the response says what the scope held. Through
the HTTP service over the Christmas Carol index and a small garden index."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from multi_index_support import build_garden

from engines.config import ServeConfig
from router import Router
from router.service import Service, ServiceThread

QUESTION = "When did Amos Quaile found the seed bank?"  # the garden's


@pytest.fixture(scope="module")
def client(carol_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    root = tmp_path_factory.mktemp("route-scope")
    routers = {"carol": Router.from_index(carol_path), "garden": Router.from_index(build_garden(root / "garden"))}
    try:
        with ServiceThread(Service(routers, ServeConfig())) as svc, \
                httpx.Client(base_url=svc.url, timeout=120) as http:
            yield http
    finally:
        for r in routers.values():
            r.close()


def _route(client: httpx.Client, **body: object) -> dict[str, object]:
    response = client.post("/v1/route", json={"question": QUESTION, **body})
    assert response.status_code == 200, response.text
    got: dict[str, object] = response.json()
    return got


def test_without_a_scope_the_question_goes_to_its_index(client: httpx.Client) -> None:
    got = _route(client)
    assert got["index"] == "garden" and got["scope"] is None


def test_the_scope_says_what_it_held(client: httpx.Client) -> None:
    got = _route(client, scope={"documents": ["Seed bank"]})
    assert got["index"] == "garden"
    assert isinstance(got["scope"], str) and got["scope"].startswith("scope (documents Seed bank): 1 of 3 documents")
    assert got["scope"] in got["reasons"]  # type: ignore[operator]


def test_routing_considers_only_indexes_with_documents_in_the_scope(client: httpx.Client) -> None:
    got = _route(client, scope={"globs": ["a-christmas-carol*"]})  # only the Carol index holds such a document
    assert got["index"] == "carol"
    assert isinstance(got["scope"], str) and "1 of 1 documents (a-christmas-carol.txt)" in got["scope"]


def test_a_scope_no_index_holds(client: httpx.Client) -> None:
    got = _route(client, scope={"where": {"year": 1999}})
    assert got["chosen"] == "none" and got["index"] is None
    assert got["scope"] == "scope (where year = 1999): no index holds a document in it"


def test_a_named_index_is_cut_to_the_scope(client: httpx.Client) -> None:
    got = _route(client, index="garden", scope={"globs": ["orchid*"]})
    assert got["index"] == "garden" and isinstance(got["scope"], str) and "(Orchid collection)" in got["scope"]
    empty = _route(client, index="carol", scope={"documents": ["Seed bank"]})
    assert empty["chosen"] == "none" and "no document of the index is in it" in str(empty["scope"])


def test_a_bad_scope_is_a_named_400(client: httpx.Client) -> None:
    response = client.post("/v1/route", json={"question": QUESTION, "scope": {"where": {"year": {"from": 2019}}}})
    assert response.status_code == 400 and "scope.where" in response.text
