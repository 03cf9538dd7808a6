"""The OpenAI-compatible API as the clients people use see it: the official `openai` SDK, LangChain's
`ChatOpenAI`, LiteLLM and a plain curl-style SSE reader, each with a plain call, a streamed call in the loop
users write (`for chunk in stream: chunk.choices[0].delta.content`) and an error; plus the chunk schema,
`include_usage`, `GET /v1/models/{id}`, the error shape and the request fields that are honoured (`max_tokens`,
`temperature`) or refused (`n` > 1, tools, unknown fields).

The service answers with the offline model over the Christmas Carol index; the tests of what reaches the
model call use the loopback OpenAI server as the chat endpoint.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from router import Router
from router.service import Service, ServiceThread

KEY = "clients-key"
QUESTION = "Who is Bob Cratchit?"
MESSAGES = [{"role": "user", "content": QUESTION}]


@pytest.fixture(scope="module")
def service(carol_path: Path) -> Iterator[ServiceThread]:
    with Router.from_index(carol_path) as router, ServiceThread(Service({"carol": router}, api_keys=[KEY])) as s:
        yield s


@pytest.fixture(scope="module")
def sdk(service: ServiceThread) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=service.url + "/v1", api_key=KEY, max_retries=0) as client:
        yield client


@pytest.fixture()
def http(service: ServiceThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as c:
        yield c


def _sse(http: httpx.Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The data events of a streamed chat completion, as a curl user reads them; [DONE] must end it."""
    events: list[Any] = []
    with http.stream("POST", "/v1/chat/completions", json=body) as resp:
        assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/event-stream")
        for line in resp.iter_lines():
            if line.startswith("data: "):
                events.append(line[6:])
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def _is_chunk(c: dict[str, Any], model: str) -> bool:
    return (c["object"] == "chat.completion.chunk" and c["id"].startswith("chatcmpl-") and isinstance(c["created"], int)
            and c["created"] > 0 and c["model"] == model)


# ---- the official SDK ----------------------------------------------------------------------------------

def test_sdk_plain_call(sdk: openai.OpenAI) -> None:
    resp = sdk.chat.completions.create(model="graphroute", messages=MESSAGES)
    assert resp.object == "chat.completion" and resp.model == "graphroute" and len(resp.choices) == 1
    assert "Cratchit" in (resp.choices[0].message.content or "") and resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None and resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
    assert (resp.model_extra or {})["graphroute"]["route"]["engine"] == "local"


def test_sdk_stream_in_the_loop_users_write(sdk: openai.OpenAI) -> None:
    stream = sdk.chat.completions.create(model="graphroute", messages=MESSAGES, stream=True)
    text, chunks = "", []
    for chunk in stream:  # the loop every OpenAI user writes: no IndexError, no None to join
        text += chunk.choices[0].delta.content or ""
        chunks.append(chunk)
    assert "Cratchit" in text
    assert all(len(c.choices) == 1 and c.id == chunks[0].id and c.created > 0 and c.model == "graphroute"
               for c in chunks)
    assert chunks[0].choices[0].delta.role == "assistant"
    route = (chunks[0].model_extra or {})["graphroute_event"]  # the route and plan, in the first chunk
    assert route["type"] == "route" and route["engine"] == "local" and route["reasons"]
    assert chunks[-1].choices[0].finish_reason == "stop" and "graphroute" in (chunks[-1].model_extra or {})
    assert all(c.usage is None for c in chunks)  # no usage chunk unless asked for


def test_sdk_stream_usage_only_when_asked(sdk: openai.OpenAI) -> None:
    chunks = list(sdk.chat.completions.create(model="graphroute-basic", messages=MESSAGES, stream=True,
                                              stream_options={"include_usage": True}))
    *answer, last = chunks
    assert last.choices == [] and last.usage is not None and last.usage.completion_tokens > 0  # OpenAI's own shape
    assert all(len(c.choices) == 1 and c.usage is None for c in answer)
    final = (answer[-1].model_extra or {})["graphroute"]
    assert last.usage.prompt_tokens == final["usage"]["total"]["prompt_tokens"]


def test_sdk_errors_are_typed(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as err:
        sdk.chat.completions.create(model="gpt-4", messages=MESSAGES)
    assert err.value.code == "model_not_found" and err.value.param == "model" and "unknown model" in err.value.message
    with pytest.raises(openai.BadRequestError) as bad:
        sdk.chat.completions.create(model="graphroute", messages=MESSAGES, n=2)
    assert bad.value.param == "n" and bad.value.code == "unsupported_parameter" and "one answer" in bad.value.message
    with pytest.raises(openai.BadRequestError) as tools:
        sdk.chat.completions.create(model="graphroute", messages=MESSAGES, tools=[
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}])
    assert tools.value.param == "tools"
    with pytest.raises(openai.BadRequestError) as unknown:
        sdk.chat.completions.create(model="graphroute", messages=MESSAGES, extra_body={"temprature": 0.2})
    assert unknown.value.param == "temprature" and unknown.value.code == "unknown_parameter"
    with pytest.raises(openai.BadRequestError) as value:
        sdk.chat.completions.create(model="graphroute", messages=MESSAGES, temperature=3)
    assert value.value.param == "temperature" and "0 to 2" in value.value.message


def test_sdk_accepts_what_asks_for_nothing(sdk: openai.OpenAI) -> None:
    resp = sdk.chat.completions.create(model="graphroute-basic", messages=MESSAGES, n=1, user="u-1", stop=None,
                                       response_format={"type": "text"}, logprobs=False, metadata={"team": "a"})
    assert "Cratchit" in (resp.choices[0].message.content or "")


def test_sdk_models_list_and_retrieve(sdk: openai.OpenAI) -> None:
    ids = [m.id for m in sdk.models.list()]
    assert "graphroute" in ids and "graphroute-drift@carol" in ids
    model = sdk.models.retrieve("graphroute")
    assert model.id == "graphroute" and model.object == "model" and model.owned_by == "graphroute"
    assert sdk.models.retrieve("graphroute-local@carol").id == "graphroute-local@carol"
    with pytest.raises(openai.NotFoundError) as err:
        sdk.models.retrieve("graphroute@nowhere")
    assert err.value.code == "model_not_found" and "unknown index 'nowhere'" in err.value.message


def test_max_tokens_caps_the_answer(sdk: openai.OpenAI, service: ServiceThread) -> None:
    tokenizer = service.service.routers["carol"].index.tokenizer
    full = sdk.chat.completions.create(model="graphroute-basic", messages=MESSAGES).choices[0].message.content or ""
    assert tokenizer.count(full) > 12
    capped = sdk.chat.completions.create(model="graphroute-basic", messages=MESSAGES, max_tokens=12)
    text = capped.choices[0].message.content or ""
    assert capped.choices[0].finish_reason == "length" and tokenizer.count(text) <= 12 and full.startswith(text)
    streamed = list(sdk.chat.completions.create(model="graphroute-basic", messages=MESSAGES, max_completion_tokens=12,
                                                stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == text
    assert streamed[-1].choices[0].finish_reason == "length"


# ---- a curl-style reader ------------------------------------------------------------------------------

def test_plain_sse_stream_follows_the_chunk_schema(http: httpx.Client) -> None:
    chunks = _sse(http, {"model": "graphroute@carol", "messages": MESSAGES, "stream": True})
    assert all(_is_chunk(c, "graphroute@carol") and len(c["choices"]) == 1 for c in chunks)
    assert "Cratchit" in "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert chunks[0]["graphroute_event"]["type"] == "route" and "usage" not in chunks[-1]
    with_usage = _sse(http, {"model": "graphroute", "messages": MESSAGES, "stream": True,
                             "stream_options": {"include_usage": True}})
    assert with_usage[-1]["choices"] == [] and with_usage[-1]["usage"]["total_tokens"] > 0
    assert all(len(c["choices"]) == 1 for c in with_usage[:-1])


def test_plain_http_errors_are_openai_shaped(http: httpx.Client) -> None:
    for resp, status, code in (
        (http.get("/v1/no-such-route"), 404, "not_found"),
        (http.get("/v1/chat/completions"), 405, "method_not_allowed"),
        (http.post("/v1/chat/completions", json={"model": "graphroute", "messages": []}), 400, None),
        (http.post("/v1/chat/completions", content=b"{oops", headers={"content-type": "application/json"}), 400,
         "invalid_json"),
        (http.get("/v1/models/gpt-4"), 404, "model_not_found"),
    ):
        assert resp.status_code == status and resp.headers["content-type"] == "application/json", resp.text
        error = resp.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["message"]
        assert error["code"] == code and error["type"] == "invalid_request_error"
    assert http.get("/v1/chat/completions").headers["allow"] == "POST"
    assert http.post("/v1/chat/completions", json={"model": "graphroute", "messages": []}).json()["error"]["param"] \
        == "messages"


# ---- LangChain -----------------------------------------------------------------------------------------

def test_langchain_chat_openai(service: ServiceThread) -> None:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="graphroute", base_url=service.url + "/v1", api_key=KEY, max_retries=0)
    reply = llm.invoke(QUESTION)
    assert "Cratchit" in str(reply.content) and reply.response_metadata["finish_reason"] == "stop"
    assert "Cratchit" in "".join(str(chunk.content) for chunk in llm.stream(QUESTION))
    short = ChatOpenAI(model="graphroute-basic", base_url=service.url + "/v1", api_key=KEY, max_retries=0,
                       max_tokens=10, temperature=0).invoke(QUESTION)
    assert short.response_metadata["finish_reason"] == "length"
    with pytest.raises(openai.NotFoundError, match="unknown model"):
        ChatOpenAI(model="graphroute-fast", base_url=service.url + "/v1", api_key=KEY, max_retries=0).invoke(QUESTION)


# ---- LiteLLM -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def litellm() -> Iterator[Any]:
    """LiteLLM with its model price map read from the package (no download at import or call time)."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm as module

    module.suppress_debug_info = True
    yield module
    module.in_memory_llm_clients_cache.flush_cache()  # its cached HTTP clients, so no socket outlives the test


def test_litellm_completion(litellm: Any, service: ServiceThread) -> None:
    where = {"api_base": service.url + "/v1", "api_key": KEY}
    resp = litellm.completion(model="openai/graphroute", messages=MESSAGES, **where)
    assert "Cratchit" in resp.choices[0].message.content and resp.choices[0].finish_reason == "stop"
    text = ""
    for chunk in litellm.completion(model="openai/graphroute-local", messages=MESSAGES, stream=True, **where):
        text += chunk.choices[0].delta.content or ""
    assert "Cratchit" in text
    # On an error LiteLLM drops the client it made without closing it; given one, it uses it, and it is closed here.
    with openai.OpenAI(base_url=service.url + "/v1", api_key=KEY, max_retries=0) as client, \
            pytest.raises(litellm.NotFoundError, match="unknown model"):
        litellm.completion(model="openai/graphroute-fast", messages=MESSAGES, client=client, **where)


# ---- what reaches the model: the client's sampling and cap go to the call that writes the answer --------

def test_temperature_and_max_tokens_reach_the_answer_call(carol_path: Path) -> None:
    from engines.config import GraphrouteConfig
    from engines.models.config import models_config_from_mapping
    from testing.model_server import LoopbackServer

    with LoopbackServer(default_reply="Bob Cratchit is Scrooge's clerk [Data: Sources (1)].") as srv:
        models = models_config_from_mapping({"chat": {"base_url": srv.base_url, "api_key": "x", "model": "gpt-4.1"},
                                             "embedding": {"provider": "offline"}}, env={})
        with Router.from_index(carol_path, config=GraphrouteConfig(models=models)) as router, \
                ServiceThread(Service({"carol": router})) as svc, \
                openai.OpenAI(base_url=svc.url + "/v1", api_key="none", max_retries=0) as client:
            client.chat.completions.create(model="graphroute-basic", messages=MESSAGES, temperature=0.7, top_p=0.5,
                                           seed=7, max_tokens=40)
            (call,) = srv.chat_requests
            assert (call.body["temperature"], call.body["top_p"], call.body["seed"], call.body["max_tokens"]) == \
                (0.7, 0.5, 7, 40)
            srv.reset()
            client.chat.completions.create(model="graphroute-basic", messages=MESSAGES)  # the next request: its own
            (plain,) = srv.chat_requests
            assert plain.body["temperature"] == 0.0 and "top_p" not in plain.body and "max_tokens" not in plain.body
