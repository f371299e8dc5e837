"""The agent: turns the game state into one game command, optionally reasoning with MCP tools.

``get_action_with_reasoning`` is the public, synchronous API. Without tools it makes one LLM
call (JSON-schema response format). With the turn's tools (a ``Toolset`` the episode runner
opened for the turn and closes after it) it is the single ``asyncio.run`` boundary of the
agent call: the tool-calling loop (``tool_loop.loop``) runs in it within the turn
budget (``turn_timeout_seconds``); the MCP manager's own background loop owns the sessions, so
the blocking model call here never holds up a server. The critic's re-asks of the same turn go
on with the turn's conversation and the same tools. The agent owns what the loop asks (model,
sampling, the answer's schema) and how the final answer is read.

The prompt speaks of text adventures in general; what it says of the game being played comes
from the game itself (``Game.briefing``: its title, its maximum score and what the score counts),
so a model is told nothing of one game while it plays another.
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

from chat_api.models import tools_not_supported
from chat_api.tracing import traced_observation
from game_interface.games import Game
from llm_client import LLMClient
from session.episode_events import EpisodeEvent, emit
from session.episode_events.episode import AgentCommandsCut, AgentParseError, AgentReplyPartial
from session.episode_folder import AGENT_CALL_NAME
from session.errors import ConfigError
from session.game_configuration import FilesSection, GameConfiguration
from session.game_state import AgentDecision, ToolCallRecord
from session.objective_spec import ObjectiveProposal
from shared_utils.model_json import (
    MAX_JSON_DEPTH,
    create_json_schema,
    extract_json_object,
    json_type,
    read_cut_json_object,
)
from shared_utils.text import cap_text, shorten
from shared_utils.toolset import Toolset
from tool_loop.events import ToolLoopLog
from tool_loop.loop import ToolLoop

if TYPE_CHECKING:
    from shared_utils.toolset import ServerPrompt

FALLBACK_ACTION = "look"
# How much of an unparseable reply the log keeps: enough to see what went wrong.
MAX_LOGGED_REPLY_CHARS = 2_000
PROMPT_DIR = Path(__file__).resolve().parent / "prompts"


class AgentResponse(BaseModel):
    """The agent's reply: its reasoning, one game command, and optionally a new objective."""

    thinking: str = Field(description="Brief reasoning for the chosen action")
    action: str = Field(description="Exactly one game command")
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
# the game's parser always splits them ("then", a period, a quote mark) and at ";", "!" and "?"; the game's own
# reading (``JerichoInterface.commands_in``) also splits at the commas and "and"s that start a command.
_SENTENCE_BREAK = re.compile(r"\s*(?:[.;!?\"]|\bthen\b)\s*", re.IGNORECASE)
# The game's parser reads short lines; longer "actions" are prose, not commands (and the engine refuses them).
MAX_ACTION_CHARS = 120
QUOTES = "\"'“”‘’"


def _unquoted(line: str) -> str:
    """``line`` without quote marks around it; a quotation it ends with keeps its closing mark
    (the game's verb reads what is quoted: 'answer "a well"')."""
    line = line.strip().strip(QUOTES).strip()
    return f'{line}"' if line.count('"') % 2 else line


def clean_action(raw: str | None) -> str:
    """The first non-empty line of a reply's action, lower-case, without quotes around it,
    markdown, an "Action:" label or trailing punctuation. It may still chain several commands:
    the agent's ``read_commands`` splits them."""
    if not raw:
        return ""
    for line in str(raw).splitlines():
        line = _unquoted(_MARKDOWN.sub("", line))
        line = re.sub(r"^(action|command)\s*:\s*", "", line, flags=re.IGNORECASE)
        line = _unquoted(re.sub(r"\s+", " ", line).strip().rstrip(".;!?"))
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
    names a tool's server (``Toolset.tool(name).server``); without it a wire name
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
        client: LLMClient,
        logger: logging.Logger | None = None,
        episode_id: str = "unknown",
        langfuse_client: Any = None,
        model: str | None = None,
        knowledge_text: str = "",
        read_commands: Callable[[str], list[str]] | None = None,
        game: Game | None = None,
    ) -> None:
        """``read_commands(line)``: the commands a line chains, as the game reads it
        (``JerichoInterface.commands_in``); without it, only sentence breaks split a line.
        ``game``: the game played, whose briefing ends the prompt (None: the prompt alone)."""
        self.config = config
        self.client = client
        self.logger = logger or logging.getLogger("zorkgpt.agent")
        self.episode_id = episode_id
        self.langfuse_client = langfuse_client
        self.model = model or config.llm.agent_model
        self.sampling = config.sampling_for("agent")
        self._base_prompt = self._load_prompt(config)
        if game is not None:
            self._base_prompt = f"{self._base_prompt}\n\n# This game\n{game.briefing}"
        self.knowledge_text = knowledge_text
        self.current_turn = 0
        self.read_commands = read_commands or sentence_commands
        # This turn's conversation so far (turn, messages): a critic's re-ask goes on with it, so the
        # model sees the tool calls it already made and every proposal the critic sent back.
        self._conversation: tuple[int, list[dict[str, Any]]] | None = None
        self.tool_loop = ToolLoop(
            client,
            config.mcp,
            ToolLoopLog(self.logger, episode_id),
            request_args=self._client_args,
            read_answer=self._parse_response,
            is_answer=self._readable,
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
        args: dict[str, Any] = dict(
            model=self.model, messages=messages, **self.sampling.request_args(), name=AGENT_CALL_NAME
        )
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
        tools: Toolset | None = None,
    ) -> AgentDecision:
        """One game command for this state, with the reasoning and the tool calls behind it.

        ``rejections``: every proposal the critic sent back this turn, with its reason. Then the
        request goes on with this turn's conversation (its tool calls and replies) and ends with
        the list; a first ask (no rejections) starts the turn's conversation afresh.
        ``tools``: the turn's tools, opened and closed by the episode runner (None: MCP is off).
        """
        if turn is not None:
            self.current_turn = turn
        kept = self._conversation
        going_on = bool(rejections) and kept is not None and kept[0] == self.current_turn
        messages = self._turn_messages(game_state_text, relevant_memories, rejections if going_on else ())
        if tools is not None and not going_on:
            # Only now is it known which tools are offered; a re-ask keeps the prompt its conversation began with.
            messages[0] = {"role": "system", "content": self._system_prompt_with(tools)}
        if tools is None or not tools.schemas:
            response = self.client.complete(**self._client_args(messages))
            return self._remember(messages, self._parse_response(response.content))
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise AgentRuntimeError(
                "get_action_with_reasoning() was called inside a running event loop. It owns the turn's "
                "asyncio.run boundary; from async code, await agent.ask_with_tools(messages, tools) instead."
            )
        return self._remember(messages, asyncio.run(self.ask_with_tools(messages, tools)))

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
        """The decision in the model's reply; an unusable reply plays ``FALLBACK_ACTION`` (logged why)."""
        try:
            parsed, dropped, commands = self._read_reply(content)
        except (ValidationError, ValueError) as exc:
            failure = AgentParseError(
                episode_id=self.episode_id,
                turn=self.current_turn,
                error=str(exc),
                raw_response=cap_text(content or "", MAX_LOGGED_REPLY_CHARS),
            )
            self._log_event(
                logging.ERROR,
                failure,
                "could not parse the agent's reply (%s); falling back to '%s'",
                exc,
                FALLBACK_ACTION,
            )
            return AgentDecision(
                action=FALLBACK_ACTION,
                reasoning=f"Parse error: {exc}. Raw: {cap_text(content or '', 100)}",
                raw_response=content,
                tool_calls=tool_calls,
            )
        action, unplayed = commands[0].lower(), tuple(commands[1:])
        if dropped:
            self._log_event(
                logging.WARNING,
                AgentReplyPartial(episode_id=self.episode_id, turn=self.current_turn, dropped=dropped, action=action),
                "kept the agent's action '%s' and dropped what was unusable in its reply: %s",
                action,
                "; ".join(dropped),
            )
        if unplayed:
            cut = AgentCommandsCut(
                episode_id=self.episode_id, turn=self.current_turn, action=action, unplayed=list(unplayed)
            )
            self._log_event(
                logging.INFO, cut, "the agent chained %s commands; playing only the first, '%s'", len(commands), action
            )
        objective = parsed.new_objective if parsed.new_objective and parsed.new_objective.text.strip() else None
        return AgentDecision(
            action=action,
            unplayed=unplayed,
            reasoning=parsed.thinking,
            new_objective=objective,
            raw_response=content,
            tool_calls=tool_calls,
        )

    def _readable(self, content: str) -> bool:
        """Whether the reply holds an action ``_parse_response`` would play (checked without logging)."""
        try:
            self._read_reply(content)
        except (ValidationError, ValueError):
            return False
        return True

    def _read_reply(self, content: str | None) -> tuple[AgentResponse, list[str], list[str]]:
        """The reply, what of it was dropped as unusable, and the commands its action chains.

        Raises ``ValueError`` (or pydantic's ``ValidationError``) saying why there is no action."""
        data = extract_json_object(content or "")
        cut = None
        if data is None or "action" not in data:
            # A reply cut off at max_tokens after its action (a small model rambling on in its
            # objective) still chose a command: play it rather than the fallback.
            cut = read_cut_json_object(content or "")
            if cut is not None and "action" in cut:
                data = cut
        if data is None:
            raise ValueError(f"no JSON object in the reply (or one nested more than {MAX_JSON_DEPTH} levels deep)")
        parsed, dropped = read_agent_reply(data)
        if data is cut:
            dropped = ["the reply stops part-way (cut off); only the fields it finished were read", *dropped]
        commands = self.read_commands(clean_action(parsed.action))
        if not commands:
            raise ValueError("the reply's action is empty")
        if len(commands[0]) > MAX_ACTION_CHARS:
            raise ValueError(f"the reply's action is {len(commands[0])} characters long (limit {MAX_ACTION_CHARS})")
        return parsed, dropped, commands

    def _log_event(self, level: int, event: EpisodeEvent, message: str, *args: Any) -> None:
        """Log ``event``, an event of this turn, with ``message % args`` after the turn's number."""
        emit(self.logger, event, f"Turn %s: {message}", self.current_turn, *args, level=level)

    # -- MCP tool-calling path -----------------------------------------------------------
    def _system_prompt_with(self, tools: Toolset) -> str:
        """The system prompt with the prompts the configuration names, in the servers' words, and
        the tools offered, named as they must be called."""
        parts = [self.system_prompt, server_prompts_text(list(tools.prompts))]
        if tools.schemas:
            parts.append(tools_prompt(tools.schemas, dict(tools.instructions), lambda name: tools.tool(name).server))
        return "\n\n".join(part for part in parts if part)

    async def ask_with_tools(self, messages: list[dict[str, Any]], tools: Toolset) -> AgentDecision:
        """Run the tool loop on ``messages`` with the turn's ``tools`` (``messages`` grows with it).

        Raises ``ToolsNotSupportedError`` when the model cannot call tools: the run cannot go on as
        configured (``session.errors`` has the policy).
        """
        if not self.client.supports_tool_calling(self.model):
            raise tools_not_supported(self.model)
        with self._tool_loop_observation() as span:
            outcome = await self.tool_loop.run(messages, tools, self.current_turn)
            if span is not None:
                span.update(
                    output={"action": outcome.decision.action},
                    metadata={
                        "iterations_used": outcome.iterations,
                        "tools_called": outcome.tool_calls,
                        "tools_used": outcome.tools_used,
                        "forced_final": outcome.forced_final,
                        "turn_budget_exhausted": outcome.budget_exhausted,
                        "final_action": outcome.decision.action,
                    },
                )
        return outcome.decision

    def _tool_loop_observation(self) -> AbstractContextManager[Any]:
        return traced_observation(
            self.langfuse_client,
            self.logger,
            self.client.redactor,
            as_type="span",
            name="agent-tool-loop",
            metadata={
                "max_iterations": self.config.mcp.max_tool_iterations,
                "turn": self.current_turn,
                "episode_id": self.episode_id,
            },
        )
