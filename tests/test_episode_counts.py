"""Counting tool calls and critic verdicts from events shaped as the agent and the critic log them."""

from __future__ import annotations

from managers.episode_counts import ToolTally, critic_counts, tool_call_counts


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
    counts = tool_call_counts(events)
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
    counts = critic_counts(events)
    assert (counts.proposals, counts.rejected, counts.overrides) == (5, 3, 1)
    assert counts.rejections == {"llm": 2, "object_tree": 1}
