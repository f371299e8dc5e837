"""Servers' resources as tools for the model, and servers' prompts in the agent's system prompt.

Real servers over stdio: the resource test server (tests/mcp_test_servers/resource_server.py) in
both protocol revisions (the entry's "protocol" pins one; "auto" agrees on 2026-07-28 after asking
the server what it offers), the misbehaving test server for a server that declares resources but
has none, and the shipped Zork server end to end. Calls go through the real MCPManager; the
prompt tests drive whole agent turns against the scripted OpenAI-compatible server.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness.scripted_llm import ScriptedLLMServer, agent_reply, completion, tool_call
from managers.mcp_manager import MCPManager
from mcp_client.config import MCPConfig, PromptRequest
from session.errors import MCPConfigError, MCPToolCallError
from session.redaction import Redactor
from tests.agent_support import AgentTurns
from tests.mcp_test_servers.helpers import (
    REPO_ROOT,
    SERVERS_DIR,
    Scenario,
    capture_logger,
    make_config,
    misbehaving_entry,
    text_of,
    tool_messages,
    write_mcp_config,
)
from tests.mcp_test_servers.resource_server import (
    GUIDE_TAIL,
    LONG_CHARS,
    PNG_BYTES,
    README_TEXT,
    SECRET_TEXT,
)

pytestmark = pytest.mark.e2e

RESOURCE_SERVER = SERVERS_DIR / "resource_server.py"
PINNED = ["2025-11-25", "2026-07-28"]
# How each revision hears of a change: a 2025-11-25 session by notification, a 2026-07-28 client on
# its listen stream (the test server announces in that way alone, so each path is tested by itself).
ANNOUNCED = {"2025-11-25": "session", "2026-07-28": "listen", "auto": "listen"}
EVERY_URI = ["notes://readme", "notes://long", "notes://secret", "images://lamp.png"]


def resource_entry(**keys: Any) -> dict[str, Any]:
    return {"command": "python", "args": [str(RESOURCE_SERVER)], **keys}


def scenario(tmp_path: Path, servers: dict[str, dict[str, Any]], **mcp: Any) -> Scenario:
    config_path = write_mcp_config(tmp_path / "cfg", servers)
    mcp.setdefault("session_lifetime", "episode")
    logger, handler = capture_logger(f"test.mcp.resources.{uuid.uuid4().hex}")
    return Scenario(MCPManager(make_config(config_path, tmp_path, **mcp), logger, redactor=Redactor()), handler)


def offered(s: Scenario) -> list[str]:
    return [schema["function"]["name"] for schema in s.schemas]


def schema_of(s: Scenario, name: str) -> dict[str, Any]:
    (schema,) = [schema for schema in s.schemas if schema["function"]["name"] == name]
    return schema["function"]


async def read(m: MCPManager, uri: str) -> dict[str, Any]:
    return (await m.call_tool("r__read_resource", {"uri": uri})).to_dict()


async def listed(m: MCPManager) -> list[dict[str, Any]]:
    return (await m.call_tool("r__list_resources", {})).to_dict()["content"]["resources"]


# -- listing and reading ------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PINNED)
def test_resources_are_listed_and_read_through_the_manager(tmp_path: Path, protocol: str) -> None:
    s = scenario(tmp_path, {"r": resource_entry(protocol=protocol)})

    async def body(m: MCPManager) -> tuple[Any, ...]:
        return await listed(m), await read(m, "notes://readme"), m.tool("r__read_resource")

    resources, readme, read_tool = s.run(body)

    (connect,) = s.handler.by_event("mcp_session_connect")
    assert connect.protocol_version == protocol
    assert offered(s) == ["r__add_note", "r__change_guide", "r__list_resources", "r__read_resource"]
    assert schema_of(s, "r__read_resource")["parameters"]["required"] == ["uri"]
    assert "notes://readme" in schema_of(s, "r__read_resource")["description"]
    assert resources == [
        {"name": "readme", "uri": "notes://readme", "mimeType": "text/plain", "description": "Where to start."},
        {"name": "long", "uri": "notes://long", "mimeType": "text/plain"},
        {"name": "secret", "uri": "notes://secret", "mimeType": "text/plain"},
        {"name": "lamp", "uri": "images://lamp.png", "mimeType": "image/png", "description": "A picture of the lamp."},
    ]
    assert readme == {"content": README_TEXT}
    # Read-only: the tool loop runs them beside other read-only calls and never refuses them.
    assert read_tool.read_only and not read_tool.destructive


def test_a_blob_is_described_by_type_and_size_never_sent_as_base64(tmp_path: Path) -> None:
    s = scenario(tmp_path, {"r": resource_entry()})
    result = s.run(lambda m: read(m, "images://lamp.png"))

    (block,) = result["content"]
    assert block["type"] == "resource" and block["uri"] == "images://lamp.png"
    assert block["mime_type"] == "image/png" and block["size_bytes"] == len(PNG_BYTES)
    assert base64.b64encode(PNG_BYTES).decode()[:16] not in json.dumps(result)


def test_a_long_text_is_cut_at_the_tool_result_cap(tmp_path: Path) -> None:
    s = scenario(tmp_path, {"r": resource_entry()}, max_tool_result_chars=1000)
    text = s.run(lambda m: read(m, "notes://long"))["content"]

    assert text.startswith("x" * 1000) and "x" * 1001 not in text
    assert text.endswith(f"[…cut: {LONG_CHARS:,} characters, the first 1,000 kept]")


def test_an_unknown_uri_is_a_tool_error_in_the_servers_words(tmp_path: Path) -> None:
    s = scenario(tmp_path, {"r": resource_entry()})

    async def body(m: MCPManager) -> str:
        with pytest.raises(MCPToolCallError) as caught:
            await read(m, "notes://nowhere")
        return str(caught.value)

    message = s.run(body)
    assert "MCP server 'r' failed reading notes://nowhere" in message
    assert "Unknown resource" in message


# -- filters ------------------------------------------------------------------------------------


def test_include_and_exclude_patterns_filter_what_is_listed_and_what_may_be_read(tmp_path: Path) -> None:
    entry = resource_entry(includeResources=["notes://*"], excludeResources=["notes://sec*"])
    s = scenario(tmp_path, {"r": entry})

    async def body(m: MCPManager) -> tuple[Any, ...]:
        return await listed(m), await read(m, "notes://secret"), await read(m, "images://lamp.png")

    resources, secret, lamp = s.run(body)

    assert [r["uri"] for r in resources] == ["notes://readme", "notes://long"]
    description = schema_of(s, "r__read_resource")["description"]
    assert "notes://readme" in description and "notes://secret" not in description and "images://" not in description
    assert secret["error"].startswith("Not read: notes://secret matches")
    assert '"excludeResources"' in secret["error"] and SECRET_TEXT not in json.dumps(secret)
    assert '"includeResources"' in lamp["error"] and '"r"' in lamp["error"]


def test_entry_keys_can_leave_out_both_resource_tools_or_one(tmp_path: Path) -> None:
    s = scenario(
        tmp_path,
        {
            "none": resource_entry(excludeResources=["*"]),
            "some": resource_entry(excludeTools=["read_resource"]),
            "only": resource_entry(includeTools=["list_resources"]),
        },
    )

    async def body(m: MCPManager) -> None:
        return None

    s.run(body)
    assert offered(s) == [
        "none__add_note",
        "none__change_guide",
        "some__add_note",
        "some__change_guide",
        "some__list_resources",
        "only__list_resources",
    ]


def test_a_server_that_lists_no_resource_gets_no_resource_tools(tmp_path: Path) -> None:
    """Every server built on the Python SDK declares resources; one without any gets no dead tools."""
    s = scenario(tmp_path, {"m": misbehaving_entry()})

    async def body(m: MCPManager) -> Any:
        return m.toolbox._slots["m"].source.capabilities  # what the server declared

    capabilities = s.run(body)
    assert capabilities is not None and capabilities.resources is not None
    assert not [name for name in offered(s) if name.endswith(("__list_resources", "__read_resource"))]


def test_a_servers_own_tool_of_that_name_wins(tmp_path: Path) -> None:
    s = scenario(tmp_path, {"r": resource_entry(env={"RESOURCE_SERVER_OWN_LIST": "1"})})

    async def body(m: MCPManager) -> tuple[Any, ...]:
        own = (await m.call_tool("r__list_resources", {})).content
        return own, await read(m, "notes://readme")

    own, readme = s.run(body)

    assert own == "the server's own listing"
    assert schema_of(s, "r__list_resources")["description"] == "The server's own list_resources."
    assert offered(s).count("r__list_resources") == 1
    assert readme == {"content": README_TEXT}  # read_resource is still offered, and ours
    (shadowed,) = s.handler.by_event("mcp_resource_tool_shadowed")
    assert shadowed.levelname == "DEBUG" and "list_resources" in shadowed.getMessage()


# -- list_changed -------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["auto", *PINNED])
def test_a_resource_the_server_adds_and_announces_is_offered_the_next_turn(tmp_path: Path, protocol: str) -> None:
    # Only the added resource passes the filter: the resource tools appear when it is listed.
    s = scenario(tmp_path, {"r": resource_entry(protocol=protocol, includeResources=["notes://added/*"])})

    async def add(m: MCPManager) -> Any:
        arguments = {"name": "plan", "text": "go north", "how": ANNOUNCED[protocol]}
        return (await m.call_tool("r__add_note", arguments)).content

    assert s.run(add, close=False) in ("added notes://added/plan", {"result": "added notes://added/plan"})
    assert "r__read_resource" not in offered(s)

    assert s.run(lambda m: read(m, "notes://added/plan")) == {"content": "go north"}
    assert "r__read_resource" in offered(s)
    (changed,) = s.handler.by_event("mcp_resources_changed")
    assert changed.server_name == "r" and changed.resource_count == 5


# -- prompts in the agent's system prompt -------------------------------------------------------


@pytest.fixture
def agent_turns(
    llm_server: ScriptedLLMServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> Iterator[Callable[..., AgentTurns]]:
    made: list[AgentTurns] = []

    def factory(servers: dict[str, dict[str, Any]], **mcp: Any) -> AgentTurns:
        config_file = write_mcp_config(tmp_path / f"mcp{len(made)}", servers)
        made.append(AgentTurns(llm_server, tmp_path, monkeypatch, caplog, capfd, config_file=config_file, **mcp))
        return made[-1]

    yield factory
    for run in made:
        run.finish()


def system_prompt(body: dict[str, Any]) -> str:
    return text_of(body["messages"][0])


@pytest.mark.parametrize("protocol", ["auto", *PINNED])
def test_a_prompt_reaches_the_system_prompt_and_a_changed_one_is_fetched_again(
    llm_server: ScriptedLLMServer, agent_turns: Callable[..., AgentTurns], protocol: str
) -> None:
    entry = resource_entry(protocol=protocol, prompts=[{"name": "guide", "arguments": {"goal": "the jewelled egg"}}])
    llm_server.script(
        completion(
            tool_calls=[tool_call("r__change_guide", {"tail": "Mind the grue.", "how": ANNOUNCED[protocol]}, "call_1")]
        ),
        agent_reply("open mailbox"),
        agent_reply("north"),
    )
    run = agent_turns({"r": entry})

    assert run.turn(turn=1).action == "open mailbox"
    assert run.turn(turn=2).action == "north"

    first, after_call, second = (system_prompt(body) for body in llm_server.bodies)
    heading = "# Prompt guide of MCP server r\n"
    assert f"{heading}Aim for the jewelled egg.\n\n{GUIDE_TAIL}" in first
    assert after_call == first  # one turn, one system prompt
    # The server said its prompts changed: the next turn asks again and shows the new text only.
    assert f"{heading}Aim for the jewelled egg.\n\nMind the grue." in second and GUIDE_TAIL not in second
    assert first.index(heading) < first.index("# Tools")
    assert not run.events("mcp_prompt_unavailable")


def test_prompts_that_cannot_be_had_are_warnings_naming_the_entry_and_the_fix(
    llm_server: ScriptedLLMServer, agent_turns: Callable[..., AgentTurns]
) -> None:
    prompts = ["guide", "nope", "picture", {"name": "guide", "arguments": {"goal": "the lamp"}}]
    llm_server.script(agent_reply("look"), agent_reply("look"))
    run = agent_turns({"r": resource_entry(prompts=prompts), "m": {**misbehaving_entry(), "prompts": ["anything"]}})

    assert run.turn(turn=1).action == "look"  # the game goes on
    assert run.turn(turn=2).action == "look"

    warnings = {(r.server_name, r.prompt_name): r for r in run.events("mcp_prompt_unavailable")}
    assert sorted(warnings) == [("m", "anything"), ("r", "guide"), ("r", "nope"), ("r", "picture")]
    assert all(r.levelname == "WARNING" for r in warnings.values())
    assert len(run.events("mcp_prompt_unavailable")) == 4, "each warned once, not again on the next turn"
    config = str(run.manager.config_path)
    missing_argument = warnings[("r", "guide")].getMessage()
    # The server's own words (the SDK says "Internal server error" in 2026-07-28), then what the prompt takes.
    assert "MCP server 'r' failed getting the prompt 'guide'" in missing_argument
    assert "Check its arguments" in missing_argument and "(it takes: goal (required))" in missing_argument
    assert f'"prompts" of the entry "r" in {config}' in missing_argument
    assert missing_argument.endswith("; the game goes on without it.")
    assert (
        warnings[("r", "nope")]
        .getMessage()
        .startswith(
            'MCP server \'r\' has no prompt "nope" (its prompts: guide, picture). Fix the name in "prompts" of the '
            f'entry "r" in {config}, or remove it'
        )
    )
    assert "has no text to add" in warnings[("r", "picture")].getMessage()
    assert "(its prompts: none)" in warnings[("m", "anything")].getMessage()

    system = system_prompt(llm_server.bodies[0])
    assert "# Prompt guide of MCP server r\nAim for the lamp." in system
    assert system.count("# Prompt ") == 1


def test_a_resource_read_is_a_tool_call_like_any_other_in_logs_and_langfuse(
    llm_server: ScriptedLLMServer,
    agent_turns: Callable[..., AgentTurns],
    langfuse_exporter: tuple[Any, InMemorySpanExporter],
) -> None:
    langfuse, exporter = langfuse_exporter
    llm_server.script(
        completion(tool_calls=[tool_call("r__read_resource", {"uri": "notes://readme"}, "call_1")]),
        agent_reply("open mailbox"),
    )
    # Turn lifetime: the servers started ahead list their resources while they start.
    run = agent_turns({"r": resource_entry()}, session_lifetime="turn", langfuse=langfuse)

    result = run.turn(turn=3)
    langfuse.flush()

    assert result.action == "open mailbox"
    assert [(c.server, c.tool, c.is_error) for c in result.tool_calls] == [("r", "r.read_resource", False)]
    assert tool_messages(llm_server.bodies[1])["call_1"] == {"content": README_TEXT}
    (call,) = run.events("mcp_tool_call")
    assert call.tool_name == "r.read_resource" and call.arguments == {"uri": "notes://readme"}
    (complete,) = run.events("mcp_tool_loop_complete")
    assert complete.tool_calls_count == 1 and complete.tools_used == ["r.read_resource"]
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "mcp-tool-r.read_resource"]
    attributes = dict(span.attributes or {})
    assert attributes["langfuse.observation.type"] == "tool"
    assert json.loads(attributes["langfuse.observation.output"]) == {"content": README_TEXT}


# -- the shipped Zork server --------------------------------------------------------------------


def test_zork_inventory_is_read_through_the_offered_tool_and_play_zork_reaches_the_prompt(
    llm_server: ScriptedLLMServer, agent_turns: Callable[..., AgentTurns], game_file: Path
) -> None:
    zork = {
        "command": "python",
        "args": ["-m", "mcp_servers.zork_server", "--game-file", str(game_file), "--log-level", "WARNING"],
        "cwd": str(REPO_ROOT),
        "prompts": [{"name": "play_zork", "arguments": {"goal": "get the leaflet"}}],
    }
    llm_server.script(
        completion(tool_calls=[tool_call("zork__play_action", {"action": "open mailbox"}, "call_1")]),
        completion(tool_calls=[tool_call("zork__play_action", {"action": "take leaflet"}, "call_2")]),
        completion(tool_calls=[tool_call("zork__read_resource", {"uri": "zork://inventory"}, "call_3")]),
        agent_reply("read leaflet"),
    )
    run = agent_turns({"zork": zork})

    assert run.turn(turn=1).action == "read leaflet"

    last = llm_server.bodies[-1]
    inventory = tool_messages(last)["call_3"]["content"]
    assert json.loads(inventory)["items"] == ["leaflet"]
    assert "zork__read_resource" in [tool["function"]["name"] for tool in last["tools"]]
    assert run.tool_calls[-1] == "zork.read_resource"
    assert [r.tool_name for r in run.events("mcp_tool_result")][-1] == "zork.read_resource"
    assert "# Prompt play_zork of MCP server zork\nLet's play Zork I" in system_prompt(last)
    assert "Your goal: get the leaflet." in system_prompt(last)


# -- the entry keys -----------------------------------------------------------------------------


def test_prompts_are_names_or_names_with_arguments_and_patterns_are_kept_as_written() -> None:
    config = MCPConfig.from_mapping(
        {
            "mcpServers": {
                "z": {
                    "command": "x",
                    "includeResources": ["zork://*"],
                    "excludeResources": ["zork://transcript"],
                    "prompts": ["play_zork", {"name": "hint", "arguments": {"room": "Kitchen"}}],
                }
            }
        }
    )
    (server,) = config.servers
    assert server.prompts == (PromptRequest("play_zork", {}), PromptRequest("hint", {"room": "Kitchen"}))
    assert server.shows_resource("zork://map") and not server.shows_resource("zork://transcript")
    assert not server.shows_resource("ZORK://map"), "patterns match case-sensitively on every system"
    assert not server.shows_resource("file:///map")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"prompts": "play_zork"}, "mcpServers.z.prompts: Input should be a valid list"),
        ({"prompts": [3]}, 'each prompt is a name ("play_zork") or an object'),
        ({"prompts": [{"name": "p", "args": {"goal": "x"}}]}, "mcpServers.z.prompts.0.args: Extra inputs"),
        ({"prompts": [{"name": ""}]}, "mcpServers.z.prompts.0.name: String should have at least 1 character"),
        ({"prompts": [{"name": "p", "arguments": {"n": 3}}]}, "mcpServers.z.prompts.0.arguments.n: Input should be"),
        ({"includeResources": "zork://*"}, "mcpServers.z.includeResources: Input should be a valid list"),
        ({"excludeResources": [1]}, "mcpServers.z.excludeResources.0: Input should be a valid string"),
    ],
)
def test_a_wrong_resource_or_prompt_key_is_an_error_naming_it(entry: dict[str, Any], message: str) -> None:
    with pytest.raises(MCPConfigError) as caught:
        MCPConfig.from_mapping({"mcpServers": {"z": {"command": "x", **entry}}})
    assert message in str(caught.value)


def test_the_mcp_page_documents_every_entry_key_and_its_example_is_a_valid_config() -> None:
    readme = (REPO_ROOT / "docs" / "mcp-tools.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Servers: `mcp_config.json`") :]
    start = section.index("```json\n", section.index("example mixing everything")) + len("```json\n")
    example = section[start : section.index("\n```", start)]
    config = MCPConfig.from_mapping(json.loads(example), environ={"NOTES_TOKEN": "secret-token"})
    zork = config.server("zork")
    assert zork.prompts[0].name == "play_zork" and zork.exclude_resources == ("zork://transcript",)
    table = section[: section.index("\n\n", section.index("| key | meaning |"))]
    for key in ("includeResources", "excludeResources", "prompts", "includeTools", "allowDestructive"):
        assert f"`{key}`" in table
