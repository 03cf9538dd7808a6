"""`graphroute serve` against callers it must not trust: hostile paths cannot break or grow `/metrics`, a keyless
server answers only this machine's programs (not another site's page through the browser), `/healthz` tells an
anonymous caller only up or degraded and never a credential, and every malformed request is a JSON 4xx."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engines.config import GraphrouteConfig
from engines.models.config import models_config_from_mapping
from router import Router
from router.service import Service, ServiceThread
from testing.model_server import LoopbackServer

KEY = "hostile-test-key"


@pytest.fixture(scope="module")
def router(carol_path: Path) -> Iterator[Router]:
    with Router.from_index(carol_path) as r:
        yield r


@pytest.fixture(scope="module")
def keyed(router: Router) -> Iterator[ServiceThread]:
    with ServiceThread(Service({"carol": router}, api_keys=[KEY])) as s:
        yield s


@pytest.fixture(scope="module")
def keyless(router: Router) -> Iterator[ServiceThread]:
    with ServiceThread(Service({"carol": router})) as s:
        yield s


def _families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


# ---- 1. metrics no caller controls -----------------------------------------------------------------------

def test_hostile_paths_without_a_key_leave_metrics_parseable_and_bounded(keyed: ServiceThread) -> None:
    with httpx.Client(base_url=keyed.url, timeout=30) as anon, \
            httpx.Client(base_url=keyed.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30) as http:
        before = http.get("/metrics").text
        _families(before)
        hostile = ["/v1/indexes/x/a%0Ab/y", '/v1/indexes/x/a"b\\c/y', "/v1/indexes/x/a%22%7D%20999/y",
                   "/v1/models/%0A%23%20TYPE", "/nowhere/%0Agraphroute_fake 1"]
        for i in range(60):
            for path in hostile:
                assert anon.get(path + "/" + "z" * 2000 + str(i)).status_code in (401, 404)
        assert anon.request("FOOBAR", "/metrics").status_code in (401, 405, 400)
        after = http.get("/metrics").text
    families = _families(after)  # prometheus_client's own parser reads every line
    requests = families["graphroute_http_requests"]
    paths = {s.labels["path"] for s in requests.samples if s.name.endswith("_total")}
    assert paths <= {"other", "/metrics", "/v1/indexes/{name}/text_units/{id}", "/v1/models/{id}", "/healthz"}
    assert not any("z" * 50 in line or "fake" in line for line in after.splitlines())
    assert len(after) < len(before) + 8_000  # 300 hostile requests add a few labelled series, not their paths


# ---- 2. loopback means loopback --------------------------------------------------------------------------

def test_keyless_server_refuses_other_hosts_and_cross_site_requests(keyless: ServiceThread,
                                                                      router: Router) -> None:
    unit = router.index.text_units[0]
    with httpx.Client(base_url=keyless.url, timeout=60) as http:
        rebound = http.get(f"/v1/indexes/carol/text_units/{unit.id}", headers={"Host": "attacker.example"})
        assert rebound.status_code == 421 and rebound.json()["error"]["code"] == "invalid_host"
        assert unit.text[:40] not in rebound.text
        cross = http.post("/v1/ask", content=json.dumps({"question": "Who is Bob Cratchit?"}),
                          headers={"Origin": "https://attacker.example", "Content-Type": "text/plain"})
        assert cross.status_code == 403 and cross.json()["error"]["code"] == "invalid_origin"
        form = http.post("/v1/ask", content=b"question=Who+is+Bob", headers={
            "Content-Type": "application/x-www-form-urlencoded"})
        assert form.status_code == 415
        plain = http.post("/v1/route", content=json.dumps({"question": "Who is Bob?"}),
                          headers={"Content-Type": "text/plain"})
        assert plain.status_code == 415
        # this machine's own programs and the page (same origin) are answered
        assert http.get(f"/v1/indexes/carol/text_units/{unit.id}").json()["text"] == unit.text
        same_origin = http.post("/v1/route", json={"question": "Who is Bob Cratchit?"},
                                headers={"Origin": keyless.url})
        assert same_origin.status_code == 200 and same_origin.json()["engine"]
        assert http.get("/", headers={"Host": "localhost:9"}).status_code == 200


def test_allowed_host_and_keyed_servers(router: Router) -> None:
    config = GraphrouteConfig().serve.model_copy(update={"allowed_hosts": ["graph.internal"]})
    with ServiceThread(Service({"carol": router}, config)) as svc, httpx.Client(base_url=svc.url, timeout=30) as http:
        assert http.get("/v1/indexes", headers={"Host": "graph.internal:8000"}).status_code == 200
        assert http.get("/v1/indexes", headers={"Host": "graph.internal.attacker.example"}).status_code == 421
    with ServiceThread(Service({"carol": router}, api_keys=[KEY])) as svc, \
            httpx.Client(base_url=svc.url, timeout=30, headers={"Authorization": f"Bearer {KEY}"}) as http:
        # with keys a page of another site cannot send the key: the Host does not matter
        assert http.get("/v1/indexes", headers={"Host": "graph.example"}).status_code == 200


# ---- 3. /healthz: up or degraded for anyone, never a credential -------------------------------------------

def test_healthz_shows_no_endpoint_or_credential_without_a_key(carol_path: Path) -> None:
    with LoopbackServer(latency_ms=0) as model:
        url = model.base_url.replace("://", "://alice:hunter2-password@")
        models = models_config_from_mapping({"chat": {"provider": "openai", "model": "gpt-4.1-mini",
                                                      "base_url": url + "?token=tok-secret-123",
                                                      "api_key": "sk-health-key-0123456789"}}, {})
        with Router.from_index(carol_path, config=GraphrouteConfig(models=models)) as router:
            service = Service({"carol": router}, api_keys=[KEY])
            service.check_endpoints()
            with ServiceThread(service) as svc, httpx.Client(base_url=svc.url, timeout=30) as http:
                anon = http.get("/healthz")
                keyed_body = http.get("/healthz", headers={"Authorization": f"Bearer {KEY}"}).text
    assert anon.status_code == 200 and set(anon.json()) == {"status"}
    assert "endpoints" in keyed_body
    for secret in ("hunter2-password", "tok-secret-123", "sk-health-key-0123456789", KEY):
        assert secret not in anon.text and secret not in keyed_body


# ---- 8. every bad input is a JSON 4xx ----------------------------------------------------------------------

def _four_hundred(resp: httpx.Response) -> dict[str, Any]:
    assert 400 <= resp.status_code < 500, (resp.status_code, resp.text[:300])
    error: dict[str, Any] = resp.json()["error"]
    assert error["message"]
    return error


def test_deep_json_huge_integers_and_lone_surrogates_are_4xx(keyless: ServiceThread) -> None:
    headers = {"Content-Type": "application/json"}
    with httpx.Client(base_url=keyless.url, timeout=60, headers=headers) as http:
        deep = '{"question": ' + "[" * 100_000 + "]" * 100_000 + "}"
        assert _four_hundred(http.post("/v1/ask", content=deep))["code"] == "invalid_json"
        huge = json.dumps({"question": "Who is Bob?", "budget": {"max_llm_calls": int("9" * 310)}})
        assert _four_hundred(http.post("/v1/route", content=huge))["code"] == "invalid_json"
        for field in ("max_llm_calls", "max_cost", "deadline_s"):
            big = json.dumps({"question": "Who is Bob?", "budget": {field: 2**62}})
            assert _four_hundred(http.post("/v1/route", content=big))["param"] == "budget"
        tokens = json.dumps({"model": "graphroute", "messages": [{"role": "user", "content": "Who?"}],
                             "max_tokens": 2**62, "seed": 1})
        assert _four_hundred(http.post("/v1/chat/completions", content=tokens))["param"] == "max_tokens"
        for body in ('{"question": "Who?", "budget": {"\\ud800": 1}}',
                     '{"model": "graphroute", "messages": [{"role": "user", "content": "Who?"}], "stop": "\\udfff"}',
                     '{"model": "graphroute", "messages": [{"role": "user", "content": "Who?"}], "\\ud800x": 1}'):
            path = "/v1/ask" if body.startswith('{"question"') else "/v1/chat/completions"
            _four_hundred(http.post(path, content=body))
        graph = '{"citations": [{"kind": "Entities", "id": "\\udc80"}]}'
        _four_hundred(http.post("/v1/indexes/carol/graph", content=graph))
        assert _four_hundred(http.get("/v1/indexes/carol/text_units/%ED%A0%80"))["code"] == "not_found"
        assert _four_hundred(http.get("/v1/models/graphroute%ED%A0%80"))


def test_the_service_log_masks_keys_and_url_credentials(router: Router, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    Service({"carol": router}, api_keys=["log-test-key-0123456789"])
    with caplog.at_level(logging.WARNING, logger="graphroute.serve"):
        logging.getLogger("graphroute.serve").warning(
            "model call failed: key %s at %s", "log-test-key-0123456789", "https://bob:s3cret-pw@llm.example/v1")
    assert "log-test-key-0123456789" not in caplog.text and "s3cret-pw" not in caplog.text
    assert "llm.example/v1" in caplog.text
