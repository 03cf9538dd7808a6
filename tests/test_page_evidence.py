"""What the web page is given to point at the evidence: a cited passage's highlights (the sentences best
matching what the answer quoted) and, for a global or DRIFT answer, the graph of its reports' top entities,
capped, with the number it hides."""

from __future__ import annotations

import re

import httpx

from router import Router
from router.service import Service, ServiceThread
from router.service.graph_view import GRAPH_NODES, GraphRequest, cited_graph, parse_graph_request
from router.service.passage_marks import quoted_spans
from shared_context.index import Index

PASSAGE = ("The office was cold. Bob Cratchit, the clerk, warmed his hands at the candle. Scrooge kept the "
           "coal-box in his own room.\nOutside the fog came pouring in at every chink.")


def test_the_quoted_sentence_is_highlighted() -> None:
    text = PASSAGE
    spans = quoted_spans(text, "Bob Cratchit, Scrooge's clerk, warms his hands at a candle")
    assert [text[a:b] for a, b in spans] == ["Bob Cratchit, the clerk, warmed his hands at the candle."]
    assert quoted_spans(text, "the and of") == []  # no content word: nothing to point at
    wide = "Ünïcödé 😀 first. The clerk warmed his hands."
    (a, b), = quoted_spans(wide, "clerk warmed hands")
    assert wide.encode("utf-16-le")[2 * a: 2 * b].decode("utf-16-le") == "The clerk warmed his hands."


def test_a_reports_graph_is_capped_and_counts_what_it_hides(carol: Index) -> None:
    reports = [("Reports", str(r.community)) for r in carol.community_reports]
    graph = cited_graph(carol, GraphRequest(reports, neighbours=6))
    nodes, hidden = graph["nodes"], graph["hidden"]
    assert isinstance(nodes, list) and isinstance(hidden, int)
    assert len(nodes) == GRAPH_NODES and hidden > 0
    assert all(isinstance(n, dict) and n["cited"] for n in nodes)  # the reports' members, no neighbours
    more = cited_graph(carol, parse_graph_request({"citations": [{"kind": k, "id": i} for k, i in reports],
                                                   "max_nodes": 2 * GRAPH_NODES}))
    assert isinstance(more["nodes"], list) and len(more["nodes"]) == 2 * GRAPH_NODES
    assert isinstance(more["hidden"], int) and more["hidden"] == hidden - GRAPH_NODES
    # every report contributes its best-connected member first
    top = {n["title"] for n in nodes if isinstance(n, dict)}
    assert "EBENEZER SCROOGE" in top


def test_the_record_endpoint_returns_highlights(carol: Index) -> None:
    with Router(carol) as router, ServiceThread(Service({"carol": router})) as svc, \
            httpx.Client(base_url=svc.url, timeout=30) as client:
        unit = carol.text_units[3]
        sentences = list(re.finditer(r"(?<=[.!?] )[A-Z][^.!?]{60,}[.!?]", unit.text))
        target = sentences[len(sentences) // 2]  # a sentence from the middle of the passage, as an answer quotes it
        quote = " ".join(target.group().split())
        body = client.get(f"/v1/indexes/carol/text_units/{unit.short_id}", params={"quote": quote}).json()
        marks = body["highlights"]
        assert marks and any(m["start"] <= target.start() < m["end"] for m in marks), (quote, marks)
        assert client.get(f"/v1/indexes/carol/text_units/{unit.short_id}").json()["highlights"] == []
        too_long = client.get(f"/v1/indexes/carol/text_units/{unit.short_id}", params={"quote": "x" * 5000})
        assert too_long.status_code == 400 and too_long.json()["error"]["param"] == "quote"
        bad = client.post("/v1/indexes/carol/graph", json={"citations": [], "max_nodes": 0})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "max_nodes"
