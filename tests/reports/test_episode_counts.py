"""Counting tool calls and critic verdicts from events shaped as the agent and the critic log them,
read back as the product reads them (``parse_event``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reports.episode_counts import (
    DisabledServer,
    ToolTally,
    critic_counts,
    game_seed,
    tool_availability,
    tool_call_counts,
)
from session.episode_events import EpisodeEvent, parse_event


def records(lines: Iterable[dict[str, Any]]) -> list[EpisodeEvent]:
    return [parse_event(line) for line in lines]


def call(turn: int, tool: str, server: str | None) -> dict[str, object]:
    return {"event_type": "mcp_tool_call", "turn": turn, "tool_name": tool, "server_name": server}


def test_every_way_a_call_fails_counts_once_by_server_and_tool() -> None:
    events = [
        call(1, "misc.echo", "misc"),
        {"event_type": "mcp_tool_result", "turn": 1, "tool_name": "misc.echo", "is_error": False, "duration_ms": 2.5},
        call(1, "misc.structured", "misc"),
        {
            "event_type": "mcp_tool_result",
            "turn": 1,
            "tool_name": "misc.structured",
            "is_error": True,
            "duration_ms": 1,
        },
        call(2, "misc.hang", "misc"),
        {"event_type": "mcp_tool_timeout", "turn": 2, "tool_name": "misc.hang", "server_name": "misc"},
        # Arguments the client could not read: no call event, only the error.
        {"event_type": "mcp_tool_error", "turn": 2, "tool_name": "misc.echo", "error": "invalid arguments"},
        call(3, "oracle__predict", None),
        {"event_type": "mcp_tool_error", "turn": 3, "tool_name": "oracle__predict", "server_name": None},
    ]
    counts = tool_call_counts(records(events))
    assert counts.by_server == {
        "misc": {
            "echo": ToolTally(calls=2, failed=1, duration_ms=2.5),
            "hang": ToolTally(calls=1, failed=1),
            "structured": ToolTally(calls=1, failed=1, duration_ms=1.0),
        }
    }
    # The unreadable call is logged without its server: its dotted name says which. The made-up tool is apart.
    assert counts.unknown_tools == {"oracle__predict": ToolTally(1, 1)}
    assert counts.total == ToolTally(calls=5, failed=4, duration_ms=3.5)
    assert counts.as_dict()["by_server"]["misc"]["failed"] == 3


def test_critic_counts_proposals_from_turns_and_rejections_by_cause() -> None:
    events = [
        {"event_type": "critic_rejection", "turn": 1, "source": "object_tree"},
        {"event_type": "turn", "turn": 1, "critic": {"rounds": 1, "overridden": False}},
        {"event_type": "critic_rejection", "turn": 2, "source": "llm"},
        {"event_type": "critic_override", "turn": 2, "source": "llm"},
        {"event_type": "turn", "turn": 2, "critic": {"rounds": 1, "overridden": True}},
        {"event_type": "turn", "turn": 3},  # a log from before the critic's figures
    ]
    counts = critic_counts(records(events))
    assert (counts.proposals, counts.rejected, counts.overrides) == (5, 3, 1)
    assert counts.rejections == {"llm": 2, "object_tree": 1}


def ready(turn: int, servers: list[str], tools: int) -> dict[str, object]:
    return {"event_type": "mcp_turn_ready", "turn": turn, "servers": servers, "tool_count": tools}


def test_tool_availability_says_which_turns_had_tools_and_why_the_others_did_not() -> None:
    """Two servers: ``steady`` throughout, ``flaky`` disabled at turn 2; then ``steady`` offers no tools."""
    connect = {"event_type": "mcp_session_connect", "protocol_version": "2025-11-25"}
    events = [
        {"event_type": "episode_start", "mcp_enabled": True, "game_seed": 7},
        {**connect, "server_name": "steady", "lifetime": "episode"},
        {**connect, "server_name": "flaky", "lifetime": "turn", "protocol_version": "2026-07-28"},
        ready(1, ["steady", "flaky"], 4),
        {"event_type": "turn", "turn": 1},
        {"event_type": "mcp_server_disabled", "turn": 2, "server_name": "flaky", "reason": "start timeout"},
        ready(2, ["steady"], 2),
        {"event_type": "turn", "turn": 2},
        ready(3, [], 0),
        {"event_type": "mcp_no_tools", "turn": 3},
        {"event_type": "turn", "turn": 3},
        {"event_type": "turn", "turn": 4},  # nothing logged about its tools
        ready(5, ["steady"], 2),  # under way: not played yet
    ]
    mcp = tool_availability(records(events))
    assert (mcp.turns, mcp.tool_turns, dict(mcp.server_turns)) == (4, 2, {"flaky": 1, "steady": 2})
    assert dict(mcp.no_tool_turns) == {"no tools offered": 1, "not recorded": 1}
    assert mcp.disabled == (DisabledServer("flaky", 2, "start timeout"),)
    assert mcp.revisions == ("2025-11-25", "2026-07-28")
    assert dict(mcp.lifetimes) == {"flaky": "turn", "steady": "episode"}
    assert not mcp.held
    assert mcp.describe() == (
        "MCP on: tools in 2 of 4 turns (without: no tools offered 1, not recorded 1); "
        "flaky disabled at turn 2 (start timeout)"
    )
    assert game_seed(records(events)) == 7


def test_mcp_off_holds_and_an_old_log_has_no_seed() -> None:
    events = [{"event_type": "episode_start", "mcp_enabled": False}, {"event_type": "turn", "turn": 1}]
    mcp = tool_availability(records(events))
    assert mcp.held and mcp.describe() == "MCP off" and (mcp.tool_turns, dict(mcp.no_tool_turns)) == (0, {})
    assert game_seed(records(events)) is None
    every_turn = [
        {"event_type": "episode_start", "mcp_enabled": True},
        ready(1, ["s"], 1),
        {"event_type": "turn", "turn": 1},
    ]
    assert tool_availability(records(every_turn)).held
    assert tool_availability(records(every_turn)).describe() == "MCP on: tools in 1 of 1 turns"
