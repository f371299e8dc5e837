"""The tool-calling loop of one agent call: ask the model, run the tools it asks for, ask again.

``ToolLoop.run(messages, tools, turn)`` asks the model with the turn's tools offered, runs the
tool calls of its reply, appends their results as ``role: "tool"`` messages and asks again,
until the model answers, ``max_tool_iterations`` replies have been asked for, or the turn budget
(``turn_timeout_seconds``) is spent; without an answer by then it asks once more, without
tools, for the final answer. Every tool_call id gets exactly one ``role: "tool"`` reply, in
the model's order, even a call that was skipped: providers reject a history where an
assistant tool call has no matching result.

While tools are offered the requests carry no ``response_format`` (a grammar that forces the
answer's JSON would forbid the tool calls), so a model may answer in free text. A text answer
its owner cannot read as an action (a small local model's, typically) is not played as a
fallback: the loop asks once more, without tools, with the answer's structured output, which a
grammar-capable server enforces.

The first request of a turn sends ``[tool.zorkgpt.mcp] tool_choice``: "auto", "required" (some
tool) or one tool named as ``server.tool``, sent as the OpenAI API defines it; later requests,
and a critic's re-ask that goes on with the turn's tool calls, are "auto".

What to ask and how to read the answer belong to the loop's owner, the agent:
``request_args`` builds each request (model, sampling, the answer's JSON schema) and
``read_answer`` turns the final reply into an ``AgentDecision``. The tools come as the turn's
``Toolset`` (``shared_utils.toolset``), which the episode runner opened and will close; what
the loop does is reported, one frozen event at a time, to a ``ToolLoopEvents`` (``tool_loop.events``).

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
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from chat_api.replies import MALFORMED_TOOL_NAME
from chat_api.wire import LLMResponse, ToolCall
from llm_client import LLMClient
from session.errors import MCPServerDiedError, MCPToolCallError
from session.game_configuration import MCPSection
from session.game_state import AgentDecision, ToolCallRecord
from shared_utils.model_json import json_depth, json_type
from shared_utils.text import shorten
from shared_utils.toolset import ToolCallResult, ToolInfo, Toolset
from tool_loop.events import (
    BatchAborted,
    BudgetExhausted,
    CallRefused,
    CallsAtOnce,
    CallsCapped,
    ChoiceNotOffered,
    ForcingFinal,
    InvalidArguments,
    IterationStarted,
    LoopFinished,
    LoopStarted,
    NoAnswer,
    ToolAnswered,
    ToolCalled,
    ToolFailed,
    ToolLoopEvents,
    ToolLoopStats,
    ToolTimedOut,
    UnreadableAnswer,
    logged_arguments,
)

FINAL_ACTION_PROMPT = "Please provide your final action now without calling any more tools."
TOOL_SUMMARY_CHARS = 200  # enough to see what a tool said; the full result is in the tool message
# How deeply a tool call's arguments may nest objects and lists. Real tool schemas nest a few
# levels; the MCP SDK's serializer gives up near 255 with an error from deep inside the call,
# so deeper arguments go back to the model as a tool error before they reach a server.
MAX_TOOL_ARGUMENT_DEPTH = 32
BUDGET_SPENT = "Skipped: the turn's time budget is spent"

RequestArgs = Callable[..., dict[str, Any]]
ReadAnswer = Callable[[str | None, tuple[ToolCallRecord, ...]], AgentDecision]


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
    lost_server: str | None = None  # the server that went away during the call


class ToolLoop:
    """The tool-calling loop (see the module docstring); one per agent, ``run`` once per agent call."""

    def __init__(
        self,
        client: LLMClient,
        settings: MCPSection,
        events: ToolLoopEvents,
        *,
        request_args: RequestArgs,
        read_answer: ReadAnswer,
        is_answer: Callable[[str], bool] = lambda content: True,
    ) -> None:
        """``request_args(messages, **overrides)``: the keyword arguments of one model call; the
        loop overrides ``tools``, ``tool_choice`` and, while tools are offered, ``response_format``.
        ``read_answer(content, tool_calls)``: the decision in the final reply.
        ``is_answer(content)``: whether a text reply holds an action ``read_answer`` can read;
        one that does not is asked for again without tools (see the module docstring)."""
        self.client = client
        self.settings = settings
        self.events = events
        self.request_args = request_args
        self.read_answer = read_answer
        self.is_answer = is_answer

    async def run(self, messages: list[dict[str, Any]], toolset: Toolset, turn: int) -> ToolLoopOutcome:
        """Ask, run the requested tools, repeat until the model answers, the cap or the budget.

        ``messages`` grows with the loop's assistant and tool messages.
        """
        stats = ToolLoopStats(turn=turn, deadline=time.monotonic() + self.settings.turn_timeout_seconds)
        max_iterations = self.settings.max_tool_iterations
        self.events.emit(LoopStarted(stats.turn, stats.iterations, max_iterations))
        first_choice = self._first_choice(toolset, messages, stats)
        args = self.request_args(messages, response_format=None, tools=toolset.schemas, tool_choice=first_choice)
        response: LLMResponse | None = None
        while stats.iterations < max_iterations and args["tools"]:
            if stats.remaining() <= 0:
                self._budget_exhausted(stats)
                break
            stats.iterations += 1
            self.events.emit(IterationStarted(stats.turn, stats.iterations, max_iterations))
            response = self.client.complete(**args)
            args["tool_choice"] = "auto"  # only the turn's first request is forced
            if not response.tool_calls:
                if not response.content:
                    self.events.emit(NoAnswer(stats.turn, stats.iterations, response.finish_reason))
                elif not self.is_answer(response.content):
                    self.events.emit(UnreadableAnswer(stats.turn, stats.iterations, response.content))
                break
            messages.append(
                {"role": "assistant", "content": None, "tool_calls": [asdict(tc) for tc in response.tool_calls]}
            )
            if await self._run_tool_batch(toolset, response.tool_calls, messages, stats):
                # A server went away: its tools are no longer offered; the other servers' still are.
                await toolset.drop_lost_servers()
                args["tools"] = toolset.schemas or None
                args["tool_choice"] = "auto" if toolset.schemas else None
            if stats.budget_exhausted:
                break
        answered = response is not None and bool(response.content) and self.is_answer(response.content)
        if not answered or response is None or response.tool_calls or stats.budget_exhausted:
            self.events.emit(ForcingFinal(stats.turn, stats.iterations))
            stats.forced_final = True
            messages.append({"role": "user", "content": FINAL_ACTION_PROMPT})
            response = self.client.complete(**self.request_args(messages, tools=None, tool_choice=None))
        decision = self.read_answer(response.content, tuple(stats.calls))
        self.events.emit(_finished(stats, decision))
        return ToolLoopOutcome(decision, stats.iterations, stats.forced_final, stats.budget_exhausted)

    def _first_choice(
        self, toolset: Toolset, messages: list[dict[str, Any]], stats: ToolLoopStats
    ) -> str | dict[str, Any]:
        """The ``tool_choice`` of the loop's first request (see the module docstring)."""
        choice = self.settings.tool_choice
        if choice == "auto" or any(message.get("role") == "tool" for message in messages):
            return "auto"  # a re-ask going on with this turn's tool calls is not forced again
        if choice == "required":
            return "required"
        wire = toolset.tool(choice).wire_name
        if wire not in {schema["function"]["name"] for schema in toolset.schemas}:
            self.events.emit(ChoiceNotOffered(stats.turn, stats.iterations, choice))
            return "auto"
        return {"type": "function", "function": {"name": wire}}

    def _budget_exhausted(self, stats: ToolLoopStats) -> None:
        if not stats.budget_exhausted:
            stats.budget_exhausted = True
            self.events.emit(
                BudgetExhausted(stats.turn, stats.iterations, self.settings.turn_timeout_seconds, stats.tool_calls)
            )

    # -- one reply's tool calls ----------------------------------------------------------------

    async def _run_tool_batch(
        self, toolset: Toolset, tool_calls: Sequence[ToolCall], messages: list[dict[str, Any]], stats: ToolLoopStats
    ) -> bool:
        """Run one reply's tool calls (see the module docstring). Returns True when a server went away."""
        cap = self.settings.max_tool_calls_per_reply
        if len(tool_calls) > cap:
            self.events.emit(CallsCapped(stats.turn, stats.iterations, len(tool_calls), cap))
        over_cap = (
            f"Skipped: this reply asked for {len(tool_calls)} tool calls and only the first {cap} run "
            "([tool.zorkgpt.mcp] max_tool_calls_per_reply). Call again for the ones you still need."
        )
        calls = [(call, toolset.tool(call.function.name)) for call in tool_calls[:cap]]
        # One call alone gains nothing from running "at once": it takes the ordinary path.
        if len(calls) > 1 and all(toolset.tool(call.function.name).read_only for call in tool_calls):
            lost = await self._run_at_once(toolset, calls, messages, stats)
        else:
            lost = await self._run_in_order(toolset, calls, messages, stats)
        for call in tool_calls[cap:]:
            _deliver(messages, stats, _Answer(call.id, ToolCallResult(None, True, over_cap)))
        return lost

    async def _run_in_order(
        self,
        toolset: Toolset,
        calls: Sequence[tuple[ToolCall, ToolInfo]],
        messages: list[dict[str, Any]],
        stats: ToolLoopStats,
    ) -> bool:
        """One call after another: a timeout skips the rest, a dead server the rest of its own calls.
        Returns True when a server went away."""
        abort_reason: str | None = None
        gone: dict[str, str] = {}  # server -> why its later calls in this batch are skipped
        for position, (tool_call, tool) in enumerate(calls):
            skip = abort_reason or (gone.get(tool.server) if tool.server else None)
            if skip is None and stats.remaining() <= 0:  # the model's own call used up the budget
                self._budget_exhausted(stats)
                skip = abort_reason = BUDGET_SPENT
            if skip is not None:
                _deliver(messages, stats, _Answer(tool_call.id, ToolCallResult(None, True, skip)))
                continue
            answer = await self._call(toolset, tool_call, tool, stats)
            _deliver(messages, stats, answer)
            if answer.timed_out:
                if answer.budget_cut:
                    self._budget_exhausted(stats)
                    abort_reason = BUDGET_SPENT
                else:
                    abort_reason = f"Skipped: an earlier tool call in this batch ({tool.name}) timed out"
                if position + 1 < len(calls):
                    self.events.emit(BatchAborted(stats.turn, stats.iterations, tool, len(calls) - position - 1))
            elif answer.lost_server is not None:
                gone[answer.lost_server] = f"Skipped: the MCP server '{answer.lost_server}' stopped during {tool.name}"
        return bool(gone)

    async def _run_at_once(
        self,
        toolset: Toolset,
        calls: Sequence[tuple[ToolCall, ToolInfo]],
        messages: list[dict[str, Any]],
        stats: ToolLoopStats,
    ) -> bool:
        """Read-only calls, all started together; each gets its own result, none is skipped for
        another's timeout. Returns True when a server went away."""
        if stats.remaining() <= 0:
            self._budget_exhausted(stats)
            for call, _ in calls:
                _deliver(messages, stats, _Answer(call.id, ToolCallResult(None, True, BUDGET_SPENT)))
            return False
        self.events.emit(CallsAtOnce(stats.turn, stats.iterations, tuple(tool.name for _, tool in calls)))
        answers = await _gather([self._call(toolset, call, tool, stats) for call, tool in calls])
        for answer in answers:  # in the model's order, whichever finished first
            _deliver(messages, stats, answer)
        if any(answer.budget_cut for answer in answers):
            self._budget_exhausted(stats)
        return any(answer.lost_server is not None for answer in answers)

    async def _call(self, toolset: Toolset, tool_call: ToolCall, tool: ToolInfo, stats: ToolLoopStats) -> _Answer:
        """One tool call, reported: its arguments read, refused if destructive, run through the toolset.

        The tool-call boundary: a call that failed (the MCP family, a timeout, or a pipe or socket
        failing under the SDK) becomes an error result the model reads, and the turn goes on.
        Anything else is a bug in ZorkGPT and propagates.
        """

        def answer(result: ToolCallResult, arguments: dict[str, Any] | str, **flags: Any) -> _Answer:
            record = ToolCallRecord(tool.server, tool.name, arguments, _summary(result), result.is_error)
            return _Answer(tool_call.id, result, record, **flags)

        raw = tool_call.function.arguments or ""
        malformed = tool.wire_name == MALFORMED_TOOL_NAME
        try:
            arguments = _read_arguments(raw)
            if malformed:  # the client could not read this call; the model hears why instead of a crash
                raise ValueError(str(arguments.get("error") or "unreadable tool call"))
        except ValueError as exc:
            self.events.emit(InvalidArguments(stats.turn, stats.iterations, tool, str(exc)))
            problem = str(exc) if malformed else f"Invalid tool arguments: {exc}"
            return answer(ToolCallResult(None, True, problem), logged_arguments(raw))
        if tool.refusal is not None:
            self.events.emit(CallRefused(stats.turn, stats.iterations, tool))
            return answer(ToolCallResult(None, True, tool.refusal), arguments)
        # The tool's own timeout, cut to what is left of the turn budget.
        timeout = min(tool.timeout_seconds, stats.remaining())
        self.events.emit(ToolCalled(stats.turn, stats.iterations, tool, arguments, raw))
        started = time.perf_counter()
        try:
            # Progress from the server moves the call's own timeout on; the turn's budget is a hard end.
            deadline = stats.deadline if math.isfinite(stats.deadline) else None
            result = await toolset.call(tool.wire_name, arguments, timeout_seconds=timeout, deadline=deadline)
        except TimeoutError:
            self.events.emit(ToolTimedOut(stats.turn, stats.iterations, tool, timeout))
            timed_out = ToolCallResult(None, True, f"Tool call timed out after {timeout:g}s")
            return answer(timed_out, arguments, timed_out=True, budget_cut=timeout < tool.timeout_seconds)
        except (MCPToolCallError, OSError) as exc:
            self.events.emit(ToolFailed(stats.turn, stats.iterations, tool, exc))
            lost = (exc.server_name or tool.server) if isinstance(exc, MCPServerDiedError) else None
            return answer(ToolCallResult(None, True, f"Tool call failed: {exc}"), arguments, lost_server=lost)
        self.events.emit(ToolAnswered(stats.turn, stats.iterations, tool, result, time.perf_counter() - started))
        return answer(result, arguments)


def _deliver(messages: list[dict[str, Any]], stats: ToolLoopStats, answer: _Answer) -> None:
    """A call's ``role: "tool"`` message for the model, and its record in the decision."""
    content = json.dumps(answer.result.to_dict(), default=str)
    messages.append({"role": "tool", "tool_call_id": answer.call_id, "content": content})
    if answer.record is not None:
        stats.calls.append(answer.record)


def _finished(stats: ToolLoopStats, decision: AgentDecision) -> LoopFinished:
    return LoopFinished(
        stats.turn,
        stats.iterations,
        tuple(stats.tools_used),
        stats.tool_calls,
        stats.forced_final,
        stats.budget_exhausted,
        decision.action,
    )


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


def _summary(result: ToolCallResult) -> str:
    """The start of a tool call's result for the turn's record: the error, or the content as JSON."""
    if result.is_error:
        return shorten(result.error_message or "Tool call failed", TOOL_SUMMARY_CHARS)
    return shorten(json.dumps(result.to_dict()["content"], default=str, ensure_ascii=False), TOOL_SUMMARY_CHARS)
