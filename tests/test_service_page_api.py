"""What the web page reads besides answers: the answer's citations by name with the graph of what it cited
(`POST /v1/indexes/{name}/graph`), one entity opened (`/v1/indexes/{name}/entities/{id}`), the stage events
in the stream, the vendored libraries with their licences, and the security headers."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from router import Router
from router.service import Service, ServiceThread
from router.service.app import STATIC
from router.service.graph_view import REPORT_ENTITIES

VENDORED = {  # the files README.md in static/vendor names, unchanged from their npm packages
    "marked/marked.min.js": "3e7e7d7feb3e5d58cb6c804f68ab5c24cc7e5eb6270fd6e5cbb9124739217d0c",
    "dompurify/purify.min.js": "f69a46022ab1f53e969c8ebbca98172c8995785a9b3be72ea4a12d25b1a1bf67",
    "cytoscape/cytoscape.min.js": "71fa9ebec21a7ca2c40cff6aacc30d1f6464e363662ad4b2c197e1adc770cd94",
}


@pytest.fixture(scope="module")
def router(carol_path: Path) -> Iterator[Router]:
    with Router.from_index(carol_path) as r:
        yield r


@pytest.fixture(scope="module")
def http(router: Router) -> Iterator[httpx.Client]:
    with ServiceThread(Service({"carol": router})) as svc, httpx.Client(base_url=svc.url, timeout=60) as client:
        yield client


def _stream(http: httpx.Client, messages: list[dict[str, str]]) -> tuple[list[dict[str, object]], dict[str, object]]:
    """(graphroute_event of each chunk, the final graphroute object) of a streamed chat completion."""
    events: list[dict[str, object]] = []
    final: dict[str, object] = {}
    with http.stream("POST", "/v1/chat/completions",
                     json={"model": "graphroute@carol", "stream": True, "messages": messages}) as resp:
        assert resp.status_code == 200
        for line in resp.iter_lines():
            if line.startswith("data: {"):
                chunk = json.loads(line[6:])
                assert len(chunk["choices"]) == 1  # every chunk stays a valid OpenAI chunk
                if "graphroute_event" in chunk:
                    events.append(chunk["graphroute_event"])
                final = chunk.get("graphroute", final)
    return events, final


def test_stream_reports_stages_and_the_graph_names_what_the_answer_cited(http: httpx.Client) -> None:
    events, g = _stream(http, [{"role": "user", "content": "Who is Bob Cratchit?"}])
    stages = [e for e in events if e["type"] == "stage"]
    first = {k: v for k, v in stages[0].items() if k != "context_tokens"}
    assert first == {"type": "stage", "engine": "local", "stage": "build_context"}
    assert isinstance(stages[0]["context_tokens"], int) and stages[0]["context_tokens"] > 1000
    assert events[0]["type"] == "route"  # the route first, the stages after it

    citations = [{"kind": c["kind"], "id": c["id"]} for c in g["citations"]]  # type: ignore[union-attr]
    body = http.post("/v1/indexes/carol/graph", json={"citations": citations, "neighbours": 3}).json()
    named = {(c["kind"], c["id"]): c for c in body["citations"]}
    assert named[("Entities", "8")]["label"] == "BOB CRATCHIT"
    assert named[("Entities", "8")]["preview"].startswith("BOB CRATCHIT: Bob Cratchit is the humble")
    assert named[("Relationships", "7")]["label"] == "BOB CRATCHIT → EBENEZER SCROOGE"
    nodes = {n["id"]: n for n in body["nodes"]}
    assert nodes["8"]["cited"] and nodes["8"]["title"] == "BOB CRATCHIT"
    assert any(not n["cited"] for n in nodes.values())  # neighbours come along
    ids = set(nodes)
    assert all(e["source"] in ids and e["target"] in ids for e in body["edges"])
    assert any(e["id"] == "7" and e["cited"] for e in body["edges"])


def test_graph_of_passages_only_shows_their_entities(http: httpx.Client, router: Router) -> None:
    unit = router.index.text_units[5]
    body = http.post("/v1/indexes/carol/graph", json={"citations": [{"kind": "Sources", "id": unit.short_id}],
                                                       "neighbours": 0}).json()
    assert body["citations"][0]["label"] == f"passage {unit.short_id} of a-christmas-carol.txt"
    titles = {n["title"] for n in body["nodes"]}
    expected = {router.index.entities[int(p)].title for p in router.index.text_unit_entities[5][:8]}
    assert titles == expected and body["edges"] == []


def test_graph_of_reports_only_shows_their_communities_best_connected_members(http: httpx.Client,
                                                                              router: Router) -> None:
    ix = router.index
    report = max(ix.community_reports, key=lambda r: r.size)
    members = ix.communities[ix.community_pos[report.community]].entity_ids
    body = http.post("/v1/indexes/carol/graph", json={"citations": [{"kind": "Reports", "id": str(report.community)}],
                                                       "neighbours": 0}).json()
    assert body["citations"][0]["label"] == report.title
    degrees = sorted((ix.entities[ix.entity_pos[e]].degree for e in members), reverse=True)
    # the report's best-connected members, cited through it, with the relationships among them and no neighbour
    assert [n["degree"] for n in body["nodes"]] == degrees[:REPORT_ENTITIES] and all(n["cited"] for n in body["nodes"])
    shown = {n["id"] for n in body["nodes"]}
    assert body["edges"] and all(e["source"] in shown and e["target"] in shown for e in body["edges"])
    assert body["hidden"] == 0


def test_unknown_ids_are_named_not_dropped(http: httpx.Client) -> None:
    body = http.post("/v1/indexes/carol/graph", json={"citations": [{"kind": "Entities", "id": "999999"},
                                                                    {"kind": "Reports", "id": "x"}]}).json()
    assert [c["known"] for c in body["citations"]] == [False, False]
    assert body["citations"][0]["label"] == "Entities 999999 (not in this index)"
    assert body["nodes"] == [] and body["edges"] == []


@pytest.mark.parametrize(("payload", "param"), [
    ({"citations": "Entities 8"}, "citations"),
    ({"citations": [{"kind": "Planets", "id": "1"}]}, "citations[0].kind"),
    ({"citations": [{"kind": "Entities", "id": ""}]}, "citations[0].id"),
    ({"citations": [{"kind": "Entities", "id": ["8"]}]}, "citations[0].id"),
    ({"citations": [], "neighbours": 99}, "neighbours"),
    ({"citations": [], "neighbours": True}, "neighbours"),
    ({"citations": [], "depth": 2}, "depth"),
    ({"citations": [{"kind": "Entities", "id": "8"}] * 201}, "citations"),
])
def test_graph_input_is_checked(http: httpx.Client, payload: dict[str, object], param: str) -> None:
    resp = http.post("/v1/indexes/carol/graph", json=payload)
    assert resp.status_code == 400 and resp.json()["error"]["param"] == param, resp.text


def test_graph_refuses_other_methods_indexes_and_bodies(http: httpx.Client) -> None:
    assert http.get("/v1/indexes/carol/graph").status_code == 405
    missing = http.post("/v1/indexes/nope/graph", json={"citations": []})
    assert missing.status_code == 404 and "unknown index 'nope'" in missing.json()["error"]["message"]
    bad = http.post("/v1/indexes/carol/graph", content=b"{", headers={"content-type": "application/json"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_json"


def test_an_entity_opens_by_short_id_id_or_title(http: httpx.Client, router: Router) -> None:
    by_short = http.get("/v1/indexes/carol/entities/8").json()
    assert by_short["title"] == "BOB CRATCHIT" and by_short["type"] == "PERSON"
    assert by_short["description"].startswith("Bob Cratchit is the humble")
    assert by_short["relationship_count"] == len(router.index.entity_relationships[router.index.entity_pos[by_short["id"]]])
    assert "EBENEZER SCROOGE" in {r["other"] for r in by_short["relationships"]}
    assert by_short["sources"][0]["document"]["title"] == "a-christmas-carol.txt"
    assert http.get(f"/v1/indexes/carol/entities/{by_short['id']}").json()["short_id"] == "8"
    assert http.get("/v1/indexes/carol/entities/BOB CRATCHIT").json()["short_id"] == "8"
    for ident in ("nobody", "..%2F..%2Fpyproject.toml", "%2Fetc%2Fpasswd"):
        resp = http.get(f"/v1/indexes/carol/entities/{ident}")
        assert resp.status_code == 404 and resp.json()["error"]["param"] == "id"


def test_page_and_static_files_carry_the_security_headers(http: httpx.Client) -> None:
    for path in ("/", "/static/app.js", "/static/vendor/cytoscape/cytoscape.min.js", "/v1/indexes"):
        resp = http.get(path)
        assert resp.status_code == 200
        csp = resp.headers["content-security-policy"]
        assert "script-src 'self';" in csp and "'unsafe-inline'" not in csp and "frame-ancestors 'none'" in csp
        assert resp.headers["x-content-type-options"] == "nosniff"
    page = http.get("/").text
    # no inline code or style for the policy to refuse: every script from a file, no handler or style attribute
    assert re.findall(r"<script(?![^>]*\ssrc=)", page) == [] and len(re.findall(r"<script\s", page)) == 6
    assert re.search(r"\s(on[a-z]+|style)\s*=", page) is None and "<style" not in page
    assert http.get("/static/../pyproject.toml").status_code == 404
    assert http.get("/static/vendor/..%2F..%2Fapp.py").status_code == 404


def test_vendored_libraries_are_unchanged_and_licensed() -> None:
    vendor = STATIC / "vendor"
    for name, digest in VENDORED.items():
        assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == digest, name
    assert "Permission is hereby granted" in (vendor / "marked" / "LICENSE.md").read_text()
    assert "Apache License" in (vendor / "dompurify" / "LICENSE").read_text()
    assert "Permission is hereby granted" in (vendor / "cytoscape" / "LICENSE").read_text()
    readme = (vendor / "README.md").read_text()
    for pinned in ("| 15.0.12 | MIT |", "| 3.5.0 | MPL-2.0 OR Apache-2.0 |", "| 3.35.0 | MIT |"):
        assert pinned in readme
    page = (STATIC / "index.html").read_text()
    assert all(f'src="/static/vendor/{name}"' in page for name in VENDORED)
