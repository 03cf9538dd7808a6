"""`graphroute serve`: the official `openai` client against the service (plain and streaming, auto and forced
modes, two indexes), keys (401), size limits (413), concurrency (429), drain (503) and the other routes."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from router import Router
from router.service import Service, ServiceThread

KEY = "test-key-1"


@pytest.fixture(scope="module")
def routers(carol_path: Path, dulce_path: Path) -> Iterator[dict[str, Router]]:
    rs = {"carol": Router.from_index(carol_path), "dulce": Router.from_index(dulce_path)}
    yield rs
    for r in rs.values():
        r.close()


@pytest.fixture(scope="module")
def service(routers: dict[str, Router]) -> Iterator[ServiceThread]:
    with ServiceThread(Service(routers, api_keys=[KEY, "second-key"])) as s:
        yield s


@pytest.fixture()
def client(service: ServiceThread) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=service.url + "/v1", api_key=KEY, max_retries=0) as c:
        yield c


@pytest.fixture()
def http(service: ServiceThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as c:
        yield c


def test_openai_client_plain_auto_mode(client: openai.OpenAI) -> None:
    resp = client.chat.completions.create(model="graphroute", messages=[{"role": "user", "content": "Who is Bob Cratchit?"}])
    assert "Cratchit" in (resp.choices[0].message.content or "")
    g = (resp.model_extra or {})["graphroute"]
    assert g["index"] == "carol" and g["route"]["engine"] == "local" and g["engine"] == "local"
    assert g["route"]["reasons"] and g["citations"] and g["usage"]["stages"]["answer"]["llm_calls"] == 1
    assert resp.usage is not None and resp.usage.prompt_tokens == g["usage"]["total"]["prompt_tokens"] > 0
    assert g["cost"] == 0.0  # offline model


def test_openai_client_streaming_forced_mode_second_index(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="graphroute-basic@dulce", stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "Earlier question"}, {"role": "assistant", "content": "Earlier answer"},
                  {"role": "user", "content": "Who is Alex Mercer?"}],
    )
    deltas, final, usage = [], None, None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            deltas.append(chunk.choices[0].delta.content)
        extra = chunk.model_extra or {}
        if "graphroute" in extra:
            final = extra["graphroute"]
        if chunk.usage is not None:
            usage = chunk.usage
    assert len(deltas) > 1 and "Mercer" in "".join(deltas)
    assert final is not None and final["index"] == "dulce" and final["engine"] == "basic"
    assert usage is not None and usage.completion_tokens == final["usage"]["total"]["output_tokens"]


def test_streamed_escalation_is_marked_for_a_plain_client(client: openai.OpenAI) -> None:
    """Local search finds nothing, streams its answer, and the router escalates: a client that only joins the
    content deltas sees a separator naming both engines and the reason, then the answer that counts."""
    question = [{"role": "user", "content": "Qwxzy plimbok frandle?"}]  # names no entity of the index
    stream = client.chat.completions.create(model="graphroute-local@carol", stream=True, messages=question)
    deltas, final, events = [], None, []
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            deltas.append(chunk.choices[0].delta.content)
        extra = chunk.model_extra or {}
        if "graphroute" in extra:
            final = extra["graphroute"]
        if "graphroute_event" in extra:
            events.append(extra["graphroute_event"])
    assert final is not None and final["escalations"], "expected local search to escalate"
    esc = final["escalations"][0]
    assert next(e for e in events if e["type"] == "escalation")["to"] == esc["to_engine"]
    text = "".join(deltas)
    note = f"[graphroute: the {esc['from_engine']} search answer above is superseded ({esc['reason']}); " \
           f"escalated to {esc['to_engine']} search, whose answer follows]"
    assert note in text
    before, after = text.split(note, 1)
    assert before.strip().endswith("---") and before.strip() != "---"  # the superseded answer, then the rule
    plain = client.chat.completions.create(model="graphroute-local@carol", messages=question)
    assert after.strip() == (plain.choices[0].message.content or "").strip()  # what follows is the answer


def test_global_forced_mode_and_ask_and_route(http: httpx.Client) -> None:
    r = http.post("/v1/ask", json={"question": "What are the main themes?", "mode": "global", "index": "carol"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["engine"] == "global" and body["usage"]["stages"]["map"]["llm_calls"] >= 1 and "cost" in body
    r = http.post("/v1/route", json={"question": "Who is Alex Mercer?", "index": "dulce",
                                     "budget": {"max_llm_calls": 2}})
    assert r.status_code == 200 and r.json()["engine"] == "local" and r.json()["plan"]


def test_indexes_records_models_and_metrics(http: httpx.Client, routers: dict[str, Router]) -> None:
    names = [ix["name"] for ix in http.get("/v1/indexes").json()["indexes"]]
    assert names == ["carol", "dulce"]
    unit = routers["carol"].index.text_units[0]
    r = http.get(f"/v1/indexes/carol/text_units/{unit.id}")
    assert r.status_code == 200 and r.json()["text"] == unit.text and r.json()["document"]["title"]
    doc_id = r.json()["document"]["id"]
    assert http.get(f"/v1/indexes/carol/documents/{doc_id}").json()["text_unit_ids"]
    assert http.get("/v1/indexes/carol/text_units/nope").status_code == 404
    last = routers["carol"].index.text_units[len(routers["carol"].index.text_units) - 1]
    assert http.get(f"/v1/indexes/carol/text_units/{last.short_id}").json()["id"] == last.id  # citation id
    assert "graphroute-drift@dulce" in {m["id"] for m in http.get("/v1/models").json()["data"]}
    http.post("/v1/ask", json={"question": "Who is Bob Cratchit?"})
    text = http.get("/metrics").text
    from prometheus_client.parser import text_string_to_metric_families

    samples = {(s.name, tuple(sorted(s.labels.items()))) for f in text_string_to_metric_families(text)
               for s in f.samples}
    assert ("graphroute_http_requests_total", (("method", "POST"), ("path", "/v1/ask"), ("status", "200"))) in samples
    assert ("graphroute_questions_total", (("engine", "local"), ("index", "carol"), ("route", "local"))) in samples
    assert "graphroute_http_request_seconds_bucket" in text and "graphroute_cost_usd_total" in text


def test_keys_required_except_health(service: ServiceThread) -> None:
    with httpx.Client(base_url=service.url, timeout=30) as anon:
        assert anon.get("/healthz").status_code == 200
        r = anon.post("/v1/ask", json={"question": "Who is Bob Cratchit?"})
        assert r.status_code == 401 and "API key" in r.json()["error"]["message"]
        assert anon.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert anon.get("/v1/indexes", headers={"X-API-Key": "second-key"}).status_code == 200
    with openai.OpenAI(base_url=service.url + "/v1", api_key="wrong", max_retries=0) as bad, \
            pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model="graphroute", messages=[{"role": "user", "content": "hi"}])


def test_size_limits_and_bad_input_are_clean_errors(http: httpx.Client, client: openai.OpenAI) -> None:
    big = http.post("/v1/ask", content=b'{"question": "' + b"x" * 300_000 + b'"}',
                    headers={"Content-Type": "application/json"})
    assert big.status_code == 413
    long_q = http.post("/v1/ask", json={"question": "Scrooge " * 3000})
    assert long_q.status_code == 413 and "limit" in long_q.json()["error"]["message"]
    for resp in (http.post("/v1/ask", content=b"{not json"), http.post("/v1/ask", json={"question": "  "}),
                 http.post("/v1/ask", json={"question": "x", "budget": {"max_cost": -1}}),
                 http.post("/v1/ask", json={"question": "x", "mode": "fast"})):
        assert resp.status_code == 400, resp.text
        assert "Traceback" not in resp.text and resp.json()["error"]["message"]
    with pytest.raises(openai.NotFoundError, match="unknown model"):
        client.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "hi"}])


# ---- limits and drain need a slow model: the loopback server with latency, answering through HTTP ----

@pytest.fixture()
def slow(carol_path: Path) -> Iterator[tuple[Any, ServiceThread]]:
    from engines.config import GraphrouteConfig, ServeConfig
    from engines.models.config import models_config_from_mapping
    from testing.model_server import LoopbackServer

    with LoopbackServer(latency_ms=600, default_reply="Bob Cratchit is the clerk [Data: Sources (1)].") as srv:
        models = models_config_from_mapping({"chat": {"base_url": srv.base_url, "api_key": "x", "model": "gpt-4.1"},
                                             "embedding": {"provider": "offline"}}, env={})
        router = Router.from_index(carol_path, config=GraphrouteConfig(models=models))
        cfg = ServeConfig(max_concurrency=3, max_concurrency_per_key=2)
        with ServiceThread(Service({"carol": router}, cfg)) as svc:
            yield srv, svc
        router.close()


def _post_in_thread(url: str, results: list[Any], **kw: Any) -> threading.Thread:
    def run() -> None:
        with httpx.Client(timeout=60) as c:
            results.append(c.post(url + "/v1/ask", json={"question": "Who is Bob Cratchit?", "mode": "basic"}, **kw))

    t = threading.Thread(target=run)
    t.start()
    return t


def _wait_for(cond: Any, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.01)


def test_concurrency_limits_give_429_with_retry_after(slow: tuple[Any, ServiceThread]) -> None:
    srv, svc = slow
    results: list[Any] = []
    threads = [_post_in_thread(svc.url, results) for _ in range(2)]
    _wait_for(lambda: svc.service.metrics.in_flight == 2)
    with httpx.Client(timeout=60) as c:
        per_key = c.post(svc.url + "/v1/ask", json={"question": "Who is Bob Cratchit?"})
        assert per_key.status_code == 429 and per_key.headers["Retry-After"] == "1"
        assert "API key" in per_key.json()["error"]["message"]
    for t in threads:
        t.join()
    assert [r.status_code for r in results] == [200, 200]
    assert srv.max_in_flight <= 2


def test_route_makes_no_model_call(slow: tuple[Any, ServiceThread]) -> None:
    srv, svc = slow
    with httpx.Client(timeout=60) as c:
        r = c.post(svc.url + "/v1/route", json={"question": "What are the main themes of the story?"})
        assert r.status_code == 200 and r.json()["engine"] == "global"
        # a follow-up is routed as asked: no rewrite call, no second opinion, history still checked
        r = c.post(svc.url + "/v1/route", json={"question": "And the minor ones?",
                                                 "history": ["What are the main themes of the story?"]})
        # the follow-up reads as the themes question it continues: global, as that one
        assert r.status_code == 200 and r.json()["engine"] == "global"
        bad = c.post(svc.url + "/v1/route", json={"question": "Who?", "history": [{"role": "wizard", "content": "x"}]})
        assert bad.status_code == 400 and "role" in bad.text
    assert srv.requests == []


def test_graceful_shutdown_finishes_in_flight_and_refuses_new(slow: tuple[Any, ServiceThread]) -> None:
    srv, svc = slow
    results: list[Any] = []
    t = _post_in_thread(svc.url, results)
    _wait_for(lambda: len(srv.chat_requests) == 1)  # the question is waiting on the model
    svc.service.begin_drain()
    with httpx.Client(timeout=60) as c:
        refused = c.post(svc.url + "/v1/ask", json={"question": "Who is Bob Cratchit?"})
        assert refused.status_code == 503 and refused.headers["Retry-After"]
        assert c.get(svc.url + "/healthz").status_code == 503
    svc.stop()  # waits for the in-flight request
    t.join()
    assert results[0].status_code == 200 and "Cratchit" in json.loads(results[0].text)["text"]


def test_prepare_warms_up_and_keeps_the_collector_off_what_is_loaded(carol_path: Path) -> None:
    import gc

    from engines.config import ServeConfig
    from shared_context.tables import per_index_cache

    thresholds = gc.get_threshold()
    with Router.from_index(carol_path) as router:  # fresh: no question has warmed anything yet
        try:
            record = router.index.entities[0]
            assert gc.is_tracked(record) and any(o is record for o in gc.get_objects())
            Service({"carol": router}, ServeConfig(warm_rows=100)).prepare()
            assert {"local", "global", "drift", "basic"} <= set(router.lifecycle.engines)
            assert router.models._chat  # the chat model (and the SDK's import) before the first request
            # local-context rows of the highest-degree entities, up to [serve] warm_rows
            assert 100 <= len(per_index_cache(router.index, "local.rows", dict)) < len(router.index.relationships)
            assert not any(o is record for o in gc.get_objects())  # frozen: no collection walks it again
            assert gc.get_threshold()[0] == 10_000
        finally:
            gc.unfreeze()
            gc.set_threshold(*thresholds)


def test_service_makes_the_model_client_on_its_loop_before_the_first_request(carol_path: Path) -> None:
    from engines.config import GraphrouteConfig
    from engines.models.config import models_config_from_mapping
    from testing.model_server import LoopbackServer

    with LoopbackServer() as srv:
        models = models_config_from_mapping({"chat": {"base_url": srv.base_url, "api_key": "k", "model": "gpt-4.1-mini"},
                                             "embedding": {"provider": "offline"}}, env={})
        with Router.from_index(carol_path, config=GraphrouteConfig(models=models)) as router:
            router.warm_up()
            (model,) = router.models._chat.values()
            assert not model._clients._clients
            with ServiceThread(Service({"carol": router})):
                assert len(model._clients._clients) == 1 and not srv.requests  # made at startup, nothing sent


def test_cli_index_specs_name_each_index() -> None:
    from router.cli import CliError, _parse_index_specs

    assert _parse_index_specs(["carol=/data/carol", "/data/dulce/"]) == {"carol": "/data/carol", "dulce": "/data/dulce/"}
    with pytest.raises(CliError, match="used twice"):
        _parse_index_specs(["a=/x", "a=/y"])
    with pytest.raises(CliError, match="without '@'"):
        _parse_index_specs(["a@b=/x"])


def test_cpu_steps_run_on_serve_cpu_threads(carol_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`[serve] cpu_threads`: the threads `asyncio.to_thread` hands the context building to, on the serving loop."""
    from concurrent.futures import ThreadPoolExecutor

    from engines.config import ServeConfig
    from shared_context.local_context import LocalContextBuilder

    seen: set[str] = set()
    build = LocalContextBuilder.build

    def spy(self: LocalContextBuilder, *args: Any, **kwargs: Any) -> Any:
        seen.add(threading.current_thread().name)
        time.sleep(0.02)  # long enough for the requests to overlap
        return build(self, *args, **kwargs)

    monkeypatch.setattr(LocalContextBuilder, "build", spy)
    with Router.from_index(carol_path) as router, \
            ServiceThread(Service({"carol": router}, ServeConfig(cpu_threads=2))) as svc, \
            httpx.Client(base_url=svc.url, timeout=60) as http:

        def ask(q: str) -> int:
            return http.post("/v1/ask", json={"question": q, "mode": "local"}).status_code

        questions = ["Who is Scrooge?", "Who is Marley?", "Who is Bob Cratchit?", "Who is Fred?", "Who is Belle?", "Who is Fan?"]
        with ThreadPoolExecutor(6) as pool:
            assert list(pool.map(ask, questions)) == [200] * 6
    assert seen and len(seen) <= 2 and all(name.startswith("graphroute-cpu") for name in seen)


def test_cpu_executor_never_queues_a_lookup_behind_cpu_work() -> None:
    import socket

    from router.service.app import CpuExecutor

    executor = CpuExecutor(1)
    try:
        release = threading.Event()
        busy = executor.submit(release.wait, 30)  # the one CPU thread is taken
        queued = executor.submit(threading.current_thread)
        lookup = executor.submit(socket.getaddrinfo, "127.0.0.1", 80)
        assert lookup.result(timeout=10)  # answered while the CPU thread is still busy
        assert not busy.done() and not queued.done()
        release.set()
        assert queued.result(timeout=10).name.startswith("graphroute-cpu")
    finally:
        release.set()
        executor.shutdown()
