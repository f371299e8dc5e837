"""A benchmark whose figure is a goal exits 1 when it misses, naming the miss and the machine's load.

The figures here are given (the harness's walkthrough is not played): what is tested is the verdict
on them, which once printed a median of 14.1 ms per turn against a goal of 10 and exited 0."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import harness_turn_cost
from session.game_state import GameState


def _played(ms_per_turn: float, episode_seconds: float) -> Any:
    def play(game_file: Path, commands: list[str], all_managers: bool, trace_memory: bool) -> dict[str, Any]:
        state = GameState(turn_count=396, score=350, max_score=350, end_reason="victory")
        return {
            "state": state,
            "per_turn": [ms_per_turn] * 396,
            "episode_seconds": episode_seconds + 1.0,
            "llm_seconds": 1.0,
            "peak": 0,
        }

    return play


@pytest.mark.parametrize(
    ("ms_per_turn", "episode_seconds", "code", "missed"),
    [
        (3.9, 1.6, 0, []),
        (14.1, 5.8, 1, ["median ms per turn: 14.1 (goal <= 10)", "seconds for the 396-turn episode: 5.8 (goal <= 5)"]),
    ],
)
def test_the_harness_benchmark_exits_1_naming_each_goal_missed(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    ms_per_turn: float,
    episode_seconds: float,
    code: int,
    missed: list[str],
) -> None:
    monkeypatch.setattr(harness_turn_cost, "play_walkthrough", _played(ms_per_turn, episode_seconds))
    monkeypatch.setattr(harness_turn_cost, "resolve_story_file", lambda *args, **kwargs: Path("zork1.z5"))
    monkeypatch.setattr(harness_turn_cost, "walkthrough", lambda game_file: ["look"])
    monkeypatch.setattr(sys, "argv", ["harness_turn_cost.py"])
    assert harness_turn_cost.main() == code
    out, err = capsys.readouterr()
    assert '"load_average_1min":' in out
    assert [line.split(", at load")[0] for line in err.splitlines()] == [f"goal missed: {m}" for m in missed]
