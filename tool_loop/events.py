"""What the tool loop reports: each step as a frozen event, and how it reads in the episode log.

The loop (``tool_loop.loop``) hands each step to a ``ToolLoopEvents``, a one-method protocol:
``emit(event)``, where the event is one of the frozen dataclasses below (a tool called, a result,
a timeout...), each carrying the turn and iteration it happened in. ``ToolLoopLog`` is the
implementation an episode uses: it writes every event to the episode's logger, in the message,
level and record (``session.episode_events.tool_loop``) the episode log, the run report and the
web viewer read; each event says how it reads there (``log_lines``). A test may hand the loop any
other ``emit``.
Keeping this here leaves the loop's code about the loop.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from session.episode_events import EpisodeEvent, emit
from session.episode_events.tool_loop import (
    MCPAgentAction,
    MCPBatchAborted,
    MCPIterationStart,
    MCPNoContent,
    MCPToolCall,
    MCPToolCallsCapped,
    MCPToolCallsConcurrent,
    MCPToolChoiceNotOffered,
    MCPToolError,
    MCPToolLoopComplete,
    MCPToolLoopStart,
    MCPToolResult,
    MCPToolTimeout,
    MCPTurnBudgetExhausted,
    MCPUnexpectedState,
    MCPUnreadableAnswer,
)
from session.errors import MCPToolCallError
from session.game_state import ToolCallRecord
from shared_utils.text import cap_text, shorten
from shared_utils.toolset import ToolCallResult, ToolInfo

TOOL_RESULT_LOG_CHARS = 2000  # enough to read a tool's answer in the log; a huge one is cut
# How much of a tool call's arguments the log keeps (the server still gets them whole).
MAX_LOGGED_TOOL_ARGUMENTS_CHARS = 2_000


def logged_arguments(raw: str) -> str:
    """A tool call's arguments' JSON as the log keeps it: cut, with a marker, past the limit."""
    return cap_text(raw, MAX_LOGGED_TOOL_ARGUMENTS_CHARS)


@dataclass
class ToolLoopStats:
    """What one turn's tool loop did so far (the decision keeps the calls, the trace the rest)."""

    turn: int = 0
    iterations: int = 0
    calls: list[ToolCallRecord] = field(default_factory=list)
    forced_final: bool = False
    budget_exhausted: bool = False
    deadline: float = math.inf  # time.monotonic() when the turn budget is spent

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    @property
    def tool_calls(self) -> int:
        return len(self.calls)

    @property
    def tools_used(self) -> list[str]:
        return sorted({call.tool for call in self.calls})


@dataclass(frozen=True)
class LogLine:
    """One log record: ``message % args`` at ``level``; an event of the episode log when it has a
    ``record``, else a plain line."""

    level: int
    record: EpisodeEvent | None
    message: str
    args: tuple[Any, ...] = ()
    exc_info: bool = False


@dataclass(frozen=True)
class LoopEvent:
    """Something the tool loop did in ``turn``, during iteration ``iteration`` (0: before the first)."""

    turn: int
    iteration: int

    def log_lines(self, episode_id: str) -> tuple[LogLine, ...]:
        """How the event reads in the log of episode ``episode_id``: most events as one line (``log_line``)."""
        return (self.log_line(episode_id),)

    def log_line(self, episode_id: str) -> LogLine:
        raise NotImplementedError(type(self).__name__)

    def _line(self, level: int, record: EpisodeEvent, message: str, *args: Any, exc_info: bool = False) -> LogLine:
        return LogLine(level, record, message, args, exc_info)

    def _ids(self, episode_id: str) -> dict[str, Any]:
        """What every record of the loop names: the episode and the turn."""
        return {"episode_id": episode_id, "turn": self.turn}


@dataclass(frozen=True)
class LoopStarted(LoopEvent):
    max_iterations: int

    def log_line(self, episode_id: str) -> LogLine:
        return self._line(
            logging.INFO,
            MCPToolLoopStart(**self._ids(episode_id), max_iterations=self.max_iterations),
            "Turn %s: tool loop started (max %s iterations)",
            self.turn,
            self.max_iterations,
        )


@dataclass(frozen=True)
class IterationStarted(LoopEvent):
    max_iterations: int

    def log_line(self, episode_id: str) -> LogLine:
        return self._line(
            logging.DEBUG,
            MCPIterationStart(**self._ids(episode_id), iteration=self.iteration, max_iterations=self.max_iterations),
            "Turn %s: tool-calling iteration %s/%s",
            self.turn,
            self.iteration,
            self.max_iterations,
        )


@dataclass(frozen=True)
class CallsCapped(LoopEvent):
    """A reply asked for more tool calls than ``max_tool_calls_per_reply``."""

    requested: int
    cap: int

    def log_line(self, episode_id: str) -> LogLine:
        record = MCPToolCallsCapped(
            **self._ids(episode_id),
            requested=self.requested,
            max_tool_calls_per_reply=self.cap,
            iteration=self.iteration,
        )
        return self._line(
            logging.WARNING,
            record,
            "Turn %s Iteration %s: the model asked for %s tool calls in one reply; running the first %s "
            "([tool.zorkgpt.mcp] max_tool_calls_per_reply)",
            self.turn,
            self.iteration,
            self.requested,
            self.cap,
        )


@dataclass(frozen=True)
class CallsAtOnce(LoopEvent):
    """A reply's read-only calls, started together."""

    tools: tuple[str, ...]

    def log_line(self, episode_id: str) -> LogLine:
        return self._line(
            logging.DEBUG,
            MCPToolCallsConcurrent(**self._ids(episode_id), iteration=self.iteration, tool_names=list(self.tools)),
            "Turn %s Iteration %s: %s read-only tool calls run at once",
            self.turn,
            self.iteration,
            len(self.tools),
        )


@dataclass(frozen=True)
class ToolEvent(LoopEvent):
    """Something that happened to one tool call."""

    tool: ToolInfo

    def _call(self, episode_id: str, **instead: Any) -> dict[str, Any]:
        """What every record about the call names: the episode, turn, tool, its server and the iteration
        (``instead``: one of them that differs, such as the server)."""
        return {
            **self._ids(episode_id),
            "tool_name": self.tool.name,
            "server_name": self.tool.server,
            "iteration": self.iteration,
            **instead,
        }

    def _tool_line(self, level: int, record: EpisodeEvent, message: str, *args: Any, exc_info: bool = False) -> LogLine:
        """The message after "Turn N Iteration M: "."""
        return LogLine(level, record, f"Turn %s Iteration %s: {message}", (self.turn, self.iteration, *args), exc_info)


@dataclass(frozen=True)
class InvalidArguments(ToolEvent):
    problem: str

    def log_line(self, episode_id: str) -> LogLine:
        # No server named: the call never reached one, and the counts keep it apart.
        record = MCPToolError(**self._call(episode_id, server_name=None), error=f"invalid arguments: {self.problem}")
        return self._tool_line(logging.WARNING, record, "invalid arguments for %s: %s", self.tool.name, self.problem)


@dataclass(frozen=True)
class CallRefused(ToolEvent):
    """A destructive tool its entry does not allow (``tool.refusal`` says why)."""

    def log_line(self, episode_id: str) -> LogLine:
        refusal = self.tool.refusal
        assert refusal is not None  # the loop refuses only a tool that says why
        record = MCPToolError(**self._call(episode_id), error=refusal, refused="destructive")
        return self._tool_line(logging.WARNING, record, "refused %s: %s", self.tool.name, refusal)


@dataclass(frozen=True)
class ToolCalled(ToolEvent):
    """``raw``: the arguments' JSON as the model sent it; the event keeps the arguments, or that
    JSON cut when it is longer than the log keeps."""

    arguments: dict[str, Any]
    raw: str

    def log_lines(self, episode_id: str) -> tuple[LogLine, ...]:
        logged = self.arguments if len(self.raw) <= MAX_LOGGED_TOOL_ARGUMENTS_CHARS else logged_arguments(self.raw)
        record = MCPToolCall(**self._call(episode_id), arguments=logged)
        call = self._tool_line(logging.INFO, record, "Agent calling tool %s", self.tool.name)
        message = "Turn %s Iteration %s: Tool arguments: %s"
        return call, LogLine(logging.DEBUG, None, message, (self.turn, self.iteration, logged_arguments(self.raw)))


@dataclass(frozen=True)
class ToolTimedOut(ToolEvent):
    timeout: float

    def log_line(self, episode_id: str) -> LogLine:
        record = MCPToolTimeout(**self._call(episode_id), timeout_seconds=self.timeout)
        return self._tool_line(logging.WARNING, record, "Tool call timeout: %s", self.tool.name)


@dataclass(frozen=True)
class ToolFailed(ToolEvent):
    """A failed call; a transport failure (not one of ours) keeps its traceback."""

    error: Exception

    def log_line(self, episode_id: str) -> LogLine:
        record = MCPToolError(
            **self._call(episode_id, server_name=getattr(self.error, "server_name", None) or self.tool.server),
            error=str(self.error),
        )
        return self._tool_line(
            logging.WARNING,
            record,
            "Tool call failed: %s - %s",
            self.tool.name,
            self.error,
            exc_info=not isinstance(self.error, MCPToolCallError),
        )


@dataclass(frozen=True)
class ToolAnswered(ToolEvent):
    result: ToolCallResult
    seconds: float

    def log_line(self, episode_id: str) -> LogLine:
        result = self.result
        record = MCPToolResult(
            **self._call(episode_id),
            result_type=type(result.content).__name__,
            result_length=len(str(result.content)),
            # What the model saw, shortened: the episode log (and the web viewer) show it.
            result=shorten(json.dumps(result.to_dict(), default=str, ensure_ascii=False), TOOL_RESULT_LOG_CHARS),
            is_error=result.is_error,
            duration_ms=round(self.seconds * 1000, 1),
        )
        return self._tool_line(logging.INFO, record, "Tool result received (%.1fs)", self.seconds)


@dataclass(frozen=True)
class BatchAborted(LoopEvent):
    """A timeout skipped the rest of a reply's calls."""

    tool: ToolInfo
    skipped: int

    def log_line(self, episode_id: str) -> LogLine:
        return self._line(
            logging.INFO,
            MCPBatchAborted(
                **self._ids(episode_id), tool_name=self.tool.name, skipped=self.skipped, iteration=self.iteration
            ),
            "Turn %s: Skipping remaining tools in batch after timeout",
            self.turn,
        )


@dataclass(frozen=True)
class BudgetExhausted(LoopEvent):
    budget: float
    tool_calls: int

    def log_line(self, episode_id: str) -> LogLine:
        record = MCPTurnBudgetExhausted(
            **self._ids(episode_id),
            turn_timeout_seconds=self.budget,
            iterations=self.iteration,
            tool_calls_count=self.tool_calls,
        )
        return self._line(
            logging.WARNING,
            record,
            "Turn %s: turn budget of %gs spent after %s iterations; asking for the final action now",
            self.turn,
            self.budget,
            self.iteration,
        )


@dataclass(frozen=True)
class NoAnswer(LoopEvent):
    """A reply with neither content nor tool calls."""

    finish_reason: str | None

    def log_line(self, episode_id: str) -> LogLine:
        return self._line(
            logging.WARNING,
            MCPUnexpectedState(**self._ids(episode_id), finish_reason=self.finish_reason, iteration=self.iteration),
            "Turn %s: LLM returned no content and no tool_calls, finish_reason=%s",
            self.turn,
            self.finish_reason,
        )


@dataclass(frozen=True)
class UnreadableAnswer(LoopEvent):
    """A text answer its owner cannot read as an action."""

    content: str

    def log_line(self, episode_id: str) -> LogLine:
        record = MCPUnreadableAnswer(
            **self._ids(episode_id),
            iteration=self.iteration,
            raw_response=cap_text(self.content, TOOL_RESULT_LOG_CHARS),
        )
        return self._line(
            logging.WARNING,
            record,
            "Turn %s: the model answered in text that is not a readable action; asking again without tools",
            self.turn,
        )


@dataclass(frozen=True)
class ChoiceNotOffered(LoopEvent):
    """``tool_choice`` names a tool the turn does not offer."""

    choice: str

    def log_line(self, episode_id: str) -> LogLine:
        return self._line(
            logging.WARNING,
            MCPToolChoiceNotOffered(**self._ids(episode_id), tool_choice=self.choice),
            "Turn %s: [tool.zorkgpt.mcp] tool_choice names %s, which is not offered this turn; "
            "the model chooses (auto)",
            self.turn,
            self.choice,
        )


@dataclass(frozen=True)
class ForcingFinal(LoopEvent):
    """No answer by the cap or the budget: the final answer is asked for without tools."""

    def log_line(self, episode_id: str) -> LogLine:
        return self._line(
            logging.WARNING,
            MCPNoContent(**self._ids(episode_id), iterations=self.iteration),
            "Turn %s: forcing final action after %s iterations without an answer",
            self.turn,
            self.iteration,
        )


@dataclass(frozen=True)
class LoopFinished(LoopEvent):
    """The loop's end, with what it did and the action it produced (``iteration``: how many it took)."""

    tools_used: tuple[str, ...]
    tool_calls: int
    forced_final: bool
    budget_exhausted: bool
    action: str

    def log_lines(self, episode_id: str) -> tuple[LogLine, ...]:
        record = MCPToolLoopComplete(
            **self._ids(episode_id),
            iterations=self.iteration,
            tool_calls_count=self.tool_calls,
            tools_used=list(self.tools_used),
            forced_final=self.forced_final,
            turn_budget_exhausted=self.budget_exhausted,
            final_action=self.action,
        )
        complete = self._line(
            logging.INFO,
            record,
            "Turn %s: tool loop complete (%s iterations, %s tool calls)",
            self.turn,
            self.iteration,
            self.tool_calls,
        )
        # The episode log closes each tool loop with the action it produced.
        action = self._line(
            logging.INFO,
            MCPAgentAction(**self._ids(episode_id), action=self.action),
            "Turn %s: Agent action: %s",
            self.turn,
            self.action,
        )
        return complete, action


class ToolLoopEvents(Protocol):
    """Whoever hears what the tool loop does (see the module docstring)."""

    def emit(self, event: LoopEvent) -> None:
        """One step of the loop, as it happens."""


@dataclass(frozen=True)
class ToolLoopLog:
    """The tool loop's events in one episode's log: each as the lines it reads as (``log_lines``)."""

    logger: logging.Logger
    episode_id: str = "unknown"

    def emit(self, event: LoopEvent) -> None:
        for line in event.log_lines(self.episode_id):
            if line.record is None:
                self.logger.log(line.level, line.message, *line.args, exc_info=line.exc_info)
            else:
                emit(self.logger, line.record, line.message, *line.args, level=line.level, exc_info=line.exc_info)
