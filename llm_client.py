"""The OpenAI-compatible chat-completions client every ZorkGPT role talks through.

Plain ``requests`` instead of the OpenAI SDK: OpenRouter accepts parameters the SDK
rejects or renames (``top_k``, ``min_p``, ``cache_control`` on messages), and one small
client keeps retries, the circuit breaker, secret redaction and Langfuse tracing in one
place for the agent, the critic, the extractor and the memory managers.

``LLMClient`` is the public face; the work is done by the ``llm`` package, one job per module
(request building, reply parsing, structured-output negotiation, transport, retries, the
breaker, cost and tracing), most of it pure functions tested without a network.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import requests

from chat_api import tracing
from chat_api.breaker import CircuitBreaker
from chat_api.cost import UsageLedger, call_cost
from chat_api.deadline import DeadlineAdapter
from chat_api.models import supports_tool_calling, tools_not_supported
from chat_api.payload import build_payload, request_headers
from chat_api.retry import call_with_retries
from chat_api.structured import StructuredOutput, StructuredOutputMemory, is_schema_format
from chat_api.transport import attempt_once
from chat_api.wire import LLMResponse, UsageStats
from session.game_configuration import GameConfiguration, Sampling
from session.providers import ProviderPreset
from session.redaction import Redactor


class LLMClient:
    """Chat completions with retries, a circuit breaker, prompt caching marks and tracing.

    ``sleep``, ``clock`` and ``random`` are attributes so tests can run the backoff
    instantly and assert the delays it asked for. ``structured_memory`` is what the run learnt
    about each endpoint's structured output; give every client of a run the same one.
    """

    def __init__(
        self,
        config: GameConfiguration,
        base_url: str | None = None,
        api_key: str | None = None,
        langfuse_client: Any = None,
        logger: logging.Logger | None = None,
        session: requests.Session | None = None,
        preset: ProviderPreset | None = None,
        structured_memory: StructuredOutputMemory | None = None,
        *,
        redactor: Redactor,
    ) -> None:
        self.config = config
        self.base_url = (base_url or config.llm.base_url).rstrip("/")
        self.preset = preset or config.preset_for_url(self.base_url)
        self._api_key = api_key if api_key is not None else config.api_key
        self.redactor = redactor  # the run's: every secret it knows of, this client's key among them
        self.langfuse = langfuse_client
        self.logger = logger or logging.getLogger("zorkgpt.llm")
        self.session = session or requests.Session()
        # Whole-request deadline: the adapter lets a timer cut a reply that trickles in.
        for prefix in ("http://", "https://"):
            self.session.mount(prefix, DeadlineAdapter())
        self.sleep: Callable[[float], None] = time.sleep
        self.clock: Callable[[], float] = time.monotonic
        self.random: Callable[[], float] = random.random
        memory = structured_memory or StructuredOutputMemory()
        self.structured = StructuredOutput(memory, self.base_url, self.preset, self.logger, self.redactor)
        self.breaker = CircuitBreaker(config.retry, self.base_url, self.logger)
        self.usage = UsageLedger(self.logger)

    def __repr__(self) -> str:  # the default repr would not show the key, but be explicit
        return f"LLMClient(base_url={self.base_url!r})"

    def complete(
        self,
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        min_p: float | None = None,
        max_tokens: int | None = None,
        stop: str | list[str] | None = None,
        response_format: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        name: str | None = None,
        extra_headers: Mapping[str, str] | None = None,
        extra_body: Mapping[str, Any] | None = None,
    ) -> LLMResponse:
        """One chat completion. ``name`` labels the call for tracing and usage; it is never sent.
        ``extra_body`` holds further body fields a provider accepts (``presence_penalty``, routing
        options...), sent as given.

        A ``json_schema`` response_format is negotiated per endpoint and model (``chat_api.structured``):
        a refusal sends the same request again in the next form down, a reply that ignored the
        format is returned and the next calls use the next form. The caller still validates the reply.

        Raises ``LLMInvalidRequestError``/``ToolsNotSupportedError`` before sending,
        ``LLMRequestError`` on a non-retryable 4xx, ``LLMRetryExhaustedError`` when every
        attempt failed and ``CircuitOpenError`` while the breaker is open.
        """
        if tools and not self.supports_tool_calling(model):
            raise tools_not_supported(model)
        build = functools.partial(
            build_payload,
            model,
            sampling=Sampling(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, max_tokens=max_tokens),
            stop=stop,
            tools=tools,
            tool_choice=tool_choice,
            extra=extra_body,
            preset=self.preset,
        )
        tool_names = frozenset(t["function"]["name"] for t in tools or () if isinstance(t.get("function"), Mapping))
        send = functools.partial(
            self._send,
            headers=request_headers(self._api_key, extra_headers),
            label=name or model,
            tool_names=tool_names,
        )
        if is_schema_format(response_format):
            assert response_format is not None
            return self.structured.complete(model, messages, response_format, build, send)
        return send(build(messages, response_format=response_format))

    def supports_tool_calling(self, model: str) -> bool:
        """False for the known reasoning families; ``[tool.zorkgpt.mcp] force_tool_support`` overrides it."""
        return supports_tool_calling(model, force=self.config.mcp.force_tool_support)

    @property
    def usage_by_name(self) -> dict[str, UsageStats]:
        """Answered calls, tokens and cost per ``name`` label, over the client's life."""
        return self.usage.by_name

    def _send(
        self, payload: dict[str, Any], headers: dict[str, str], label: str, tool_names: frozenset[str]
    ) -> LLMResponse:
        """One call through the breaker and retries, traced, with its tokens and cost counted."""
        with tracing.generation(self.langfuse, self.logger, self.redactor, label, payload) as observation:
            response = self.breaker.call(
                lambda trial: self._call(payload, headers, label, tool_names, trial), now=self.clock
            )
            response.cost_usd = call_cost(payload["model"], response, self.config.pricing)
            if observation is not None:
                tracing.record_generation(observation, response, self.logger, self.redactor)
        self.usage.record(label, response, payload["model"])
        return response

    def _call(
        self, payload: dict[str, Any], headers: dict[str, str], label: str, tool_names: frozenset[str], trial: bool
    ) -> LLMResponse:
        """Attempts with backoff between them; a half-open trial is a single attempt."""
        retry = self.config.retry
        url = f"{self.base_url}/chat/completions"
        return call_with_retries(
            functools.partial(
                attempt_once,
                self.session,
                url,
                payload,
                headers,
                timeout=retry.request_timeout,
                tool_names=tool_names,
                redact=self.redactor,
            ),
            retry=retry,
            retries=0 if trial else retry.max_retries,
            label=label,
            model=payload["model"],
            url=url,
            sleep=self.sleep,
            rand=self.random,
            logger=self.logger,
            redact=self.redactor,
        )
