"""Issue 4 end to end: every manager on (default config), a full walkthrough, cost per turn,
and what carries into the next episode."""

from __future__ import annotations

import json
from pathlib import Path

from orchestration.zork_orchestrator_v2 import ZorkOrchestratorV2
from tests.e2e_support import WalkthroughModel, e2e_config, read_events, walkthrough
from tests.scripted_llm import ScriptedLLMServer

ALL_ON = {
    "memory": {"enabled": True},
    "objectives": {"enabled": True},
    "knowledge": {"enabled": True},
    "extractor": {"llm_enabled": True},
}


def play(config, episode_id: str, turns: int) -> tuple[ZorkOrchestratorV2, object]:
    orchestrator = ZorkOrchestratorV2(episode_id=episode_id, config=config, console=False, max_turns_per_episode=turns)
    try:
        state = orchestrator.play_episode()
    finally:
        orchestrator.close()
    return orchestrator, state


def test_walkthrough_with_all_managers_wins_within_cost_budget(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    commands = walkthrough(game_file)
    model = WalkthroughModel(commands)
    llm_server.respond_with(model)
    config = e2e_config(tmp_path, llm_server.base_url, game_file, **ALL_ON)
    _, state = play(config, "all-managers", len(commands) + 5)

    assert state.victory and (state.score, state.max_score) == (350, 350)
    assert model.agent_calls == len(commands)
    total_calls = len(llm_server.requests)
    calls_per_turn = total_calls / state.turn_count
    assert calls_per_turn <= 1.3, f"{calls_per_turn:.3f} LLM calls per turn"
    assert model.other_calls > 0  # the managers really asked their models

    episode_dir = tmp_path / "game_files" / "episodes" / "all-managers"
    summary = json.loads((episode_dir / "episode_summary.json").read_text())
    assert summary["score"] == 350
    usage_text = json.dumps(summary)
    assert "Agent" in usage_text
    assert (episode_dir / "episode_summary.md").is_file()
    # Every persisted file parses.
    for path in (tmp_path / "game_files").rglob("*.json"):
        json.loads(path.read_text())
    for event in read_events(episode_dir):
        assert "event_type" in event


def test_knowledge_and_memories_reach_the_next_episode(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    llm_server.respond_with(WalkthroughModel(walkthrough(game_file)))
    config = e2e_config(tmp_path, llm_server.base_url, game_file, **ALL_ON)
    workdir = tmp_path / "game_files"
    workdir.mkdir(parents=True)
    (workdir / config.files.knowledge_file).write_text(
        "# Zork knowledge\n\n## Dangers\n- The grue lives in dark rooms: keep the lamp lit.\n"
    )
    play(config, "ep1", 3)
    bodies_before = len(llm_server.bodies)
    play(config, "ep2", 1)
    agent_bodies = [b for b in llm_server.bodies[bodies_before:] if b["model"] == "scripted/agent"]
    system = json.dumps(agent_bodies[0]["messages"][0])
    assert "grue lives in dark rooms" in system
    assert (workdir / config.files.map_file).is_file()
