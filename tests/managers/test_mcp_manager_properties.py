"""Hypothesis properties of the MCP client side (seed 001: properties 5, 7, 8, 9, 33-38, 41-43).

Deterministic under the "ci" profile of tests/conftest.py (100 examples each, derandomized).
Properties 8 and 9 spawn a real subprocess per example: the standard-library-only
``raw_server.py`` starts in milliseconds, so a hundred real sessions stay cheap.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import tempfile
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from chat_api.wire import TOOL_NAME_PATTERN
from managers.mcp_manager import MCPManager
from mcp_client.config import SECRET_ENV_VARS, build_server_environment
from mcp_client.tools import (
    WIRE_NAME_MAX,
    ToolNameMap,
    convert_call_result,
    dotted_name,
    stable_hash,
    translate_parameters,
    translate_tool,
    wire_name,
)
from session.errors import MCPConfigError, MCPToolCallError
from session.game_configuration import GameConfiguration
from session.redaction import Redactor
from shared_utils.toolset import ToolCallResult, to_jsonable
from tests.mcp_test_servers.helpers import child_pids, make_config, raw_entry, wait_gone, write_mcp_config

LOGGER = logging.getLogger("test.mcp.properties")
LOGGER.addHandler(logging.NullHandler())
LOGGER.propagate = False

# Names as servers really write them, plus the awkward cases: dots, spaces, unicode, long.
names = st.one_of(
    st.from_regex(r"[a-z][a-z0-9_]{0,20}", fullmatch=True),
    st.text(min_size=1, max_size=90),
)
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)
property_schemas = st.dictionaries(
    st.text(min_size=1, max_size=12),
    st.sampled_from([{"type": "string"}, {"type": "integer", "minimum": 1}, {"type": "boolean"}, {}]),
    max_size=5,
)


@st.composite
def input_schemas(draw: st.DrawFn) -> dict[str, Any]:
    """Object schemas, some without "type" or "properties", as servers in the wild send them."""
    schema: dict[str, Any] = {}
    if draw(st.booleans()):
        schema["type"] = "object"
    if draw(st.booleans()):
        props = draw(property_schemas)
        schema["properties"] = props
        if props and draw(st.booleans()):
            schema["required"] = sorted(draw(st.sets(st.sampled_from(sorted(props)), min_size=1)))
    if draw(st.booleans()):
        schema["additionalProperties"] = draw(st.booleans())
    return schema


@st.composite
def tools(draw: st.DrawFn, unique: bool = True) -> list[types.Tool]:
    tool_names = draw(st.lists(names, min_size=1, max_size=6, unique=unique))
    return [
        types.Tool(
            name=name,
            description=draw(st.one_of(st.none(), st.text(max_size=40))),
            input_schema=draw(input_schemas()),
        )
        for name in tool_names
    ]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


content_blocks = st.one_of(
    st.builds(lambda t: types.TextContent(type="text", text=t), st.text(max_size=200)),
    st.builds(lambda d: types.ImageContent(type="image", data=b64(d), mime_type="image/png"), st.binary(max_size=64)),
    st.builds(lambda d: types.AudioContent(type="audio", data=b64(d), mime_type="audio/wav"), st.binary(max_size=64)),
    st.builds(
        lambda n: types.ResourceLink(type="resource_link", uri=f"file:///{n}", name=n or "r"),
        st.from_regex(r"[a-z]{0,8}", fullmatch=True),
    ),
    st.builds(
        lambda t: types.EmbeddedResource(
            type="resource", resource=types.TextResourceContents(uri="file:///t", mime_type="text/plain", text=t)
        ),
        st.text(max_size=50),
    ),
    st.builds(
        lambda d: types.EmbeddedResource(
            type="resource", resource=types.BlobResourceContents(uri="file:///b", blob=b64(d))
        ),
        st.binary(max_size=32),
    ),
)


def run_in_loop(coro: Any) -> Any:
    return asyncio.run(coro)


# -- configuration -------------------------------------------------------------------------------


@st.composite
def broken_json(draw: st.DrawFn) -> str:
    servers = draw(
        st.dictionaries(
            st.from_regex(r"[a-z]{1,8}", fullmatch=True),
            st.fixed_dictionaries(
                {"command": st.sampled_from(["python", "npx"]), "args": st.lists(st.text(max_size=5))}
            ),
            min_size=1,
            max_size=3,
        )
    )
    text = json.dumps({"mcpServers": servers}, indent=draw(st.sampled_from([None, 2])))
    truncated = text[: draw(st.integers(0, len(text) - 1))]  # a truncated object never parses
    if draw(st.booleans()):
        return truncated
    at = draw(st.integers(0, len(text)))
    broken = text[:at] + draw(st.sampled_from([",", "{", "]", ":", '"', "x", "}}"])) + text[at:]
    try:
        json.loads(broken)
    except ValueError:
        return broken
    return truncated  # the insertion landed inside a string and kept it JSON: no example is thrown away


@given(text=broken_json())
def test_property_05_invalid_json_configuration_is_rejected(text: str) -> None:
    """Property 5: for any mcp_config.json containing invalid JSON, a configuration error is raised
    (fail fast, from MCPManager's constructor) and it names the parse location."""
    with pytest.raises(json.JSONDecodeError) as parse:
        json.loads(text)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mcp_config.json"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(MCPConfigError) as caught:
            MCPManager(make_config(path, Path(folder)), LOGGER, redactor=Redactor())
    message = str(caught.value)
    assert "not valid JSON" in message
    assert f"line {parse.value.lineno}, column {parse.value.colno}" in message
    assert str(path) in message


env_keys = st.one_of(st.sampled_from(sorted(SECRET_ENV_VARS)), st.from_regex(r"[A-Z][A-Z0-9_]{0,10}", fullmatch=True))
env_maps = st.dictionaries(env_keys, st.text(max_size=10), max_size=8)


@given(base=env_maps, configured=st.one_of(st.none(), env_maps))
def test_property_07_environment_variables_are_merged(base: dict[str, str], configured: dict[str, str] | None) -> None:
    """Property 7: the server's environment is the system environment merged with the configured
    variables (the config wins), minus ZorkGPT's secrets unless the config lists them (issue 3, correction 5)."""
    env = build_server_environment(base, configured)
    configured = configured or {}
    for key, value in configured.items():
        assert env[key] == value
    for key, value in base.items():
        if key in configured:
            continue
        if key in SECRET_ENV_VARS:
            assert key not in env
        else:
            assert env[key] == value
    assert set(env) == set(configured) | (set(base) - SECRET_ENV_VARS)


# -- real sessions (raw_server.py) ---------------------------------------------------------------

# Each example starts a real server process (about 0.2 s of CPU, more of waiting): 100 of them took
# a minute of a loaded worker per property. An ordering or a process left running shows on any example;
# 20 still reach the empty cases, odd texts and every step.
REAL_SESSION_EXAMPLES = settings(max_examples=20)


@pytest.fixture(scope="module")
def raw_config(tmp_path_factory: pytest.TempPathFactory) -> GameConfiguration:
    folder = tmp_path_factory.mktemp("raw-mcp")
    return make_config(write_mcp_config(folder, {"raw": raw_entry()}), folder, session_lifetime="episode")


@pytest.mark.e2e
@REAL_SESSION_EXAMPLES
@given(texts=st.lists(st.text(max_size=30), max_size=3))
def test_property_08_handshake_before_discovery(raw_config: GameConfiguration, texts: list[str]) -> None:
    """Property 8: for any session, initialize (and its initialized notification) reaches the server
    before tools/list, and discovery happens before any tool call. The raw server speaks only the
    2025 revision: the client asks for 2026-07-28 first (server/discover) and falls back."""
    manager = MCPManager(raw_config, LOGGER, redactor=Redactor())

    async def turn() -> list[str]:
        await manager.open_turn(1)
        for text in texts:
            assert (await manager.call_tool("raw__echo", {"text": text})).content == text
        return json.loads((await manager.call_tool("raw.methods", {})).content)

    try:
        methods = run_in_loop(turn())
    finally:
        manager.close()
    assert methods[:4] == ["server/discover", "initialize", "notifications/initialized", "tools/list"]
    assert methods[4:] == ["tools/call"] * (len(texts) + 1)


session_steps = st.lists(st.sampled_from(["echo", "unknown", "pid", "end_turn"]), max_size=4)


@pytest.mark.e2e
@REAL_SESSION_EXAMPLES
@given(steps=session_steps, double_close=st.booleans())
def test_property_09_subprocess_terminates_on_close(
    raw_config: GameConfiguration, steps: list[str], double_close: bool
) -> None:
    """Property 9: for any MCP session, whatever happened in it (calls, failed calls, the turn
    ended early), once the manager closes its subprocess is gone."""
    manager = MCPManager(raw_config, LOGGER, redactor=Redactor())
    before = child_pids()
    spawned: set[int] = set()

    async def turn() -> None:
        await manager.open_turn(1)
        # Not the sweeper: the check after close covers it.
        spawned.update(child_pids() - before - {manager.sweeper_pid})
        for step in steps:
            if step == "end_turn":
                manager.end_turn()
                break
            if step == "unknown":
                with pytest.raises(MCPToolCallError):
                    await manager.call_tool("raw__missing", {})
            else:
                await manager.call_tool(f"raw__{step}", {"text": "t"})

    try:
        run_in_loop(turn())
    finally:
        manager.close()
        if double_close:
            manager.close()
    assert len(spawned) == 1
    assert not wait_gone(spawned, 3.0)
    assert not (child_pids() - before)


# -- schema translation and names --------------------------------------------------------------------


@given(server=names, listing=tools())
def test_property_33_schemas_translate_to_openai_format(server: str, listing: list[types.Tool]) -> None:
    """Property 33: for any MCP tool schema, the translation is a valid OpenAI function tool."""
    name_map = ToolNameMap((server, t.name) for t in listing)
    for tool in listing:
        translated = translate_tool(server, tool, name_map)
        assert set(translated) == {"type", "function"} and translated["type"] == "function"
        function = translated["function"]
        assert set(function) == {"name", "description", "parameters"}
        assert TOOL_NAME_PATTERN.match(function["name"])
        assert isinstance(function["description"], str) and function["description"]
        assert function["parameters"]["type"] == "object"
        assert isinstance(function["parameters"]["properties"], dict)
        json.dumps(translated)


@given(server=names, tool=names)
def test_property_34_wire_names_are_provider_valid_and_stable(server: str, tool: str) -> None:
    """Property 34 (as corrected by issue 3): every wire name matches ^[a-zA-Z0-9_-]{1,64}$; it is
    {server}__{tool} with other characters replaced by "_", and a name over 64 characters keeps its
    start and ends in "_" + a stable 8-hex SHA-256 of the dotted name."""
    name = wire_name(server, tool)
    assert TOOL_NAME_PATTERN.match(name)
    assert name == wire_name(server, tool)  # deterministic
    sanitized = re.sub(r"[^a-zA-Z0-9_-]", "_", f"{server}__{tool}")
    if len(sanitized) <= WIRE_NAME_MAX:
        assert name == sanitized
    else:
        suffix = "_" + stable_hash(dotted_name(server, tool))
        assert len(name) == WIRE_NAME_MAX
        assert name == sanitized[: WIRE_NAME_MAX - len(suffix)] + suffix
    if re.fullmatch(r"[a-zA-Z0-9_-]+", server) and re.fullmatch(r"[a-zA-Z0-9_-]+", tool) and len(sanitized) <= 64:
        assert name == f"{server}__{tool}"


@given(server=names, listing=tools())
def test_property_35_names_route_back_to_the_tool(server: str, listing: list[types.Tool]) -> None:
    """Property 35: for any tool call, both the wire name and the dotted name route to the right
    server and tool, even when sanitizing makes two names collide."""
    name_map = ToolNameMap((server, t.name) for t in listing)
    wires = [route.wire_name for route in name_map.routes]
    assert len(set(wires)) == len(listing)  # collisions were resolved
    for tool in listing:
        wire = name_map.wire_for(server, tool.name)
        for name in (wire, dotted_name(server, tool.name)):
            route = name_map.resolve(name)
            assert route is not None
            assert (route.server_name, route.tool_name) == (server, tool.name)
        assert name_map.display_name(wire) == f"{server}.{tool.name}"


@given(servers=st.lists(st.tuples(st.sampled_from(["a.b", "a_b", "a", "b", "x y"]), tools()), max_size=4))
def test_property_35_wire_names_are_unique_across_servers(servers: list[tuple[str, list[types.Tool]]]) -> None:
    """Property 35, federated: with several servers (whose names may sanitize alike), every wire name
    is unique and routes back to its own server and tool."""
    pairs = list(dict.fromkeys((server, tool.name) for server, listing in servers for tool in listing))
    name_map = ToolNameMap(pairs)
    wires = [name_map.wire_for(server, tool) for server, tool in pairs]
    assert len(set(wires)) == len(pairs)
    for (server, tool), wire in zip(pairs, wires, strict=True):
        assert TOOL_NAME_PATTERN.match(wire)
        route = name_map.resolve(wire)
        assert route is not None and (route.server_name, route.tool_name) == (server, tool)


@given(schema=input_schemas())
def test_property_36_input_schema_maps_to_parameters(schema: dict[str, Any]) -> None:
    """Property 36: the tool's input_schema becomes the parameters field: every key kept as is
    (on a copy), with "type": "object" and "properties" supplied only when missing."""
    original = json.loads(json.dumps(schema))
    parameters = translate_parameters(schema)
    assert schema == original  # the server's schema is not modified
    for key, value in schema.items():
        assert parameters[key] == value
    assert parameters["type"] == schema.get("type", "object")
    assert parameters["properties"] == schema.get("properties", {})
    assert set(parameters) == set(schema) | {"type", "properties"}
    parameters["properties"]["added"] = {}
    assert "added" not in schema.get("properties", {})


@given(server=names, listing=tools(unique=True))
def test_property_37_every_tool_is_translated(server: str, listing: list[types.Tool]) -> None:
    """Property 37: for any server with several tools, all of them are translated and available."""
    name_map = ToolNameMap((server, t.name) for t in listing)
    translated = [translate_tool(server, tool, name_map) for tool in listing]
    assert len(translated) == len(listing)
    routed = [name_map.resolve(t["function"]["name"]) for t in translated]
    assert [r.tool_name for r in routed if r] == [tool.name for tool in listing]


@given(server=names, listing=tools())
def test_property_38_tool_definitions_are_openai_compatible(server: str, listing: list[types.Tool]) -> None:
    """Property 38: a schema request yields a list of OpenAI tool definitions with unique
    provider-valid names, JSON-serializable, and each parameters an object schema."""
    name_map = ToolNameMap((server, t.name) for t in listing)
    definitions = [translate_tool(server, tool, name_map) for tool in listing]
    assert isinstance(definitions, list)
    assert json.loads(json.dumps(definitions)) == definitions
    function_names = [d["function"]["name"] for d in definitions]
    assert len(set(function_names)) == len(function_names)
    assert all(TOOL_NAME_PATTERN.match(n) for n in function_names)
    assert all(d["function"]["parameters"].get("type") == "object" for d in definitions)


# -- results ------------------------------------------------------------------------------------------


@given(
    blocks=st.lists(content_blocks, max_size=5),
    structured=st.one_of(st.none(), st.dictionaries(st.text(max_size=8), json_values, max_size=4)),
    limit=st.integers(256, 3000),
)
def test_property_41_successful_calls_become_success_results(blocks: list[Any], structured: Any, limit: int) -> None:
    """Property 41: for any successful tool call, the result is a ToolCallResult with content and
    is_error=False, its content plain JSON no longer than the limit (plus the truncation marker)."""
    result = convert_call_result(types.CallToolResult(content=blocks, structured_content=structured), limit)
    assert isinstance(result, ToolCallResult)
    assert result.is_error is False and result.error_message is None
    assert set(result.to_dict()) == {"content"}
    encoded = result.content if isinstance(result.content, str) else json.dumps(result.content, ensure_ascii=False)
    assert len(encoded) <= limit + 80
    if len(encoded) > limit:
        assert "[…cut: " in encoded
    if structured is not None and len(json.dumps(structured, ensure_ascii=False)) <= limit and not blocks:
        assert result.content == structured
    if not blocks and structured is None:
        assert result.content is None


@given(blocks=st.lists(content_blocks, max_size=5), limit=st.integers(256, 3000))
def test_property_42_failed_calls_become_error_results(blocks: list[Any], limit: int) -> None:
    """Property 42: for any failed tool call (is_error from the server), the result is a
    ToolCallResult with is_error=True and a non-empty error_message carrying the server's text."""
    result = convert_call_result(types.CallToolResult(content=blocks, is_error=True), limit)
    assert result.is_error is True
    assert isinstance(result.error_message, str) and result.error_message
    text = "\n".join(b.text for b in blocks if isinstance(b, types.TextContent))
    if text and len(text) <= limit:
        assert result.error_message == text
    as_dict = result.to_dict()
    assert set(as_dict) == {"error", "content"} and as_dict["error"] == result.error_message
    json.dumps(as_dict)


def _blob(size: int) -> str:
    return base64.b64encode(b"\0" * size).decode()


@pytest.mark.parametrize(
    "make",
    [
        lambda n: types.CallToolResult(content=[types.TextContent(type="text", text="x" * n)]),
        lambda n: types.CallToolResult(content=[types.TextContent(type="text", text="é" * (n // 2))]),
        lambda n: types.CallToolResult(
            content=[types.ImageContent(type="image", data=_blob(n * 3 // 4), mime_type="image/png")]
        ),
        lambda n: types.CallToolResult(
            content=[
                types.EmbeddedResource(
                    type="resource", resource=types.TextResourceContents(uri="file:///a", text="x" * (n // 2))
                ),
                types.EmbeddedResource(
                    type="resource", resource=types.BlobResourceContents(uri="file:///b", blob=_blob(n * 3 // 8))
                ),
            ]
        ),
        lambda n: types.CallToolResult(content=[], structured_content={"rows": [{"cell": "x" * 1000}] * (n // 1000)}),
    ],
    ids=["text", "non-ascii-text", "image", "resources", "structured"],
)
def test_a_reply_over_max_reply_bytes_is_refused_whatever_it_carries(make: Any) -> None:
    limit = 1_000_000
    refused = convert_call_result(make(limit + 10_000), 8000, limit)
    assert refused.is_error and refused.content is None
    assert refused.error_message is not None and "over the limit of 1,000,000" in refused.error_message
    assert "[tool.zorkgpt.mcp] max_tool_reply_bytes" in refused.error_message
    assert not convert_call_result(make(limit - 10_000), 8000, limit).is_error


class _Model(BaseModel):
    name: str
    count: int


odd_values = st.recursive(
    st.one_of(
        json_scalars,
        st.floats(),  # NaN and infinities are not JSON
        st.binary(max_size=8),
        st.builds(_Model, name=st.text(max_size=5), count=st.integers()),
        st.builds(object),
        st.sets(st.integers(), max_size=3),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=5), st.integers()), inner, max_size=3),
    ),
    max_leaves=10,
)


@given(content=odd_values, is_error=st.booleans(), message=st.one_of(st.none(), st.text(max_size=30)))
def test_property_43_tool_call_results_always_serialize(content: Any, is_error: bool, message: str | None) -> None:
    """Property 43: for any ToolCallResult, to_dict() is a dict that json.dumps accepts (strict JSON:
    no NaN), and JSON data already in the result passes through unchanged."""
    result = ToolCallResult(content=content, is_error=is_error, error_message=message)
    as_dict = result.to_dict()
    encoded = json.dumps(as_dict, allow_nan=False)
    assert json.loads(encoded) == as_dict
    assert as_dict["content"] == to_jsonable(content)
    if is_error:
        assert isinstance(as_dict["error"], str)
    else:
        assert set(as_dict) == {"content"}


@given(value=json_values)
def test_property_43_json_content_is_unchanged(value: Any) -> None:
    """Property 43 (continued): content that is already JSON data is serialized as is."""
    assert ToolCallResult(content=value).to_dict() == {"content": value}
