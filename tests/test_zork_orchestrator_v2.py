"""End-to-end: the full orchestrator plays real Zork I through real HTTP and real Jericho."""

from __future__ import annotations

import json
from pathlib import Path

from orchestration.zork_orchestrator_v2 import ZorkOrchestratorV2
from tests.e2e_support import WalkthroughModel, e2e_config, read_events, walkthrough
from tests.scripted_llm import ScriptedLLMServer, agent_reply


def test_walkthrough_episode_wins_with_full_score(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    commands = walkthrough(game_file)
    model = WalkthroughModel(commands)
    llm_server.respond_with(model)
    config = e2e_config(tmp_path, llm_server.base_url, game_file)
    orchestrator = ZorkOrchestratorV2(
        episode_id="e2e-walkthrough", config=config, console=False, max_turns_per_episode=len(commands) + 5
    )
    try:
        state = orchestrator.play_episode()
    finally:
        orchestrator.close()

    assert state.victory and state.end_reason == "victory"
    assert (state.score, state.max_score) == (350, 350)
    assert state.turn_count == len(commands) == model.agent_calls
    # Every agent request went over HTTP with the JSON-schema response format.
    agent_bodies = [b for b in llm_server.bodies if b["model"] == "scripted/agent"]
    assert len(agent_bodies) == len(commands)
    assert agent_bodies[0]["response_format"]["json_schema"]["name"] == "AgentResponse"

    episode_dir = tmp_path / "game_files" / "episodes" / "e2e-walkthrough"
    events = read_events(episode_dir)
    kinds = [e["event_type"] for e in events]
    assert kinds[0] == "episode_start" and kinds[-1] == "episode_end"
    turns = [e for e in events if e["event_type"] == "turn"]
    assert [t["turn"] for t in turns] == list(range(1, len(commands) + 1))
    assert [t["action"] for t in turns] == [c.lower() for c in commands]
    assert turns[-1]["score"] == 350
    assert events[-1]["end_reason"] == "victory"

    exported = json.loads((episode_dir / "current_state.json").read_text())
    assert exported["score"] == 350 and exported["victory"] is True
    assert exported["turn_count"] == len(commands)
    human_log = (episode_dir / "episode.log").read_text()
    assert "Turn 1 | Score 0/350 | North of House" in human_log


def test_context_reaches_the_model(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    llm_server.script(agent_reply("open mailbox"), agent_reply("take leaflet"))
    config = e2e_config(tmp_path, llm_server.base_url, game_file)
    orchestrator = ZorkOrchestratorV2(episode_id="ctx", config=config, console=False, max_turns_per_episode=2)
    try:
        state = orchestrator.play_episode()
    finally:
        orchestrator.close()
    assert state.end_reason == "max_turns"
    assert "leaflet" in state.inventory
    first_user = llm_server.bodies[0]["messages"][-1]
    second_user = llm_server.bodies[1]["messages"][-1]
    text = lambda m: m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]  # noqa: E731
    assert "West of House" in text(first_user)
    assert "Valid exits:" in text(first_user) and "north" in text(first_user)
    assert "> open mailbox" in text(second_user)
    assert "leaflet" in text(second_user).lower()


def test_stop_request_ends_after_current_turn(llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path) -> None:
    llm_server.respond_with(lambda body, i: agent_reply("look"))
    config = e2e_config(tmp_path, llm_server.base_url, game_file)
    orchestrator = ZorkOrchestratorV2(episode_id="stop", config=config, console=False, max_turns_per_episode=50)
    original = orchestrator._process_turn

    def process_and_stop() -> bool:
        outcome = original()
        if orchestrator.game_state.turn_count == 3:
            orchestrator.stop_requested = True
        return outcome

    orchestrator._process_turn = process_and_stop  # type: ignore[method-assign]
    try:
        state = orchestrator.play_episode()
    finally:
        orchestrator.close()
    assert state.turn_count == 3 and state.end_reason == "stopped_by_user"
    events = read_events(tmp_path / "game_files" / "episodes" / "stop")
    assert events[-1]["event_type"] == "episode_end" and events[-1]["end_reason"] == "stopped_by_user"
