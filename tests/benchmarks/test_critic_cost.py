"""The critic's cost on the walkthrough: calls and prompt tokens per turn, critic off and on."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.critic_cost import MODES, Cost, goals_missed, replay
from harness.walkthroughs import walkthrough

pytestmark = pytest.mark.e2e

TURNS = 120  # from West of House through the cellar, the troll and the dam: every kind of risky action


def test_the_critic_on_stays_within_its_goals_on_the_walkthrough(game_file: Path) -> None:
    commands = walkthrough(game_file)[:TURNS]
    costs = {mode: replay(game_file, commands, MODES[mode]) for mode in ("off", "on")}
    assert costs["off"].turns == costs["on"].turns == TURNS
    asked = costs["on"].calls_by_role.get("CriticResponse", 0)
    assert 0 < asked < TURNS / 4, f"the critic model was asked {asked} times in {TURNS} turns"
    assert "CriticResponse" not in costs["off"].calls_by_role
    assert goals_missed(costs) == []
    # Its request is the proposal and its facts: a few hundred tokens, not the agent's prompt.
    per_critic_call = costs["on"].prompt_tokens_by_role["CriticResponse"] / asked
    per_agent_call = costs["on"].prompt_tokens_by_role["agent"] / costs["on"].calls_by_role["agent"]
    assert per_critic_call < 400 < per_agent_call


def test_a_missed_goal_is_named() -> None:
    off = Cost(100, {"agent": 100}, {"agent": 100_000})
    costly = Cost(100, {"agent": 100, "CriticResponse": 100}, {"agent": 100_000, "CriticResponse": 90_000})
    assert goals_missed({"off": off, "on": off}) == []
    assert goals_missed({"off": off, "on": costly}) == [
        "critic on: 2.00 LLM calls per turn (goal <= 1.4)",
        "critic on: +90.0% prompt tokens over off (goal <= +25%)",
    ]
