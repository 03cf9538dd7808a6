"""API keys bound to indexes: a key bound to one index gets 404 for another on every endpoint, in the same words
as an index that does not exist, never sees its name, and index routing never picks it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from multi_index_support import build_garden

from engines.config import ServeConfig
from router import Router
from router.service import Service, ServiceThread
from router.service.tenants import TenantConfigError, Tenants, read_keys_file

ALL = "key-for-everything"
GARDEN_ONLY = "key-for-the-garden"
HIDDEN = "carol"


@pytest.fixture(scope="module")
def service(carol_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceThread]:
    root = tmp_path_factory.mktemp("tenants")
    keys_file = root / "keys.toml"
    keys_file.write_text(f'[keys]\n"{GARDEN_ONLY}" = ["garden"]\n', encoding="utf-8")
    routers = {HIDDEN: Router.from_index(carol_path), "garden": Router.from_index(build_garden(root / "garden"))}
    try:
        with ServiceThread(Service(routers, ServeConfig(keys_file=str(keys_file)), api_keys=[ALL])) as svc:
            yield svc
    finally:
        for r in routers.values():
            r.close()


def _client(service: ServiceThread, key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=service.url, headers=headers, timeout=120)


# every endpoint that takes an index by name: (method, path template, JSON body or None)
NAMED = [
    ("POST", "/v1/ask", {"question": "Who is Bob Cratchit?", "index": "{name}"}),
    ("POST", "/v1/route", {"question": "Who is Bob Cratchit?", "index": "{name}"}),
    ("POST", "/v1/chat/completions", {"model": "graphroute@{name}",
                                      "messages": [{"role": "user", "content": "Who is Bob Cratchit?"}]}),
    ("GET", "/v1/models/graphroute@{name}", None),
    ("GET", "/v1/indexes/{name}/entities/BOB%20CRATCHIT", None),
    ("GET", "/v1/indexes/{name}/text_units/1", None),
    ("GET", "/v1/indexes/{name}/documents/0", None),
    ("POST", "/v1/indexes/{name}/graph", {"citations": [{"kind": "Entities", "id": "1"}]}),
]


@pytest.mark.parametrize(("method", "path", "body"), NAMED)
def test_another_index_is_a_404_like_one_that_does_not_exist(service: ServiceThread, method: str, path: str,
                                                             body: dict[str, object] | None) -> None:
    def call(client: httpx.Client, name: str) -> httpx.Response:
        raw = json.dumps(body).replace("{name}", name) if body is not None else None
        return client.request(method, path.replace("{name}", name), content=raw,
                              headers={"content-type": "application/json"})

    with _client(service, GARDEN_ONLY) as bound, _client(service, ALL) as everything:
        hidden, missing = call(bound, HIDDEN), call(bound, "nosuchindex")
        assert hidden.status_code == missing.status_code == 404
        assert hidden.text.replace(HIDDEN, "nosuchindex") == missing.text
        assert call(everything, HIDDEN).status_code == 200  # the index is there: only the bound key cannot see it


def test_listings_show_only_the_keys_indexes(service: ServiceThread) -> None:
    with _client(service, GARDEN_ONLY) as bound, _client(service, None) as anonymous, _client(service, ALL) as all_:
        for path in ("/v1/models", "/v1/indexes", "/healthz"):
            got = bound.get(path)
            assert got.status_code == 200 and "garden" in got.text and HIDDEN not in got.text.lower(), path
        assert [i["name"] for i in bound.get("/v1/indexes").json()["indexes"]] == ["garden"]
        assert set(anonymous.get("/healthz").json()) == {"status"}  # no key: up or degraded, no index named
        assert [i["name"] for i in all_.get("/v1/indexes").json()["indexes"]] == [HIDDEN, "garden"]


def test_index_routing_never_picks_an_index_outside_the_key(service: ServiceThread) -> None:
    with _client(service, GARDEN_ONLY) as bound, _client(service, ALL) as everything:
        question = {"question": "Who is Bob Cratchit?"}
        assert everything.post("/v1/route", json=question).json()["index"] == HIDDEN
        routed = bound.post("/v1/route", json=question).json()
        assert routed["index"] == "garden" and HIDDEN not in json.dumps(routed).lower()
        answer = bound.post("/v1/ask", json=question)
        assert answer.status_code == 200 and answer.json()["index"] == "garden"
        assert HIDDEN not in json.dumps(answer.json()["route"]).lower()
        assert all(c["document_titles"] != ["A Christmas Carol"] for c in answer.json()["citations"])
        chat = bound.post("/v1/chat/completions", json={"model": "graphroute", "messages": [
            {"role": "user", "content": "Who is Bob Cratchit?"}]}).json()
        assert chat["graphroute"]["index"] == "garden"


def test_metrics_labels_only_the_keys_indexes(service: ServiceThread) -> None:
    with _client(service, GARDEN_ONLY) as bound, _client(service, ALL) as everything:
        assert everything.post("/v1/ask", json={"question": "Who is Scrooge?", "index": HIDDEN}).status_code == 200
        assert bound.post("/v1/ask", json={"question": "Who founded the seed bank?"}).status_code == 200
        assert f'index="{HIDDEN}"' in everything.get("/metrics").text
        mine = bound.get("/metrics").text
        assert 'index="garden"' in mine and HIDDEN not in mine


def test_bindings_are_checked(tmp_path: Path) -> None:
    with pytest.raises(TenantConfigError, match="'nope', not among the indexes served"):
        Tenants(["k"], {"k": ["nope"]}, ["a"])
    with pytest.raises(TenantConfigError, match="to no index"):
        Tenants(["k"], {"k": []}, ["a"])
    bad = tmp_path / "keys.toml"
    bad.write_text('keys = "k"\n', encoding="utf-8")
    with pytest.raises(TenantConfigError, match="no \\[keys\\] table"):
        read_keys_file(bad)
    with pytest.raises(TenantConfigError, match="cannot read the keys file"):
        read_keys_file(tmp_path / "missing.toml")
    tenants = Tenants(["open", "bound"], {"bound": ["b"]}, ["a", "b"])
    assert tenants.visible(0, True) == ["a", "b"] and tenants.visible(1, True) == ["b"]
    assert tenants.visible(None, False) == [] and tenants.visible(0, False) == []


def test_ask_with_a_scope(service: ServiceThread) -> None:
    with _client(service, GARDEN_ONLY) as bound:
        scoped = bound.post("/v1/ask", json={"question": "Who is Odile Verrill?",
                                             "scope": {"documents": ["Orchid collection"]}})
        assert scoped.status_code == 200, scoped.text
        body = scoped.json()
        assert body["notes"][0].startswith("scope (documents Orchid collection): 1 of 3 documents")
        assert all(c["document_titles"] == ["Orchid collection"] for c in body["citations"]) and body["citations"]
        bad = bound.post("/v1/ask", json={"question": "Who?", "scope": {"where": {"year": {"from": 1}}}})
        assert bad.status_code == 400 and "scope" in bad.json()["error"]["message"]
        wrong = bound.post("/v1/ask", json={"question": "Who?", "scope": ["Seed bank"]})
        assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "scope"
        chat = bound.post("/v1/chat/completions", json={
            "model": "graphroute", "scope": {"globs": ["orchid*"]},
            "messages": [{"role": "user", "content": "Who is Odile Verrill?"}]})
        assert chat.status_code == 200, chat.text
        g = chat.json()["graphroute"]
        assert g["notes"][0].startswith("scope (matching orchid*): 1 of 3 documents")


def test_a_binding_to_an_index_not_served_is_one_clear_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from router.cli import main

    (tmp_path / "graphroute.toml").write_text('[serve.key_indexes]\n"k" = ["elsewhere"]\n', encoding="utf-8")
    (tmp_path / "ix").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--index", f"here={tmp_path / 'ix'}", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "'elsewhere', not among the indexes served (here)" in err and "Traceback" not in err
