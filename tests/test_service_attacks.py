"""`graphroute serve` under attack and under load, as a client sees it over HTTP: bodies over the limit however
they are framed, unexpected errors, path traversal, concurrency limits at the defaults and per key, many
concurrent requests, half-open connections, and a streaming client that goes away mid-answer."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.client import HTTPConnection
from pathlib import Path
from typing import Any

import httpx
import pytest

from engines.config import GraphrouteConfig, ServeConfig
from engines.models.config import models_config_from_mapping
from router import Router
from router.service import Service, ServiceThread
from router.service.admission import per_key_limit, refusal_message
from testing.model_server import LoopbackServer

KEY, OTHER = "attack-key-a", "attack-key-b"
REPLY = "Bob Cratchit is Scrooge's clerk [Data: Sources (1)]."


@pytest.fixture(scope="module")
def service(carol_path: Path) -> Iterator[ServiceThread]:
    with Router.from_index(carol_path) as router, ServiceThread(Service({"carol": router}, api_keys=[KEY])) as s:
        yield s


@pytest.fixture()
def http(service: ServiceThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as c:
        yield c


def _json_error(resp: httpx.Response, status: int, code: str | None) -> dict[str, Any]:
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"] == "application/json"
    error: dict[str, Any] = resp.json()["error"]
    assert error["code"] == code and error["message"]
    return error


def test_a_key_in_the_query_string_is_not_read(service: ServiceThread) -> None:
    with httpx.Client(base_url=service.url, timeout=30) as anon:
        for resp in (anon.get("/v1/indexes", params={"api_key": KEY}), anon.get("/v1/indexes", params={"key": KEY}),
                     anon.get("/metrics")):
            _json_error(resp, 401, "invalid_api_key")
            assert resp.headers["www-authenticate"] == "Bearer"


# ---- bodies of any framing ------------------------------------------------------------------------------

def test_a_chunked_body_over_the_limit_gets_the_same_json_413(http: httpx.Client) -> None:
    big = b'{"question": "' + b"x" * 400_000 + b'"}'

    def chunked(body: bytes) -> Iterator[bytes]:  # no Content-Length: Transfer-Encoding: chunked
        for i in range(0, len(body), 16_384):
            yield body[i:i + 16_384]

    for resp in (http.post("/v1/ask", content=chunked(big), headers={"content-type": "application/json"}),
                 http.post("/v1/ask", content=big, headers={"content-type": "application/json"})):
        error = _json_error(resp, 413, "request_too_large")
        assert "256000 bytes" in error["message"] and "max_body_bytes" in error["message"]
    small = b'{"question": "Who is Bob Cratchit?", "mode": "basic"}'
    ok = http.post("/v1/ask", content=chunked(small), headers={"content-type": "application/json"})
    assert ok.status_code == 200 and "Cratchit" in ok.json()["text"]  # a chunked body within the limit is read


def test_an_unexpected_error_is_a_json_500_with_a_request_id_in_the_log(
        http: httpx.Client, service: ServiceThread, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    router = service.service.routers["carol"]

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("a bug")

    monkeypatch.setattr(router, "aroute", broken)
    with caplog.at_level(logging.ERROR, logger="graphroute.serve"):
        resp = http.post("/v1/route", json={"question": "Who is Bob Cratchit?"})
    error = _json_error(resp, 500, "internal_error")
    request_id = resp.headers["x-request-id"]
    assert request_id in error["message"] and "Traceback" not in resp.text and "a bug" not in resp.text
    (logged,) = [r for r in caplog.records if request_id in r.getMessage()]
    assert logged.exc_info is not None and logged.exc_info[0] is KeyError  # the traceback, under that id


# ---- no traversal --------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [
    "/static/../../../../../../etc/passwd",
    "/static/%2e%2e/%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/static/..%2f..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/static//etc/passwd",
    "/v1/indexes/carol/text_units/../../../../../etc/passwd",
    "/v1/indexes/carol/text_units/..%2f..%2f..%2f..%2fetc%2fpasswd",
    "/v1/indexes/carol/documents/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
])
def test_no_traversal_through_static_or_record_ids(service: ServiceThread, path: str) -> None:
    conn = HTTPConnection("127.0.0.1", service.port, timeout=30)  # sends the path exactly as written
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {KEY}"})
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    assert resp.status == 404 and resp.getheader("content-type") == "application/json"
    assert b"root:" not in body and b'"error"' in body


# ---- concurrency: the defaults serve one busy client; limits hold per key -------------------------------

def test_per_key_limit_defaults_fit_the_deployment(service: ServiceThread) -> None:
    assert per_key_limit(32, None, 1) == 32  # one key, or none: the whole server
    assert per_key_limit(32, None, 2) == 16 and per_key_limit(32, None, 3) == 11  # several: a fair share
    assert per_key_limit(32, 4, 1) == 4  # configured: as set
    assert "limit of 11 requests" in refusal_message("key", 32, None, 3)
    assert "fair share of [serve] max_concurrency = 32 among 3 API keys" in refusal_message("key", 32, None, 3)
    assert "[serve] max_concurrency_per_key" in refusal_message("key", 32, 4, 3)
    assert "[serve] max_concurrency)" in refusal_message("server", 32, None, 1)
    routers = service.service.routers  # the service applies them
    assert service.service.admission.per_key_limit == 32
    assert Service(routers).admission.per_key_limit == 32
    assert Service(routers, api_keys=["a", "b"]).admission.per_key_limit == 16


@pytest.fixture(scope="module")
def slow_model() -> Iterator[LoopbackServer]:
    with LoopbackServer(latency_ms=800, default_reply=REPLY) as srv:
        yield srv


def _slow_router(carol_path: Path, model: LoopbackServer, concurrency: int = 64) -> Router:
    models = models_config_from_mapping({"chat": {"base_url": model.base_url, "api_key": "x", "model": "gpt-4.1",
                                                  "concurrency": concurrency},
                                         "embedding": {"provider": "offline"}}, env={})
    return Router.from_index(carol_path, config=GraphrouteConfig(models=models))


async def _ask_all(url: str, n: int, key: str | None = None, path: str = "/v1/chat/completions") -> list[httpx.Response]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    body = {"model": "graphroute-basic", "messages": [{"role": "user", "content": "Who is Bob Cratchit?"}]}
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120, limits=limits) as client:
        return list(await asyncio.gather(*(client.post(path, json=body) for _ in range(n))))


def test_one_key_sixteen_concurrent_requests_at_the_defaults(carol_path: Path, slow_model: LoopbackServer) -> None:
    with _slow_router(carol_path, slow_model) as router, \
            ServiceThread(Service({"carol": router}, ServeConfig(), api_keys=[KEY])) as svc:
        responses = asyncio.run(_ask_all(svc.url, 16, KEY))
    assert [r.status_code for r in responses] == [200] * 16
    assert all("Cratchit" in r.json()["choices"][0]["message"]["content"] for r in responses)


def test_a_configured_per_key_limit_holds_per_key(carol_path: Path, slow_model: LoopbackServer) -> None:
    cfg = ServeConfig(max_concurrency_per_key=2)
    with _slow_router(carol_path, slow_model) as router, \
            ServiceThread(Service({"carol": router}, cfg, api_keys=[KEY, OTHER])) as svc:
        responses = asyncio.run(_ask_all(svc.url, 4, KEY))
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200, 200, 429, 429]
        refused = next(r for r in responses if r.status_code == 429)
        error = _json_error(refused, 429, "rate_limit_exceeded")
        assert refused.headers["Retry-After"] == "1"
        assert "this API key is at its limit of 2 requests in flight ([serve] max_concurrency_per_key)" in \
            error["message"]
        both = asyncio.run(_both_keys(svc.url))
        assert [r.status_code for r in both] == [200, 200, 200, 200]  # two per key: each key's own share


async def _both_keys(url: str) -> list[httpx.Response]:
    a, b = await asyncio.gather(_ask_all(url, 2, KEY), _ask_all(url, 2, OTHER))
    return [*a, *b]


def test_two_hundred_concurrent_requests_get_only_200s_and_json_429s(carol_path: Path,
                                                                      slow_model: LoopbackServer) -> None:
    cfg = ServeConfig(max_concurrency=8)
    with _slow_router(carol_path, slow_model) as router, ServiceThread(Service({"carol": router}, cfg)) as svc:
        responses = asyncio.run(_ask_all(svc.url, 200))
    statuses = [r.status_code for r in responses]
    assert set(statuses) == {200, 429} and statuses.count(200) >= 8
    for r in responses:
        if r.status_code == 429:
            error = _json_error(r, 429, "rate_limit_exceeded")
            assert r.headers["Retry-After"] == "1" and "limit of 8 requests" in error["message"]
        else:
            assert "Cratchit" in r.json()["choices"][0]["message"]["content"]


def test_half_open_connections_do_not_delay_a_normal_request(service: ServiceThread, http: httpx.Client) -> None:
    """300 connections that send nothing, or headers and part of a body, then stall: a normal request is
    answered as fast as without them, and the stalled ones hold no concurrency slot."""
    held: list[socket.socket] = []
    try:
        started = time.perf_counter()
        baseline = http.get("/v1/indexes")
        baseline_s = time.perf_counter() - started
        for i in range(300):
            s = socket.create_connection(("127.0.0.1", service.port), timeout=10)
            held.append(s)
            if i % 3 == 1:  # headers only
                s.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + KEY.encode() + b"\r\n")
            elif i % 3 == 2:  # headers and part of the body
                s.sendall(b"POST /v1/ask HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAuthorization: "
                          b"Bearer " + KEY.encode() + b"\r\nContent-Length: 1000\r\n\r\n{\"question\": \"Who")
        time.sleep(0.5)  # the server has read what they sent
        assert service.service.metrics.in_flight == 0  # a body still arriving takes no slot
        started = time.perf_counter()
        resp = http.post("/v1/ask", json={"question": "Who is Bob Cratchit?", "mode": "basic"})
        answered_s = time.perf_counter() - started
    finally:
        for s in held:
            s.close()
    assert baseline.status_code == 200 and resp.status_code == 200 and "Cratchit" in resp.json()["text"]
    assert answered_s < max(2.0, 10 * baseline_s), f"{answered_s:.2f} s with 300 half-open connections"


# ---- a streaming client that goes away stops the model spending -------------------------------------------

def test_a_streaming_client_that_disconnects_stops_the_model_spending(carol_path: Path) -> None:
    from benchmarks.bench_mock import OfflineResponder

    with LoopbackServer(latency_ms=300, default_reply=OfflineResponder()) as srv, \
            _slow_router(carol_path, srv) as router, ServiceThread(Service({"carol": router})) as svc, \
            httpx.Client(base_url=svc.url, timeout=120) as client:
        body = {"model": "graphroute-drift", "stream": True,
                "messages": [{"role": "user", "content": "What are the main themes of the story?"}]}
        with client.stream("POST", "/v1/chat/completions", json=body) as resp:
            full = sum(1 for line in resp.iter_lines() if line.startswith("data: "))
        full_calls = len(srv.chat_requests)
        assert full > 3 and full_calls >= 5, f"a DRIFT answer made {full_calls} model calls"
        srv.reset()
        with client.stream("POST", "/v1/chat/completions", json=body) as resp:
            first = next(line for line in resp.iter_lines() if line.startswith("data: "))
            assert '"graphroute_event"' in first  # the route: sent before any model call
        # closing the response closed the connection: the server notices, the question is cancelled
        time.sleep(3.0)
        cut_calls = len(srv.chat_requests)
        time.sleep(1.0)
        assert len(srv.chat_requests) == cut_calls <= 2, f"{cut_calls} calls after a disconnect, {full_calls} in full"
        assert svc.service.metrics.in_flight == 0


def test_drain_gives_503_json_while_in_flight_requests_finish(carol_path: Path, slow_model: LoopbackServer) -> None:
    with _slow_router(carol_path, slow_model) as router:
        svc = ServiceThread(Service({"carol": router})).start()
        results: list[httpx.Response] = []
        t = threading.Thread(target=lambda: results.extend(asyncio.run(_ask_all(svc.url, 1))))
        t.start()
        deadline = time.monotonic() + 30
        while svc.service.metrics.in_flight < 1:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        svc.service.begin_drain()
        with httpx.Client(base_url=svc.url, timeout=30) as c:
            _json_error(c.post("/v1/ask", json={"question": "x"}), 503, "unavailable")
        svc.stop()
        t.join()
    assert results[0].status_code == 200
