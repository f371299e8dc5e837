"""The MCP overhead benchmark's verdict: a missed goal is named and makes it exit 1.

The figures themselves depend on the machine, so no test asserts them; what is held here is that
a figure over its goal cannot pass unseen.
"""

from __future__ import annotations

import pytest

from benchmarks.mcp_overhead import Goal, report_goals


def test_a_missed_goal_is_named_and_fails_the_run(capsys: pytest.CaptureFixture[str]) -> None:
    goals = [
        Goal("3 servers / 1 server at startup (cold turn)", 1.36, 1.3),
        Goal("episode lifetime, per turn (1 server)", 2.4, 5, " ms"),
    ]
    assert report_goals(goals) == 1
    captured = capsys.readouterr()
    assert "goals met: 1 of 2" in captured.out
    missed = "3 servers / 1 server at startup (cold turn): 1.36 (goal <= 1.3)"
    assert captured.err == f"mcp_overhead: goal missed: {missed}\n"


def test_goals_met_up_to_their_limit_pass(capsys: pytest.CaptureFixture[str]) -> None:
    assert report_goals([Goal("started ahead, visible per turn (1 server)", 50.0, 50, " ms")]) == 0
    captured = capsys.readouterr()
    assert "goals met: 1 of 1" in captured.out and captured.err == ""
