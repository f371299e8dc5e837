"""What the tool loop reports, as episode log events.

The loop (``tool_loop.loop``) says what happened in one call each (a tool called, a
result, a timeout...); this module decides how that reads in the log: the message, its level,
and the event's fields, which the episode log, the run report and the web viewer read by
``event_type``. Keeping them here leaves the loop's code about the loop.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

from session.errors import MCPToolCallError
from session.events import Event
from session.game_state import AgentDecision, ToolCallRecord
from shared_utils.text import cap_text, shorten
from tool_loop.toolset import ToolCallResult, ToolInfo

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
class ToolLoopEvents:
    """The tool loop's reports for one episode's log (see the module docstring)."""

    logger: logging.Logger
    episode_id: str = "unknown"

    def started(self, stats: ToolLoopStats, max_iterations: int) -> None:
        self._log(
            logging.INFO,
            Event.MCP_SESSION_START,
            "Turn %s: MCP session started (max %s iterations)",
            stats.turn,
            max_iterations,
            turn=stats.turn,
            max_iterations=max_iterations,
        )

    def iteration(self, stats: ToolLoopStats, max_iterations: int) -> None:
        self._log(
            logging.DEBUG,
            Event.MCP_ITERATION_START,
            "Turn %s: tool-calling iteration %s/%s",
            stats.turn,
            stats.iterations,
            max_iterations,
            turn=stats.turn,
            iteration=stats.iterations,
            max_iterations=max_iterations,
        )

    def capped(self, stats: ToolLoopStats, requested: int, cap: int) -> None:
        self._log(
            logging.WARNING,
            Event.MCP_TOOL_CALLS_CAPPED,
            "Turn %s Iteration %s: the model asked for %s tool calls in one reply; running the first %s "
            "([tool.zorkgpt.mcp] max_tool_calls_per_reply)",
            stats.turn,
            stats.iterations,
            requested,
            cap,
            turn=stats.turn,
            requested=requested,
            max_tool_calls_per_reply=cap,
            iteration=stats.iterations,
        )

    def at_once(self, stats: ToolLoopStats, tools: list[str]) -> None:
        self._log(
            logging.DEBUG,
            Event.MCP_TOOL_CALLS_CONCURRENT,
            "Turn %s Iteration %s: %s read-only tool calls run at once",
            stats.turn,
            stats.iterations,
            len(tools),
            turn=stats.turn,
            iteration=stats.iterations,
            tool_names=tools,
        )

    def invalid_arguments(self, stats: ToolLoopStats, tool: ToolInfo, problem: str) -> None:
        # No server named: the call never reached one, and the counts keep it apart.
        self._tool_event(
            logging.WARNING,
            Event.MCP_TOOL_ERROR,
            "invalid arguments for %s: %s",
            stats,
            tool,
            tool.name,
            problem,
            server_name=None,
            error=f"invalid arguments: {problem}",
        )

    def refused(self, stats: ToolLoopStats, tool: ToolInfo) -> None:
        self._tool_event(
            logging.WARNING,
            Event.MCP_TOOL_ERROR,
            "refused %s: %s",
            stats,
            tool,
            tool.name,
            tool.refusal,
            error=tool.refusal,
            refused="destructive",
        )

    def calling(self, stats: ToolLoopStats, tool: ToolInfo, arguments: dict[str, Any], raw: str) -> None:
        """``raw``: the arguments' JSON as the model sent it; the event keeps the arguments, or
        that JSON cut when it is longer than the log keeps."""
        logged = arguments if len(raw) <= MAX_LOGGED_TOOL_ARGUMENTS_CHARS else logged_arguments(raw)
        self._tool_event(
            logging.INFO, Event.MCP_TOOL_CALL, "Agent calling tool %s", stats, tool, tool.name, arguments=logged
        )
        self.logger.debug(
            "Turn %s Iteration %s: Tool arguments: %s",
            stats.turn,
            stats.iterations,
            logged_arguments(raw),
        )

    def timed_out(self, stats: ToolLoopStats, tool: ToolInfo, timeout: float) -> None:
        self._tool_event(
            logging.WARNING,
            Event.MCP_TOOL_TIMEOUT,
            "Tool call timeout: %s",
            stats,
            tool,
            tool.name,
            timeout_seconds=timeout,
        )

    def failed(self, stats: ToolLoopStats, tool: ToolInfo, error: Exception) -> None:
        """A failed call; a transport failure (not one of ours) keeps its traceback."""
        self._tool_event(
            logging.WARNING,
            Event.MCP_TOOL_ERROR,
            "Tool call failed: %s - %s",
            stats,
            tool,
            tool.name,
            error,
            server_name=getattr(error, "server_name", None) or tool.server,
            error=str(error),
            exc_info=not isinstance(error, MCPToolCallError),
        )

    def result(self, stats: ToolLoopStats, tool: ToolInfo, result: ToolCallResult, seconds: float) -> None:
        self._tool_event(
            logging.INFO,
            Event.MCP_TOOL_RESULT,
            "Tool result received (%.1fs)",
            stats,
            tool,
            seconds,
            result_type=type(result.content).__name__,
            result_length=len(str(result.content)),
            # What the model saw, shortened: the episode log (and the web viewer) show it.
            result=shorten(json.dumps(result.to_dict(), default=str, ensure_ascii=False), TOOL_RESULT_LOG_CHARS),
            is_error=result.is_error,
            duration_ms=round(seconds * 1000, 1),
        )

    def batch_aborted(self, stats: ToolLoopStats, tool: ToolInfo, skipped: int) -> None:
        self._log(
            logging.INFO,
            Event.MCP_BATCH_ABORTED,
            "Turn %s: Skipping remaining tools in batch after timeout",
            stats.turn,
            turn=stats.turn,
            tool_name=tool.name,
            skipped=skipped,
            iteration=stats.iterations,
        )

    def budget_exhausted(self, stats: ToolLoopStats, budget: float) -> None:
        self._log(
            logging.WARNING,
            Event.MCP_TURN_BUDGET_EXHAUSTED,
            "Turn %s: turn budget of %gs spent after %s iterations; asking for the final action now",
            stats.turn,
            budget,
            stats.iterations,
            turn=stats.turn,
            turn_timeout_seconds=budget,
            iterations=stats.iterations,
            tool_calls_count=stats.tool_calls,
        )

    def no_answer(self, stats: ToolLoopStats, finish_reason: str | None) -> None:
        self._log(
            logging.WARNING,
            Event.MCP_UNEXPECTED_STATE,
            "Turn %s: LLM returned no content and no tool_calls, finish_reason=%s",
            stats.turn,
            finish_reason,
            turn=stats.turn,
            finish_reason=finish_reason,
            iteration=stats.iterations,
        )

    def unreadable_answer(self, stats: ToolLoopStats, content: str) -> None:
        self._log(
            logging.WARNING,
            Event.MCP_UNREADABLE_ANSWER,
            "Turn %s: the model answered in text that is not a readable action; asking again without tools",
            stats.turn,
            turn=stats.turn,
            iteration=stats.iterations,
            raw_response=cap_text(content, TOOL_RESULT_LOG_CHARS),
        )

    def choice_not_offered(self, stats: ToolLoopStats, choice: str) -> None:
        self._log(
            logging.WARNING,
            Event.MCP_TOOL_CHOICE_NOT_OFFERED,
            "Turn %s: [tool.zorkgpt.mcp] tool_choice names %s, which is not offered this turn; "
            "the model chooses (auto)",
            stats.turn,
            choice,
            turn=stats.turn,
            tool_choice=choice,
        )

    def forcing_final(self, stats: ToolLoopStats) -> None:
        self._log(
            logging.WARNING,
            Event.MCP_NO_CONTENT,
            "Turn %s: forcing final action after %s iterations without an answer",
            stats.turn,
            stats.iterations,
            turn=stats.turn,
            iterations=stats.iterations,
        )

    def finished(self, stats: ToolLoopStats, decision: AgentDecision) -> None:
        self._log(
            logging.INFO,
            Event.MCP_SESSION_COMPLETE,
            "Turn %s: MCP session complete (%s iterations, %s tool calls)",
            stats.turn,
            stats.iterations,
            stats.tool_calls,
            turn=stats.turn,
            iterations=stats.iterations,
            tool_calls_count=stats.tool_calls,
            tools_used=stats.tools_used,
            forced_final=stats.forced_final,
            turn_budget_exhausted=stats.budget_exhausted,
            final_action=decision.action,
        )
        # The episode log closes each MCP session with the action it produced.
        self._log(
            logging.INFO,
            Event.MCP_AGENT_ACTION,
            "Turn %s: Agent action: %s",
            stats.turn,
            decision.action,
            turn=stats.turn,
            action=decision.action,
        )

    def _tool_event(
        self,
        level: int,
        event_type: str,
        message: str,
        stats: ToolLoopStats,
        tool: ToolInfo,
        *args: Any,
        exc_info: bool = False,
        **fields: Any,
    ) -> None:
        """An event about one tool call: the message after "Turn N Iteration M: ", and the turn,
        iteration, tool and its server (``server_name`` in ``fields`` overrides it) in the event."""
        fields = {"tool_name": tool.name, "server_name": tool.server, "iteration": stats.iterations, **fields}
        self._log(
            level,
            event_type,
            f"Turn %s Iteration %s: {message}",
            stats.turn,
            stats.iterations,
            *args,
            turn=stats.turn,
            exc_info=exc_info,
            **fields,
        )

    def _log(
        self, level: int, event_type: str, message: str, *args: Any, turn: int, exc_info: bool = False, **fields: Any
    ) -> None:
        """Log ``message % args`` as an event of ``turn``; ``fields`` go into the event."""
        extra = {"event_type": event_type, "episode_id": self.episode_id, "turn": turn, **fields}
        self.logger.log(level, message, *args, exc_info=exc_info, extra=extra)
