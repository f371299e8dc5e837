"""Hypothesis property tests for the LLM client: design properties 10-15 (seed 001).

Most properties run through the client's pure request/reply functions (fast: 100
examples each in the "ci" profile); property 11 also makes a real HTTP round trip per
example through the scripted server, so parsing is checked on bytes that crossed a socket.
"""

from __future__ import annotations

import copy
import json
import re
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_client import (
    ANTHROPIC_MAX_CACHE_BREAKPOINTS,
    LLMClient,
    LLMInvalidRequestError,
    build_payload,
    is_anthropic_model,
    parse_completion,
    prepare_messages,
    supports_tool_calling,
)
from session.game_configuration import GameConfiguration, Sampling
from tests.scripted_llm import ScriptedLLMServer, completion

OPENAI_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
JSON_TYPES = ["string", "integer", "number", "boolean"]

tool_names = st.from_regex(OPENAI_TOOL_NAME, fullmatch=True)
# Names a provider would reject: a dotted MCP name, a space, or more than 64 characters.
bad_tool_names = st.one_of(
    st.builds(lambda a, b: f"{a}.{b}", tool_names, tool_names),
    st.builds(lambda a: f"{a} x", tool_names),
    st.text(alphabet=string.ascii_letters, min_size=65, max_size=90),
    st.just(""),
)
schema_properties = st.dictionaries(
    st.text(alphabet=string.ascii_letters, min_size=1, max_size=12),
    st.sampled_from(JSON_TYPES).map(lambda t: {"type": t}),
    max_size=5,
)


@st.composite
def tool_schemas(draw: st.DrawFn, names: st.SearchStrategy[str] = tool_names) -> dict[str, Any]:
    properties = draw(schema_properties)
    required = draw(st.lists(st.sampled_from(sorted(properties)), unique=True)) if properties else []
    function: dict[str, Any] = {
        "name": draw(names),
        "parameters": {"type": "object", "properties": properties, "required": required},
    }
    if draw(st.booleans()):
        function["description"] = draw(st.text(max_size=40))
    return {"type": "function", "function": function}


def is_openai_tool(tool: Any) -> bool:
    """The OpenAI function-tool format, checked independently of the client's validator."""
    function = tool.get("function") if isinstance(tool, dict) else None
    return (
        tool.get("type") == "function"
        and isinstance(function, dict)
        and isinstance(function.get("name"), str)
        and OPENAI_TOOL_NAME.fullmatch(function["name"]) is not None
        and isinstance(function.get("parameters"), dict)
        and function["parameters"].get("type") == "object"
        and isinstance(function.get("description", ""), str)
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
tool_arguments = st.dictionaries(st.text(min_size=1, max_size=10), json_values, max_size=4)
call_ids = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=24)


@st.composite
def wire_tool_calls(draw: st.DrawFn) -> list[dict[str, Any]]:
    count = draw(st.integers(min_value=1, max_value=4))
    ids = draw(st.lists(call_ids, min_size=count, max_size=count, unique=True))
    return [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": draw(tool_names), "arguments": json.dumps(draw(tool_arguments))},
        }
        for call_id in ids
    ]


def fresh_config() -> GameConfiguration:
    return GameConfiguration.from_mapping({"retry": {"max_retries": 0}}, environ={})


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


# -- property 11 -------------------------------------------------------------------------


@given(calls=wire_tool_calls(), narration=st.one_of(st.none(), st.just(""), st.text(max_size=30)))
def test_property_11_tool_calls_parsed_through_http(
    calls: list[dict[str, Any]], narration: str | None, llm_server: ScriptedLLMServer
) -> None:
    """Property 11 (Req 4.2): for any response containing tool_calls, the client returns each call's
    id, type, function name and arguments exactly as sent, in order (real HTTP round trip)."""
    client = LLMClient(fresh_config(), base_url=llm_server.base_url, api_key="sk-test")
    body = completion(tool_calls=calls)
    body["choices"][0]["message"]["content"] = narration
    llm_server.respond_with(lambda _body, _index: body)

    try:
        response = client.chat_completions_create(model="openai/gpt-4o", messages=[{"role": "user", "content": "go"}])
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


# -- property 12 -------------------------------------------------------------------------


@given(
    content=st.one_of(st.none(), st.just(""), st.text(max_size=40)),
    calls=st.one_of(st.none(), st.just([]), wire_tool_calls()),
    finish_reason=st.sampled_from([None, "stop", "tool_calls", "length"]),
)
def test_property_12_content_and_tool_calls_are_exclusive(
    content: str | None, calls: list[dict[str, Any]] | None, finish_reason: str | None
) -> None:
    """Property 12 (Req 4.3, 4.4): for any response, tool_calls present => content None, and content
    present => tool_calls None. A reply with neither is an answer with content "" (not retried)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls is not None:
        message["tool_calls"] = calls
    body = {"model": "m", "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}]}

    response = parse_completion(body, "m")

    assert (response.content is None) != (response.tool_calls is None)
    if calls:
        assert response.content is None
        assert len(response.tool_calls or []) == len(calls)
    else:
        assert response.tool_calls is None
        assert response.content == (content or "")


# -- property 13 -------------------------------------------------------------------------

SEED_NO_TOOL_PATTERNS = ["o1-", "o3-", "qwq", "deepseek-r1", "deepseek-reasoner", "-reasoning", "r1-"]
SEED_TOOL_FAMILIES = [
    "gpt-4",
    "gpt-3.5",
    "claude-3",
    "claude-sonnet",
    "claude-opus",
    "claude-haiku",
    "gemini",
    "mistral",
    "mixtral",
    "llama-3.1",
    "llama-3.2",
    "command-r",
]
# Filler without "-" or "q" cannot form any no-tool pattern by itself, and the separators
# keep it from completing one with the inserted family name.
filler = st.text(alphabet="abcdefghijklmnoprstuvwxyz0123456789", max_size=10)
separators = st.sampled_from(["/", ":", "."])


def random_case(text: str, flips: list[bool]) -> str:
    return "".join(c.upper() if flip else c for c, flip in zip(text, flips + [False] * len(text), strict=False))


@given(
    kind=st.sampled_from(["no_tools", "tool_family", "unknown"]),
    no_tool=st.sampled_from(SEED_NO_TOOL_PATTERNS),
    family=st.sampled_from(SEED_TOOL_FAMILIES),
    prefix=filler,
    suffix=filler,
    sep=separators,
    flips=st.lists(st.booleans(), max_size=40),
    force=st.booleans(),
)
def test_property_13_model_compatibility_detection(
    kind: str, no_tool: str, family: str, prefix: str, suffix: str, sep: str, flips: list[bool], force: bool
) -> None:
    """Property 13 (Req 4.5, 12.1-12.3): for any model name, tool support is detected by the seed's
    patterns, case-insensitively: reasoning families (o1-, o3-, qwq, deepseek-r1, ...) cannot call tools,
    known families and unknown models can; force_tool_support overrides the heuristic."""
    core = {"no_tools": no_tool, "tool_family": family, "unknown": "model"}[kind]
    model = random_case(f"{prefix}{sep}{core}{sep}{suffix}", flips)
    expected = force or kind != "no_tools"

    assert supports_tool_calling(model, force=force) is expected
    config = fresh_config()
    config.mcp.force_tool_support = force
    assert LLMClient(config, api_key="sk-test")._supports_tool_calling(model) is expected


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
