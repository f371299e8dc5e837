"""What ZorkGPT answers when a server asks the client something: elicitation, sampling, roots.

ZorkGPT plays alone: there is nobody to fill a form or approve a model call. So by default
every elicitation is declined (``mcp_elicitation_declined`` in the log, the server gets the
answer "decline" at once, in both protocol revisions: a legacy request or an input-required
round of a 2026-07-28 call), and sampling is not offered at all (the client does not declare
it; a server that asks anyway gets an error answer). Roots are never offered.

An entry may opt in:

* ``"elicitation": "agent"`` — the agent's model fills a form from its schema (one call,
  counted in the run's usage and cost under ``mcp-elicitation``). A URL elicitation (open
  this page) is still declined: nobody can visit it.
* ``"sampling": {"role": "memory", "maxPerTurn": 3, "maxTokens": 400}`` — the server may ask
  that role's model (agent, critic, extractor or memory) for a completion, at most
  ``maxPerTurn`` times a turn, each capped at ``maxTokens`` (and at what the server asked),
  counted under ``mcp-sampling``.

The answers run on the MCP session loop; the (blocking) model call runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import mcp.types as types
from mcp.client.session import ClientRequestContext, ElicitationFnT, SamplingFnT

from chat_api.wire import LLMResponse
from managers.mcp.config import ServerConfig
from shared_utils import extract_json_object

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


class ServerRequestAnswers:
    """The answers for every server of one manager; ``turn()`` says which turn it is (for the
    per-turn sampling cap)."""

    def __init__(
        self,
        config_models: Mapping[str, str],
        clients: Mapping[str, ChatModel],
        logger: logging.Logger,
        turn: Callable[[], int | None],
        redact: Callable[[str], str],
    ) -> None:
        self.models = config_models  # role -> model name
        self.clients = clients  # role -> client
        self.logger = logger
        self.turn = turn
        self.redact = redact
        self._sampled: dict[tuple[str, int | None], int] = {}

    def elicitation(self, server: ServerConfig) -> ElicitationFnT:
        async def answer(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
            mode = getattr(params, "mode", "form")
            if server.elicitation != "agent" or mode != "form" or "agent" not in self.clients:
                reason = (
                    "a URL elicitation needs a person to open the page"
                    if mode == "url"
                    else 'its entry does not say "elicitation": "agent"'
                )
                return self._declined(server, params.message, reason)
            try:
                content = await asyncio.to_thread(self._fill_form, params)
            except (ValueError, KeyError, TypeError) as exc:
                return self._declined(server, params.message, f"the model's answer did not fit the form ({exc})")
            self._log(
                logging.INFO,
                "mcp_elicitation_answered",
                "MCP server '%s' asked: %s; the agent's model answered the form",
                server.name,
                self.redact(params.message),
                server_name=server.name,
                fields=sorted(content),
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
            key = (server.name, self.turn())
            used = self._sampled.get(key, 0)
            if used >= settings.max_per_turn:
                message = (
                    f"ZorkGPT answers at most {settings.max_per_turn} sampling requests per turn from "
                    f"'{server.name}' (its entry's sampling.maxPerTurn)"
                )
                self._log(logging.WARNING, "mcp_sampling_refused", "%s", message, server_name=server.name, used=used)
                return types.ErrorData(code=types.INVALID_REQUEST, message=message)
            self._sampled[key] = used + 1
            max_tokens = min(params.max_tokens, settings.max_tokens or params.max_tokens)
            text, model = await asyncio.to_thread(self._sample, settings.role, params, max_tokens)
            self._log(
                logging.INFO,
                "mcp_sampling_answered",
                "MCP server '%s' asked the %s model for a completion (%d of %d this turn)",
                server.name,
                settings.role,
                used + 1,
                settings.max_per_turn,
                server_name=server.name,
                role=settings.role,
                max_tokens=max_tokens,
            )
            return types.CreateMessageResult(
                role="assistant", content=types.TextContent(type="text", text=text), model=model, stop_reason="endTurn"
            )

        return answer

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

    def _declined(self, server: ServerConfig, message: str, reason: str) -> types.ElicitResult:
        self._log(
            logging.INFO,
            "mcp_elicitation_declined",
            "MCP server '%s' asked: %s; declined (%s)",
            server.name,
            self.redact(message),
            reason,
            server_name=server.name,
            reason=reason,
        )
        return types.ElicitResult(action="decline")

    def _log(self, level: int, event_type: str, message: str, *args: Any, **extra: Any) -> None:
        self.logger.log(level, message, *args, extra={"event_type": event_type, "turn": self.turn(), **extra})
