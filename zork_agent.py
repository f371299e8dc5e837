"""The agent: turns the game state into one Zork command, optionally reasoning with MCP tools.

``get_action_with_reasoning`` is the public, synchronous API. With MCP disabled it makes one
LLM call (JSON-schema response format) exactly as before MCP existed. With MCP enabled it is
the single ``asyncio.run`` boundary of the agent call: inside it the turn's tools are opened
(the MCP manager's own background loop owns the sessions, so the blocking model call here
never holds up a server), the tool-calling loop (``managers.mcp.tool_loop``) runs within the
turn budget (``turn_timeout_seconds``), and the sessions stay open for the critic's re-asks of
the same turn; the orchestrator ends the turn. The agent owns what the loop asks (model,
sampling, the answer's schema) and how the final answer is read.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from llm.models import tools_not_supported
from llm_client import LLMClientWrapper
from managers.mcp.tool_loop import ToolLoop, ToolLoopOutcome, json_type
from session.errors import ConfigError
from session.game_configuration import FilesSection, GameConfiguration
from session.game_state import AgentDecision, ToolCallRecord
from session.objective_spec import ObjectiveProposal
from shared_utils import (
    MAX_JSON_DEPTH,
    cap_text,
    create_json_schema,
    extract_json_object,
    shorten,
    traced_observation,
)

if TYPE_CHECKING:
    from managers.mcp import MCPManager
    from managers.mcp.toolbox import ServerPrompt

FALLBACK_ACTION = "look"
# How much of an unparseable reply the log keeps: enough to see what went wrong.
MAX_LOGGED_REPLY_CHARS = 2_000
PROMPT_DIR = Path(__file__).resolve().parent / "prompts"


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


_MARKDOWN = re.compile(r"[*_`#>]+")
# Without the story's dictionary (an agent built without a game), commands are split only where
# Zork always splits them ("then", a period, a quote mark) and at ";", "!" and "?"; the game's own
# reading (``JerichoInterface.commands_in``) also splits at the commas and "and"s that start a command.
_SENTENCE_BREAK = re.compile(r"\s*(?:[.;!?\"]|\bthen\b)\s*", re.IGNORECASE)
# Zork's parser reads short lines; longer "actions" are prose, not commands (and the engine refuses them).
MAX_ACTION_CHARS = 120
QUOTES = "\"'“”‘’"


def clean_action(raw: str | None) -> str:
    """The first non-empty line of a reply's action, lower-case, without quotes around it,
    markdown, an "Action:" label or trailing punctuation. It may still chain several commands:
    the agent's ``read_commands`` splits them."""
    if not raw:
        return ""
    for line in str(raw).splitlines():
        line = _MARKDOWN.sub("", line).strip().strip(QUOTES).strip()
        line = re.sub(r"^(action|command)\s*:\s*", "", line, flags=re.IGNORECASE)
        line = re.sub(r"\s+", " ", line).strip().rstrip(".;!?").strip().strip(QUOTES).strip()
        if line:
            return line.lower()
    return ""


def sentence_commands(line: str) -> list[str]:
    """The commands of ``line`` where no story dictionary is at hand (see ``_SENTENCE_BREAK``)."""
    return [part for part in (p.strip() for p in _SENTENCE_BREAK.split(line)) if part]


def unplayed_note(played: str, unplayed: tuple[str, ...]) -> str:
    """The line that tells the model, on its next turn, what of its last action the game did not play."""
    rest = "; ".join(f'"{command}"' for command in unplayed)
    return (
        f'Note: your last action chained several commands; only the first, "{played}", was played '
        f"(one command per turn). Not played: {rest}."
    )


TOOL_DESCRIPTION_CHARS = 200  # a tool's first sentence is its purpose; schemas carry the rest
# A server without instructions says what it is for only through its tools' descriptions: those are given whole.
TOOL_FULL_DESCRIPTION_CHARS = 600


def tools_prompt(
    tools: list[dict[str, Any]],
    instructions: dict[str, str] | None = None,
    server_of: Callable[[str], str | None] | None = None,
) -> str:
    """What the system prompt says when MCP tools are offered: that they may be called before
    answering, that the final answer is still the JSON object, and each tool by the name the
    model must call it by, grouped by server and described in the servers' own words: a
    server's ``instructions`` and each tool's first sentence, or, for a server that gives no
    instructions, each tool's whole description.

    ``tools`` are the OpenAI function tools sent with the request. ``server_of(wire_name)``
    names a tool's server (the MCP manager's routing); without it a wire name
    ``server__tool`` is read as naming its server.
    """
    instructions = instructions or {}
    by_server: dict[str, list[tuple[str, str]]] = {}
    for tool in tools:
        function = tool.get("function", {})
        wire = str(function.get("name", ""))
        server = (server_of(wire) if server_of else None) or wire.rpartition("__")[0] or "tools"
        by_server.setdefault(server, []).append((wire, str(function.get("description") or "").strip()))
    lines = [
        "# Tools",
        "With this request you are offered tools. You may call them before answering, as often as they help; they "
        "do not act in the game. Call each by the name given here. When you are done, answer as above: the single "
        "JSON object with your game command.",
    ]
    for server, named in by_server.items():
        about = shorten(instructions.get(server, ""), TOOL_DESCRIPTION_CHARS)
        lines.append(f"- Server {server}" + (f": {about}" if about else ""))
        for wire, description in named:
            if about:
                description = shorten(re.split(r"(?<=[.!?])\s", description)[0], TOOL_DESCRIPTION_CHARS)
            else:
                description = shorten(" ".join(description.split()), TOOL_FULL_DESCRIPTION_CHARS)
            lines.append(f"  - {wire}" + (f": {description}" if description else ""))
    return "\n".join(lines)


def server_prompts_text(prompts: list[ServerPrompt]) -> str:
    """The configured MCP prompts for the system prompt, each under a heading naming its server and
    prompt (the servers' own words, as they gave them)."""
    return "\n\n".join(f"# Prompt {prompt.name} of MCP server {prompt.server}\n{prompt.text}" for prompt in prompts)


def rejections_prompt(rejections: Sequence[str]) -> str:
    """The re-ask's message: every proposal the critic sent back this turn, with its reason."""
    listed = "\n".join(f"- {rejection}" for rejection in rejections)
    return (
        "The critic sent your proposal back. Proposals rejected this turn, with the critic's reasons:\n"
        f"{listed}\nPropose a different action (not one of these), answering with the JSON object as before."
    )


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
        dropped.append("thinking (missing)" if thinking is None else f"thinking ({json_type(thinking)}, not text)")
        fields["thinking"] = ""
    objective = fields.get("new_objective")
    if objective is not None and not isinstance(objective, str):
        try:
            ObjectiveProposal.model_validate(objective)
        except ValidationError:
            shown = shorten(json.dumps(objective), 80)
            dropped.append(f"new_objective ({json_type(objective)}, not a goal with done_when steps): {shown}")
            fields["new_objective"] = None
    return AgentResponse.model_validate(fields), dropped


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
        read_commands: Callable[[str], list[str]] | None = None,
    ) -> None:
        """``read_commands(line)``: the commands a line chains, as the game reads it
        (``JerichoInterface.commands_in``); without it, only sentence breaks split a line."""
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
        self.read_commands = read_commands or sentence_commands
        # This turn's conversation so far (turn, messages): a critic's re-ask goes on with it, so the
        # model sees the tool calls it already made and every proposal the critic sent back.
        self._conversation: tuple[int, list[dict[str, Any]]] | None = None
        self.tool_loop = (
            ToolLoop(
                client,
                mcp_manager,
                config.mcp,
                self.logger,
                request_args=self._client_args,
                read_answer=self._parse_response,
                episode_id=episode_id,
            )
            if mcp_manager is not None
            else None
        )

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
        self,
        game_state_text: str,
        relevant_memories: str | None = None,
        turn: int | None = None,
        rejections: Sequence[str] = (),
    ) -> AgentDecision:
        """One game command for this state, with the reasoning and the tool calls behind it.

        ``rejections``: every proposal the critic sent back this turn, with its reason. Then the
        request goes on with this turn's conversation (its tool calls and replies) and ends with
        the list; a first ask (no rejections) starts the turn's conversation afresh.
        """
        if turn is not None:
            self.current_turn = turn
        kept = self._conversation
        going_on = bool(rejections) and kept is not None and kept[0] == self.current_turn
        messages = self._turn_messages(game_state_text, relevant_memories, rejections if going_on else ())
        if not self.mcp_enabled:
            response = self.client.complete(**self._client_args(messages))
            return self._remember(messages, self._parse_response(response.content))
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise AgentRuntimeError(
                "get_action_with_reasoning() was called inside a running event loop. It owns the turn's "
                "asyncio.run boundary; from async code, await agent._generate_action_async(...) instead."
            )
        return asyncio.run(self._generate_action_async(messages, first_ask=not going_on))

    def _turn_messages(
        self, game_state_text: str, relevant_memories: str | None, rejections: Sequence[str]
    ) -> list[dict[str, Any]]:
        """A first ask's system and user messages, or, with ``rejections`` (a re-ask of the turn
        whose conversation is kept), that conversation and the critic's rejections."""
        if not rejections or self._conversation is None:
            return self._build_messages(game_state_text, relevant_memories)
        return [*self._conversation[1], {"role": "user", "content": rejections_prompt(rejections)}]

    def _remember(self, messages: list[dict[str, Any]], decision: AgentDecision) -> AgentDecision:
        """Keeps the turn's conversation, the model's final answer included, for a re-ask."""
        answer = {"role": "assistant", "content": decision.raw_response or ""}
        self._conversation = (self.current_turn, [*messages, answer])
        return decision

    # -- parsing -----------------------------------------------------------------------
    def _parse_response(self, content: str | None, tool_calls: tuple[ToolCallRecord, ...] = ()) -> AgentDecision:
        data = extract_json_object(content or "")
        try:
            if data is None:
                raise ValueError(f"no JSON object in the reply (or one nested more than {MAX_JSON_DEPTH} levels deep)")
            parsed, dropped = read_agent_reply(data)
            commands = self.read_commands(clean_action(parsed.action))
            if not commands:
                raise ValueError("the reply's action is empty")
            action, unplayed = commands[0].lower(), tuple(commands[1:])
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
        if unplayed:
            self.logger.info(
                "Turn %s: the agent chained %s commands; playing only the first, '%s'",
                self.current_turn,
                len(commands),
                action,
                extra={
                    "event_type": "agent_commands_cut",
                    "action": action,
                    "unplayed": list(unplayed),
                    "episode_id": self.episode_id,
                    "turn": self.current_turn,
                },
            )
        return AgentDecision(
            action=action,
            unplayed=unplayed,
            reasoning=parsed.thinking,
            new_objective=parsed.new_objective if parsed.new_objective and parsed.new_objective.text.strip() else None,
            raw_response=content,
            tool_calls=tool_calls,
        )

    # -- MCP tool-calling path -----------------------------------------------------------
    async def _generate_action_async(self, messages: list[dict[str, Any]], first_ask: bool = True) -> AgentDecision:
        """Open the turn's tools and run the tool loop on ``messages``; the sessions stay open for this
        turn's re-asks. ``first_ask``: the turn's first request (its system prompt gets the tools)."""
        assert self.mcp_manager is not None and self.tool_loop is not None
        with self._session_observation() as span:
            tools = await self._open_tools()
            # The prompts the config names, fetched when the episode's first turn opened its tools.
            prompts = server_prompts_text(self.mcp_manager.server_prompts())
            system = f"{self.system_prompt}\n\n{prompts}" if prompts else self.system_prompt
            if tools is None:
                if first_ask:
                    messages[0] = {"role": "system", "content": system}
                response = self.client.complete(**self._client_args(messages))
                outcome = ToolLoopOutcome(self._parse_response(response.content))
            else:
                if first_ask:
                    # Only now is it known which tools are offered: the prompt names them as they must be
                    # called, in the servers' words. A re-ask keeps the prompt its conversation began with.
                    about = tools_prompt(tools, self.mcp_manager.server_instructions(), self.mcp_manager.server_of)
                    messages[0] = {"role": "system", "content": f"{system}\n\n{about}"}
                outcome = await self.tool_loop.run(messages, tools, self.current_turn)
            decision = outcome.decision
            if span is not None:
                span.update(
                    output={"action": decision.action},
                    metadata={
                        "iterations_used": outcome.iterations,
                        "tools_called": outcome.tool_calls,
                        "tools_used": outcome.tools_used,
                        "forced_final": outcome.forced_final,
                        "turn_budget_exhausted": outcome.budget_exhausted,
                        "final_action": decision.action,
                    },
                )
        return self._remember(messages, decision)

    async def _open_tools(self) -> list[dict[str, Any]] | None:
        """This turn's tools from every server; None means the turn plays without tools (logged why).

        Raises ``MCPServerStartupError`` when a server failed to start on the episode's first
        connect, and ``ToolsNotSupportedError`` when the model cannot call tools: the run cannot go on
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
        if not self.client.supports_tool_calling(self.model):
            raise tools_not_supported(self.model)
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

    def _log(
        self, level: str, event_type: str, message: str, *args: Any, exc_info: bool = False, **fields: Any
    ) -> None:
        """Log ``message % args`` as an event of this turn; ``fields`` go into the event."""
        extra = {"event_type": event_type, "episode_id": self.episode_id, "turn": self.current_turn, **fields}
        getattr(self.logger, level)(message, *args, exc_info=exc_info, extra=extra)
