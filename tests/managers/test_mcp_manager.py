"""MCPManager with one server, against real stdio subprocesses: the shipped thoughtbox server and a
misbehaving one.

Every scenario runs one turn inside one ``asyncio.run`` from a sync test, as the agent does,
closes the manager as the episode's end does, and then checks that every server process is
gone and that no "Event loop is closed" / "cancel scope" problem was warned, logged or raised
from a destructor. (Several servers at once: tests/mcp_client/test_toolbox.py.)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chat_api.wire import TOOL_NAME_PATTERN
from managers.mcp_manager import MCPManager
from mcp_client.tools import dotted_name, wire_name
from session.errors import MCPServerDiedError, MCPServerStartupError, MCPToolCallError
from session.game_configuration import GameConfiguration
from session.redaction import Redactor
from shared_utils.toolset import ToolCallResult
from tests.mcp_test_servers.helpers import (
    MISBEHAVING_SERVER,
    REPO_ROOT,
    THINK_FIELDS,
    Scenario,
    async_hygiene,
    capture_logger,
    child_pids,
    http_server,
    make_config,
    misbehaving_entry,
    raw_entry,
    wait_gone,
    write_mcp_config,
)
from tests.mcp_test_servers.misbehaving_server import DOTTED_TOOL_NAME, LONG_TOOL_NAME, PNG_BYTES, WAV_BYTES

pytestmark = pytest.mark.e2e


def misbehaving_scenario(tmp_path: Path, *args: str, env: dict[str, str] | None = None, **mcp: Any) -> Scenario:
    """One misbehaving server; episode lifetime unless asked (closed after every run, so every run
    connects anew, without a server started early for a next turn that never comes)."""
    mcp.setdefault("session_lifetime", "episode")
    config_path = write_mcp_config(tmp_path / "cfg", {"misbehaving": misbehaving_entry(*args, env=env)})
    logger, handler = capture_logger(f"test.mcp.{uuid.uuid4().hex}")
    return Scenario(MCPManager(make_config(config_path, tmp_path, **mcp), logger, redactor=Redactor()), handler)


async def noop(manager: MCPManager) -> None:
    return None


# -- the shipped thoughtbox server -------------------------------------------------------------


def test_shipped_thoughtbox_from_default_config_in_another_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths must resolve against mcp_config.json, not the cwd
    config = GameConfiguration.from_mapping(
        {"mcp": {"enabled": True, "server_startup_timeout_seconds": 120}}, base_dir=REPO_ROOT, environ={}
    )
    logger, handler = capture_logger("test.mcp.thoughtbox")
    manager = MCPManager(config, logger, redactor=Redactor())
    assert manager.server_names == ["thoughtbox"]
    scenario = Scenario(manager, handler)

    async def body(m: MCPManager) -> dict[str, Any]:
        pid = min(scenario.spawned)  # the turn's server (the next turn's may be starting too)
        return {
            "exe": os.readlink(f"/proc/{pid}/exe"),
            "cwd": os.readlink(f"/proc/{pid}/cwd"),
            "cmdline": Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"),
            "schemas": scenario.schemas,
            "first": await m.call_tool(
                "thoughtbox__think",
                {"thought": "The door is locked.", "thoughtNumber": 1, "totalThoughts": 2, "nextThoughtNeeded": True},
            ),
            "second": await m.call_tool(
                "thoughtbox.think",
                {"thought": "Try the key.", "thoughtNumber": 3, "totalThoughts": 2, "nextThoughtNeeded": False},
            ),
        }

    seen = scenario.run(body)

    # "python" ran this project's interpreter, in the config file's folder.
    assert seen["exe"] == os.path.realpath(sys.executable)
    assert seen["cwd"] == str(REPO_ROOT)
    assert b"mcp_servers.thoughtbox_server" in seen["cmdline"]

    (schema,) = seen["schemas"]
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == "thoughtbox__think"
    assert TOOL_NAME_PATTERN.match(function["name"])
    assert "reasoning" in function["description"]
    parameters = function["parameters"]
    assert parameters["type"] == "object"
    assert set(parameters["properties"]) == THINK_FIELDS
    assert set(parameters["required"]) == {"thought", "thoughtNumber", "totalThoughts", "nextThoughtNeeded"}
    assert parameters["properties"]["thoughtNumber"]["type"] == "integer"
    assert parameters["properties"]["thoughtNumber"]["minimum"] == 1

    assert seen["first"] == ToolCallResult(
        content={
            "thoughtNumber": 1,
            "totalThoughts": 2,
            "nextThoughtNeeded": True,
            "branches": [],
            "thoughtHistoryLength": 1,
        }
    )
    # The session keeps its history; totalThoughts follows a thought past the estimate.
    assert seen["second"].content["thoughtHistoryLength"] == 2
    assert seen["second"].content["totalThoughts"] == 3
    assert json.loads(json.dumps(seen["second"].to_dict())) == {"content": seen["second"].content}
    assert manager.display_name("thoughtbox__think") == "thoughtbox.think"

    connect = handler.by_event("mcp_session_connect")
    assert len(connect) == 1 and connect[0].tools == ["thoughtbox.think"]


def test_thoughtbox_session_state_is_fresh_each_turn(tmp_path: Path) -> None:
    config = GameConfiguration.from_mapping(
        {"mcp": {"enabled": True, "server_startup_timeout_seconds": 120}}, base_dir=REPO_ROOT, environ={}
    )
    logger, handler = capture_logger("test.mcp.thoughtbox.turns")
    scenario = Scenario(MCPManager(config, logger, redactor=Redactor()), handler)
    args = {"thought": "Look around.", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False}

    async def body(m: MCPManager) -> ToolCallResult:
        return await m.call_tool("thoughtbox__think", args)

    # Turn lifetime: turn 2 takes over the server started early during turn 1.
    first, second = scenario.run(body, close=False), scenario.run(body)
    assert first.content["thoughtHistoryLength"] == second.content["thoughtHistoryLength"] == 1
    connects = scenario.handler.by_event("mcp_session_connect")
    assert len(connects) >= 2 and len(scenario.spawned) >= 2  # one process per turn, all gone


# -- tool calls that fail --------------------------------------------------------------------


def test_hanging_tool_raises_builtin_timeout_and_session_survives(tmp_path: Path) -> None:
    scenario = misbehaving_scenario(tmp_path)

    async def body(m: MCPManager) -> tuple[BaseException, ToolCallResult]:
        with pytest.raises(TimeoutError) as caught:
            await m.call_tool("misbehaving__hang", {"seconds": 60}, timeout_seconds=0.5)
        after = await m.call_tool("misbehaving.echo", {"text": "still here"})
        return caught.value, after

    error, after = scenario.run(body)
    assert isinstance(error, asyncio.TimeoutError)  # the same class: the agent may catch either
    assert "misbehaving.hang" in str(error) and "0.5s" in str(error)
    assert after == ToolCallResult(content="still here")


def test_default_call_timeout_comes_from_config(tmp_path: Path) -> None:
    scenario = misbehaving_scenario(tmp_path, tool_call_timeout_seconds=0.3)

    async def body(m: MCPManager) -> None:
        await m.call_tool("misbehaving__hang", {"seconds": 60})

    with pytest.raises(TimeoutError, match=r"0\.3s"):
        scenario.run(body)


def test_server_exiting_mid_call_raises_server_died(tmp_path: Path) -> None:
    scenario = misbehaving_scenario(tmp_path)

    async def body(m: MCPManager) -> tuple[str, list[dict[str, Any]], BaseException]:
        with pytest.raises(MCPServerDiedError) as died:
            await m.call_tool("misbehaving__exit_now", {"code": 7})
        assert scenario.toolset is not None
        await scenario.toolset.drop_lost_servers()  # the tool loop's step: the dead server's tools are gone
        left = scenario.toolset.schemas
        with pytest.raises(MCPToolCallError) as again:
            await m.call_tool("misbehaving__echo", {"text": "anyone?"})
        return str(died.value), left, again.value

    message, left, again = scenario.run(body)
    assert "misbehaving" in message and "misbehaving.exit_now" in message
    assert left == []
    assert "Unknown tool 'misbehaving__echo'" in str(again)  # the agent's generic tool-error path also catches it


def test_is_error_result_becomes_error_tool_call_result(tmp_path: Path) -> None:
    scenario = misbehaving_scenario(tmp_path)

    async def body(m: MCPManager) -> tuple[ToolCallResult, ToolCallResult]:
        failed = await m.call_tool("misbehaving__fail", {"message": "no such door"})
        ok = await m.call_tool("misbehaving__echo", {"text": "fine"})
        return failed, ok

    failed, ok = scenario.run(body)
    assert failed.is_error is True
    assert failed.error_message == "no such door"
    assert failed.to_dict() == {"error": "no such door", "content": None}
    assert ok == ToolCallResult(content="fine")


def test_unknown_tool_and_bad_arguments_raise_tool_call_error(tmp_path: Path) -> None:
    scenario = misbehaving_scenario(tmp_path)

    async def body(m: MCPManager) -> tuple[str, str, ToolCallResult]:
        with pytest.raises(MCPToolCallError) as unknown:
            await m.call_tool("misbehaving__nope", {})
        with pytest.raises(MCPToolCallError) as not_a_dict:
            await m.call_tool("misbehaving__echo", ["text"])  # type: ignore[arg-type]
        # A schema violation is the server's to report, as an error result the model can read.
        invalid = await m.call_tool("misbehaving__echo", {"text": 5, "extra": True})
        return str(unknown.value), str(not_a_dict.value), invalid

    unknown, not_a_dict, invalid = scenario.run(body)
    assert "misbehaving__nope" in unknown and "misbehaving__echo (misbehaving.echo)" in unknown
    assert "JSON object" in not_a_dict
    assert invalid.is_error and "text" in (invalid.error_message or "")


def test_calls_before_a_turn_raise_and_close_is_idempotent(tmp_path: Path) -> None:
    scenario = misbehaving_scenario(tmp_path)

    async def body(m: MCPManager) -> None:
        with pytest.raises(MCPToolCallError, match="Tools offered this turn: none"):
            await m.call_tool("misbehaving__echo", {"text": "x"})
        m.end_turn()

    scenario.run(body, connect=False)
    scenario.manager.close()
    scenario.manager.end_turn()
    assert scenario.spawned == set()


# -- results of every content type -----------------------------------------------------------


def test_every_content_type_becomes_json(tmp_path: Path) -> None:
    scenario = misbehaving_scenario(tmp_path)
    names = ["image", "audio", "resource", "resource_link", "structured", "wrapped", "mixed", "empty"]

    async def body(m: MCPManager) -> dict[str, ToolCallResult]:
        return {name: await m.call_tool(f"misbehaving__{name}", {}) for name in names}

    results = scenario.run(body)
    for result in results.values():
        assert not result.is_error
        json.dumps(result.to_dict())  # must not raise

    assert results["image"].content == [
        {
            "type": "image",
            "mime_type": "image/png",
            "size_bytes": len(PNG_BYTES),
            "note": results["image"].content[0]["note"],
        }
    ]
    assert f"{len(PNG_BYTES)} bytes" in results["image"].content[0]["note"]
    assert results["audio"].content[0]["type"] == "audio"
    assert results["audio"].content[0]["size_bytes"] == len(WAV_BYTES)
    text_resource, blob_resource = results["resource"].content
    assert text_resource == {
        "type": "resource",
        "uri": "file:///notes.txt",
        "mime_type": "text/plain",
        "text": "the notes",
    }
    assert blob_resource["uri"] == "file:///blob.bin" and blob_resource["size_bytes"] == 4
    assert results["resource_link"].content == [
        {
            "type": "resource_link",
            "uri": "file:///map.txt",
            "name": "map",
            "description": "the map",
            "mime_type": "text/plain",
        }
    ]
    assert results["structured"].content == {"ok": True, "count": 2}  # the JSON-text echo is dropped
    assert results["wrapped"].content == {"result": 3}
    mixed = results["mixed"].content
    assert mixed["structured_content"] == {"ok": True}
    assert [block["type"] for block in mixed["blocks"]] == ["text", "image"]
    assert results["empty"].content is None


def test_oversized_result_is_truncated_with_marker(tmp_path: Path) -> None:
    scenario = misbehaving_scenario(tmp_path, max_tool_result_chars=1000)

    async def body(m: MCPManager) -> tuple[ToolCallResult, ToolCallResult]:
        return (
            await m.call_tool("misbehaving__huge", {"chars": 50_000}),
            await m.call_tool("misbehaving__huge", {"chars": 1000}),
        )

    huge, exact = scenario.run(body)
    assert huge.content.startswith("x" * 1000)
    assert "[…cut: 50,000 characters, the first 1,000 kept]" in huge.content
    assert len(huge.content) < 1100
    assert exact.content == "x" * 1000  # at the limit: untouched


def test_a_reply_over_the_size_limit_over_http_is_refused_and_the_session_lives_on(tmp_path: Path) -> None:
    """Over streamable HTTP the SDK stops reading an event at the limit; that used to pass for the
    server dying (its own 1 MiB default, reported as a closed connection) and cost its tools for the turn."""
    with http_server("tests.mcp_test_servers.misbehaving_server") as server:
        config_path = write_mcp_config(tmp_path / "cfg", {"remote": {"url": server.url}})
        logger, handler = capture_logger(f"test.mcp.{uuid.uuid4().hex}")
        config = make_config(config_path, tmp_path, session_lifetime="episode", max_tool_reply_bytes=3_000_000)
        scenario = Scenario(MCPManager(config, logger, redactor=Redactor()), handler)

        async def body(m: MCPManager) -> tuple[str, ToolCallResult, ToolCallResult]:
            with pytest.raises(MCPToolCallError) as refused:
                await m.call_tool("remote__huge", {"chars": 5_000_000})
            return (
                str(refused.value),
                await m.call_tool("remote__huge", {"chars": 2_000_000}),
                await m.call_tool("remote__echo", {"text": "still here"}),
            )

        message, under, after = scenario.run(body)
    assert message == (
        "MCP tool remote.huge replied with more than 3,000,000 bytes; the reply was dropped. Ask for less "
        "(a narrower query, a smaller page). The limit is [tool.zorkgpt.mcp] max_tool_reply_bytes."
    )
    assert under.content.endswith("[…cut: 2,000,000 characters, the first 8,000 kept]")
    assert after.content == "still here"


def test_a_reply_over_the_size_limit_over_stdio_is_refused_and_the_session_lives_on(tmp_path: Path) -> None:
    """The SDK's stdio reader kept a line whole, whatever its size; ours stops at the limit and
    answers the call with an error, and the next call on the same session works."""
    scenario = misbehaving_scenario(tmp_path, max_tool_reply_bytes=3_000_000)

    async def body(m: MCPManager) -> tuple[str, ToolCallResult, ToolCallResult]:
        with pytest.raises(MCPToolCallError) as refused:
            await m.call_tool("misbehaving__huge", {"chars": 5_000_000})
        return (
            str(refused.value),
            await m.call_tool("misbehaving__huge", {"chars": 2_000_000}),
            await m.call_tool("misbehaving__echo", {"text": "still here"}),
        )

    message, under, after = scenario.run(body)
    assert message.startswith("MCP tool misbehaving.huge replied with 5,000,")
    assert message.endswith(
        "bytes, over the limit of 3,000,000; the reply was dropped. Ask for less "
        "(a narrower query, a smaller page). The limit is [tool.zorkgpt.mcp] max_tool_reply_bytes."
    )
    assert under.content.endswith("[…cut: 2,000,000 characters, the first 8,000 kept]")
    assert after.content == "still here"


def test_real_tool_names_are_wire_safe_and_callable_both_ways(tmp_path: Path) -> None:
    scenario = misbehaving_scenario(tmp_path)

    async def body(m: MCPManager) -> tuple[list[dict[str, Any]], ToolCallResult, ToolCallResult, ToolCallResult]:
        schemas = scenario.schemas
        long_wire = wire_name("misbehaving", LONG_TOOL_NAME)
        return (
            schemas,
            await m.call_tool(long_wire, {}),
            await m.call_tool(dotted_name("misbehaving", LONG_TOOL_NAME), {}),
            await m.call_tool(dotted_name("misbehaving", DOTTED_TOOL_NAME), {}),
        )

    schemas, by_wire, by_dotted, dotted = scenario.run(body)
    names = [s["function"]["name"] for s in schemas]
    assert all(TOOL_NAME_PATTERN.match(n) for n in names)
    assert len(set(names)) == len(names)
    long_wire = wire_name("misbehaving", LONG_TOOL_NAME)
    assert len(long_wire) == 64 and long_wire in names
    assert "misbehaving__weird_name_with_spaces" in names
    assert by_wire == by_dotted == ToolCallResult(content="long")
    assert dotted == ToolCallResult(content="dotted")
    for schema in schemas:
        parameters = schema["function"]["parameters"]
        assert parameters["type"] == "object" and "properties" in parameters
        assert schema["function"]["description"]
    assert scenario.manager.display_name(long_wire) == f"misbehaving.{LONG_TOOL_NAME}"


# -- environment and working directory -------------------------------------------------------


def test_server_environment_and_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-secret-value")
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-secret")
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-public")
    monkeypatch.setenv("ZORKGPT_TEST_PLAIN", "inherited")
    monkeypatch.setenv("ZORKGPT_TEST_OVERRIDDEN", "from-system")
    (tmp_path / "cfg" / "work").mkdir(parents=True)
    config_path = write_mcp_config(
        tmp_path / "cfg",
        {
            "misbehaving": {
                **misbehaving_entry(
                    env={"ZORKGPT_TEST_OVERRIDDEN": "from-config", "LANGFUSE_PUBLIC_KEY": "pk-given-explicitly"}
                ),
                "cwd": "work",
            }
        },
    )
    logger, handler = capture_logger("test.mcp.env")
    scenario = Scenario(MCPManager(make_config(config_path, tmp_path), logger, redactor=Redactor()), handler)
    names = [
        "OPENROUTER_API_KEY",
        "LANGFUSE_SECRET_KEY",
        "LANGFUSE_PUBLIC_KEY",
        "ZORKGPT_TEST_PLAIN",
        "ZORKGPT_TEST_OVERRIDDEN",
        "PATH",
    ]

    async def body(m: MCPManager) -> tuple[ToolCallResult, ToolCallResult]:
        return await m.call_tool("misbehaving__env", {"names": names}), await m.call_tool("misbehaving__cwd", {})

    env, cwd = scenario.run(body)
    assert env.content == {
        "OPENROUTER_API_KEY": None,
        "LANGFUSE_SECRET_KEY": None,
        "LANGFUSE_PUBLIC_KEY": "pk-given-explicitly",
        "ZORKGPT_TEST_PLAIN": "inherited",
        "ZORKGPT_TEST_OVERRIDDEN": "from-config",
        "PATH": os.environ["PATH"],
    }
    assert cwd.content == str(tmp_path / "cfg" / "work")


# -- startup failures, retry and disable -----------------------------------------------------


def attempts(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_first_connect_failure_raises_startup_error_without_retry(tmp_path: Path) -> None:
    attempts_file = tmp_path / "attempts.txt"
    scenario = misbehaving_scenario(tmp_path, "--start", "crash", "--attempts-file", str(attempts_file))

    with pytest.raises(MCPServerStartupError) as caught:
        scenario.run(noop)

    message = str(caught.value)
    assert "Failed to start MCP server 'misbehaving'" in message
    assert f"Command: python {MISBEHAVING_SERVER} --start crash --attempts-file {attempts_file}" in message
    assert "runs this project's interpreter" in message
    assert "refusing to start: start mode is crash" in message  # the server's stderr tail
    assert "enabled = false" in message
    assert attempts(attempts_file) == 1  # no retry on the first connect
    assert scenario.manager.is_disabled is False
    (failed,) = scenario.handler.by_event("mcp_session_connect_failed")
    assert failed.retry is False


def test_command_not_found_names_the_command_and_how_to_install(tmp_path: Path) -> None:
    config_path = write_mcp_config(tmp_path, {"tool": {"command": "zorkgpt-no-such-command", "args": ["--x"]}})
    logger, handler = capture_logger("test.mcp.notfound")
    scenario = Scenario(MCPManager(make_config(config_path, tmp_path), logger, redactor=Redactor()), handler)

    with pytest.raises(MCPServerStartupError) as caught:
        scenario.run(noop)

    message = str(caught.value)
    assert "command not found: 'zorkgpt-no-such-command'" in message
    assert "Command: zorkgpt-no-such-command --x" in message
    assert "PATH" in message and str(config_path) in message


def test_npx_not_found_hint_mentions_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    config_path = write_mcp_config(tmp_path, {"seq": {"command": "npx", "args": ["-y", "some-server"]}})
    logger, handler = capture_logger("test.mcp.npx")
    scenario = Scenario(MCPManager(make_config(config_path, tmp_path), logger, redactor=Redactor()), handler)

    with pytest.raises(MCPServerStartupError, match=r"Install Node\.js 22 or newer"):
        scenario.run(noop)


def test_startup_timeout_raises_and_leaves_no_process(tmp_path: Path) -> None:
    scenario = misbehaving_scenario(tmp_path, "--start", "hang", server_startup_timeout_seconds=0.5)

    with pytest.raises(MCPServerStartupError, match=r"within 0\.5s"):
        scenario.run(noop)


def flaky_scenario(tmp_path: Path) -> tuple[Scenario, Path, Path]:
    counter = tmp_path / "failures-left.txt"
    counter.write_text("0")
    attempts_file = tmp_path / "attempts.txt"
    scenario = misbehaving_scenario(
        tmp_path, "--start", "flaky", "--counter-file", str(counter), "--attempts-file", str(attempts_file)
    )
    return scenario, counter, attempts_file


async def echo_turn(m: MCPManager) -> ToolCallResult:
    return await m.call_tool("misbehaving__echo", {"text": "ok"})


def test_later_turn_failure_is_retried_once_and_recovers(tmp_path: Path) -> None:
    scenario, counter, attempts_file = flaky_scenario(tmp_path)
    assert scenario.run(echo_turn).content == "ok"  # turn 1 connects

    counter.write_text("1")  # the next start fails once
    assert scenario.run(echo_turn).content == "ok"

    assert attempts(attempts_file) == 3
    assert scenario.manager.is_disabled is False
    events = scenario.handler.events()
    assert [r.retry for r in scenario.handler.by_event("mcp_session_connect_failed")] == [True]
    assert events.count("mcp_session_retry_ok") == 1
    assert "mcp_server_disabled" not in events

    counter.write_text("1")  # each later failure gets its own single retry
    assert scenario.run(echo_turn).content == "ok"
    assert attempts(attempts_file) == 5


def test_failed_retry_disables_mcp_until_the_next_episode(tmp_path: Path) -> None:
    scenario, counter, attempts_file = flaky_scenario(tmp_path)
    scenario.run(echo_turn)

    counter.write_text("2")  # the connect and its retry both fail
    scenario.run(noop)  # the turn goes on without the server's tools
    assert scenario.schemas == []
    assert scenario.manager.is_disabled is True
    assert scenario.manager.disabled_servers() == ["misbehaving"]
    assert attempts(attempts_file) == 3
    disabled = scenario.handler.by_event("mcp_server_disabled")
    assert len(disabled) == 1 and "flaky start" in disabled[0].getMessage()
    assert "disabled for the rest of this episode" in disabled[0].getMessage()

    scenario.run(noop)
    assert scenario.schemas == []
    assert attempts(attempts_file) == 3  # disabled: no more spawns

    scenario.manager.reset_episode()
    assert scenario.manager.is_disabled is False
    assert scenario.run(echo_turn).content == "ok"
    assert attempts(attempts_file) == 4


def test_first_connect_of_a_new_episode_fails_fast_again(tmp_path: Path) -> None:
    scenario, counter, attempts_file = flaky_scenario(tmp_path)
    scenario.run(echo_turn)
    scenario.manager.reset_episode()

    counter.write_text("1")
    with pytest.raises(MCPServerStartupError, match="flaky start"):
        scenario.run(noop)
    assert attempts(attempts_file) == 2  # no retry: first connect of the episode


# -- Langfuse ----------------------------------------------------------------------------------


def test_each_tool_call_is_one_langfuse_tool_observation(
    tmp_path: Path, langfuse_exporter: tuple[Any, InMemorySpanExporter]
) -> None:
    langfuse, exporter = langfuse_exporter
    config_path = write_mcp_config(tmp_path, {"misbehaving": misbehaving_entry()})
    logger, handler = capture_logger("test.mcp.langfuse")
    scenario = Scenario(
        MCPManager(make_config(config_path, tmp_path), logger, langfuse_client=langfuse, redactor=Redactor()), handler
    )

    async def body(m: MCPManager) -> None:
        await m.call_tool("misbehaving__echo", {"text": "hello"})
        await m.call_tool("misbehaving.fail", {"message": "bad"})
        with pytest.raises(TimeoutError):
            await m.call_tool("misbehaving__hang", {"seconds": 60}, timeout_seconds=0.3)

    scenario.run(body)
    langfuse.flush()
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [
        "mcp-tool-misbehaving.echo",
        "mcp-tool-misbehaving.fail",
        "mcp-tool-misbehaving.hang",
    ]
    echo, fail, hang = (dict(s.attributes or {}) for s in spans)
    assert all(a["langfuse.observation.type"] == "tool" for a in (echo, fail, hang))
    assert json.loads(echo["langfuse.observation.input"]) == {"text": "hello"}
    assert json.loads(echo["langfuse.observation.output"]) == {"content": "hello"}
    metadata = {key.rsplit(".", 1)[1]: json.loads(value) for key, value in echo.items() if ".metadata." in key}
    assert metadata["is_error"] is False
    assert metadata["duration_ms"] >= 0
    assert metadata["tool_name"] == "misbehaving.echo"
    assert metadata["server_name"] == "misbehaving"
    assert json.loads(fail["langfuse.observation.output"]) == {"error": "bad", "content": None}
    assert json.loads(fail["langfuse.observation.metadata.is_error"]) is True
    assert fail["langfuse.observation.level"] == "WARNING"
    assert hang["langfuse.observation.level"] == "ERROR"
    assert "TimeoutError" in hang["langfuse.observation.status_message"]


def test_hygiene_check_catches_what_it_is_meant_to_catch() -> None:
    """The checks above can fail: a subprocess left to outlive its loop is reported on all counts."""

    async def leak() -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-c", "import time; time.sleep(0.2)", stdin=asyncio.subprocess.PIPE
        )

    with async_hygiene() as report:
        process = asyncio.run(leak())
        assert process.pid in child_pids()
        assert not wait_gone({process.pid}, 5.0)
        # asyncio's child watcher thread reaps the process and lets go of its transport;
        # once it has, the __del__ below certainly runs against the closed loop.
        for thread in threading.enumerate():
            if thread.name.startswith("asyncio-waitpid-"):
                thread.join()
        del process  # its __del__ now runs against the closed loop, inside the check
    problems = "\n".join(report.problems())
    assert "Event loop is closed" in problems
    assert "ResourceWarning" in problems


def test_paginated_listing_with_a_repeated_name_and_a_bare_schema(tmp_path: Path) -> None:
    # (A schema without "type" never gets this far: the SDK rejects such a listing.)
    listing = [
        {"name": "a", "description": "first a", "inputSchema": {"type": "object", "properties": {"x": {}}}},
        {"name": "b", "inputSchema": {"type": "object", "required": []}},
        {"name": "a", "description": "second a", "inputSchema": {"type": "object"}},
        {"name": "c.d", "description": "dotted", "inputSchema": {"type": "object"}},
    ]
    env = {"RAW_SERVER_TOOLS": json.dumps(listing), "RAW_SERVER_PAGE_SIZE": "1"}
    config_path = write_mcp_config(tmp_path, {"raw": raw_entry(env=env)})
    logger, handler = capture_logger("test.mcp.pages")
    scenario = Scenario(MCPManager(make_config(config_path, tmp_path), logger, redactor=Redactor()), handler)

    scenario.run(noop)
    schemas = scenario.schemas
    functions = [s["function"] for s in schemas]
    assert [f["name"] for f in functions] == ["raw__a", "raw__b", "raw__c_d"]  # all pages, "a" once
    assert functions[0]["description"] == "first a"
    assert functions[1]["parameters"] == {"type": "object", "required": [], "properties": {}}
    assert functions[2]["parameters"] == {"type": "object", "properties": {}}
    assert functions[1]["description"] == "Tool 'b' of MCP server 'raw'."
