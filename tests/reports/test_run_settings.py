"""A run's settings on record: what tells two runs apart, and what makes them measure different things."""

from __future__ import annotations

import copy
from typing import Any

from reports.run_settings import key_settings_lines, not_comparable, settings_differences


def run(**gameplay: Any) -> dict[str, Any]:
    settings = {
        "version": 1,
        "game": {"file": "zork1.z5", "md5": "b732a93a6244ddd92a9b9a3e3a46c687"},
        "models": {"agent": "a/agent", "critic": "a/critic", "extractor": "a/x", "memory": "a/m"},
        "mcp_servers": [
            {"name": "thoughtbox", "transport": "stdio", "command": "python", "args": [], "lifetime": "turn"}
        ],
        "mcp_servers_disabled": [],
        "config": {
            "gameplay": {
                "enable_critic": False,
                "critic_when": "risky",
                "max_turns_per_episode": 80,
                "fair_play": "seen",
            }
            | gameplay,
            "mcp": {"enabled": True},
            "files": {"agent_prompt_file": "prompts/agent.md", "game_workdir": "game_files"},
        },
    }
    return {"settings": settings, "seeds": {"ep1": 12, "ep2": 13}, "differ_between_episodes": []}


def test_a_different_turn_limit_or_story_file_is_not_comparable_and_a_critic_is() -> None:
    assert not_comparable(run(), run(enable_critic=True)) == ""
    assert not_comparable(run(), run(max_turns_per_episode=400)) == "had different turn limits"
    other_game = copy.deepcopy(run())
    other_game["settings"]["game"]["md5"] = "0" * 32
    assert not_comparable(run(), other_game) == "played different story files"
    assert not_comparable(run(), None) == "", "a run written before settings were kept is compared as before"


def test_differences_name_each_setting_and_each_runs_value_but_not_where_files_went() -> None:
    moved = run(enable_critic=True, seed=99)
    moved["settings"]["config"]["files"]["game_workdir"] = "elsewhere"
    assert settings_differences([("a", run()), ("b", moved)]) == ["gameplay.enable_critic: a false, b true"]
    assert settings_differences([("a", run()), ("old", None)]) == [
        "Settings not recorded (written before runs kept them): old"
    ]


def test_the_report_names_the_settings_that_tell_runs_apart() -> None:
    lines = key_settings_lines(run(enable_critic=True, critic_when="always"))
    assert "- LLM critic: on, asked about every proposal" in lines
    assert "- MCP: on: thoughtbox (turn lifetime)" in lines
    assert "- Turns per episode at most: 80" in lines
    # Settings from before the game was recorded name only the file: the game is Zork I, the only one then.
    assert any(
        line.startswith("- Game: Zork I (zork1.z5, md5 b732a93a") and line.endswith("), seeds 12, 13") for line in lines
    )


def test_the_report_names_every_game_of_a_run_over_several() -> None:
    trilogy = run()
    trilogy["games"] = {
        "zork1": {"name": "zork1", "title": "Zork I", "file": "zork1.z5", "md5": "b732"},
        "zork2": {"name": "zork2", "title": "Zork II", "file": "zork2.z5", "md5": "5bcd"},
    }
    assert "- Games: Zork I (zork1.z5, md5 b732), Zork II (zork2.z5, md5 5bcd), seeds 12, 13" in key_settings_lines(
        trilogy
    )
