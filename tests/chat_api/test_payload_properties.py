"""Hypothesis property tests for the request body (chat_api/payload.py): design properties 10, 14 and 15 (seed 001)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chat_api.models import is_anthropic_model
from chat_api.payload import ANTHROPIC_MAX_CACHE_BREAKPOINTS, build_payload, prepare_messages
from session.errors import LLMInvalidRequestError
from session.game_configuration import Sampling
from tests.llm_support import bad_tool_names, call_ids, is_openai_tool, tool_schemas

# -- property 10 -------------------------------------------------------------------------


@given(tools=st.lists(tool_schemas(), min_size=1, max_size=5), choice=st.sampled_from([None, "auto", "none"]))
def test_property_10_tool_schemas_sent_in_openai_format(tools: list[dict[str, Any]], choice: str | None) -> None:
    """Property 10 (Req 4.1): for any request with tools, the tool schemas are in valid OpenAI format.

    Valid schemas go on the wire unchanged, each in the OpenAI function-tool shape.
    """
    payload = build_payload("openai/gpt-4o", [{"role": "user", "content": "hi"}], tools=tools, tool_choice=choice)

    assert payload["tools"] == tools
    assert all(is_openai_tool(tool) for tool in payload["tools"])
    assert payload.get("tool_choice") == choice


@given(
    good=st.lists(tool_schemas(), max_size=3),
    bad=tool_schemas(names=bad_tool_names),
    position=st.integers(min_value=0, max_value=3),
)
def test_property_10_non_openai_tool_schemas_never_sent(
    good: list[dict[str, Any]], bad: dict[str, Any], position: int
) -> None:
    """Property 10 (Req 4.1): a tool list holding a schema providers would reject is refused before sending,
    with an error naming the offending tool's position."""
    tools = [*good]
    index = min(position, len(tools))
    tools.insert(index, bad)
    assert not is_openai_tool(bad)

    with pytest.raises(LLMInvalidRequestError, match=rf"tools\[{index}\]"):
        build_payload("openai/gpt-4o", [{"role": "user", "content": "hi"}], tools=tools)


# -- property 14 -------------------------------------------------------------------------

models = st.sampled_from(["openai/gpt-4o", "anthropic/claude-sonnet-4.5", "google/gemini-2.5-pro", "mistral/large"])
optional_float = st.one_of(st.none(), st.floats(min_value=0, max_value=2, allow_nan=False))
optional_probability = st.one_of(st.none(), st.floats(min_value=0, max_value=1, allow_nan=False))  # top_p is in [0, 1]


@given(
    model=models,
    tools=st.one_of(st.none(), st.lists(tool_schemas(), min_size=1, max_size=3)),
    temperature=optional_float,
    top_p=optional_probability,
    max_tokens=st.one_of(st.none(), st.integers(min_value=1, max_value=4096)),
    with_format=st.booleans(),
)
def test_property_14_response_format_absent_when_none(
    model: str,
    tools: list[dict[str, Any]] | None,
    temperature: float | None,
    top_p: float | None,
    max_tokens: int | None,
    with_format: bool,
) -> None:
    """Property 14 (Req 4.6): during the tool-calling loop the agent passes response_format=None, and
    then no response_format reaches the provider; the forced final call's json_schema is sent as given."""
    schema = {"type": "json_schema", "json_schema": {"name": "AgentResponse", "schema": {"type": "object"}}}
    payload = build_payload(
        model,
        [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
        sampling=Sampling(temperature=temperature, top_p=top_p, max_tokens=max_tokens),
        response_format=schema if with_format else None,
        tools=tools,
    )

    if with_format:
        assert payload["response_format"] == schema
    else:
        assert "response_format" not in payload
    for key, value in {"temperature": temperature, "top_p": top_p, "max_tokens": max_tokens}.items():
        assert (key in payload) == (value is not None)


# -- property 15 -------------------------------------------------------------------------

roles = st.sampled_from(["system", "user", "assistant", "tool"])
contents = st.one_of(st.text(min_size=1, max_size=30), st.just(""))


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for role in draw(st.lists(roles, min_size=1, max_size=12)):
        message: dict[str, Any] = {"role": role, "content": draw(contents)}
        if role == "tool":
            message["tool_call_id"] = draw(call_ids)
        messages.append(message)
    return messages


def has_marker(message: dict[str, Any]) -> bool:
    content = message.get("content")
    in_parts = isinstance(content, list) and any(isinstance(p, dict) and "cache_control" in p for p in content)
    return "cache_control" in message or in_parts


@given(messages=histories(), model=st.sampled_from(["openai/gpt-4o", "google/gemini-2.5-pro", "meta/llama-3.1-70b"]))
def test_property_15_cache_control_on_every_system_and_user_message(messages: list[dict[str, Any]], model: str) -> None:
    """Property 15 (Req 4.7): for any message with system or user role, the message sent carries
    cache_control metadata; other roles and the caller's own list are left untouched."""
    before = copy.deepcopy(messages)

    sent = prepare_messages(messages, model)

    assert messages == before
    assert len(sent) == len(messages)
    for original, message in zip(messages, sent, strict=True):
        if original["role"] in ("system", "user"):
            assert message["cache_control"] == {"type": "ephemeral"}
        else:
            assert message == original


@given(messages=histories(), model=st.sampled_from(["anthropic/claude-sonnet-4.5", "claude-3-haiku"]))
def test_property_15_anthropic_cache_control_on_text_parts(messages: list[dict[str, Any]], model: str) -> None:
    """Property 15 (Req 4.7), Anthropic form: system/user messages carry cache_control on a text part
    (OpenRouter's form for Anthropic), the first system prompt and the latest turns first, never more
    than Anthropic's four breakpoints; the text is unchanged."""
    assert is_anthropic_model(model)
    before = copy.deepcopy(messages)

    sent = prepare_messages(messages, model)

    assert messages == before
    cacheable = [i for i, m in enumerate(messages) if m["role"] in ("system", "user") and m["content"]]
    marked = [i for i, m in enumerate(sent) if has_marker(m)]
    assert all("cache_control" not in m for m in sent), "no message-level marker for Anthropic"
    assert len(marked) == min(len(cacheable), ANTHROPIC_MAX_CACHE_BREAKPOINTS)
    first_system = next((i for i in cacheable if messages[i]["role"] == "system"), None)
    expected = [] if first_system is None else [first_system]
    for i in reversed(cacheable):
        if len(expected) < ANTHROPIC_MAX_CACHE_BREAKPOINTS and i not in expected:
            expected.append(i)
    assert marked == sorted(expected)
    for original, message in zip(messages, sent, strict=True):
        content = message["content"]
        text = content[0]["text"] if isinstance(content, list) else content
        assert text == original["content"]
