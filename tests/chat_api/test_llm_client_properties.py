"""Hypothesis property tests for the LLM client through real HTTP: design property 11 (seed 001).

Property 11 makes a real HTTP round trip per example through the scripted server, so parsing
is checked on bytes that crossed a socket. The pure request and reply rules have their own
property tests: test_llm_payload_properties.py (10, 14, 15), test_llm_replies_properties.py (12)
and test_llm_models_properties.py (13).
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from harness.scripted_llm import ScriptedLLMServer, completion
from llm_client import LLMClient
from session.game_configuration import GameConfiguration
from session.redaction import Redactor
from tests.llm_support import wire_tool_calls


def fresh_config() -> GameConfiguration:
    return GameConfiguration.from_mapping({"retry": {"max_retries": 0}}, environ={})


# -- property 11 -------------------------------------------------------------------------


@given(calls=wire_tool_calls(), narration=st.one_of(st.none(), st.just(""), st.text(max_size=30)))
def test_property_11_tool_calls_parsed_through_http(
    calls: list[dict[str, Any]], narration: str | None, llm_server: ScriptedLLMServer
) -> None:
    """Property 11 (Req 4.2): for any response containing tool_calls, the client returns each call's
    id, type, function name and arguments exactly as sent, in order (real HTTP round trip)."""
    client = LLMClient(fresh_config(), base_url=llm_server.base_url, api_key="sk-test", redactor=Redactor())
    body = completion(tool_calls=calls)
    body["choices"][0]["message"]["content"] = narration
    llm_server.respond_with(lambda _body, _index: body)

    try:
        response = client.complete(model="openai/gpt-4o", messages=[{"role": "user", "content": "go"}])
    finally:
        client.session.close()

    assert response.tool_calls is not None
    assert [(c.id, c.type, c.function.name) for c in response.tool_calls] == [
        (c["id"], c["type"], c["function"]["name"]) for c in calls
    ]
    assert [json.loads(c.function.arguments) for c in response.tool_calls] == [
        json.loads(c["function"]["arguments"]) for c in calls
    ]
    assert response.finish_reason == "tool_calls"
