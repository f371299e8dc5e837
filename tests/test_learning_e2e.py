"""Issue 4 end to end: every manager on (default config), a full walkthrough, cost per turn,
and what carries into the next episode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.config import scripted_config
from harness.learning import LEARNED, REMEMBERED, LearningModel
from harness.scripted_llm import ScriptedLLMServer
from harness.walkthroughs import AGENT_MODEL, WalkthroughModel, read_events, walkthrough
from orchestration.episode_runner import EpisodeRunner
from session.episode_folder import EpisodeFolder, episodes_dir
from session.game_configuration import GameConfiguration
from session.game_state import GameState
from session.redaction import Redactor

pytestmark = pytest.mark.e2e

HAND_WRITTEN = "The grue lives in dark rooms: keep the lamp lit."


def default_config(tmp_path: Path, base_url: str, game_file: Path) -> GameConfiguration:
    """The product's defaults (every learning manager on, LLM critic off) with only what a test
    must set: the scripted endpoint and models, the story file, fast retries, tmp_path files."""
    return scripted_config(
        tmp_path,
        base_url,
        environ={"OPENROUTER_API_KEY": "test-key-123456"},
        retry={"max_retries": 1, "request_timeout": 10.0},
        files={"game_file": str(game_file)},
    )


def play(config: GameConfiguration, episode_id: str, turns: int) -> tuple[EpisodeRunner, GameState]:
    orchestrator = EpisodeRunner(
        episode_id=episode_id, config=config, console=False, max_turns_per_episode=turns, redactor=Redactor()
    )
    try:
        state = orchestrator.play_episode()
    finally:
        orchestrator.close()
    return orchestrator, state


def test_walkthrough_with_default_config_wins_within_cost_budget(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    commands = walkthrough(game_file)
    model = WalkthroughModel(commands)
    llm_server.respond_with(model)
    config = default_config(tmp_path, llm_server.base_url, game_file)
    # The figure is only meaningful if the defaults really run every learning manager.
    assert config.memory.enabled and config.objectives.enabled and config.knowledge.enabled
    assert config.extractor.llm_enabled
    _, state = play(config, "all-managers", len(commands) + 5)

    assert state.victory and (state.score, state.max_score) == (350, 350)
    assert model.agent_calls == len(commands)
    total_calls = len(llm_server.requests)
    calls_per_turn = total_calls / state.turn_count
    assert calls_per_turn <= 1.3, f"{calls_per_turn:.3f} LLM calls per turn"
    manager_models = {body["model"] for body in llm_server.bodies} - {AGENT_MODEL}
    assert manager_models, "the managers never asked their models"

    episode_dir = episodes_dir(tmp_path / "game_files") / "all-managers"
    summary = json.loads(EpisodeFolder(episode_dir).summary.read_text())
    assert summary["score"] == 350
    usage_text = json.dumps(summary)
    assert "Agent" in usage_text
    assert EpisodeFolder(episode_dir).summary_md.is_file()
    # Every persisted file parses.
    for path in (tmp_path / "game_files").rglob("*.json"):
        json.loads(path.read_text())
    for event in read_events(episode_dir):
        assert "event_type" in event


def test_knowledge_and_memories_reach_the_next_episode(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    model = LearningModel(walkthrough(game_file))
    llm_server.respond_with(model)
    config = default_config(tmp_path, llm_server.base_url, game_file)
    workdir = tmp_path / "game_files"
    workdir.mkdir(parents=True)
    (workdir / config.files.knowledge_file).write_text(f"# Zork knowledge\n\n## Dangers\n- {HAND_WRITTEN}\n")

    # N, N, U, Get egg: a first visit to North of House (a memory, filed there) and 5 points (knowledge).
    _, first = play(config, "ep1", 4)
    assert first.score == 5
    assert model.calls["MemoryBatchReply"] >= 1 and model.calls["KnowledgeUpdate"] >= 1
    assert REMEMBERED in (workdir / config.files.memories_file).read_text(encoding="utf-8")

    bodies_before = len(llm_server.bodies)
    model.agent_calls = 0  # episode 2 plays the walkthrough from its start: N, N
    play(config, "ep2", 2)
    agent_bodies = [b for b in llm_server.bodies[bodies_before:] if b["model"] == AGENT_MODEL]
    system = json.dumps(agent_bodies[0]["messages"][0])
    assert HAND_WRITTEN in system
    assert LEARNED in system
    # Episode 2 starts at West of House again and goes north: the memory waits where it applies.
    assert REMEMBERED not in json.dumps(agent_bodies[0]["messages"])
    at_north = [b for b in agent_bodies if "Location: North of House" in json.dumps(b["messages"])]
    assert at_north and REMEMBERED in json.dumps(at_north[0]["messages"])
    assert (workdir / config.files.map_file).is_file()
