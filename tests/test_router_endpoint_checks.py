"""No network call in a Router's constructor, and bounded checks of the model endpoints: the embedding model's
vector size is learned on the first question (within its deadline, or `probe_timeout_s`), a silent endpoint
degrades the answer naming it, and `graphroute serve` checks every endpoint at start-up and reports them in
`/healthz` and `/v1/indexes`."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest

from engines.config import GraphrouteConfig
from engines.models.config import models_config_from_mapping
from router import Budget, Router
from router.service import Service, ServiceThread
from testing.model_server import LoopbackServer


@pytest.fixture()
def silent_endpoint() -> Iterator[str]:
    """A base URL whose server accepts connections (the kernel's backlog) and never answers."""
    with closing(socket.socket()) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def _config(embedding_url: str, chat_url: str | None = None, **embedding: Any) -> GraphrouteConfig:
    table: dict[str, Any] = {"embedding": {"base_url": embedding_url, "api_key": "k", "model": "text-embedding-3-large",
                                           **embedding}}
    if chat_url is not None:
        table["chat"] = {"base_url": chat_url, "api_key": "k", "model": "gpt-4.1"}
    return GraphrouteConfig(models=models_config_from_mapping(table, env={}))


def test_from_index_makes_no_call_and_a_silent_endpoint_degrades_the_first_question(
        carol_path: Path, silent_endpoint: str) -> None:
    started = time.perf_counter()
    router = Router.from_index(carol_path, config=_config(silent_endpoint, probe_timeout_s=1.0))
    assert time.perf_counter() - started < 5.0
    with router:
        started = time.perf_counter()
        answer = router.ask("Who is Bob Cratchit?", budget=Budget(deadline_s=3.0))
        within = time.perf_counter() - started
        assert within < 3.0 + 1.0  # the deadline (and the router's grace), not the endpoint's 60 s timeout
        assert "Cratchit" in answer.text  # answered by names and keywords
        (note,) = [d for d in answer.degraded if d.startswith("embeddings:")]
        assert silent_endpoint in note and "unreachable" in note and "no answer within 1 s" in note
        assert answer.usage.total.embedding_calls == 0  # no query vector asked of a silent endpoint
        started = time.perf_counter()
        again = router.ask("Who is Fred?")  # no deadline: the probe is not asked again for a while
        assert time.perf_counter() - started < 1.0 and any(silent_endpoint in d for d in again.degraded)


def test_without_a_deadline_the_check_is_cut_at_its_own_bound(carol_path: Path, silent_endpoint: str) -> None:
    with Router.from_index(carol_path, config=_config(silent_endpoint, probe_timeout_s=0.5)) as router:
        started = time.perf_counter()
        answer = router.ask("Who is Bob Cratchit?", mode="basic")
        assert time.perf_counter() - started < 5.0
    assert any("no answer within 0.5 s" in d for d in answer.degraded)


def test_the_first_question_learns_the_size_and_uses_the_vectors(carol_path: Path) -> None:
    with LoopbackServer(embedding_dim=3072) as srv, \
            Router.from_index(carol_path, config=_config(srv.base_url)) as router:
        assert srv.requests == []
        answer = router.ask("Who is Bob Cratchit?")
        assert not any(d.startswith("embeddings:") for d in answer.degraded)
        assert router.models.embedder.dim == 3072 and answer.usage.total.embedding_calls >= 1
        assert srv.requests[0].body["input"] == ["dimension probe"]


def test_serve_checks_every_endpoint_and_reports_them(carol_path: Path, silent_endpoint: str) -> None:
    with LoopbackServer(embedding_dim=64) as srv:
        routers = {
            "good": Router.from_index(carol_path, config=_config(srv.base_url, srv.base_url)),
            "silent": Router.from_index(carol_path, config=_config(silent_endpoint, srv.base_url, probe_timeout_s=1.0)),
        }
        try:
            service = Service(routers, api_keys=["k"])
            started = time.perf_counter()
            lines = service.check_endpoints()
            assert time.perf_counter() - started < 5.0  # concurrent, each within its bound
            checks = {name: {c.role: c for c in cs} for name, cs in service.endpoint_checks.items()}
            assert checks["good"]["chat"].status == "ok" and checks["silent"]["chat"].status == "ok"
            size = checks["good"]["embedding"]  # answered, but its vectors do not fit the index's
            assert size.status == "error" and "dimension 3072" in size.detail and "produces 64" in size.detail
            silent = checks["silent"]["embedding"]
            assert silent.status == "unreachable" and "no answer within 1 s" in silent.detail
            assert any(silent_endpoint in line and "unreachable" in line for line in lines)
            with ServiceThread(service) as svc, httpx.Client(base_url=svc.url, timeout=30) as anon:
                assert anon.get("/healthz").json() == {"status": "degraded"}  # no more without a key
                health = anon.get("/healthz", headers={"Authorization": "Bearer k"}).json()
                shown = {e["role"]: e for e in health["endpoints"]["silent"]}
                assert shown["embedding"]["status"] == "unreachable"
                keyed = anon.get("/v1/indexes", headers={"Authorization": "Bearer k"}).json()["indexes"]
                silent_index = next(ix for ix in keyed if ix["name"] == "silent")
                assert {e["role"]: e["endpoint"] for e in silent_index["endpoints"]}["embedding"] == silent_endpoint
                # the size mismatch the check found is a clear error for that index's questions
                resp = anon.post("/v1/ask", json={"question": "Who is Bob Cratchit?", "index": "good"},
                                 headers={"Authorization": "Bearer k"})
                assert resp.status_code == 500 and resp.json()["error"]["code"] == "index_error"
                assert "dimension 3072" in resp.json()["error"]["message"]
        finally:
            for router in routers.values():
                router.close()
