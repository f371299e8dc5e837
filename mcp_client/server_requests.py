"""What ZorkGPT answers when a server asks the client something: elicitation, sampling, roots.

ZorkGPT plays alone: there is nobody to fill a form or approve a model call. So by default
every elicitation is declined (``mcp_elicitation_declined`` in the log, the server gets the
answer "decline" at once, in both protocol revisions: a legacy request or an input-required
round of a 2026-07-28 call), and sampling is not offered at all (the client does not declare
it; a server that asks anyway gets an error answer). Roots are never offered.

An entry may opt in:

* ``"elicitation": "agent"`` — the agent's model fills a form from its schema (one call,
  counted in the run's usage and cost under ``mcp-elicitation``), at most 3 forms a turn, or
  ``maxPerTurn`` in the object form ``{"answer": "agent", "maxPerTurn": 5}``; the forms beyond
  it are declined. A URL elicitation (open this page) is still declined: nobody can visit it.
* ``"sampling": {"role": "memory", "maxPerTurn": 3, "maxTokens": 400}`` — the server may ask
  that role's model (agent, critic, extractor or memory) for a completion, at most
  ``maxPerTurn`` times a turn, each capped at ``maxTokens`` (and at what the server asked),
  counted under ``mcp-sampling``; the requests beyond it get an error answer.

A server asking in a loop must not flood the terminal or the log either: of the requests turned
away in a turn (over a cap, or declined by the entry), the first of each kind is logged (a
warning for a cap) and the rest only counted; when the turn ends, one ``mcp_server_requests_refused``
line per server gives the counts.

The answers run on the MCP session loop; the (blocking) model call runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import mcp.types as types
from mcp.client.session import ClientRequestContext, ElicitationFnT, SamplingFnT

from chat_api.wire import LLMResponse
from mcp_client.config import ServerConfig
from session.episode_events import EpisodeEvent, emit
from session.episode_events.mcp import (
    MCPElicitationAnswered,
    MCPElicitationDeclined,
    MCPElicitationRefused,
    MCPSamplingAnswered,
    MCPSamplingRefused,
    MCPServerRequestsRefused,
)
from session.redaction import Redactor
from shared_utils.model_json import extract_json_object

ELICITATION_USAGE_NAME = "mcp-elicitation"
SAMPLING_USAGE_NAME = "mcp-sampling"


class ChatModel(Protocol):
    """What a role's LLM client offers: ``client.complete(...)`` (``LLMClient`` in llm_client.py)."""

    def complete(
        self,
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        max_tokens: int | None = None,
        response_format: dict[str, Any] | None = None,
        name: str | None = None,
    ) -> LLMResponse: ...


# The kinds of request turned away, as counted in a turn's tally and named in its summary line.
SAMPLING_REFUSED = "sampling_refused"  # over sampling.maxPerTurn
ELICITATION_REFUSED = "elicitation_refused"  # over elicitation.maxPerTurn
ELICITATION_DECLINED = "elicitation_declined"  # the entry does not let the agent answer, or a URL form
_WHAT = {
    ELICITATION_DECLINED: "forms declined (the entry does not let the agent answer, or a web page to open)",
    ELICITATION_REFUSED: "forms declined over elicitation.maxPerTurn",
    SAMPLING_REFUSED: "sampling requests refused over sampling.maxPerTurn",
}


@dataclass
class _Tally:
    """One server's requests in one turn."""

    answered: Counter[str] = field(default_factory=Counter)  # model calls made: "sampling", "elicitation"
    turned_away: Counter[str] = field(default_factory=Counter)  # by kind, since the last summary
    logged: set[str] = field(default_factory=set)  # kinds whose first refusal this turn has its own line
    unlogged: int = 0  # of turned_away, those counted without a line of their own


class ServerRequestAnswers:
    """The answers for every server of one manager; ``turn()`` says which turn it is (for the
    per-turn caps), and ``end_turn()`` logs what was turned away in it."""

    def __init__(
        self,
        config_models: Mapping[str, str],
        clients: Mapping[str, ChatModel],
        logger: logging.Logger,
        turn: Callable[[], int | None],
        redactor: Redactor,
    ) -> None:
        self.models = config_models  # role -> model name
        self.clients = clients  # role -> client
        self.logger = logger
        self.turn = turn
        self.redactor = redactor
        # By (server, turn). Requests are answered on the session loop, the summary is asked for
        # from the episode's thread: the lock keeps each count whole.
        self._tallies: dict[tuple[str, int | None], _Tally] = {}
        self._lock = threading.Lock()

    def elicitation(self, server: ServerConfig) -> ElicitationFnT:
        async def answer(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
            mode = getattr(params, "mode", "form")
            settings = server.elicitation
            if settings.answer != "agent" or mode != "form" or "agent" not in self.clients:
                reason = (
                    "a URL elicitation needs a person to open the page"
                    if mode == "url"
                    else 'its entry does not say "elicitation": "agent"'
                )
                if self._turned_away(server.name, ELICITATION_DECLINED):
                    self._declined(server, params.message, reason)
                return types.ElicitResult(action="decline")
            used = self._answer(server.name, "elicitation", settings.max_per_turn)
            if used is None:
                if self._turned_away(server.name, ELICITATION_REFUSED):
                    self._log(
                        logging.WARNING,
                        MCPElicitationRefused(
                            turn=self.turn(), server_name=server.name, max_per_turn=settings.max_per_turn
                        ),
                        "ZorkGPT fills at most %d forms per turn from '%s' (its entry's elicitation.maxPerTurn); "
                        "declined, as any more this turn will be (counted, not logged one by one)",
                        settings.max_per_turn,
                        server.name,
                    )
                return types.ElicitResult(action="decline")
            try:
                content = await asyncio.to_thread(self._fill_form, params)
            except (ValueError, KeyError, TypeError) as exc:
                self._declined(server, params.message, f"the model's answer did not fit the form ({exc})")
                return types.ElicitResult(action="decline")
            self._log(
                logging.INFO,
                MCPElicitationAnswered(turn=self.turn(), server_name=server.name, form_fields=sorted(content)),
                "MCP server '%s' asked: %s; the agent's model answered the form (%d of %d this turn)",
                server.name,
                self.redactor(params.message),
                used,
                settings.max_per_turn,
            )
            return types.ElicitResult(action="accept", content=content)

        return answer

    def sampling(self, server: ServerConfig) -> SamplingFnT | None:
        """The sampling answer for ``server``, or None when its entry does not opt in (not offered)."""
        settings = server.sampling
        if settings is None or settings.role not in self.clients:
            return None

        async def answer(
            context: ClientRequestContext, params: types.CreateMessageRequestParams
        ) -> types.CreateMessageResult | types.ErrorData:
            used = self._answer(server.name, "sampling", settings.max_per_turn)
            if used is None:
                message = (
                    f"ZorkGPT answers at most {settings.max_per_turn} sampling requests per turn from "
                    f"'{server.name}' (its entry's sampling.maxPerTurn)"
                )
                if self._turned_away(server.name, SAMPLING_REFUSED):
                    self._log(
                        logging.WARNING,
                        MCPSamplingRefused(
                            turn=self.turn(), server_name=server.name, max_per_turn=settings.max_per_turn
                        ),
                        "%s; refused, as any more this turn will be (counted, not logged one by one)",
                        message,
                    )
                return types.ErrorData(code=types.INVALID_REQUEST, message=message)
            max_tokens = min(params.max_tokens, settings.max_tokens or params.max_tokens)
            text, model = await asyncio.to_thread(self._sample, settings.role, params, max_tokens)
            record = MCPSamplingAnswered(
                turn=self.turn(), server_name=server.name, role=settings.role, max_tokens=max_tokens
            )
            self._log(
                logging.INFO,
                record,
                "MCP server '%s' asked the %s model for a completion (%d of %d this turn)",
                server.name,
                settings.role,
                used,
                settings.max_per_turn,
            )
            return types.CreateMessageResult(
                role="assistant", content=types.TextContent(type="text", text=text), model=model, stop_reason="endTurn"
            )

        return answer

    # -- the per-turn tallies ----------------------------------------------------------------

    def _answer(self, server_name: str, kind: str, cap: int) -> int | None:
        """Count one more ``kind`` model call for the server this turn: its number, or None when
        the cap is reached (nothing counted). Checked and counted before any await, so requests
        dispatched at once cannot all slip under the cap."""
        with self._lock:
            tally = self._tallies.setdefault((server_name, self.turn()), _Tally())
            if tally.answered[kind] >= cap:
                return None
            tally.answered[kind] += 1
            return tally.answered[kind]

    def _turned_away(self, server_name: str, kind: str) -> bool:
        """Count a request turned away; True when it is the first of its kind this turn (the one
        that gets its own line)."""
        with self._lock:
            tally = self._tallies.setdefault((server_name, self.turn()), _Tally())
            tally.turned_away[kind] += 1
            if kind in tally.logged:
                tally.unlogged += 1
                return False
            tally.logged.add(kind)
            return True

    def end_turn(self) -> None:
        """Log, per server whose requests were turned away beyond the first of each kind (those have
        their own line), one ``mcp_server_requests_refused`` line with the counts since the last call."""
        with self._lock:
            pending = [(key, tally.turned_away.copy()) for key, tally in self._tallies.items() if tally.unlogged]
            for tally in self._tallies.values():
                tally.turned_away.clear()
                tally.unlogged = 0
            # Only the current turn's tallies can still count (its caps); the older ones are done.
            current = self.turn()
            self._tallies = {key: tally for key, tally in self._tallies.items() if key[1] == current}
        for (server_name, turn), counts in pending:
            record = MCPServerRequestsRefused(
                turn=turn,
                server_name=server_name,
                elicitation_declined=counts.get(ELICITATION_DECLINED, 0),
                elicitation_refused=counts.get(ELICITATION_REFUSED, 0),
                sampling_refused=counts.get(SAMPLING_REFUSED, 0),
            )
            self._log(
                logging.INFO,
                record,
                "Turn %s: MCP server '%s' had requests turned away: %s",
                turn,
                server_name,
                ", ".join(f"{count} {_WHAT[kind]}" for kind, count in sorted(counts.items())),
            )

    # -- the model calls (worker thread) ---------------------------------------------------

    def _fill_form(self, params: types.ElicitRequestParams) -> dict[str, Any]:
        schema = params.requested_schema  # type: ignore[union-attr]
        schema_json = schema if isinstance(schema, dict) else schema.model_dump(by_alias=True, exclude_none=True)
        messages = [
            {
                "role": "system",
                "content": (
                    "You are the player of a text adventure. A tool server asks you to fill in a form. "
                    "Answer with one JSON object that matches the form's schema, nothing else."
                ),
            },
            {"role": "user", "content": f"{params.message}\n\nForm schema:\n{json.dumps(schema_json)}"},
        ]
        response = self.clients["agent"].complete(
            model=self.models["agent"],
            messages=messages,
            response_format={"type": "json_object"},
            name=ELICITATION_USAGE_NAME,
        )
        # Read as every model reply is (bare, fenced or amid prose, depth-checked): one path for model JSON.
        content = extract_json_object(response.content or "")
        if content is None:
            raise ValueError("expected a JSON object")
        wanted = set(schema_json.get("properties", {}))
        missing = [key for key in schema_json.get("required", []) if key not in content]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        return {key: value for key, value in content.items() if key in wanted}

    def _sample(self, role: str, params: types.CreateMessageRequestParams, max_tokens: int) -> tuple[str, str]:
        messages: list[dict[str, Any]] = []
        if params.system_prompt:
            messages.append({"role": "system", "content": params.system_prompt})
        for message in params.messages:
            blocks = message.content if isinstance(message.content, list) else [message.content]
            text = "\n".join(
                block.text if isinstance(block, types.TextContent) else f"[{block.type} content omitted]"
                for block in blocks
            )
            messages.append({"role": message.role, "content": text})
        model = self.models[role]
        response = self.clients[role].complete(
            model=model, messages=messages, max_tokens=max_tokens, name=SAMPLING_USAGE_NAME
        )
        return response.content or "", model

    def _declined(self, server: ServerConfig, message: str, reason: str) -> None:
        self._log(
            logging.INFO,
            MCPElicitationDeclined(turn=self.turn(), server_name=server.name, reason=reason),
            "MCP server '%s' asked: %s; declined (%s)",
            server.name,
            self.redactor(message),
            reason,
        )

    def _log(self, level: int, record: EpisodeEvent, message: str, *args: Any) -> None:
        emit(self.logger, record, message, *args, level=level)
