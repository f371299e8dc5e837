"""Issue 4 end to end: every manager on (default config), a full walkthrough, cost per turn,
and what carries into the next episode; and what carries into another game (only the general
lessons) with real files and real Zork I and Zork II."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from game_interface.games import ZORK2
from harness.config import scripted_config
from harness.learning import GENERAL, LEARNED, REMEMBERED, LearningModel
from harness.managers import schema_name
from harness.scripted_llm import ScriptedLLMServer, completion
from harness.walkthroughs import AGENT_MODEL, WalkthroughModel, read_events, walkthrough
from orchestration.episode_runner import EpisodeRunner
from session.episode_folder import EpisodeFolder, episodes_dir
from session.game_configuration import GameConfiguration
from session.game_state import GameState
from session.redaction import Redactor
from tests.main_support import REPO, run_main, scripted_env

pytestmark = pytest.mark.e2e

HAND_WRITTEN = "The grue lives in dark rooms: keep the lamp lit."


def default_config(
    tmp_path: Path, base_url: str, game_file: Path, game: str | None = None, **sections: dict[str, Any]
) -> GameConfiguration:
    """The product's defaults (every learning manager on, LLM critic off) with only what a test
    must set: the scripted endpoint and models, the story file, fast retries, tmp_path files.
    ``game``: another game than ``game_file``'s, whose story file lies beside it; ``sections``
    override more."""
    return scripted_config(
        tmp_path,
        base_url,
        environ={"OPENROUTER_API_KEY": "test-key-123456"},
        retry={"max_retries": 1, "request_timeout": 10.0},
        files={"game_file": str(game_file), **({"game": game} if game else {})},
        **sections,
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
    """The whole walkthrough through the orchestrator, real HTTP and real Jericho, every learning manager
    on: the game is won turn by turn as the episode's files tell it, within the calls budget. (One game
    serves both: a second replay with the managers off checked nothing this one does not.)"""
    commands = walkthrough(game_file)
    model = WalkthroughModel(commands)
    llm_server.respond_with(model)
    config = default_config(tmp_path, llm_server.base_url, game_file)
    # The figure is only meaningful if the defaults really run every learning manager.
    assert config.memory.enabled and config.objectives.enabled and config.knowledge.enabled
    assert config.extractor.llm_enabled
    _, state = play(config, "all-managers", len(commands) + 5)

    assert state.victory and state.end_reason == "victory"
    assert (state.score, state.max_score) == (350, 350)
    assert state.turn_count == len(commands) == model.agent_calls
    # Every agent request went over HTTP with the JSON-schema response format.
    agent_bodies = [b for b in llm_server.bodies if b["model"] == AGENT_MODEL]
    assert len(agent_bodies) == len(commands)
    assert agent_bodies[0]["response_format"]["json_schema"]["name"] == "AgentResponse"
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
    events = read_events(episode_dir)
    for event in events:
        assert "event_type" in event
    # The episode's log, state and human log tell the whole game, turn by turn.
    kinds = [e["event_type"] for e in events]
    assert kinds[0] == "episode_start" and kinds[-1] == "episode_end"
    turns = [e for e in events if e["event_type"] == "turn"]
    assert [t["turn"] for t in turns] == list(range(1, len(commands) + 1))
    assert [t["action"] for t in turns] == [c.lower() for c in commands]
    assert turns[-1]["score"] == 350
    assert events[-1]["end_reason"] == "victory"
    exported = json.loads(EpisodeFolder(episode_dir).state.read_text())
    assert exported["score"] == 350 and exported["victory"] is True
    assert exported["turn_count"] == len(commands)
    assert "Turn 1 | Score 0/350 | North of House" in EpisodeFolder(episode_dir).human_log.read_text()


def test_knowledge_and_memories_reach_the_next_episode(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    model = LearningModel(walkthrough(game_file))
    llm_server.respond_with(model)
    config = default_config(tmp_path, llm_server.base_url, game_file)
    workdir = tmp_path / "game_files"
    workdir.mkdir(parents=True)
    # Where the knowledge base was before each game had a folder of its own: it was Zork I's.
    (workdir / config.files.knowledge_file).write_text(f"# Zork knowledge\n\n## Dangers\n- {HAND_WRITTEN}\n")

    # N, N, U, Get egg: a first visit to North of House (a memory, filed there) and 5 points (knowledge).
    _, first = play(config, "ep1", 4)
    assert first.score == 5
    assert model.calls["MemoryBatchReply"] >= 1 and model.calls["KnowledgeUpdate"] >= 1
    zork1 = workdir / "zork1"
    assert not (workdir / config.files.knowledge_file).exists(), "the earlier file moved into Zork I's folder"
    assert HAND_WRITTEN in (zork1 / config.files.knowledge_file).read_text(encoding="utf-8")
    assert REMEMBERED in (zork1 / config.files.memories_file).read_text(encoding="utf-8")

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
    assert (zork1 / config.files.map_file).is_file()


# What only Zork I shows: its title, its treasures' case, its mailbox; "Zork I" not followed by another "I".
ZORK1_WORDS = re.compile(r"\bZork I\b(?!I)|trophy|treasure|mailbox", re.IGNORECASE)


def text_of(content: str | list[dict[str, Any]]) -> str:
    """A message's text, whether sent as a string or as parts (with a provider's caching markers)."""
    return content if isinstance(content, str) else "".join(part.get("text", "") for part in content)


class ApprovingLearningModel(LearningModel):
    """``LearningModel`` whose critic approves every proposal, so each turn plays the next command."""

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        if body.get("response_format") and schema_name(body) == "CriticResponse":
            return completion(json.dumps({"score": 0.5, "justification": "Worth a try."}))
        return super().__call__(body, index)


def test_another_game_sees_none_of_zork1s_lessons_and_every_game_the_general_ones(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """Zork I teaches a lesson about itself and one about text adventures; Zork II, played next by
    main.py in the same workdir, is told the general one and nothing of Zork I, in its agent's and
    its helpers' instructions alike; Zork I, played again, still has both."""
    zork2_file = game_file.parent / "zork2.z5"
    if not zork2_file.is_file():
        pytest.skip(f"no Zork II story file beside {game_file}")
    model = ApprovingLearningModel(walkthrough(game_file))
    llm_server.respond_with(model)
    workdir = tmp_path / "game_files"
    zork1_config = default_config(tmp_path, llm_server.base_url, game_file)
    play(zork1_config, "zork1-ep", 4)
    assert LEARNED in (workdir / "zork1" / "knowledgebase.md").read_text(encoding="utf-8")
    assert GENERAL in (workdir / "general_knowledge.md").read_text(encoding="utf-8")
    assert GENERAL not in (workdir / "zork1" / "knowledgebase.md").read_text(encoding="utf-8")

    before = len(llm_server.bodies)
    model.commands, model.agent_calls = walkthrough(zork2_file), 0
    # Every helper asked every turn, and the critic model about every proposal: each one's instructions are read.
    every_turn = {
        "ZORKGPT_FILES_GAME_WORKDIR": str(workdir),
        "ZORKGPT_MEMORY_MIN_TURNS_BETWEEN_CALLS": "1",
        "ZORKGPT_KNOWLEDGE_UPDATE_INTERVAL_TURNS": "1",
        "ZORKGPT_OBJECTIVES_DISCOVERY_INTERVAL_TURNS": "1",
        "ZORKGPT_GAMEPLAY_ENABLE_CRITIC": "true",
        "ZORKGPT_GAMEPLAY_CRITIC_WHEN": "always",
    }
    # Its own process, as a user plays another game: a run plays one game.
    proc = run_main(
        ["--game", "zork2", "--max-turns", "3", "--config", str(REPO / "pyproject.toml")],
        scripted_env(llm_server, tmp_path, game_file, **every_turn),
        cwd=tmp_path,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    bodies = llm_server.bodies[before:]
    asked = {schema_name(b) for b in bodies if b.get("response_format")} - {"AgentResponse"}
    assert {"KnowledgeUpdate", "ObjectiveReview", "CriticResponse", "MemoryBatchReply"} <= asked, asked
    agent = [b for b in bodies if b["model"] == AGENT_MODEL]
    assert "Inside the Barrow" in json.dumps(agent[0]["messages"])  # Zork II's first room
    system = text_of(agent[0]["messages"][0]["content"])
    assert "The game is Zork II. Its score goes up to 400" in system
    assert GENERAL in system
    assert LEARNED not in system and HAND_WRITTEN not in system
    # No instruction to any model of this game names Zork I or what only Zork I has: treasures come
    # only from Zork II's own briefing (its score counts them too).
    instructions = [
        text_of(message["content"]).replace(ZORK2.briefing, "")
        for body in bodies
        for message in body["messages"]
        if message["role"] == "system"
    ]
    leaks = [found.group(0) for text in instructions if (found := ZORK1_WORDS.search(text))]
    assert instructions and not leaks, leaks
    # What Zork II learns stays in its own folder: Zork I's files are as Zork I left them.
    assert "Inside the Barrow" in (workdir / "zork2" / "map_state.json").read_text(encoding="utf-8")
    assert "Inside the Barrow" not in (workdir / "zork1" / "map_state.json").read_text(encoding="utf-8")
    assert LEARNED in (workdir / "zork2" / "knowledgebase.md").read_text(encoding="utf-8")  # the script's lesson

    before = len(llm_server.bodies)
    model.commands, model.agent_calls = walkthrough(game_file), 0
    play(zork1_config, "zork1-again", 1)
    system = text_of(next(b for b in llm_server.bodies[before:] if b["model"] == AGENT_MODEL)["messages"][0]["content"])
    assert LEARNED in system and GENERAL in system and "The game is Zork I." in system
