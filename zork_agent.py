"""The agent: turns the game state into one Zork command, optionally reasoning with MCP tools.

``get_action_with_reasoning`` is the public, synchronous API. With MCP disabled it makes one
LLM call (JSON-schema response format) exactly as before MCP existed. With MCP enabled it is
the single ``asyncio.run`` boundary of the agent call: inside it the turn's tools are opened
(the MCP manager's own background loop owns the sessions, so the blocking model call here
never holds up a server), the tool-calling loop runs within the turn budget
(``turn_timeout_seconds``), and the sessions stay open for the critic's re-asks of the same
turn; the orchestrator ends the turn.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import re
import time
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from llm_client import MALFORMED_TOOL_NAME, LLMClientWrapper, LLMResponse
from session.errors import (
    ConfigError,
    MCPConfigError,
    MCPServerDiedError,
    MCPToolCallError,
)
from session.game_configuration import FilesSection, GameConfiguration
from session.game_state import AgentDecision, ToolCallRecord
from session.objective_spec import ObjectiveProposal
from shared_utils import (
    MAX_JSON_DEPTH,
    cap_text,
    create_json_schema,
    extract_json_object,
    json_depth,
    shorten,
    traced_observation,
)

if TYPE_CHECKING:
    from managers.mcp import MCPManager

FALLBACK_ACTION = "look"
# How much of an unparseable reply the log keeps: enough to see what went wrong.
MAX_LOGGED_REPLY_CHARS = 2_000
# How much of a tool call's arguments the log keeps (the server still gets them whole).
MAX_LOGGED_TOOL_ARGUMENTS_CHARS = 2_000
TOOL_SUMMARY_CHARS = 200  # enough to see what a tool said; the full result is in the tool message
FINAL_ACTION_PROMPT = "Please provide your final action now without calling any more tools."
PROMPT_DIR = Path(__file__).resolve().parent / "prompts"

TOOL_RESULT_LOG_CHARS = 2000  # enough to read a tool's answer in the log; a huge one is cut
# How deeply a tool call's arguments may nest objects and lists. Real tool schemas nest a few
# levels; the MCP SDK's serializer gives up near 255 with an error from deep inside the call,
# so deeper arguments go back to the model as a tool error before they reach a server.
MAX_TOOL_ARGUMENT_DEPTH = 32


class AgentResponse(BaseModel):
    """The agent's reply: its reasoning, one game command, and optionally a new objective."""

    thinking: str = Field(description="Brief reasoning for the chosen action")
    action: str = Field(description="Exactly one Zork game command")
    new_objective: ObjectiveProposal | None = Field(
        default=None, description="A new multi-step goal and the steps that show it is done, or null"
    )

    @field_validator("new_objective", mode="before")
    @classmethod
    def _sentence_is_a_free_goal(cls, value: Any) -> Any:
        """A bare sentence (what a model that skims the schema sends) is kept as a goal the
        objective review judges, rather than failing the whole reply."""
        if isinstance(value, str):
            text = value.strip()
            return {"text": text, "done_when": [{"kind": "free", "criterion": text}]} if text else None
        return value


class AgentRuntimeError(RuntimeError):
    """The agent was used in a way that cannot work (e.g. called inside a running event loop)."""


@dataclass
class ToolLoopStats:
    """What one turn's tool loop did so far (the decision keeps the calls, the trace the rest)."""

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


_MARKDOWN = re.compile(r"[*_`#>]+")
# Zork runs "take lamp. north" or "take lamp then north" as several moves; a turn is one command.
_NEXT_COMMAND = re.compile(r"\s*(?:[.;!]|\bthen\b)\s*", re.IGNORECASE)
# Zork's parser reads short lines; longer "actions" are prose, not commands (and the engine refuses them).
MAX_ACTION_CHARS = 120


def clean_action(raw: str | None) -> str:
    """One lower-case game command: the first command of the first non-empty line, without
    quotes, markdown or trailing punctuation."""
    if not raw:
        return ""
    for line in str(raw).splitlines():
        line = _MARKDOWN.sub("", line).strip().strip("\"'“”‘’").strip()
        line = re.sub(r"^(action|command)\s*:\s*", "", line, flags=re.IGNORECASE)
        line = _NEXT_COMMAND.split(line, maxsplit=1)[0]
        line = re.sub(r"\s+", " ", line).strip().strip("\"'“”‘’").strip()
        if line:
            return line.lower()
    return ""


TOOL_DESCRIPTION_CHARS = 200  # a tool's first sentence is its purpose; schemas carry the rest


def tools_prompt(tools: list[dict[str, Any]], instructions: dict[str, str] | None = None) -> str:
    """What the system prompt says when MCP tools are offered: that they may be called before
    answering, that the final answer is still the JSON object, and what each server is for, in
    the servers' own words (their ``instructions`` and their tools' descriptions).

    ``tools`` are the OpenAI function tools sent with the request; a wire name
    ``server__tool`` names its server.
    """
    by_server: dict[str, list[str]] = {}
    for tool in tools:
        function = tool.get("function", {})
        server, _, name = str(function.get("name", "")).rpartition("__")
        purpose = shorten(re.split(r"(?<=[.!?])\s", str(function.get("description") or ""))[0], TOOL_DESCRIPTION_CHARS)
        by_server.setdefault(server or "tools", []).append(f"{name or server}" + (f" ({purpose})" if purpose else ""))
    lines = [
        "# Tools",
        "With this request you are offered tools. You may call them before answering, as often as they help; they "
        "do not act in the game. When you are done, answer as above: the single JSON object with your game command.",
    ]
    for server, names in by_server.items():
        about = shorten((instructions or {}).get(server, ""), TOOL_DESCRIPTION_CHARS)
        lines.append(f"- {server}: {about + ' ' if about else ''}Tools: {'; '.join(names)}.")
    return "\n".join(lines)


def _loggable_arguments(arguments: dict[str, Any], raw: str) -> dict[str, Any] | str:
    """A tool call's arguments for the episode log: the object itself, or, when its JSON is
    longer than the log keeps, that JSON cut with a marker."""
    if len(raw) <= MAX_LOGGED_TOOL_ARGUMENTS_CHARS:
        return arguments
    return cap_text(raw, MAX_LOGGED_TOOL_ARGUMENTS_CHARS)


def read_agent_reply(data: dict[str, Any]) -> tuple[AgentResponse, list[str]]:
    """The reply as an ``AgentResponse``, keeping a valid action when the rest is not usable.

    ``thinking`` that is missing or not a string becomes empty, and a ``new_objective`` that
    is neither a sentence, a goal with its steps, nor null is dropped: neither is worth losing
    the turn's action for.
    Returns what was dropped, in words, beside the reply. The action itself is as strict as
    ever: a missing or non-string action raises ``ValidationError``.
    """
    fields = dict(data)
    dropped: list[str] = []
    thinking = fields.get("thinking")
    if not isinstance(thinking, str):
        dropped.append("thinking (missing)" if thinking is None else f"thinking ({_json_type(thinking)}, not text)")
        fields["thinking"] = ""
    objective = fields.get("new_objective")
    if objective is not None and not isinstance(objective, str):
        try:
            ObjectiveProposal.model_validate(objective)
        except ValidationError:
            shown = shorten(json.dumps(objective), 80)
            dropped.append(f"new_objective ({_json_type(objective)}, not a goal with done_when steps): {shown}")
            fields["new_objective"] = None
    return AgentResponse.model_validate(fields), dropped


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
        raise ValueError(f"not a JSON object (got {_json_type(arguments)})")
    depth = json_depth(arguments, MAX_TOOL_ARGUMENT_DEPTH)
    if depth > MAX_TOOL_ARGUMENT_DEPTH:
        raise ValueError(
            f"they nest objects and lists more than {MAX_TOOL_ARGUMENT_DEPTH} levels deep (the limit). "
            "Send flatter arguments."
        )
    return arguments


def _json_type(value: Any) -> str:
    """A parsed JSON value's type in words ("a number", "an object")."""
    names = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object"}
    return names.get(type(value), f"a {type(value).__name__}")


class ZorkAgent:
    def __init__(
        self,
        config: GameConfiguration,
        client: LLMClientWrapper,
        logger: logging.Logger | None = None,
        episode_id: str = "unknown",
        mcp_manager: MCPManager | None = None,
        langfuse_client: Any = None,
        model: str | None = None,
        knowledge_text: str = "",
    ) -> None:
        self.config = config
        self.client = client
        self.logger = logger or logging.getLogger("zorkgpt.agent")
        self.episode_id = episode_id
        self.mcp_manager = mcp_manager
        self.mcp_enabled = config.mcp.enabled and mcp_manager is not None
        self.langfuse_client = langfuse_client
        self.model = model or config.llm.agent_model
        self.sampling = config.sampling_for("agent")
        self._base_prompt = self._load_prompt(config)
        self.knowledge_text = knowledge_text
        self.current_turn = 0

    # -- prompt ------------------------------------------------------------------------
    @staticmethod
    def _load_prompt(config: GameConfiguration) -> str:
        configured = config.files.agent_prompt_file
        path = config.resolve_path(configured)
        if path.is_file():
            try:
                return path.read_text(encoding="utf-8").strip()
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"[tool.zorkgpt.files] agent_prompt_file = {configured!r}: {path} is not UTF-8 text "
                    f"(byte {exc.start}: {exc.reason}). Save it as UTF-8."
                ) from None
            except OSError as exc:
                raise ConfigError(
                    f"[tool.zorkgpt.files] agent_prompt_file = {configured!r}: cannot read {path} ({exc.strerror}). "
                    "Check its permissions."
                ) from None
        if configured != FilesSection.model_fields["agent_prompt_file"].default:
            raise ConfigError(
                f"[tool.zorkgpt.files] agent_prompt_file = {configured!r}: no such file ({path}). "
                "Point it at your prompt file, or remove the key to use the shipped prompt."
            )
        # The default path, relative to a config outside the repository: use the shipped prompt.
        return (PROMPT_DIR / "agent.md").read_text(encoding="utf-8").strip()

    @property
    def system_prompt(self) -> str:
        if not self.knowledge_text.strip():
            return self._base_prompt
        return f"{self._base_prompt}\n\n# What earlier episodes taught you\n{self.knowledge_text.strip()}"

    def update_knowledge(self, knowledge_text: str) -> None:
        self.knowledge_text = knowledge_text

    def _build_messages(self, game_state_text: str, relevant_memories: str | None) -> list[dict[str, Any]]:
        user_content = game_state_text
        if relevant_memories:
            user_content = f"{user_content}\n\n{relevant_memories}"
        return [
            # The LLM client adds the prompt-caching markers in the form each provider expects.
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": user_content},
        ]

    def _client_args(self, messages: list[dict[str, Any]], **overrides: Any) -> dict[str, Any]:
        args: dict[str, Any] = dict(model=self.model, messages=messages, **self.sampling.request_args(), name="Agent")
        if "response_format" not in overrides:
            args["response_format"] = create_json_schema(AgentResponse)
        args.update(overrides)
        return args

    # -- public API --------------------------------------------------------------------
    def get_action_with_reasoning(
        self, game_state_text: str, relevant_memories: str | None = None, turn: int | None = None
    ) -> AgentDecision:
        """One game command for this state, with the reasoning and the tool calls behind it."""
        if turn is not None:
            self.current_turn = turn
        if not self.mcp_enabled:
            messages = self._build_messages(game_state_text, relevant_memories)
            response = self.client.chat.completions.create(**self._client_args(messages))
            return self._parse_response(response.content)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise AgentRuntimeError(
                "get_action_with_reasoning() was called inside a running event loop. It owns the turn's "
                "asyncio.run boundary; from async code, await agent._generate_action_async(...) instead."
            )
        return asyncio.run(self._generate_action_async(game_state_text, relevant_memories))

    # -- parsing -----------------------------------------------------------------------
    def _parse_response(self, content: str | None, tool_calls: tuple[ToolCallRecord, ...] = ()) -> AgentDecision:
        data = extract_json_object(content or "")
        try:
            if data is None:
                raise ValueError(f"no JSON object in the reply (or one nested more than {MAX_JSON_DEPTH} levels deep)")
            parsed, dropped = read_agent_reply(data)
            action = clean_action(parsed.action)
            if not action:
                raise ValueError("the reply's action is empty")
            if len(action) > MAX_ACTION_CHARS:
                raise ValueError(f"the reply's action is {len(action)} characters long (limit {MAX_ACTION_CHARS})")
        except (ValidationError, ValueError) as exc:
            self.logger.error(
                "Turn %s: could not parse the agent's reply (%s); falling back to '%s'",
                self.current_turn,
                exc,
                FALLBACK_ACTION,
                extra={
                    "event_type": "agent_parse_error",
                    "error": str(exc),
                    "raw_response": cap_text(content or "", MAX_LOGGED_REPLY_CHARS),
                    "episode_id": self.episode_id,
                    "turn": self.current_turn,
                },
            )
            return AgentDecision(
                action=FALLBACK_ACTION,
                reasoning=f"Parse error: {exc}. Raw: {(content or '')[:100]}",
                raw_response=content,
                tool_calls=tool_calls,
            )
        if dropped:
            self.logger.warning(
                "Turn %s: kept the agent's action '%s' and dropped what was unusable in its reply: %s",
                self.current_turn,
                action,
                "; ".join(dropped),
                extra={
                    "event_type": "agent_reply_partial",
                    "dropped": dropped,
                    "action": action,
                    "episode_id": self.episode_id,
                    "turn": self.current_turn,
                },
            )
        return AgentDecision(
            action=action,
            reasoning=parsed.thinking,
            new_objective=parsed.new_objective if parsed.new_objective and parsed.new_objective.text.strip() else None,
            raw_response=content,
            tool_calls=tool_calls,
        )

    # -- MCP tool-calling path -----------------------------------------------------------
    async def _generate_action_async(self, game_state_text: str, relevant_memories: str | None = None) -> AgentDecision:
        """Open the turn's tools and run the tool loop; the sessions stay open for this turn's re-asks."""
        assert self.mcp_manager is not None
        messages = self._build_messages(game_state_text, relevant_memories)
        stats = ToolLoopStats()
        with self._session_observation() as span:
            tools = await self._open_tools()
            if tools is None:
                response = self.client.chat.completions.create(**self._client_args(messages))
                decision = self._parse_response(response.content)
            else:
                # Only now is it known which tools are offered: the prompt says so, in the servers' words.
                about = tools_prompt(tools, self.mcp_manager.server_instructions())
                messages[0]["content"] = f"{self.system_prompt}\n\n{about}"
                decision = await self._tool_loop(messages, tools, stats)
            if span is not None:
                span.update(
                    output={"action": decision.action},
                    metadata={
                        "iterations_used": stats.iterations,
                        "tools_called": stats.tool_calls,
                        "tools_used": stats.tools_used,
                        "forced_final": stats.forced_final,
                        "turn_budget_exhausted": stats.budget_exhausted,
                        "final_action": decision.action,
                    },
                )
        return decision

    async def _open_tools(self) -> list[dict[str, Any]] | None:
        """This turn's tools from every server; None means the turn plays without tools (logged why).

        Raises ``MCPServerStartupError`` when a server failed to start on the episode's first
        connect, and ``MCPConfigError`` when the model cannot call tools: the run cannot go on
        as configured (``session.errors`` has the policy).
        """
        assert self.mcp_manager is not None
        turn = self.current_turn
        tools = [] if self.mcp_manager.is_disabled else await self.mcp_manager.open_turn(turn)
        if self.mcp_manager.is_disabled:  # every server disabled after repeated failures
            self._log("warning", "mcp_disabled_fallback", "Turn %s: MCP disabled, continuing without tools", turn)
            return None
        if not tools:  # working servers that offer no tools: nothing is disabled
            servers = self.mcp_manager.server_names
            self._log(
                "warning",
                "mcp_no_tools",
                "Turn %s: no MCP tools offered (servers: %s), continuing without tools",
                turn,
                ", ".join(servers),
                server_names=servers,
            )
            return None
        if not self.client._supports_tool_calling(self.model):
            raise MCPConfigError(
                f"Model '{self.model}' does not support tool calling.\n"
                "Please either:\n"
                "  1. Set mcp.enabled = false in pyproject.toml, or\n"
                "  2. Use a compatible model (gpt-4, claude-3, etc.), or\n"
                "  3. Set mcp.force_tool_support = true if the detection is wrong"
            )
        return tools

    def _session_observation(self) -> AbstractContextManager[Any]:
        return traced_observation(
            self.langfuse_client,
            self.logger,
            as_type="span",
            name="agent-tool-calling-session",
            metadata={
                "mcp_enabled": self.mcp_enabled,
                "max_iterations": self.config.mcp.max_tool_iterations,
                "turn": self.current_turn,
                "episode_id": self.episode_id,
            },
        )

    async def _tool_loop(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], stats: ToolLoopStats
    ) -> AgentDecision:
        """Ask, run the requested tools in order, repeat until the model answers, the cap or the budget."""
        max_iterations = self.config.mcp.max_tool_iterations
        budget = self.config.mcp.turn_timeout_seconds
        stats.deadline = time.monotonic() + budget
        turn = self.current_turn
        self._log(
            "info",
            "mcp_session_start",
            "Turn %s: MCP session started (max %s iterations)",
            turn,
            max_iterations,
            max_iterations=max_iterations,
        )
        args = self._client_args(messages, response_format=None, tools=tools, tool_choice="auto")
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
                iteration=stats.iterations,
                max_iterations=max_iterations,
            )
            response = self.client.chat.completions.create(**args)
            if response.tool_calls:
                messages.append(
                    {"role": "assistant", "content": None, "tool_calls": [asdict(tc) for tc in response.tool_calls]}
                )
                servers_lost = await self._run_tool_batch(response.tool_calls, messages, stats)
                if stats.budget_exhausted:
                    break
                if servers_lost:
                    # A server went away: its tools are no longer offered; the other servers' still are.
                    assert self.mcp_manager is not None
                    tools = await self.mcp_manager.open_turn(turn)
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
                iterations=stats.iterations,
            )
            stats.forced_final = True
            messages.append({"role": "user", "content": FINAL_ACTION_PROMPT})
            response = self.client.chat.completions.create(**self._client_args(messages, tools=None, tool_choice=None))
        decision = self._parse_response(response.content, tuple(stats.calls))
        self._log(
            "info",
            "mcp_session_complete",
            "Turn %s: MCP session complete (%s iterations, %s tool calls)",
            turn,
            stats.iterations,
            stats.tool_calls,
            iterations=stats.iterations,
            tool_calls_count=stats.tool_calls,
            tools_used=stats.tools_used,
            forced_final=stats.forced_final,
            turn_budget_exhausted=stats.budget_exhausted,
            final_action=decision.action,
        )
        # The episode log closes each MCP session with the action it produced.
        self._log(
            "info", "mcp_agent_action", "Turn %s: Agent action: %s", turn, decision.action, action=decision.action
        )
        return decision

    def _budget_exhausted(self, stats: ToolLoopStats) -> None:
        if stats.budget_exhausted:
            return
        stats.budget_exhausted = True
        budget = self.config.mcp.turn_timeout_seconds
        self._log(
            "warning",
            "mcp_turn_budget_exhausted",
            "Turn %s: turn budget of %gs spent after %s iterations; asking for the final action now",
            self.current_turn,
            budget,
            stats.iterations,
            turn_timeout_seconds=budget,
            iterations=stats.iterations,
            tool_calls_count=stats.tool_calls,
        )

    async def _run_tool_batch(
        self, tool_calls: list[Any], messages: list[dict[str, Any]], stats: ToolLoopStats
    ) -> bool:
        """Run one response's tool calls in order. Returns True when a server went away during it.

        Every tool_call id gets a ``role: "tool"`` reply, even the ones skipped after a timeout:
        providers reject a history where an assistant tool call has no matching result. A
        server that died only skips the rest of its own tools' calls; the other servers' run.
        """
        from managers.mcp.tools import ToolCallResult

        assert self.mcp_manager is not None
        manager = self.mcp_manager
        turn, iteration = self.current_turn, stats.iterations
        abort_reason: str | None = None
        gone: dict[str, str] = {}  # server -> why its later calls in this batch are skipped
        cap = self.config.mcp.max_tool_calls_per_reply
        over_cap = (
            f"Skipped: this reply asked for {len(tool_calls)} tool calls and only the first {cap} run "
            "([tool.zorkgpt.mcp] max_tool_calls_per_reply). Call again for the ones you still need."
        )
        if len(tool_calls) > cap:
            self._log(
                "warning",
                "mcp_tool_calls_capped",
                "Turn %s Iteration %s: the model asked for %s tool calls in one reply; running the first %s "
                "([tool.zorkgpt.mcp] max_tool_calls_per_reply)",
                turn,
                iteration,
                len(tool_calls),
                cap,
                requested=len(tool_calls),
                max_tool_calls_per_reply=cap,
                iteration=iteration,
            )
        for position, tool_call in enumerate(tool_calls):
            name = self._display_name(tool_call.function.name)
            server = manager.server_of(tool_call.function.name)
            skip = over_cap if position >= cap else abort_reason or (gone.get(server) if server else None)
            if skip is None and stats.remaining() <= 0:  # the model's own call used up the budget
                self._budget_exhausted(stats)
                skip = abort_reason = "Skipped: the turn's time budget is spent"
            if skip is not None:
                self._append_tool_result(messages, tool_call.id, ToolCallResult(None, True, skip))
                continue

            answer = functools.partial(self._answer, messages, stats, tool_call.id, server, name)
            raw_arguments = tool_call.function.arguments or ""
            try:
                arguments = _read_arguments(raw_arguments)
                if tool_call.function.name == MALFORMED_TOOL_NAME:
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
                    tool_name=name,
                    error=f"invalid arguments: {exc}",
                    iteration=iteration,
                )
                malformed = tool_call.function.name == MALFORMED_TOOL_NAME
                problem = str(exc) if malformed else f"Invalid tool arguments: {exc}"
                answer(ToolCallResult(None, True, problem), cap_text(raw_arguments, MAX_LOGGED_TOOL_ARGUMENTS_CHARS))
                continue
            # The server's own timeout (or the configured one), cut to what is left of the turn budget.
            server_timeout = manager.timeout_for(tool_call.function.name)
            timeout = min(server_timeout, stats.remaining())
            self._log(
                "info",
                "mcp_tool_call",
                "Turn %s Iteration %s: Agent calling tool %s",
                turn,
                iteration,
                name,
                tool_name=name,
                server_name=server,
                arguments=_loggable_arguments(arguments, raw_arguments),
                iteration=iteration,
            )
            self.logger.debug("Turn %s Iteration %s: Tool arguments: %s", turn, iteration, json.dumps(arguments)[:500])
            started = time.perf_counter()
            try:
                result = await manager.call_tool(name, arguments, timeout_seconds=timeout)
            except TimeoutError:
                self._log(
                    "warning",
                    "mcp_tool_timeout",
                    "Turn %s Iteration %s: Tool call timeout: %s",
                    turn,
                    iteration,
                    name,
                    tool_name=name,
                    server_name=server,
                    iteration=iteration,
                    timeout_seconds=timeout,
                )
                answer(ToolCallResult(None, True, f"Tool call timed out after {timeout:g}s"), arguments)
                if timeout < server_timeout:  # it was the turn budget that ran out
                    self._budget_exhausted(stats)
                    abort_reason = "Skipped: the turn's time budget is spent"
                else:
                    abort_reason = f"Skipped: an earlier tool call in this batch ({name}) timed out"
                if position + 1 < len(tool_calls):
                    self._log(
                        "info",
                        "mcp_batch_aborted",
                        "Turn %s: Skipping remaining tools in batch after timeout",
                        turn,
                        tool_name=name,
                        skipped=len(tool_calls) - position - 1,
                        iteration=iteration,
                    )
                continue
            except (MCPToolCallError, OSError) as exc:
                # The tool-call boundary: a call that failed (the MCP family, or a pipe or socket
                # failing under the SDK) becomes an error result the model reads, and the turn
                # goes on. Anything else is a bug in ZorkGPT and propagates.
                self._log(
                    "warning",
                    "mcp_tool_error",
                    "Turn %s Iteration %s: Tool call failed: %s - %s",
                    turn,
                    iteration,
                    name,
                    exc,
                    tool_name=name,
                    server_name=server,
                    error=str(exc),
                    iteration=iteration,
                    exc_info=not isinstance(exc, MCPToolCallError),  # a transport failure: keep its traceback
                )
                answer(ToolCallResult(None, True, f"Tool call failed: {exc}"), arguments)
                if isinstance(exc, MCPServerDiedError) and server is not None:
                    gone[server] = f"Skipped: the MCP server '{server}' stopped during {name}"
                continue
            duration = time.perf_counter() - started
            answer(result, arguments)
            self._log(
                "info",
                "mcp_tool_result",
                "Turn %s Iteration %s: Tool result received (%.1fs)",
                turn,
                iteration,
                duration,
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
        return bool(gone)

    def _display_name(self, wire_name: str) -> str:
        return self.mcp_manager.display_name(wire_name) if self.mcp_manager else wire_name

    def _answer(
        self,
        messages: list[dict[str, Any]],
        stats: ToolLoopStats,
        call_id: str,
        server: str | None,
        name: str,
        result: Any,
        arguments: dict[str, Any] | str,
    ) -> None:
        """A call's ``role: "tool"`` message for the model, and its record in the decision."""
        self._append_tool_result(messages, call_id, result)
        stats.calls.append(ToolCallRecord(server, name, arguments, _summary(result), result.is_error))

    @staticmethod
    def _append_tool_result(messages: list[dict[str, Any]], call_id: str, result: Any) -> None:
        messages.append({"role": "tool", "tool_call_id": call_id, "content": json.dumps(result.to_dict(), default=str)})

    def _log(
        self, level: str, event_type: str, message: str, *args: Any, exc_info: bool = False, **fields: Any
    ) -> None:
        """Log ``message % args`` as an event of this turn; ``fields`` go into the event."""
        extra = {"event_type": event_type, "episode_id": self.episode_id, "turn": self.current_turn, **fields}
        getattr(self.logger, level)(message, *args, exc_info=exc_info, extra=extra)


def _summary(result: Any) -> str:
    """The start of a tool call's result for the turn's record: the error, or the content as JSON."""
    if result.is_error:
        return shorten(result.error_message or "Tool call failed", TOOL_SUMMARY_CHARS)
    return shorten(json.dumps(result.to_dict()["content"], default=str, ensure_ascii=False), TOOL_SUMMARY_CHARS)
