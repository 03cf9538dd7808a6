"""The loopback server itself: rules, sequences, callables, faults, embeddings, recording."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import numpy as np
import openai
import pytest

from testing.model_server import Fault, LoopbackServer, Reply, hash_vector


def post(srv: LoopbackServer, path: str, body: dict) -> tuple[int, dict | str]:
    req = urllib.request.Request(srv.base_url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            raw = resp.read().decode()
            return resp.status, json.loads(raw) if raw.startswith("{") else raw
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read().decode())


def ask(srv: LoopbackServer, user: str, system: str = "", model: str = "m") -> str:
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    status, body = post(srv, "/chat/completions", {"model": model, "messages": messages})
    assert status == 200
    return body["choices"][0]["message"]["content"]


def test_rules_first_match_wins_with_system_model_and_sequences():
    with LoopbackServer(default_reply="default") as srv:
        srv.add_rule("weather", reply=["sunny", "rainy"])
        srv.add_rule(None, system="Reports", reply="reports!")
        srv.add_rule(None, model="nano", reply=lambda body: f"echo {body['messages'][-1]['content']}")
        srv.add_rule("once", reply="first", times=1)
        assert [ask(srv, "weather?") for _ in range(3)] == ["sunny", "rainy", "rainy"]  # last repeats
        assert ask(srv, "hello", system="-----Reports-----") == "reports!"
        assert ask(srv, "hi", model="gpt-4.1-nano") == "echo hi"
        assert ask(srv, "once") == "first" and ask(srv, "once") == "default"
        assert len(srv.chat_requests) == 7 and srv.requests[0].body["messages"][-1]["content"] == "weather?"


def test_usage_is_deterministic_and_overridable():
    with LoopbackServer() as srv:
        srv.add_rule("fixed", reply=Reply("x", prompt_tokens=100, completion_tokens=7))
        status, body = post(srv, "/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "fixed"}]})
        assert status == 200
        assert body["usage"] == {"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107}


def test_faults_for_next_n_calls():
    with LoopbackServer() as srv:
        srv.fail_next(1, Fault("rate_limit", retry_after=2))
        srv.fail_next(1, Fault("server_error"))
        msgs = {"model": "m", "messages": [{"role": "user", "content": "q"}]}
        assert post(srv, "/chat/completions", msgs)[0] == 429
        assert post(srv, "/chat/completions", msgs)[0] == 500
        assert post(srv, "/chat/completions", msgs)[0] == 200
        assert [r.fault for r in srv.requests] == ["rate_limit", "server_error", None]


def test_content_faults_change_the_reply():
    with LoopbackServer() as srv:
        srv.add_rule("t", reply='{"a": [1, 2, 3]}', fault=Fault("truncate", keep=0.5))
        srv.add_rule("m", reply='{"a": "b"}', fault=Fault("malformed"))
        srv.add_rule("e", reply="something", fault=Fault("empty"))
        assert ask(srv, "t") == '{"a": [1'
        assert ask(srv, "m") == "{'a': 'b',}"
        assert ask(srv, "e") == ""


def test_embeddings_float_and_base64_are_the_same_vectors():
    with LoopbackServer(embedding_dim=16) as srv:
        _, plain = post(srv, "/embeddings", {"model": "e", "input": ["hello", "world"]})
        _, b64 = post(srv, "/embeddings", {"model": "e", "input": "hello", "encoding_format": "base64"})
        vec = np.frombuffer(base64.b64decode(b64["data"][0]["embedding"]), dtype="<f4")
        assert np.allclose(plain["data"][0]["embedding"], vec) and np.allclose(vec, hash_vector("hello", 16))
        assert len(plain["data"]) == 2 and plain["usage"]["prompt_tokens"] == 2
        status, err = post(srv, "/embeddings", {"model": "e", "input": []})
        assert status == 400 and "input" in err["error"]["message"]


async def test_sse_stream_with_the_real_client_and_models_list():
    with LoopbackServer(stream_chunk_chars=3) as srv:
        srv.add_rule(None, reply="streamed reply")
        client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="k", max_retries=0)
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "q"}], stream=True, stream_options={"include_usage": True}
        )
        deltas, usage = [], None
        async for chunk in stream:
            deltas += [c.delta.content for c in chunk.choices if c.delta.content]
            usage = chunk.usage or usage
        assert "".join(deltas) == "streamed reply" and len(deltas) == 5
        assert usage.completion_tokens == srv.chat_requests[-1].completion_tokens
        models = await client.models.list()
        assert "gpt-4.1-mini" in [m.id for m in models.data]
        await client.close()


def test_base_url_requires_running_server():
    with pytest.raises(RuntimeError, match="not running"):
        _ = LoopbackServer().base_url
