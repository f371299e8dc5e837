"""Zork II and Zork III won through ``main.py`` as a user runs it (``--game zork2``), MCP off and on.

The scripted model plays Jericho's walkthrough of each game, with the game's own seed (the one the
walkthrough wins with), as Zork I's are played in test_learning_e2e.py (MCP off) and test_mcp_e2e.py
(MCP on). ZorkGPT plays one command per turn, and a few steps of these walkthroughs chain two
("REMOVE OPENER AND DROP IT"): the model plays each step's commands as the game's parser reads them,
one a turn. The story file is configured as Zork I's, as a user's would be: ``--game`` finds the other
games beside it. The cheapest settings that still run the real path: the learning managers off (only
the agent's calls reach the scripted server) and the idle rule off (the walkthroughs wait where the
game needs it); with MCP on the shipped thoughtbox keeps one session for the episode and the model
thinks every 25th turn.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from game_interface.commands import CommandReader
from game_interface.games import ZORK2, ZORK3, Game
from game_interface.story_data import StoryData
from harness.scripted_llm import ScriptedLLMServer
from harness.walkthroughs import THINK_ARGS, ThinkingWalkthroughModel, WalkthroughModel, read_events, walkthrough
from session.episode_folder import EpisodeFolder
from tests.main_support import NO_LEARNING, REPO, run_main, scripted_env
from tests.mcp_test_servers.helpers import thoughtbox_entry, write_mcp_config
from tests.trilogy_support import story_file_of
from zork_agent import clean_action

pytestmark = pytest.mark.e2e

THINK_EVERY = 25


def walkthrough_commands(story: Path) -> list[str]:
    """The walkthrough's steps as the commands the game plays one after another."""
    reader = CommandReader(StoryData(story.read_bytes()))
    return [command for step in walkthrough(story) for command in reader.commands(step)]


def _runs() -> list[object]:
    return [
        pytest.param(game, mcp, id=f"{game.name}-{'mcp_on' if mcp else 'mcp_off'}")
        for game in (ZORK2, ZORK3)
        for mcp in (False, True)
    ]


@pytest.mark.parametrize(("game", "mcp"), _runs())
def test_the_walkthrough_through_main_wins_the_game(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, game: Game, mcp: bool
) -> None:
    commands = walkthrough_commands(story_file_of(game, game_file))
    model: WalkthroughModel | ThinkingWalkthroughModel
    settings = {**NO_LEARNING, "ZORKGPT_GAMEPLAY_STUCK_LIMIT_TURNS": "0"}
    if mcp:
        model = ThinkingWalkthroughModel(commands, every=THINK_EVERY, rotation=[("thoughtbox__think", THINK_ARGS)])
        mcp_file = write_mcp_config(tmp_path / "mcp-config", {"thoughtbox": thoughtbox_entry()})
        settings |= {
            "ZORKGPT_MCP_ENABLED": "true",
            "ZORKGPT_MCP_CONFIG_FILE": str(mcp_file),
            "ZORKGPT_MCP_SESSION_LIFETIME": "episode",
        }
    else:
        model = WalkthroughModel(commands)
        settings["ZORKGPT_MCP_ENABLED"] = "false"
    llm_server.respond_with(model)
    env = scripted_env(llm_server, tmp_path, game_file, **settings)
    args = ["--game", game.name, "--max-turns", str(len(commands) + 5), "--config", str(REPO / "pyproject.toml")]
    done = run_main(args, env, tmp_path, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]

    (episode,) = [p.parent for p in (tmp_path / "runs").rglob(EpisodeFolder.LOG)]
    events = read_events(episode)
    start = next(e for e in events if e["event_type"] == "episode_start")
    assert start["game_seed"] == game.seed
    turns = [e for e in events if e["event_type"] == "turn"]
    assert [e["action"] for e in turns] == [clean_action(c) for c in commands]  # each played, none refused
    assert turns[-1]["score"] == game.max_score
    assert f"score {game.max_score}/{game.max_score} in {len(commands)} turns" in done.stderr
    assert "victory" in done.stderr.lower()
    if mcp:
        results = [e for e in events if e["event_type"] == "mcp_tool_result"]
        assert len(results) == len(model.thinking_turns) >= len(commands) // THINK_EVERY
        assert not any(e.get("is_error") for e in results)
