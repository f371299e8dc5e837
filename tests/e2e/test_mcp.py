"""End-to-end with MCP on: the episode runner plays 12 walkthrough turns of real Zork I through real
HTTP, with three MCP servers in one toolbox: the shipped thoughtbox over stdio (a fresh server
every turn, started early while the previous turn runs), the misbehaving test server over stdio
(one session for the episode) and the thoughtbox in HTTP mode as a remote server.

The scripted model thinks on every fourth turn with one server's tool, in rotation, then plays
the walkthrough command. Thinking must not change the game: the score after 12 turns equals the
score of the same 12 turns with MCP off. When the episode ends no server process is left.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.scripted_llm import ScriptedLLMServer, agent_reply, completion, tool_call
from harness.walkthroughs import (
    AGENT_MODEL,
    THINK_ARGS,
    ThinkingWalkthroughModel,
    WalkthroughModel,
    e2e_config,
    read_events,
    walkthrough,
)
from orchestration.episode_runner import EpisodeRunner
from reports.episode_records import EpisodeFigures
from session.episode_events import parse_event
from session.episode_folder import EpisodeFolder, episodes_dir
from session.game_state import GameState
from session.redaction import Redactor
from tests.main_support import NO_LEARNING, REPO, run_main, scripted_env
from tests.mcp_test_servers.helpers import (
    HTTPServer,
    assert_clean,
    async_hygiene,
    child_pids,
    misbehaving_entry,
    thoughtbox_entry,
    wait_gone,
    write_mcp_config,
)

pytestmark = pytest.mark.e2e

TURNS = 12
THINK_EVERY = 4
# The tool each thinking turn calls, in rotation: one per server.
ROTATION = [("thoughtbox__think", THINK_ARGS), ("tools__echo", {"text": "plan"}), ("remote__think", THINK_ARGS)]


def play(orchestrator: EpisodeRunner) -> GameState:
    try:
        return orchestrator.play_episode()
    finally:
        orchestrator.close()


def test_three_servers_through_a_walkthrough_reach_the_same_score(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, thoughtbox_http: HTTPServer
) -> None:
    commands = walkthrough(game_file)[:TURNS]

    llm_server.respond_with(WalkthroughModel(commands))
    plain_config = e2e_config(tmp_path / "plain", llm_server.base_url, game_file)
    plain = play(
        EpisodeRunner(
            episode_id="plain", config=plain_config, console=False, max_turns_per_episode=TURNS, redactor=Redactor()
        )
    )
    plain_requests = len(llm_server.requests)

    never = tmp_path / "never-started.txt"
    mcp_file = write_mcp_config(
        tmp_path / "mcp-config",
        {
            "thoughtbox": thoughtbox_entry(),
            "tools": {**misbehaving_entry(), "includeTools": ["echo"], "lifetime": "episode"},
            "remote": {"type": "http", "url": thoughtbox_http.url},
            "off": {**misbehaving_entry("--attempts-file", str(never)), "disabled": True},
        },
    )
    model = ThinkingWalkthroughModel(commands, THINK_EVERY, ROTATION)
    llm_server.respond_with(model)
    config = e2e_config(
        tmp_path / "mcp",
        llm_server.base_url,
        game_file,
        mcp={"enabled": True, "config_file": str(mcp_file), "server_startup_timeout_seconds": 120},
    )
    orchestrator = EpisodeRunner(
        episode_id="with-mcp", config=config, console=False, max_turns_per_episode=TURNS, redactor=Redactor()
    )
    assert orchestrator.mcp_manager is not None
    children_before = child_pids()
    spawned: set[int] = set()
    real_process_turn = orchestrator._process_turn

    def recording_turn() -> bool:
        try:
            return real_process_turn()
        finally:
            spawned.update(child_pids() - children_before)

    orchestrator._process_turn = recording_turn  # type: ignore[method-assign]
    with async_hygiene() as report:
        state = play(orchestrator)
    assert_clean(report)

    # The same game: thinking changed nothing the engine saw.
    assert plain.end_reason == state.end_reason == "max_turns"
    assert plain.turn_count == state.turn_count == TURNS
    assert state.score == plain.score and state.score > 0
    assert state.current_room_id == plain.current_room_id and sorted(state.inventory) == sorted(plain.inventory)

    # Every server process gone with the episode; the disabled entry never started.
    assert len(spawned) > TURNS  # a thoughtbox per turn, plus the episode's misbehaving server
    assert not wait_gone(spawned, 5.0)
    assert child_pids() == children_before
    assert not never.exists()

    thinking_turns = list(range(THINK_EVERY, TURNS + 1, THINK_EVERY))
    assert model.thinking_turns == thinking_turns
    agent_bodies = [b for b in llm_server.bodies[plain_requests:] if b["model"] == AGENT_MODEL]
    assert len(agent_bodies) == TURNS + len(thinking_turns)
    offered = {tuple(t["function"]["name"] for t in b["tools"]) for b in agent_bodies}
    assert offered == {("thoughtbox__think", "tools__echo", "remote__think")}
    answers = [b for b in agent_bodies if any(m["role"] == "tool" for m in b["messages"])]
    assert len(answers) == len(thinking_turns)
    for index, body in enumerate(answers):
        (message,) = [m for m in body["messages"] if m["role"] == "tool"]
        content = json.loads(message["content"])["content"]
        if ROTATION[index % len(ROTATION)][0] == "tools__echo":
            assert content == "plan"
        else:  # a fresh server (stdio) or a fresh session (HTTP) each turn
            assert content["thoughtHistoryLength"] == 1

    episode_dir = episodes_dir(tmp_path / "mcp" / "game_files") / "with-mcp"
    events = read_events(episode_dir)
    by_type: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_type.setdefault(event["event_type"], []).append(event)
    calls = by_type["mcp_tool_call"]
    dotted = ["thoughtbox.think", "tools.echo", "remote.think"]
    assert [(e["turn"], e["tool_name"]) for e in calls] == [
        (t, dotted[i % len(dotted)]) for i, t in enumerate(thinking_turns)
    ]
    assert [e["server_name"] for e in calls] == [dotted[i % 3].split(".")[0] for i in range(len(thinking_turns))]
    assert not any(e["is_error"] for e in by_type["mcp_tool_result"])
    sessions = by_type["mcp_tool_loop_complete"]
    assert [e["turn"] for e in sessions] == list(range(1, TURNS + 1))
    assert [e["tool_calls_count"] for e in sessions] == [1 if t in thinking_turns else 0 for t in range(1, TURNS + 1)]
    turns = by_type["turn"]
    assert [e["action"] for e in turns] == [c.lower() for c in commands]
    for absent in ("mcp_tool_error", "mcp_tool_timeout", "mcp_disabled_fallback", "mcp_server_disabled"):
        assert absent not in by_type, f"unexpected {absent} events: {by_type.get(absent)}"
    connects = [e["server_name"] for e in by_type["mcp_session_connect"]]
    assert connects.count("tools") == 1 and connects.count("thoughtbox") >= TURNS
    exported = json.loads(EpisodeFolder(episode_dir).state.read_text())
    assert exported["mcp"] == {"enabled": True, "disabled_after_failures": False, "disabled_servers": []}
    human_log = EpisodeFolder(episode_dir).human_log.read_text(encoding="utf-8")
    assert "[INFO] Turn 4 Iteration 1: Agent calling tool thoughtbox.think" in human_log
    assert "[INFO] Turn 8 Iteration 1: Agent calling tool tools.echo" in human_log
    assert "[INFO] Turn 4: tool loop complete (2 iterations, 1 tool calls)" in human_log
    assert "[INFO] Turn 5: tool loop complete (1 iterations, 0 tool calls)" in human_log


# One thoughtbox per protocol revision, each pinned, in one run: the model's thinking turns alternate
# between them, so one whole walkthrough shows both revisions (a run per revision played it twice).
PINNED = {"thoughtbox_2025": "2025-11-25", "thoughtbox_2026": "2026-07-28"}


def test_the_whole_walkthrough_through_main_reaches_350_with_mcp_on(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """main.py as a user runs it, MCP on with the shipped thoughtbox twice, each pinned to one revision:
    the model thinks every 25th turn, on each server in turn, and plays the walkthrough; the game is won
    with the full score and every thought of either revision is answered."""
    commands = walkthrough(game_file)
    think = [(f"{name}__think", THINK_ARGS) for name in PINNED]
    model = ThinkingWalkthroughModel(commands, every=25, rotation=think)
    llm_server.respond_with(model)
    servers = {name: {**thoughtbox_entry(), "protocol": protocol} for name, protocol in PINNED.items()}
    mcp_file = write_mcp_config(tmp_path / "mcp-config", servers)
    env = scripted_env(
        llm_server,
        tmp_path,
        game_file,
        **NO_LEARNING,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(mcp_file),
        ZORKGPT_MCP_SESSION_LIFETIME="episode",
        ZORKGPT_GAMEPLAY_STUCK_LIMIT_TURNS="0",  # the idle rule off: the walkthrough waits where the game needs it
    )
    done = run_main(
        ["--max-turns", str(len(commands) + 5), "--config", str(REPO / "pyproject.toml")], env, tmp_path, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (episode,) = [p for p in (tmp_path / "runs").rglob(EpisodeFolder.LOG)]
    events = read_events(episode.parent)
    turns = [e for e in events if e["event_type"] == "turn"]
    assert turns[-1]["score"] == 350
    connects = [e for e in events if e["event_type"] == "mcp_session_connect"]
    assert {(e["server_name"], e["protocol_version"]) for e in connects} == set(PINNED.items())
    results = [e for e in events if e["event_type"] == "mcp_tool_result"]
    assert len(results) == len(model.thinking_turns) >= len(commands) // 25
    assert {e["tool_name"] for e in results} == {f"{name}.think" for name in PINNED}
    assert not any(e.get("is_error") for e in results)


def test_a_server_with_1001_tools_offers_the_model_no_more_than_max_tools_offered(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """OpenAI's API refuses more than 128 tools: the default cap keeps every request under it, the tools
    left out are named in one warning for the episode, and the figures count what was offered."""
    bodies: list[dict[str, Any]] = []

    def model(body: dict[str, Any], index: int) -> dict[str, Any]:
        bodies.append(body)
        answered = any(m["role"] == "tool" for m in body["messages"])
        if body.get("tools") and not answered and len(bodies) == 1:
            return completion(tool_calls=[tool_call("many__tool_0100", {"text": "last kept"}, "call_kept")])
        return agent_reply("north")

    llm_server.respond_with(model)
    entry = {"command": "python", "args": [str(REPO / "tests/mcp_test_servers/raw_server.py")]}
    many = {**entry, "env": {"RAW_SERVER_TOOL_COUNT": "1001"}}
    mcp_file = write_mcp_config(tmp_path / "mcp-config", {"many": many, "after": entry})
    env = scripted_env(
        llm_server,
        tmp_path,
        game_file,
        **NO_LEARNING,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(mcp_file),
    )
    done = run_main(["--max-turns", "2", "--config", str(REPO / "pyproject.toml")], env, tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    offered = [[tool["function"]["name"] for tool in body["tools"]] for body in bodies if body.get("tools")]
    assert len(offered) >= 2  # each turn, and the call's answer
    # The first 100 in config order: the first server's tools in its own order; the second server is left out.
    expected = [f"many__tool_{number:04d}" for number in range(1, 101)]
    assert all(names == expected for names in offered)
    (episode,) = [p.parent for p in (tmp_path / "runs").rglob(EpisodeFolder.LOG)]
    events = read_events(episode)
    (capped,) = [e for e in events if e["event_type"] == "mcp_tools_capped"]  # once, not every turn
    assert capped["tools_listed"] == 1004 and capped["max_tools_offered"] == 100
    assert capped["left_out_by_server"] == {"many": 901, "after": 3}
    assert capped["left_out"][:2] == ["many.tool_0101", "many.tool_0102"] and capped["left_out"][-1] == "after.pid"
    assert "1,004 tools, more than max_tools_offered (100)" in capped["message"]
    assert "904 left out (many: 901, after: 3): many.tool_0101," in capped["message"]
    assert '"includeTools" / "excludeTools"' in capped["message"]
    (result,) = [e for e in events if e["event_type"] == "mcp_tool_result"]
    assert result["tool_name"] == "many.tool_0100" and not result["is_error"]
    # The figures count what the model was offered, and only the server whose tools it saw.
    ready = [e for e in events if e["event_type"] == "mcp_turn_ready"]
    assert [e["tool_count"] for e in ready] == [100, 100]
    assert all(e["servers"] == ["many"] for e in ready)
    figures = EpisodeFigures.from_events(episode.name, [parse_event(event) for event in events])
    assert figures.mcp.tool_turns == 2 and figures.mcp.server_turns == {"many": 2}
