"""End-to-end with MCP on: the orchestrator plays 40 walkthrough turns of real Zork I through real
HTTP, with the shipped thoughtbox server spawned for every turn by the real MCPManager.

The scripted model thinks with ``thoughtbox__think`` on every fifth turn, then plays the
walkthrough command. Thinking must not change the game: the score after 40 turns equals the
score of the same 40 turns with MCP off. And no server may outlive its turn: each turn is
wrapped to check that the servers started during it are gone when it returns.

This is the slowest MCP test (one Python server start per turn, about 0.3-0.5 s each here):
it is the only place the whole chain runs, so it stays; a full 396-turn MCP episode belongs in
the benchmarks, not in CI.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestration.zork_orchestrator_v2 import ZorkOrchestratorV2
from session.game_state import GameState
from tests.e2e_support import AGENT_MODEL, WalkthroughModel, e2e_config, read_events, walkthrough
from tests.mcp_test_servers.helpers import REPO_ROOT, assert_clean, async_hygiene, child_pids, pid_alive
from tests.scripted_llm import ScriptedLLMServer, completion, tool_call

TURNS = 40
THINK_EVERY = 5


class ThinkingWalkthroughModel:
    """The walkthrough player, but every ``every``-th turn it first calls thoughtbox__think once."""

    def __init__(self, commands: list[str], every: int = THINK_EVERY) -> None:
        self.walkthrough = WalkthroughModel(commands)
        self.every = every
        self.turns = 0
        self.thinking_turns: list[int] = []

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        fresh_turn = body.get("model") == AGENT_MODEL and not any(m["role"] == "tool" for m in body["messages"])
        if fresh_turn:
            self.turns += 1
            if self.turns % self.every == 0 and body.get("tools"):
                self.thinking_turns.append(self.turns)
                arguments = {
                    "thought": f"Turn {self.turns}: follow the plan.",
                    "thoughtNumber": 1,
                    "totalThoughts": 1,
                    "nextThoughtNeeded": False,
                }
                return completion(tool_calls=[tool_call("thoughtbox__think", arguments, f"call_turn_{self.turns}")])
        return self.walkthrough(body, index)


def play(orchestrator: ZorkOrchestratorV2) -> GameState:
    try:
        return orchestrator.play_episode()
    finally:
        orchestrator.close()


def test_forty_walkthrough_turns_with_thoughtbox_reach_the_same_score(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    commands = walkthrough(game_file)[:TURNS]

    llm_server.respond_with(WalkthroughModel(commands))
    plain_config = e2e_config(tmp_path / "plain", llm_server.base_url, game_file)
    plain = play(
        ZorkOrchestratorV2(episode_id="plain", config=plain_config, console=False, max_turns_per_episode=TURNS)
    )
    plain_requests = len(llm_server.requests)

    model = ThinkingWalkthroughModel(commands)
    llm_server.respond_with(model)
    config = e2e_config(
        tmp_path / "mcp",
        llm_server.base_url,
        game_file,
        mcp={"enabled": True, "config_file": str(REPO_ROOT / "mcp_config.json")},
    )
    orchestrator = ZorkOrchestratorV2(episode_id="with-mcp", config=config, console=False, max_turns_per_episode=TURNS)
    manager = orchestrator.mcp_manager
    assert manager is not None

    children_before = child_pids()
    spawned_per_turn: list[set[int]] = []
    real_connect, real_process_turn = manager.connect_session, orchestrator._process_turn

    async def recording_connect() -> None:
        before = child_pids()
        try:
            await real_connect()
        finally:
            spawned_per_turn[-1] |= child_pids() - before

    def checked_turn() -> bool:
        spawned_per_turn.append(set())
        outcome = real_process_turn()
        alive = [pid for pid in spawned_per_turn[-1] if pid_alive(pid)]
        assert not alive, f"turn {len(spawned_per_turn)}: server process(es) {alive} outlived the turn"
        assert child_pids() == children_before, f"turn {len(spawned_per_turn)} left a child process"
        return outcome

    manager.connect_session = recording_connect  # type: ignore[method-assign]
    orchestrator._process_turn = checked_turn  # type: ignore[method-assign]
    with async_hygiene() as report:
        state = play(orchestrator)
    assert_clean(report)

    # The same game: thinking changed nothing the engine saw.
    assert plain.end_reason == state.end_reason == "max_turns"
    assert plain.turn_count == state.turn_count == TURNS
    assert state.score == plain.score and state.score > 0
    assert state.current_room_id == plain.current_room_id and sorted(state.inventory) == sorted(plain.inventory)

    # One fresh server per turn, every one of them gone.
    assert len(spawned_per_turn) == TURNS
    assert all(len(pids) == 1 for pids in spawned_per_turn)
    assert len(set().union(*spawned_per_turn)) == TURNS
    assert child_pids() == children_before

    thinking_turns = list(range(THINK_EVERY, TURNS + 1, THINK_EVERY))
    assert model.thinking_turns == thinking_turns
    agent_bodies = [b for b in llm_server.bodies[plain_requests:] if b["model"] == AGENT_MODEL]
    assert len(agent_bodies) == TURNS + len(thinking_turns)
    assert all(b["tools"][0]["function"]["name"] == "thoughtbox__think" for b in agent_bodies)
    answers = [b for b in agent_bodies if any(m["role"] == "tool" for m in b["messages"])]
    assert len(answers) == len(thinking_turns)
    for body in answers:
        (message,) = [m for m in body["messages"] if m["role"] == "tool"]
        assert json.loads(message["content"])["content"]["thoughtHistoryLength"] == 1  # a fresh server each turn

    episode_dir = tmp_path / "mcp" / "game_files" / "episodes" / "with-mcp"
    events = read_events(episode_dir)
    by_type: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_type.setdefault(event["event_type"], []).append(event)
    calls = by_type["mcp_tool_call"]
    assert [(e["turn"], e["tool_name"]) for e in calls] == [(t, "thoughtbox.think") for t in thinking_turns]
    assert all(e["arguments"]["thoughtNumber"] == 1 for e in calls)
    assert [e["turn"] for e in by_type["mcp_tool_result"]] == thinking_turns
    assert not any(e["is_error"] for e in by_type["mcp_tool_result"])
    sessions = by_type["mcp_session_complete"]
    assert [e["turn"] for e in sessions] == list(range(1, TURNS + 1))
    assert [e["tool_calls_count"] for e in sessions] == [1 if t in thinking_turns else 0 for t in range(1, TURNS + 1)]
    assert {tuple(e["tools_used"]) for e in sessions if e["tool_calls_count"]} == {("thoughtbox.think",)}
    turns = by_type["turn"]
    assert [e["action"] for e in turns] == [c.lower() for c in commands]
    assert [e["final_action"] for e in sessions] == [c.lower() for c in commands]
    for absent in ("mcp_tool_error", "mcp_tool_timeout", "mcp_disabled_fallback", "mcp_disabled"):
        assert absent not in by_type, f"unexpected {absent} events: {by_type.get(absent)}"
    exported = json.loads((episode_dir / "current_state.json").read_text())
    assert exported["mcp"] == {"enabled": True, "disabled_after_failures": False}
    human_log = (episode_dir / "episode.log").read_text(encoding="utf-8")
    assert "[INFO] Turn 5 Iteration 1: Agent calling tool thoughtbox.think" in human_log
    assert "[INFO] Turn 5: MCP session complete (2 iterations, 1 tool calls)" in human_log
    assert "[INFO] Turn 6: MCP session complete (1 iterations, 0 tool calls)" in human_log
