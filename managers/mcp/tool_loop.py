"""The tool-calling loop of one agent call: ask the model, run the tools it asks for, ask again.

``ToolLoop.run(messages, tools, turn)`` asks the model with the turn's tools offered, runs the
tool calls of its reply, appends their results as ``role: "tool"`` messages and asks again,
until the model answers, ``max_tool_iterations`` replies have been asked for, or the turn budget
(``turn_timeout_seconds``) is spent; without an answer by then it asks once more, without
tools, for the final answer. Every tool_call id gets exactly one ``role: "tool"`` reply, in
the model's order, even a call that was skipped: providers reject a history where an
assistant tool call has no matching result.

What to ask and how to read the answer belong to the loop's owner, the agent:
``request_args`` builds each request (model, sampling, the answer's JSON schema) and
``read_answer`` turns the final reply into an ``AgentDecision``.

How the calls of one reply run:

* In order, one after another, as a rule. A timeout skips the rest of the reply's calls; a
  server that died skips the rest of its own tools' calls (the other servers' still run) and
  its tools are no longer offered; any other failure is an error result the model reads.
* At once (``asyncio.gather``) when every call of the reply targets a tool its server marked
  ``readOnlyHint: true``: such tools change nothing, so their order cannot matter. Their
  results still go back in the model's order.
* Not at all for a tool marked ``destructiveHint: true`` (and not read-only), unless its
  server's entry in mcp_config.json says ``"allowDestructive": true``: ZorkGPT plays alone,
  with nobody to confirm such a call. The model reads a tool error saying so. MCP's default
  for an absent ``destructiveHint`` is true (when ``readOnlyHint`` is false), but only tools
  that set it explicitly are refused: most servers annotate nothing, and refusing every
  unannotated tool would refuse nearly every tool there is.

Annotations are the server's own hints (the MCP spec warns against trusting an untrusted
server's). The servers here are the ones the user configured, and the most a wrong hint can
do is run two of that server's read-only calls at once, or refuse one of its calls.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import mcp.types as types

from llm.replies import MALFORMED_TOOL_NAME
from llm.wire import LLMResponse, ToolCall
from llm_client import LLMClientWrapper
from managers.mcp.tools import ToolCallResult
from session.errors import MCPServerDiedError, MCPToolCallError
from session.game_configuration import MCPSection
from session.game_state import AgentDecision, ToolCallRecord
from shared_utils import cap_text, json_depth, shorten

if TYPE_CHECKING:
    from managers.mcp.manager import MCPManager

FINAL_ACTION_PROMPT = "Please provide your final action now without calling any more tools."
# How much of a tool call's arguments the log keeps (the server still gets them whole).
MAX_LOGGED_TOOL_ARGUMENTS_CHARS = 2_000
TOOL_SUMMARY_CHARS = 200  # enough to see what a tool said; the full result is in the tool message
TOOL_RESULT_LOG_CHARS = 2000  # enough to read a tool's answer in the log; a huge one is cut
# How deeply a tool call's arguments may nest objects and lists. Real tool schemas nest a few
# levels; the MCP SDK's serializer gives up near 255 with an error from deep inside the call,
# so deeper arguments go back to the model as a tool error before they reach a server.
MAX_TOOL_ARGUMENT_DEPTH = 32
BUDGET_SPENT = "Skipped: the turn's time budget is spent"

RequestArgs = Callable[..., dict[str, Any]]
ReadAnswer = Callable[[str | None, tuple[ToolCallRecord, ...]], AgentDecision]


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
class ToolLoopOutcome:
    """One agent call's decision and what its tool loop did (all zero when no loop ran)."""

    decision: AgentDecision
    iterations: int = 0
    forced_final: bool = False
    budget_exhausted: bool = False

    @property
    def tool_calls(self) -> int:
        return len(self.decision.tool_calls)

    @property
    def tools_used(self) -> list[str]:
        return sorted({call.tool for call in self.decision.tool_calls})


@dataclass(frozen=True)
class _Answer:
    """What one tool call of a reply gets: its tool message, and its record unless it was skipped."""

    call_id: str
    result: ToolCallResult
    record: ToolCallRecord | None = None
    timed_out: bool = False
    budget_cut: bool = False  # it timed out at what was left of the turn budget, not the call's own timeout
    server_died: bool = False


def is_read_only(annotations: types.ToolAnnotations | None) -> bool:
    return annotations is not None and annotations.read_only_hint is True


def is_destructive(annotations: types.ToolAnnotations | None) -> bool:
    """Marked ``destructiveHint: true`` explicitly, and not read-only (see the module docstring:
    the spec's default of true for an absent hint is not applied)."""
    return annotations is not None and annotations.destructive_hint is True and annotations.read_only_hint is not True


class ToolLoop:
    """The tool-calling loop (see the module docstring); one per agent, ``run`` once per agent call."""

    def __init__(
        self,
        client: LLMClientWrapper,
        manager: MCPManager,
        settings: MCPSection,
        logger: logging.Logger,
        *,
        request_args: RequestArgs,
        read_answer: ReadAnswer,
        episode_id: str = "unknown",
    ) -> None:
        """``request_args(messages, **overrides)``: the keyword arguments of one model call; the
        loop overrides ``tools``, ``tool_choice`` and, while tools are offered, ``response_format``.
        ``read_answer(content, tool_calls)``: the decision in the final reply."""
        self.client = client
        self.manager = manager
        self.settings = settings
        self.logger = logger
        self.request_args = request_args
        self.read_answer = read_answer
        self.episode_id = episode_id

    async def run(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], turn: int) -> ToolLoopOutcome:
        """Ask, run the requested tools, repeat until the model answers, the cap or the budget.

        ``messages`` grows with the loop's assistant and tool messages.
        """
        stats = ToolLoopStats(turn=turn)
        max_iterations = self.settings.max_tool_iterations
        stats.deadline = time.monotonic() + self.settings.turn_timeout_seconds
        self._log(
            "info",
            "mcp_session_start",
            "Turn %s: MCP session started (max %s iterations)",
            turn,
            max_iterations,
            turn=turn,
            max_iterations=max_iterations,
        )
        args = self.request_args(messages, response_format=None, tools=tools, tool_choice="auto")
        response: LLMResponse | None = None
        tools_left = True
        while stats.iterations < max_iterations and tools_left:
            if stats.remaining() <= 0:
                self._budget_exhausted(stats)
                break
            stats.iterations += 1
            self._log(
                "debug",
                "mcp_iteration_start",
                "Turn %s: tool-calling iteration %s/%s",
                turn,
                stats.iterations,
                max_iterations,
                turn=turn,
                iteration=stats.iterations,
                max_iterations=max_iterations,
            )
            response = self.client.complete(**args)
            if response.tool_calls:
                messages.append(
                    {"role": "assistant", "content": None, "tool_calls": [asdict(tc) for tc in response.tool_calls]}
                )
                servers_lost = await self._run_tool_batch(response.tool_calls, messages, stats)
                if stats.budget_exhausted:
                    break
                if servers_lost:
                    # A server went away: its tools are no longer offered; the other servers' still are.
                    tools = await self.manager.open_turn(turn)
                    tools_left = bool(tools)
                    args["tools"] = tools or None
                    args["tool_choice"] = "auto" if tools else None
                continue
            if response.content:
                break
            self._log(
                "warning",
                "mcp_unexpected_state",
                "Turn %s: LLM returned no content and no tool_calls, finish_reason=%s",
                turn,
                response.finish_reason,
                turn=turn,
                finish_reason=response.finish_reason,
                iteration=stats.iterations,
            )
            break

        if response is None or not response.content or response.tool_calls or stats.budget_exhausted:
            self._log(
                "warning",
                "mcp_no_content",
                "Turn %s: forcing final action after %s iterations without an answer",
                turn,
                stats.iterations,
                turn=turn,
                iterations=stats.iterations,
            )
            stats.forced_final = True
            messages.append({"role": "user", "content": FINAL_ACTION_PROMPT})
            response = self.client.complete(**self.request_args(messages, tools=None, tool_choice=None))
        decision = self.read_answer(response.content, tuple(stats.calls))
        self._log(
            "info",
            "mcp_session_complete",
            "Turn %s: MCP session complete (%s iterations, %s tool calls)",
            turn,
            stats.iterations,
            stats.tool_calls,
            turn=turn,
            iterations=stats.iterations,
            tool_calls_count=stats.tool_calls,
            tools_used=stats.tools_used,
            forced_final=stats.forced_final,
            turn_budget_exhausted=stats.budget_exhausted,
            final_action=decision.action,
        )
        # The episode log closes each MCP session with the action it produced.
        self._log(
            "info",
            "mcp_agent_action",
            "Turn %s: Agent action: %s",
            turn,
            decision.action,
            turn=turn,
            action=decision.action,
        )
        return ToolLoopOutcome(decision, stats.iterations, stats.forced_final, stats.budget_exhausted)

    def _budget_exhausted(self, stats: ToolLoopStats) -> None:
        if stats.budget_exhausted:
            return
        stats.budget_exhausted = True
        budget = self.settings.turn_timeout_seconds
        self._log(
            "warning",
            "mcp_turn_budget_exhausted",
            "Turn %s: turn budget of %gs spent after %s iterations; asking for the final action now",
            stats.turn,
            budget,
            stats.iterations,
            turn=stats.turn,
            turn_timeout_seconds=budget,
            iterations=stats.iterations,
            tool_calls_count=stats.tool_calls,
        )

    # -- one reply's tool calls ----------------------------------------------------------------

    async def _run_tool_batch(
        self, tool_calls: Sequence[ToolCall], messages: list[dict[str, Any]], stats: ToolLoopStats
    ) -> bool:
        """Run one reply's tool calls (see the module docstring). Returns True when a server went away."""
        cap = self.settings.max_tool_calls_per_reply
        if len(tool_calls) > cap:
            self._log(
                "warning",
                "mcp_tool_calls_capped",
                "Turn %s Iteration %s: the model asked for %s tool calls in one reply; running the first %s "
                "([tool.zorkgpt.mcp] max_tool_calls_per_reply)",
                stats.turn,
                stats.iterations,
                len(tool_calls),
                cap,
                turn=stats.turn,
                requested=len(tool_calls),
                max_tool_calls_per_reply=cap,
                iteration=stats.iterations,
            )
        over_cap = (
            f"Skipped: this reply asked for {len(tool_calls)} tool calls and only the first {cap} run "
            "([tool.zorkgpt.mcp] max_tool_calls_per_reply). Call again for the ones you still need."
        )
        runnable, beyond = tool_calls[:cap], tool_calls[cap:]
        # One call alone gains nothing from running "at once": it takes the ordinary path.
        if len(runnable) > 1 and all(self._read_only(call.function.name) for call in tool_calls):
            lost = await self._run_at_once(runnable, messages, stats)
        else:
            lost = await self._run_in_order(runnable, messages, stats)
        for call in beyond:
            _deliver(messages, stats, _Answer(call.id, ToolCallResult(None, True, over_cap)))
        return lost

    async def _run_in_order(
        self, tool_calls: Sequence[ToolCall], messages: list[dict[str, Any]], stats: ToolLoopStats
    ) -> bool:
        """One call after another: a timeout skips the rest, a dead server the rest of its own calls.
        Returns True when a server went away."""
        abort_reason: str | None = None
        gone: dict[str, str] = {}  # server -> why its later calls in this batch are skipped
        for position, tool_call in enumerate(tool_calls):
            server = self.manager.server_of(tool_call.function.name)
            skip = abort_reason or (gone.get(server) if server else None)
            if skip is None and stats.remaining() <= 0:  # the model's own call used up the budget
                self._budget_exhausted(stats)
                skip = abort_reason = BUDGET_SPENT
            if skip is not None:
                _deliver(messages, stats, _Answer(tool_call.id, ToolCallResult(None, True, skip)))
                continue
            answer = await self._call(tool_call, stats)
            _deliver(messages, stats, answer)
            name = self.manager.display_name(tool_call.function.name)
            if answer.timed_out:
                if answer.budget_cut:
                    self._budget_exhausted(stats)
                    abort_reason = BUDGET_SPENT
                else:
                    abort_reason = f"Skipped: an earlier tool call in this batch ({name}) timed out"
                if position + 1 < len(tool_calls):
                    self._log(
                        "info",
                        "mcp_batch_aborted",
                        "Turn %s: Skipping remaining tools in batch after timeout",
                        stats.turn,
                        turn=stats.turn,
                        tool_name=name,
                        skipped=len(tool_calls) - position - 1,
                        iteration=stats.iterations,
                    )
            elif answer.server_died and server is not None:
                gone[server] = f"Skipped: the MCP server '{server}' stopped during {name}"
        return bool(gone)

    async def _run_at_once(
        self, tool_calls: Sequence[ToolCall], messages: list[dict[str, Any]], stats: ToolLoopStats
    ) -> bool:
        """Read-only calls, all started together; each gets its own result, none is skipped for
        another's timeout. Returns True when a server went away."""
        if stats.remaining() <= 0:
            self._budget_exhausted(stats)
            for call in tool_calls:
                _deliver(messages, stats, _Answer(call.id, ToolCallResult(None, True, BUDGET_SPENT)))
            return False
        self._log(
            "debug",
            "mcp_tool_calls_concurrent",
            "Turn %s Iteration %s: %s read-only tool calls run at once",
            stats.turn,
            stats.iterations,
            len(tool_calls),
            turn=stats.turn,
            iteration=stats.iterations,
            tool_names=[self.manager.display_name(call.function.name) for call in tool_calls],
        )
        answers = await _gather([self._call(call, stats) for call in tool_calls])
        for answer in answers:  # in the model's order, whichever finished first
            _deliver(messages, stats, answer)
        if any(answer.budget_cut for answer in answers):
            self._budget_exhausted(stats)
        return any(answer.server_died for answer in answers)

    async def _call(self, tool_call: ToolCall, stats: ToolLoopStats) -> _Answer:
        """One tool call, logged: its arguments read, refused if destructive, run through the manager.

        The tool-call boundary: a call that failed (the MCP family, a timeout, or a pipe or socket
        failing under the SDK) becomes an error result the model reads, and the turn goes on.
        Anything else is a bug in ZorkGPT and propagates.
        """
        manager = self.manager
        turn, iteration = stats.turn, stats.iterations
        wire = tool_call.function.name
        name = manager.display_name(wire)
        server = manager.server_of(wire)

        def answer(result: ToolCallResult, arguments: dict[str, Any] | str, **flags: bool) -> _Answer:
            record = ToolCallRecord(server, name, arguments, _summary(result), result.is_error)
            return _Answer(tool_call.id, result, record, **flags)

        raw_arguments = tool_call.function.arguments or ""
        try:
            arguments = _read_arguments(raw_arguments)
            if wire == MALFORMED_TOOL_NAME:
                # The client could not read this call; the model hears why instead of a crash.
                raise ValueError(str(arguments.get("error") or "unreadable tool call"))
        except ValueError as exc:
            self._log(
                "warning",
                "mcp_tool_error",
                "Turn %s Iteration %s: invalid arguments for %s: %s",
                turn,
                iteration,
                name,
                exc,
                turn=turn,
                tool_name=name,
                error=f"invalid arguments: {exc}",
                iteration=iteration,
            )
            problem = str(exc) if wire == MALFORMED_TOOL_NAME else f"Invalid tool arguments: {exc}"
            return answer(ToolCallResult(None, True, problem), cap_text(raw_arguments, MAX_LOGGED_TOOL_ARGUMENTS_CHARS))
        refusal = self._refusal(wire, server, name)
        if refusal is not None:
            self._log(
                "warning",
                "mcp_tool_error",
                "Turn %s Iteration %s: refused %s: %s",
                turn,
                iteration,
                name,
                refusal,
                turn=turn,
                tool_name=name,
                server_name=server,
                error=refusal,
                refused="destructive",
                iteration=iteration,
            )
            return answer(ToolCallResult(None, True, refusal), arguments)
        # The server's own timeout (or the configured one), cut to what is left of the turn budget.
        server_timeout = manager.timeout_for(wire)
        timeout = min(server_timeout, stats.remaining())
        self._log(
            "info",
            "mcp_tool_call",
            "Turn %s Iteration %s: Agent calling tool %s",
            turn,
            iteration,
            name,
            turn=turn,
            tool_name=name,
            server_name=server,
            arguments=_loggable_arguments(arguments, raw_arguments),
            iteration=iteration,
        )
        self.logger.debug("Turn %s Iteration %s: Tool arguments: %s", turn, iteration, json.dumps(arguments)[:500])
        started = time.perf_counter()
        try:
            # Progress from the server moves the call's own timeout on; the turn's budget is a hard end.
            deadline = stats.deadline if math.isfinite(stats.deadline) else None
            result = await manager.call_tool(name, arguments, timeout_seconds=timeout, deadline=deadline)
        except TimeoutError:
            self._log(
                "warning",
                "mcp_tool_timeout",
                "Turn %s Iteration %s: Tool call timeout: %s",
                turn,
                iteration,
                name,
                turn=turn,
                tool_name=name,
                server_name=server,
                iteration=iteration,
                timeout_seconds=timeout,
            )
            timed_out = ToolCallResult(None, True, f"Tool call timed out after {timeout:g}s")
            return answer(timed_out, arguments, timed_out=True, budget_cut=timeout < server_timeout)
        except (MCPToolCallError, OSError) as exc:
            self._log(
                "warning",
                "mcp_tool_error",
                "Turn %s Iteration %s: Tool call failed: %s - %s",
                turn,
                iteration,
                name,
                exc,
                turn=turn,
                tool_name=name,
                server_name=server,
                error=str(exc),
                iteration=iteration,
                exc_info=not isinstance(exc, MCPToolCallError),  # a transport failure: keep its traceback
            )
            failed = ToolCallResult(None, True, f"Tool call failed: {exc}")
            return answer(failed, arguments, server_died=isinstance(exc, MCPServerDiedError) and server is not None)
        duration = time.perf_counter() - started
        self._log(
            "info",
            "mcp_tool_result",
            "Turn %s Iteration %s: Tool result received (%.1fs)",
            turn,
            iteration,
            duration,
            turn=turn,
            tool_name=name,
            server_name=server,
            result_type=type(result.content).__name__,
            result_length=len(str(result.content)),
            # What the model saw, shortened: the episode log (and the web viewer) show it.
            result=shorten(json.dumps(result.to_dict(), default=str, ensure_ascii=False), TOOL_RESULT_LOG_CHARS),
            is_error=result.is_error,
            duration_ms=round(duration * 1000, 1),
            iteration=iteration,
        )
        return answer(result, arguments)

    # -- annotations -----------------------------------------------------------------------------

    def _read_only(self, wire: str) -> bool:
        return is_read_only(self.manager.tool_annotations(wire))

    def _refusal(self, wire: str, server: str | None, name: str) -> str | None:
        """Why the call must not run (a destructive tool its server's entry does not allow), else None."""
        if server is None or not is_destructive(self.manager.tool_annotations(wire)):
            return None
        if self.manager.mcp_config.server(server).allow_destructive:
            return None
        return (
            f"{name} is marked destructive; ZorkGPT plays alone with nobody to confirm it. To allow it, set "
            f'"allowDestructive": true in its entry of {self.manager.config_path.name}'
        )

    def _log(
        self, level: str, event_type: str, message: str, *args: Any, turn: int, exc_info: bool = False, **fields: Any
    ) -> None:
        """Log ``message % args`` as an event of ``turn``; ``fields`` go into the event."""
        extra = {"event_type": event_type, "episode_id": self.episode_id, "turn": turn, **fields}
        getattr(self.logger, level)(message, *args, exc_info=exc_info, extra=extra)


def _deliver(messages: list[dict[str, Any]], stats: ToolLoopStats, answer: _Answer) -> None:
    """A call's ``role: "tool"`` message for the model, and its record in the decision."""
    content = json.dumps(answer.result.to_dict(), default=str)
    messages.append({"role": "tool", "tool_call_id": answer.call_id, "content": content})
    if answer.record is not None:
        stats.calls.append(answer.record)


async def _gather(calls: Iterable[Awaitable[_Answer]]) -> list[_Answer]:
    """Every call's answer, in the given order. A call that raises (a bug: failed calls are
    answers) cancels the others and waits for them before its error propagates, so no call
    outlives the turn."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


def _loggable_arguments(arguments: dict[str, Any], raw: str) -> dict[str, Any] | str:
    """A tool call's arguments for the episode log: the object itself, or, when its JSON is
    longer than the log keeps, that JSON cut with a marker."""
    if len(raw) <= MAX_LOGGED_TOOL_ARGUMENTS_CHARS:
        return arguments
    return cap_text(raw, MAX_LOGGED_TOOL_ARGUMENTS_CHARS)


def _read_arguments(raw: str) -> dict[str, Any]:
    """A tool call's arguments as an object; ``ValueError`` saying what is wrong with them."""
    try:
        arguments = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a JSON object ({exc})") from None
    except RecursionError:
        raise ValueError(
            f"they nest objects and lists far deeper than the limit of {MAX_TOOL_ARGUMENT_DEPTH} levels. "
            "Send flatter arguments."
        ) from None
    if not isinstance(arguments, dict):
        raise ValueError(f"not a JSON object (got {json_type(arguments)})")
    depth = json_depth(arguments, MAX_TOOL_ARGUMENT_DEPTH)
    if depth > MAX_TOOL_ARGUMENT_DEPTH:
        raise ValueError(
            f"they nest objects and lists more than {MAX_TOOL_ARGUMENT_DEPTH} levels deep (the limit). "
            "Send flatter arguments."
        )
    return arguments


def json_type(value: Any) -> str:
    """A parsed JSON value's type in words ("a number", "an object")."""
    names = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}
    return names.get(type(value), f"a {type(value).__name__}")


def _summary(result: ToolCallResult) -> str:
    """The start of a tool call's result for the turn's record: the error, or the content as JSON."""
    if result.is_error:
        return shorten(result.error_message or "Tool call failed", TOOL_SUMMARY_CHARS)
    return shorten(json.dumps(result.to_dict()["content"], default=str, ensure_ascii=False), TOOL_SUMMARY_CHARS)
