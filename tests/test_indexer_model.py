"""Model extraction path against the loopback OpenAI-compatible server with scripted replies (no mocks)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pydantic import SecretStr

from engines.models.cache import ModelCallCache
from engines.models.config import ModelEndpoint
from engines.models.openai_backend import OpenAIChatModel
from indexer import IndexerConfig, build_index
from shared_context import load_index
from testing.model_server import LoopbackServer

DOC_A = "Dr. Amara Osei leads the Tidewater Turbine Programme at the Harrowmere Energy Cooperative in Saltbridge."
DOC_B = "Haixing Marine Engineering in Ningbo builds the TT-2 hull for the Tidewater Turbine Programme."


def _last_user(body: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")


def _extract(body: dict[str, Any]) -> str:
    text = _last_user(body)
    if "Amara Osei" in text:
        return json.dumps({
            "entities": [
                {"name": "Amara Osei", "type": "person", "description": "Amara Osei leads the programme."},
                {"name": "Tidewater Turbine Programme", "type": "ORGANIZATION", "description": "A tidal turbine programme."},
                {"name": "Harrowmere Energy Cooperative", "type": "ORGANIZATION", "description": "An energy cooperative."},
            ],
            "relationships": [
                {"source": "Amara Osei", "target": "Tidewater Turbine Programme", "description": "Osei leads it.", "strength": 9},
                {"source": "Tidewater Turbine Programme", "target": "Harrowmere Energy Cooperative", "description": "Run by the cooperative.", "strength": 7},
            ],
        })
    return json.dumps({
        "entities": [
            {"name": "Haixing Marine Engineering", "type": "ORGANIZATION", "description": "A shipbuilder in Ningbo."},
            {"name": "Tidewater Turbine Programme", "type": "ORGANIZATION", "description": "Its TT-2 hull is built by Haixing."},
        ],
        "relationships": [
            {"source": "Haixing Marine Engineering", "target": "Tidewater Turbine Programme", "description": "Builds the hull.", "strength": 6},
        ],
    })


def _glean(body: dict[str, Any]) -> str:
    # gleaning sees the whole conversation: add Saltbridge for document A only
    if any("Amara Osei" in m["content"] for m in body["messages"] if m["role"] == "user"):
        return json.dumps({
            "entities": [{"name": "Saltbridge", "type": "GEO", "description": "A harbour town."}],
            "relationships": [{"source": "Harrowmere Energy Cooperative", "target": "Saltbridge", "description": "Based in Saltbridge.", "strength": 4}],
        })
    return '{"entities": [], "relationships": []}'


def _report(body: dict[str, Any]) -> str:
    community = re.search(r"community (\d+)", _last_user(body)).group(1)  # type: ignore[union-attr]
    return json.dumps({
        "title": f"Scripted community {community}",
        "summary": "A scripted summary.",
        "rating": 7.5,
        "rating_explanation": "Scripted.",
        "findings": [{"summary": "Finding one", "explanation": "Explained [Data: Entities (0)]."}],
    })


CLAIMS = json.dumps({"claims": [{
    "subject": "Haixing Marine Engineering", "object": "Tidewater Turbine Programme", "type": "commitment",
    "status": "TRUE", "start_date": "2020-02-01", "end_date": None, "description": "Haixing builds the TT-2 hull.",
    "source_text": "Haixing Marine Engineering in Ningbo builds the TT-2 hull",
}]})


@pytest.fixture(scope="module")
def server() -> Any:
    with LoopbackServer() as srv:
        srv.add_rule(r"MANY entities", reply=_glean)
        srv.add_rule(r"Answer Y", reply="N")
        srv.add_rule(None, system=r"You extract claims", reply=lambda b: CLAIMS if "Haixing" in _last_user(b) else '{"claims": []}')
        srv.add_rule(None, system=r"one comprehensive description", reply="The Tidewater Turbine Programme is a scripted summary.")
        srv.add_rule(None, system=r"community report", reply=_report)
        srv.add_rule(r"Text:", system=r"knowledge graph", reply=_extract)
        yield srv


def _model(srv: LoopbackServer, cache: Path) -> OpenAIChatModel:
    endpoint = ModelEndpoint(provider="openai", model="scripted-model", base_url=srv.base_url, api_key=SecretStr("x"), max_retries=0)
    return OpenAIChatModel(endpoint, cache=ModelCallCache(cache))


@pytest.fixture(scope="module")
def built(server: LoopbackServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("model")
    docs = root / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(DOC_A, encoding="utf-8")
    (docs / "b.md").write_text(DOC_B, encoding="utf-8")
    config = IndexerConfig(max_gleanings=2, claims=True, summarize_min_tokens=5)
    cache = root / "calls.sqlite"
    report = build_index(docs, root / "index", config=config, model=_model(server, cache), progress=False)
    calls_after_first = len(server.chat_requests)
    rerun = build_index(docs, root / "index2", config=config, model=_model(server, cache), progress=False)
    return {"root": root, "report": report, "rerun": rerun, "calls_first": calls_after_first,
            "calls_second": len(server.chat_requests) - calls_after_first}


def test_scripted_entities_and_relationships(built: dict[str, Any]) -> None:
    out = built["root"] / "index"
    ents = pd.read_parquet(out / "entities.parquet").set_index("title")
    assert set(ents.index) == {"AMARA OSEI", "TIDEWATER TURBINE PROGRAMME", "HARROWMERE ENERGY COOPERATIVE",
                               "SALTBRIDGE", "HAIXING MARINE ENGINEERING"}
    assert ents.loc["AMARA OSEI", "type"] == "PERSON" and ents.loc["SALTBRIDGE", "type"] == "GEO"
    # two descriptions above summarize_min_tokens -> one model-written summary
    assert ents.loc["TIDEWATER TURBINE PROGRAMME", "description"] == "The Tidewater Turbine Programme is a scripted summary."
    assert ents.loc["TIDEWATER TURBINE PROGRAMME", "frequency"] == 2
    rels = pd.read_parquet(out / "relationships.parquet")
    weights = {frozenset((s, t)): w for s, t, w in zip(rels["source"], rels["target"], rels["weight"], strict=True)}
    assert weights[frozenset(("AMARA OSEI", "TIDEWATER TURBINE PROGRAMME"))] == 9.0
    assert weights[frozenset(("HARROWMERE ENERGY COOPERATIVE", "SALTBRIDGE"))] == 4.0  # found by gleaning
    assert len(rels) == 4


def test_scripted_reports_and_claims(built: dict[str, Any]) -> None:
    out = built["root"] / "index"
    reps = pd.read_parquet(out / "community_reports.parquet")
    assert len(reps) >= 1
    for _, r in reps.iterrows():
        assert r["title"] == f"Scripted community {r['community']}"
        assert r["rank"] == 7.5
        assert r["full_content"] == f"# {r['title']}\n\nA scripted summary.\n\n## Finding one\n\nExplained [Data: Entities (0)]."
        assert json.loads(r["full_content_json"])["rating"] == 7.5
    cov = pd.read_parquet(out / "covariates.parquet")
    assert len(cov) == 1
    claim = cov.iloc[0]
    assert (claim["subject_id"], claim["object_id"], claim["type"], claim["status"]) == (
        "HAIXING MARINE ENGINEERING", "TIDEWATER TURBINE PROGRAMME", "COMMITMENT", "TRUE")
    tus = pd.read_parquet(out / "text_units.parquet").set_index("id")
    assert list(tus.loc[claim["text_unit_id"], "covariate_ids"]) == [claim["id"]]
    index = load_index(out)
    assert len(index.entities) == 5 and len(index.community_reports) == len(reps)


def test_usage_counts_every_call_and_rerun_is_free(built: dict[str, Any]) -> None:
    report, rerun = built["report"], built["rerun"]
    total = report.usage.total
    # per doc: extract + glean (+ loop check and a 2nd glean for doc A), claims; + 1 summary + 1 report per community
    assert total.llm_calls == built["calls_first"] > 0
    assert set(report.usage.stages) >= {"extract", "glean", "claims", "summarize", "reports", "embed"}
    assert report.usage.stages["extract"].llm_calls == 2
    assert total.prompt_tokens > 0 and total.output_tokens > 0
    assert built["calls_second"] == 0  # everything came from the call cache
    assert rerun.usage.total.llm_calls == total.llm_calls == rerun.usage.total.cached_calls
    assert rerun.entities == report.entities and rerun.reports == report.reports


def test_unreachable_model_fails_with_a_clear_error(tmp_path: Path) -> None:
    from indexer import IndexerError

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.md").write_text(DOC_A, encoding="utf-8")
    endpoint = ModelEndpoint(provider="openai", model="m", base_url="http://127.0.0.1:9/v1", api_key=SecretStr("x"),
                             max_retries=0, timeout_s=2, total_deadline_s=3)
    with pytest.raises(IndexerError, match="failed for every chunk"):
        build_index(tmp_path / "d", tmp_path / "out", model=OpenAIChatModel(endpoint), progress=False)


def test_update_reuses_reports_whose_community_context_is_unchanged(server: LoopbackServer, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text(DOC_A, encoding="utf-8")
    (docs / "b.md").write_text(DOC_B, encoding="utf-8")
    out = tmp_path / "index"

    def report_calls() -> int:
        return sum(1 for r in server.chat_requests if "community report" in json.dumps(r.body["messages"][0]))

    first = build_index(docs, out, model=_model(server, tmp_path / "c1.sqlite"), progress=False)
    before = report_calls()
    # a setting that changes neither text units nor the graph: an update, not a no-op, with a cold call cache
    second = build_index(
        docs, out, config=IndexerConfig(embed_batch_size=7), model=_model(server, tmp_path / "c2.sqlite"), progress=False
    )
    assert not second.noop and not second.full_rebuild_reason
    assert report_calls() == before  # every report came from the previous build, none from the model
    assert second.reports_reused == second.reports == first.reports >= 1
    reps = pd.read_parquet(out / "community_reports.parquet")
    assert all(title.startswith("Scripted community") for title in reps["title"])
