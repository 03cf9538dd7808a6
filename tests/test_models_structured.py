"""JSON repair (pure) and complete_json against the loopback server with the real openai client."""

from __future__ import annotations

import dataclasses

import pytest

from engines.models.config import ModelEndpoint
from engines.models.errors import StructuredOutputError
from engines.models.limiter import LimiterRegistry
from engines.models.openai_backend import OpenAIChatModel
from engines.models.structured import complete_json, parse_structured, repair_json_text
from engines.schemas import MapResponse, PrimerResponse, RateResponse
from testing.model_server import Fault, LoopbackServer

# ---------------------------------------------------------------------------- repair_json_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ("Here you go:\n```\n{\"a\": [1, 2]}\n```\nHope it helps", {"a": [1, 2]}),
        ('<think>maybe {"a": 0}?</think>\n{"a": 1}', {"a": 1}),
        ('<think>I will answer {"a": 0} no wait\n{"a": 1}', {"a": 1}),  # unclosed think: last object
        ('reasoning the server cut</think>{"a": 1}', {"a": 1}),
        ('{"a": 1, "b": [1, 2,],}', {"a": 1, "b": [1, 2]}),
        ("{'b': 'Scrooge's nephew', 'a': 'x'}", {"b": "Scrooge's nephew", "a": "x"}),
        ("{'ok': True, 'none': None, 'no': False}", {"ok": True, "none": None, "no": False}),
        ('{{"a": 1}}', {"a": 1}),
        ('Sure! {"a": 1} Anything else?', {"a": 1}),
        ('{a: 1, b: "two"}', {"a": 1, "b": "two"}),
        ('{"reason": "he said "no" twice", "rating": 2}', {"reason": 'he said "no" twice', "rating": 2}),
        ('{"text": "line one\nline two"}', {"text": "line one\nline two"}),
        ('{"a": 1} // done', {"a": 1}),
    ],
)
def test_repair_cases(text, expected):
    assert repair_json_text(text) == expected


def test_truncated_array_keeps_complete_elements():
    text = '{"points": [{"description": "A [Data: Reports (1)]", "score": 80}, {"description": "B [Data: Rep'
    assert repair_json_text(text) == {"points": [{"description": "A [Data: Reports (1)]", "score": 80}]}


def test_truncated_string_and_object_are_closed():
    assert repair_json_text('{"questions": ["Who is Fred?", "Why') == {"questions": ["Who is Fred?"]}
    # With no list to cut back to, the cut-off field would be taken as meant ("Who is Sc"): refused.
    with pytest.raises(ValueError, match="cut off"):
        repair_json_text('{"intermediate_answer": "Scrooge changes')
    with pytest.raises(ValueError, match="cut off"):
        repair_json_text('{"question": "Who is Sc')


def test_truncated_nested_list_drops_the_whole_half_written_element():
    text = '{"points": [{"description": "A", "score": 80}, {"description": "B", "tags": ["x", "y'
    assert repair_json_text(text) == {"points": [{"description": "A", "score": 80}]}


def test_no_json_raises_value_error_with_preview():
    with pytest.raises(ValueError, match=r"no JSON object found.*I cannot help"):
        repair_json_text("I cannot help with that.")


# ---------------------------------------------------------------------------- parse_structured


def test_numeric_strings_and_floats_are_coerced():
    assert parse_structured('{"reason": "r", "rating": "4"}', RateResponse).rating == 4
    assert parse_structured('{"reason": "r", "rating": 4.6}', RateResponse).rating == 5
    assert parse_structured('{"points": [{"description": "d", "score": "85"}]}', MapResponse).points[0].score == 85


def test_out_of_range_is_rejected_not_clamped():
    with pytest.raises(ValueError, match=r"RateResponse.*rating.*less than or equal to 5"):
        parse_structured('{"reason": "r", "rating": 9}', RateResponse)


def test_bare_list_is_wrapped_into_the_single_list_field():
    parsed = parse_structured('[{"description": "d", "score": 10}]', MapResponse)
    assert parsed.points[0].description == "d"


def test_truncated_reply_prefers_the_candidate_that_validates():
    text = '{"intermediate_answer": "Fred invites Scrooge.", "score": 70, "follow_up_queries": ["Who is Fred?", "Wh'
    parsed = parse_structured(text, PrimerResponse)
    assert parsed.score == 70 and parsed.follow_up_queries == ["Who is Fred?"]


# ---------------------------------------------------------------------------- complete_json via the loopback server


@pytest.fixture()
def srv():
    with LoopbackServer() as server:
        yield server


def model_for(srv: LoopbackServer) -> OpenAIChatModel:
    endpoint = ModelEndpoint(provider="openai", model="gpt-4.1-nano", base_url=srv.base_url, api_key="k",
                             max_retries=2, timeout_s=2)
    model = OpenAIChatModel(endpoint, limiter_registry=LimiterRegistry())
    model.policy = dataclasses.replace(model.policy, base_delay_s=0.01)
    return model


MESSAGES = [{"role": "system", "content": "-----Reports-----\nid|title\n1|x"}, {"role": "user", "content": "rate"}]
GOOD = '{"reason": "relevant", "rating": 4}'


async def test_valid_json_in_one_call_with_json_mode(srv):
    srv.add_rule("rate", reply=GOOD)
    parsed, completions = await complete_json(model_for(srv), MESSAGES, RateResponse, task="rate")
    assert parsed == RateResponse(reason="relevant", rating=4) and len(completions) == 1
    assert srv.chat_requests[0].body["response_format"] == {"type": "json_object"}


async def test_malformed_json_is_repaired_without_retry(srv):
    srv.add_rule("rate", reply=GOOD, fault=Fault("malformed"))  # single quotes + trailing commas
    parsed, completions = await complete_json(model_for(srv), MESSAGES, RateResponse, task="rate")
    assert parsed.rating == 4 and len(completions) == 1
    assert "'" in completions[0].text  # the server really sent the malformed form


async def test_truncated_json_is_repaired(srv):
    reply = '{"points": [{"description": "a", "score": 90}, {"description": "b", "score": 40}]}'
    srv.add_rule("rate", reply=reply, fault=Fault("truncate", keep=0.75))
    parsed, completions = await complete_json(model_for(srv), MESSAGES, MapResponse, task="global_map")
    assert [p.score for p in parsed.points] == [90] and len(completions) == 1


async def test_invalid_then_valid_retries_once_quoting_the_error(srv):
    srv.add_rule("rate", reply=['{"reason": "r", "rating": 9}', GOOD])
    srv.add_rule("could not be used", reply=GOOD)
    parsed, completions = await complete_json(model_for(srv), MESSAGES, RateResponse, task="rate")
    assert parsed.rating == 4 and len(completions) == 2
    retry = srv.chat_requests[1].body["messages"]
    assert retry[-2] == {"role": "assistant", "content": '{"reason": "r", "rating": 9}'}
    assert "less than or equal to 5" in retry[-1]["content"] and "rating" in retry[-1]["content"]


async def test_garbage_twice_raises_with_all_completions(srv):
    srv.add_rule(None, reply="I am unable to produce JSON today.")
    with pytest.raises(StructuredOutputError) as info:
        await complete_json(model_for(srv), MESSAGES, RateResponse, task="rate")
    err = info.value
    assert len(err.completions) == 2 and err.task == "rate" and err.schema_name == "RateResponse"
    assert "no JSON object" in err.last_error
    assert sum(c.prompt_tokens for c in err.completions) == sum(r.prompt_tokens for r in srv.chat_requests)


async def test_empty_content_is_retried_then_typed_failure(srv):
    srv.add_rule(None, reply=GOOD, fault=Fault("empty"))
    with pytest.raises(StructuredOutputError, match=r"gpt-4\.1-nano did not return valid RateResponse JSON"):
        await complete_json(model_for(srv), MESSAGES, RateResponse, task="rate")
    assert len(srv.chat_requests) == 2


async def test_failed_corrective_call_still_carries_first_completion(srv):
    srv.add_rule("rate", reply="not json")
    srv.add_rule("could not be used", reply="x", fault=Fault("http_error", status=400))
    with pytest.raises(StructuredOutputError, match="corrective retry failed") as info:
        await complete_json(model_for(srv), MESSAGES, RateResponse, task="rate")
    assert len(info.value.completions) == 1
