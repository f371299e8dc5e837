"""ZorkAgent's MCP path with real parts: real HTTP and real stdio MCP servers.

The tool loop's own behaviour (caps, timeouts, failures, hostile replies, annotations) is
tested in tests/tool_loop/test_loop.py; here, what the agent adds around it: the turn's tools
opened, the prompt, the fallbacks without tools, the Langfuse session span, re-asks.

The model is the scripted chat-completions server (``llm_server``) reached through the real
``LLMClient``; the tools are the shipped thoughtbox server (started from the repo's
``mcp_config.json``) or the misbehaving test server, spawned by the real ``MCPManager``.
Two spies, both delegating to the real methods, record what crossed the agent/manager
seam: which server processes opening a turn started and which tool calls reached the manager.

Every turn runs through ``AgentTurns._run``, which asserts the async hygiene the issue asks
for: asyncio.run entered exactly once and never inside a running loop (property 39/40) and
no "Event loop is closed" / "cancel scope" text in warnings, unraisable exceptions, log
records or the captured stdout/stderr; then it ends the turn as the episode runner does. At
the end of each test the manager is closed and no server process may be left.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from harness.scripted_llm import ScriptedLLMServer, agent_reply, completion, tool_call
from mcp_servers.thoughtbox_server import THINK_DESCRIPTION
from session.errors import Consequence, MCPServerStartupError, ToolsNotSupportedError, consequence_of
from tests.agent_support import API_KEY, AgentTurns
from tests.mcp_test_servers.helpers import (
    STATE,
    THINK_FIELDS,
    misbehaving_config,
    raw_entry,
    text_of,
    think,
    tool_messages,
    write_mcp_config,
)
from zork_agent import tools_prompt

pytestmark = pytest.mark.e2e

THINK_REQUIRED = {"thought", "thoughtNumber", "totalThoughts", "nextThoughtNeeded"}


@pytest.fixture
def turns(
    llm_server: ScriptedLLMServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> Iterator[Callable[..., AgentTurns]]:
    made: list[AgentTurns] = []

    def factory(**kwargs: Any) -> AgentTurns:
        made.append(AgentTurns(llm_server, tmp_path, monkeypatch, caplog, capfd, **kwargs))
        return made[-1]

    yield factory
    for run in made:
        run.finish()


# -- the shipped thoughtbox server --------------------------------------------------------------------


def test_full_turn_with_two_thoughts_then_an_answer(
    llm_server: ScriptedLLMServer, turns: Callable[..., AgentTurns]
) -> None:
    llm_server.script(
        completion(tool_calls=[tool_call("thoughtbox__think", think(1, 2, True), "call_1")]),
        completion(tool_calls=[tool_call("thoughtbox__think", think(2, 2, False, "Open it."), "call_2")]),
        agent_reply("Open Mailbox", thinking="the thoughts say: mailbox", new_objective="read the leaflet"),
    )
    run = turns()
    result = run.turn(turn=7)

    assert result.action == "open mailbox"
    assert result.reasoning == "the thoughts say: mailbox"
    assert result.new_objective is not None and result.new_objective.text == "read the leaflet"
    assert len(run.spawned) == 1, "one server process for the turn"
    assert run.tool_calls == ["thoughtbox.think", "thoughtbox.think"]
    # The decision keeps the calls it was made with, in order, and cannot be changed afterwards.
    assert [(c.server, c.tool, c.is_error) for c in result.tool_calls] == [
        ("thoughtbox", "thoughtbox.think", False)
    ] * 2
    assert [c.arguments for c in result.tool_calls] == [think(1, 2, True), think(2, 2, False, "Open it.")]
    assert all('"thoughtNumber"' in c.result_summary for c in result.tool_calls)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.action = "north"  # type: ignore[misc]

    bodies = llm_server.bodies
    assert len(bodies) == 3
    for body in bodies:  # every call of the loop offers the real tool and lets the model choose
        assert "response_format" not in body
        assert body["tool_choice"] == "auto"
        (tool,) = body["tools"]
        assert tool["type"] == "function"
        assert tool["function"]["name"] == "thoughtbox__think"
        parameters = tool["function"]["parameters"]
        assert parameters["type"] == "object"
        assert set(parameters["properties"]) == THINK_FIELDS
        assert set(parameters["required"]) == THINK_REQUIRED
        assert parameters["properties"]["thoughtNumber"]["type"] == "integer"

    first, second, third = bodies
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert STATE in text_of(first["messages"][1])
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert [m["role"] for m in third["messages"]] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assistant = second["messages"][2]
    assert assistant["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "thoughtbox__think", "arguments": json.dumps(think(1, 2, True))},
        }
    ]
    assert not assistant.get("content")
    assert third["messages"][4]["tool_calls"][0]["id"] == "call_2"
    results = tool_messages(third)
    assert list(results) == ["call_1", "call_2"]
    assert results["call_1"] == {
        "content": {
            "thoughtNumber": 1,
            "totalThoughts": 2,
            "nextThoughtNeeded": True,
            "branches": [],
            "thoughtHistoryLength": 1,
        }
    }
    # One server for the whole turn: the second thought sees the first in its history.
    assert results["call_2"]["content"]["thoughtNumber"] == 2
    assert results["call_2"]["content"]["thoughtHistoryLength"] == 2
    assert tool_messages(second) == {"call_1": results["call_1"]}

    calls = run.events("mcp_tool_call")
    assert [(r.tool_name, r.iteration, r.turn) for r in calls] == [
        ("thoughtbox.think", 1, 7),
        ("thoughtbox.think", 2, 7),
    ]
    assert calls[0].arguments == think(1, 2, True)
    assert calls[0].server_name == "thoughtbox"
    tool_results = run.events("mcp_tool_result")
    assert [(r.tool_name, r.is_error, r.result_type) for r in tool_results] == [("thoughtbox.think", False, "dict")] * 2
    assert all(r.duration_ms > 0 and r.result_length > 0 for r in tool_results)
    (complete,) = run.events("mcp_tool_loop_complete")
    assert complete.iterations == 3 and complete.tool_calls_count == 2
    assert complete.tools_used == ["thoughtbox.think"]
    assert complete.final_action == "open mailbox" and complete.forced_final is False
    assert not run.events("mcp_no_content") and not run.events("mcp_disabled_fallback")

    lines = run.human_lines()

    def line(prefix: str) -> str:
        found = [text for text in lines if text.startswith(prefix)]
        assert found, f"no log line starting with {prefix!r} in:\n" + "\n".join(lines)
        return found[0]

    line("[INFO] Turn 7: tool loop started (max 20 iterations)")
    line("[INFO] Turn 7 Iteration 1: Agent calling tool thoughtbox.think")
    assert json.loads(line("[DEBUG] Turn 7 Iteration 1: Tool arguments: ").split(": ", 2)[2]) == think(1, 2, True)
    line("[INFO] Turn 7 Iteration 1: Tool result received (")
    line("[INFO] Turn 7 Iteration 2: Agent calling tool thoughtbox.think")
    line("[INFO] Turn 7: tool loop complete (3 iterations, 2 tool calls)")
    line("[INFO] Turn 7: Agent action: open mailbox")


def test_a_prose_answer_with_tools_offered_is_asked_for_again_in_the_structured_form_not_played_as_a_fallback(
    llm_server: ScriptedLLMServer, turns: Callable[..., AgentTurns]
) -> None:
    """A small local model answers in prose once it may call tools (no response_format then): the agent
    tells the loop the prose holds no action, and the model is asked once more with the agent's schema."""
    llm_server.script(
        completion(tool_calls=[tool_call("thoughtbox__think", think(1, 1, False), "call_1")]),
        completion(content="The mailbox is small. I will open it, I think, and then read what is inside."),
        agent_reply("open mailbox"),
    )
    run = turns(tool_choice="thoughtbox.think")
    decision = run.turn(turn=1)

    assert decision.action == "open mailbox"
    assert [call.tool for call in decision.tool_calls] == ["thoughtbox.think"]
    first, prose, final = llm_server.bodies
    assert first["tool_choice"] == {"type": "function", "function": {"name": "thoughtbox__think"}}
    assert prose["tool_choice"] == "auto" and "response_format" not in prose
    assert "tools" not in final and final["response_format"]["json_schema"]["name"] == "AgentResponse"
    assert len(run.events("mcp_unreadable_answer")) == 1
    assert run.events("agent_parse_error") == []


def test_a_named_tool_choice_forces_a_turns_first_request_but_not_a_reask_that_goes_on_with_its_calls(
    llm_server: ScriptedLLMServer, turns: Callable[..., AgentTurns]
) -> None:
    llm_server.script(
        completion(tool_calls=[tool_call("thoughtbox__think", think(1, 1, False), "call_1")]),
        agent_reply("open mailbox"),
        agent_reply("north"),
        completion(tool_calls=[tool_call("thoughtbox__think", think(1, 1, False), "call_2")]),
        agent_reply("south"),
    )
    run = turns(tool_choice="thoughtbox.think")
    assert run.reask(turn=1).action == "open mailbox"
    assert run.reask(turn=1, rejections=("open mailbox: it is already open",)).action == "north"
    assert run.turn(turn=2).action == "south"
    forced = {"type": "function", "function": {"name": "thoughtbox__think"}}
    assert [body["tool_choice"] for body in llm_server.bodies] == [forced, "auto", "auto", forced, "auto"]


def test_the_system_prompt_says_tools_are_offered_and_what_they_are_for(
    llm_server: ScriptedLLMServer, turns: Callable[..., AgentTurns]
) -> None:
    """A model that follows "Answer with a single JSON object" literally would never call a tool;
    the prompt now says it may, that the answer is still the JSON, and what the server is for."""
    llm_server.script(
        completion(tool_calls=[tool_call("thoughtbox__think", think(1, 1, False), "call_1")]),
        agent_reply("open mailbox"),
    )
    run = turns()
    run.turn(turn=1)
    systems = [text_of(body["messages"][0]) for body in llm_server.bodies]
    assert len(systems) == 2 and systems[0] == systems[1]
    tools_part = systems[0].split("# Tools\n", 1)[1]
    assert "You may call them before answering" in tools_part
    assert "the single JSON object with your game command" in tools_part
    # The purposes come from the server itself: its MCP instructions and its tool's description;
    # the tool is named as the model must call it (the wire name the request offers).
    assert "- Server thoughtbox: Structured step-by-step reasoning: call think once per thought." in tools_part
    first_sentence = THINK_DESCRIPTION.splitlines()[0]
    assert first_sentence.endswith(".")
    offered = [tool["function"]["name"] for tool in llm_server.bodies[0]["tools"]]
    assert offered == ["thoughtbox__think"]
    assert f"  - thoughtbox__think: {first_sentence}" in tools_part.splitlines()
    assert systems[0].startswith(run.agent.system_prompt)  # the rest of the prompt is unchanged


def test_tools_prompt_names_each_tool_by_its_wire_name_and_describes_servers_without_instructions() -> None:
    tools = [
        {"type": "function", "function": {"name": "zork_maps__route", "description": "Find a route. Long details."}},
        {"type": "function", "function": {"name": "zork_maps__rooms", "description": ""}},
        {"type": "function", "function": {"name": "notes__add", "description": "Add a note! Notes last\n  a game."}},
    ]
    servers = {"zork_maps__route": "zork.maps", "zork_maps__rooms": "zork.maps", "notes__add": "notes"}
    text = tools_prompt(tools, {"zork.maps": "Zork maps.", "other": "unused"}, servers.get)
    assert text.splitlines()[2:] == [
        # The server's name as configured (the manager's routing), not as read back from the wire name.
        "- Server zork.maps: Zork maps.",
        "  - zork_maps__route: Find a route.",
        "  - zork_maps__rooms",
        # No instructions: the tool's whole description says what the server is for.
        "- Server notes",
        "  - notes__add: Add a note! Notes last a game.",
    ]


# -- the misbehaving server ----------------------------------------------------------------------------


def test_first_turn_startup_failure_raises_out_of_the_agent(
    llm_server: ScriptedLLMServer, turns: Callable[..., AgentTurns], tmp_path: Path
) -> None:
    run = turns(config_file=misbehaving_config(tmp_path, "--start", "crash"))
    error = run.failing_turn(MCPServerStartupError)

    assert "Failed to start MCP server 'misbehaving'" in str(error)
    assert "refusing to start" in str(error)  # the server's stderr is quoted
    assert API_KEY not in str(error)
    assert llm_server.requests == [], "no LLM call when the first connect fails"
    assert run.manager.is_disabled is False


def test_later_turn_failure_after_the_retry_disables_mcp_and_the_turn_still_plays(
    llm_server: ScriptedLLMServer, turns: Callable[..., AgentTurns], tmp_path: Path
) -> None:
    script = tmp_path / "starts.txt"
    script.write_text("ok\nfail\nfail\n")  # turn 1 starts; turn 2's start and its retry fail
    config_file = write_mcp_config(tmp_path / "mcp", {"flaky": raw_entry(env={"RAW_SERVER_SCRIPT": str(script)})})
    llm_server.script(agent_reply("north"), agent_reply("east"), agent_reply("west"))
    run = turns(config_file=config_file, session_lifetime="turn")

    assert run.turn(turn=1).action == "north"
    assert "tools" in llm_server.bodies[0]
    assert run.turn(turn=2).action == "east"
    taken = tmp_path / "starts.taken"
    assert taken.read_text().split() == ["ok", "fail", "fail"], "turn 1, then one start and exactly one retry"
    assert run.manager.is_disabled is True
    assert run.turn(turn=3).action == "west"
    assert taken.read_text().split() == ["ok", "fail", "fail"], "no start attempts once MCP is disabled"

    for body in llm_server.bodies[1:]:  # the MCP-disabled path: the plain schema call
        assert "tools" not in body and "tool_choice" not in body
        assert body["response_format"]["json_schema"]["name"] == "AgentResponse"
    fallbacks = run.events("mcp_disabled_fallback")
    assert [r.turn for r in fallbacks] == [2, 3]
    assert all(r.levelname == "WARNING" for r in fallbacks)
    assert len(run.events("mcp_server_disabled")) == 1
    assert run.tool_calls == []


def test_server_without_tools_plays_the_turn_without_tools_and_says_why(
    llm_server: ScriptedLLMServer, turns: Callable[..., AgentTurns], tmp_path: Path
) -> None:
    config_file = write_mcp_config(tmp_path / "mcp", {"empty": raw_entry(env={"RAW_SERVER_TOOLS": "[]"})})
    llm_server.script(agent_reply("look"))
    run = turns(config_file=config_file)
    assert run.turn(turn=2).action == "look"

    assert len(run.spawned) == 1
    (body,) = llm_server.bodies
    assert "tools" not in body and body["response_format"]["json_schema"]["name"] == "AgentResponse"
    (record,) = run.events("mcp_no_tools")
    assert record.server_names == ["empty"] and "no MCP tools offered (servers: empty)" in record.getMessage()
    assert not run.events("mcp_disabled_fallback"), "MCP is not disabled: the server simply has no tools"
    assert run.manager.is_disabled is False


# -- model compatibility -------------------------------------------------------------------------------


def test_model_without_tool_support_fails_before_the_first_tool_call(
    llm_server: ScriptedLLMServer, turns: Callable[..., AgentTurns]
) -> None:
    run = turns(agent_model="deepseek/deepseek-r1")
    error = run.failing_turn(ToolsNotSupportedError)

    assert consequence_of(error) is Consequence.SETUP_FAILS
    assert "deepseek/deepseek-r1" in str(error) and "does not support tool calling" in str(error)
    assert "force_tool_support" in str(error) and "enabled = false" in str(error)
    assert llm_server.requests == [] and run.tool_calls == []
    assert len(run.spawned) == 1  # it connected, found tools, refused, and still disconnected


def test_force_tool_support_lets_a_flagged_model_call_tools(
    llm_server: ScriptedLLMServer, turns: Callable[..., AgentTurns]
) -> None:
    llm_server.script(
        completion(tool_calls=[tool_call("thoughtbox__think", think(1, 1, False), "call_1")]),
        agent_reply("take lamp"),
    )
    run = turns(agent_model="deepseek/deepseek-r1", force_tool_support=True)
    assert run.turn().action == "take lamp"
    assert run.tool_calls == ["thoughtbox.think"]
    assert llm_server.bodies[0]["tools"][0]["function"]["name"] == "thoughtbox__think"
    assert tool_messages(llm_server.bodies[1])["call_1"]["content"]["thoughtNumber"] == 1


# -- Langfuse ------------------------------------------------------------------------------------------


def test_langfuse_session_span_with_one_tool_observation_per_call_nested_under_it(
    llm_server: ScriptedLLMServer,
    turns: Callable[..., AgentTurns],
    langfuse_exporter: tuple[Any, InMemorySpanExporter],
) -> None:
    langfuse, exporter = langfuse_exporter
    llm_server.script(
        completion(
            tool_calls=[
                tool_call("thoughtbox__think", think(1, 2, True), "call_1"),
                tool_call("thoughtbox__think", think(2, 2, False, "Then open it."), "call_2"),
            ]
        ),
        agent_reply("open mailbox"),
    )
    run = turns(langfuse=langfuse)
    assert run.turn(turn=9).action == "open mailbox"
    langfuse.flush()

    spans = exporter.get_finished_spans()
    attributes = {id(s): dict(s.attributes or {}) for s in spans}
    kind = {id(s): attributes[id(s)].get("langfuse.observation.type") for s in spans}
    sessions = [s for s in spans if s.name == "agent-tool-loop"]
    tools = [s for s in spans if kind[id(s)] == "tool"]
    generations = [s for s in spans if kind[id(s)] == "generation"]
    assert len(sessions) == 1 and kind[id(sessions[0])] == "span"
    assert [s.name for s in tools] == ["mcp-tool-thoughtbox.think", "mcp-tool-thoughtbox.think"]
    assert len(generations) == 2
    session = sessions[0]
    for child in (*tools, *generations):
        assert child.parent is not None and child.parent.span_id == session.context.span_id
        assert child.context.trace_id == session.context.trace_id
    first_input = json.loads(attributes[id(tools[0])]["langfuse.observation.input"])
    assert first_input == think(1, 2, True)
    first_output = json.loads(attributes[id(tools[0])]["langfuse.observation.output"])
    assert first_output["content"]["thoughtHistoryLength"] == 1
    meta = {
        key.rsplit(".", 1)[1]: json.loads(value)
        for key, value in attributes[id(session)].items()
        if key.startswith("langfuse.observation.metadata.")
    }
    assert meta["iterations_used"] == 2 and meta["tools_called"] == 2
    assert meta["tools_used"] == ["thoughtbox.think"] and meta["final_action"] == "open mailbox"
    assert meta["max_iterations"] == 20 and meta["turn"] == 9
    for attrs in attributes.values():
        assert API_KEY not in json.dumps(attrs)


def test_critic_reasks_reuse_the_turns_sessions(
    llm_server: ScriptedLLMServer, turns: Callable[..., AgentTurns], tmp_path: Path
) -> None:
    """Within one turn every agent call sees the same server; the next turn sees a fresh one."""
    pid_call = tool_call("misbehaving__pid", {}, "call_pid")
    llm_server.script(
        completion(tool_calls=[pid_call]),
        agent_reply("take lamp"),
        completion(tool_calls=[pid_call]),
        agent_reply("take sword"),
        completion(tool_calls=[pid_call]),
        agent_reply("north"),
    )
    run = turns(config_file=misbehaving_config(tmp_path), session_lifetime="turn")
    assert run.reask(turn=4).action == "take lamp"
    assert run.turn(turn=4).action == "take sword"  # the critic's re-ask, then the turn ends
    assert run.turn(turn=5).action == "north"
    pids = [tool_messages(body)["call_pid"]["content"] for body in llm_server.bodies if "call_pid" in str(body)]
    first, reask, next_turn = pids[0], pids[1], pids[2]
    assert first == reask and next_turn != first
    assert len([r for r in run.events("mcp_turn_ready")]) == 2  # one per turn, none for the re-ask
