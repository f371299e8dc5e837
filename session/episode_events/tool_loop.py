"""The tool loop of a turn: its start, each model call, each tool call and result, its end.

Every line of the loop names its episode and turn; those about one call also name the tool, its
server and the iteration (the model call) it came in. The keys are the file's: ``iteration`` is
where a line has it, ``iterations`` a count.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from session.episode_events.base import OMITTED_WHEN_NONE, EpisodeEvent, record
from session.events import Event


@record
class ToolLoopEvent(EpisodeEvent):
    """A line of one turn's tool loop."""

    episode_id: str
    turn: int


@record
class MCPToolLoopStart(ToolLoopEvent):
    """The tool loop of a turn starts."""

    EVENT = Event.MCP_TOOL_LOOP_START

    max_iterations: int


@record
class MCPIterationStart(ToolLoopEvent):
    """One model call of the loop."""

    EVENT = Event.MCP_ITERATION_START

    iteration: int
    max_iterations: int


@record
class MCPToolCallsCapped(ToolLoopEvent):
    """A reply asked for more calls than ``max_tool_calls_per_reply``: the first that many run."""

    EVENT = Event.MCP_TOOL_CALLS_CAPPED

    requested: int
    max_tool_calls_per_reply: int
    iteration: int


@record
class MCPToolCallsConcurrent(ToolLoopEvent):
    """A reply's read-only calls, run at once."""

    EVENT = Event.MCP_TOOL_CALLS_CONCURRENT

    iteration: int
    tool_names: list[str]


@record
class ToolCallEvent(ToolLoopEvent):
    """Something that happened to one tool call: the tool (dotted name) and its server."""

    tool_name: str
    server_name: str | None  # None: no server offers a tool of that name, or the call reached none
    iteration: int


@record
class MCPToolCall(ToolCallEvent):
    """The model calls a tool: its arguments, or their JSON cut when longer than the log keeps."""

    EVENT = Event.MCP_TOOL_CALL

    arguments: dict[str, Any] | str


@record
class MCPToolResult(ToolCallEvent):
    """A tool's answer, as the model saw it (shortened); ``is_error``: the tool said it failed."""

    EVENT = Event.MCP_TOOL_RESULT

    result_type: str
    result_length: int
    result: str | None = None  # None: a log from before the answer was kept
    is_error: bool
    duration_ms: float


@record
class MCPToolTimeout(ToolCallEvent):
    """A tool call ran out of time."""

    EVENT = Event.MCP_TOOL_TIMEOUT

    timeout_seconds: float


@record
class MCPToolError(ToolCallEvent):
    """A tool call failed, or was refused (``refused``: why, e.g. "destructive"; the key is written only then)."""

    EVENT = Event.MCP_TOOL_ERROR

    error: str
    # A failed call's line has no ``refused`` key: readers (and users' scripts) tell refusals by it.
    refused: str | None = field(default=None, metadata=OMITTED_WHEN_NONE)


@record
class MCPBatchAborted(ToolLoopEvent):
    """The rest of a reply's calls skipped after ``tool_name`` timed out."""

    EVENT = Event.MCP_BATCH_ABORTED

    tool_name: str
    skipped: int
    iteration: int


@record
class MCPTurnBudgetExhausted(ToolLoopEvent):
    """The turn's time spent: the final action asked for."""

    EVENT = Event.MCP_TURN_BUDGET_EXHAUSTED

    turn_timeout_seconds: float
    iterations: int
    tool_calls_count: int


@record
class MCPUnexpectedState(ToolLoopEvent):
    """A reply with neither text nor tool calls."""

    EVENT = Event.MCP_UNEXPECTED_STATE

    finish_reason: str | None
    iteration: int


@record
class MCPUnreadableAnswer(ToolLoopEvent):
    """A prose answer that is not a readable action (cut): asked for again without tools."""

    EVENT = Event.MCP_UNREADABLE_ANSWER

    iteration: int
    raw_response: str


@record
class MCPToolChoiceNotOffered(ToolLoopEvent):
    """The ``tool_choice`` setting names a tool not offered this turn."""

    EVENT = Event.MCP_TOOL_CHOICE_NOT_OFFERED

    tool_choice: str


@record
class MCPNoContent(ToolLoopEvent):
    """No answer after the iterations: the final call forced."""

    EVENT = Event.MCP_NO_CONTENT

    iterations: int


@record
class MCPToolLoopComplete(ToolLoopEvent):
    """The tool loop ended: what it did and the action it produced."""

    EVENT = Event.MCP_TOOL_LOOP_COMPLETE

    iterations: int
    tool_calls_count: int
    tools_used: list[str]
    forced_final: bool
    turn_budget_exhausted: bool
    final_action: str


@record
class MCPAgentAction(ToolLoopEvent):
    """The action the tool loop produced."""

    EVENT = Event.MCP_AGENT_ACTION

    action: str
