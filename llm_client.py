"""The OpenAI-compatible chat-completions client every ZorkGPT role talks through.

Plain ``requests`` instead of the OpenAI SDK: OpenRouter accepts parameters the SDK
rejects or renames (``top_k``, ``min_p``, ``cache_control`` on messages), and one small
client keeps retries, the circuit breaker, secret redaction and Langfuse tracing in one
place for the agent, the critic, the extractor and the memory managers.

The request is built and the reply parsed by pure functions (``prepare_messages``,
``build_payload``, ``parse_completion``, ``backoff_delay``...) so they can be tested
without a network; ``LLMClient`` adds the transport, retries and bookkeeping around them.
"""

from __future__ import annotations

import contextlib
import copy
import email.utils
import functools
import hashlib
import json
import logging
import math
import random
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, astuple, dataclass
from datetime import UTC, datetime
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter

from session.episode_log import known_secrets, redact
from session.errors import (
    CircuitOpenError,
    LLMInvalidRequestError,
    LLMRequestError,
    LLMRetryExhaustedError,
    ToolsNotSupportedError,
)
from session.errors import LLMError as LLMError  # the client's errors stay importable from here
from session.game_configuration import GameConfiguration, ModelPrice, RetrySection, Sampling
from session.providers import GENERIC, ProviderPreset, StructuredMode
from shared_utils import MAX_JSON_DEPTH, fenced_blocks, json_depth, shorten, traced_observation

# -- wire shapes -------------------------------------------------------------------------


@dataclass
class FunctionCall:
    """The function a model asked for; ``arguments`` is the JSON string as the model sent it."""

    name: str
    arguments: str


@dataclass
class ToolCall:
    id: str
    type: str
    function: FunctionCall


@dataclass
class LLMResponse:
    """One completion. Exactly one of ``content`` / ``tool_calls`` is set;
    ``content`` is ``""`` when the model answered nothing."""

    content: str | None
    model: str
    usage: dict[str, int] | None = None
    tool_calls: list[ToolCall] | None = None
    finish_reason: str | None = None
    # What the provider says the call cost (OpenRouter's usage.cost), in USD.
    reported_cost: float | None = None
    # What the call cost in USD: the provider's figure, else the pricing table; None = unknown.
    cost_usd: float | None = None


@dataclass
class UsageStats:
    """Answered calls, tokens and money under one ``name`` label, for per-role cost reports.

    ``cost_usd`` adds up the calls whose price is known; ``unpriced_calls`` counts the others,
    so a report can say "unknown" instead of a misleading 0.
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def cost(self) -> float | None:
        """USD, or None (unknown) as soon as one call has no price: a partial sum would read as the total."""
        return None if self.unpriced_calls else round(self.cost_usd, 6)

    def __add__(self, other: UsageStats) -> UsageStats:
        return UsageStats(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))

    def __sub__(self, other: UsageStats) -> UsageStats:
        return UsageStats(*(a - b for a, b in zip(astuple(self), astuple(other), strict=True)))


# -- model families ----------------------------------------------------------------------

REASONING_MODEL_PATTERNS: tuple[str, ...] = ("o1-", "o3-", "qwq", "deepseek-r1", "deepseek-reasoner")
# Bare OpenAI reasoning names ("openai/o1", "o3", "o4-mini") do not contain "o1-".
_BARE_REASONING_MODEL = re.compile(r"(^|/)o[134](-|$)")
# Models known not to call tools: the reasoning families. Every other model is assumed to support
# tools (the request then fails at runtime if it does not); config.mcp.force_tool_support
# overrides the heuristic when it is wrong.
NO_TOOL_PATTERNS: tuple[str, ...] = (*REASONING_MODEL_PATTERNS, "-reasoning", "r1-")
SAMPLING_PARAMS: frozenset[str] = frozenset(
    {"temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty"}
)
CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
# Anthropic rejects requests with more than four cache breakpoints.
ANTHROPIC_MAX_CACHE_BREAKPOINTS = 4
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ATTRIBUTION_HEADERS: dict[str, str] = {"HTTP-Referer": "https://zorkgpt.com", "X-Title": "ZorkGPT"}


def is_reasoning_model(model: str) -> bool:
    lowered = model.lower()
    return any(p in lowered for p in REASONING_MODEL_PATTERNS) or bool(_BARE_REASONING_MODEL.search(lowered))


def is_anthropic_model(model: str) -> bool:
    lowered = model.lower()
    return "claude" in lowered or lowered.startswith("anthropic/")


def supports_tool_calling(model: str, force: bool = False) -> bool:
    """False only for the known reasoning families (they reject a tools list), unless forced."""
    if force:
        return True
    lowered = model.lower()
    return not any(p in lowered for p in NO_TOOL_PATTERNS)


# -- request building (pure) -------------------------------------------------------------


def validate_messages(messages: Sequence[Any]) -> None:
    if not isinstance(messages, Sequence) or isinstance(messages, str) or not messages:
        raise LLMInvalidRequestError("messages must be a non-empty list of {'role': ..., 'content': ...} dicts.")
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise LLMInvalidRequestError(
                f"messages[{index}] must be a dict with a string 'role' (got {type(message).__name__})."
            )


def validate_tool_schemas(tools: Sequence[Any]) -> None:
    """Refuse tool schemas the provider would reject, naming the tool and the fix.

    OpenAI and Anthropic both reject function names outside ``^[a-zA-Z0-9_-]{1,64}$``,
    which is why MCP tools go on the wire as ``server__tool``.
    """
    for index, tool in enumerate(tools):
        where = f"tools[{index}]"
        if not isinstance(tool, Mapping) or tool.get("type") != "function":
            raise LLMInvalidRequestError(f"{where} must be {{'type': 'function', 'function': {{...}}}}.")
        function = tool.get("function")
        if not isinstance(function, Mapping):
            raise LLMInvalidRequestError(f"{where}['function'] must be a dict with name, description and parameters.")
        name = function.get("name")
        if not isinstance(name, str) or not TOOL_NAME_PATTERN.match(name):
            raise LLMInvalidRequestError(
                f"{where} has function name {name!r}; providers only accept names matching "
                f"{TOOL_NAME_PATTERN.pattern} (use 'server__tool' instead of 'server.tool')."
            )
        description = function.get("description")
        if description is not None and not isinstance(description, str):
            raise LLMInvalidRequestError(f"{where} ({name}) has a non-string description.")
        parameters = function.get("parameters")
        if not isinstance(parameters, Mapping) or parameters.get("type") != "object":
            raise LLMInvalidRequestError(
                f"{where} ({name}) needs 'parameters' as a JSON schema object ({{'type': 'object', ...}})."
            )


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") == "text")
    return "" if content is None else str(content)


def fold_system_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Reasoning models take no system role: its text is prepended to the first user message.

    Assistant and tool turns keep their roles (they are the model's own history); only the
    instructions move.
    """
    texts = [_text_of(m.get("content")) for m in messages if m["role"] in ("system", "developer")]
    system_text = "\n\n".join(t for t in texts if t)
    rest = [m for m in messages if m["role"] not in ("system", "developer")]
    if not system_text:
        return rest
    for index, message in enumerate(rest):
        if message["role"] == "user":
            content = message.get("content")
            if isinstance(content, list):
                merged: Any = [{"type": "text", "text": system_text}, *content]
            else:
                merged = f"{system_text}\n\n{_text_of(content)}" if content else system_text
            rest[index] = {**message, "content": merged}
            return rest
    return [{"role": "user", "content": system_text}, *rest]


def add_cache_control(messages: list[dict[str, Any]], anthropic: bool) -> list[dict[str, Any]]:
    """Mark system and user messages for prompt caching.

    Most providers read a message-level ``cache_control`` (or ignore it, OpenAI caches
    prefixes on its own), so every system/user message gets one unless the caller set it.
    Anthropic through OpenRouter only honours the marker on a content part, and rejects more
    than four breakpoints: there the string content becomes a one-part text list whose part
    carries the marker, on the first system message and the most recent system/user
    messages up to four markers in all (a fifth would turn a working request into a 400).
    """
    eligible = [i for i, m in enumerate(messages) if m["role"] in ("system", "user")]
    if not anthropic:
        for i in eligible:
            messages[i].setdefault("cache_control", dict(CACHE_CONTROL))
        return messages
    with_content = [
        i for i in eligible if isinstance(messages[i].get("content"), str | list) and messages[i]["content"]
    ]
    existing = sum(
        1
        for m in messages
        if isinstance(m.get("content"), list)
        for p in m["content"]
        if isinstance(p, Mapping) and "cache_control" in p
    )
    budget = max(0, ANTHROPIC_MAX_CACHE_BREAKPOINTS - existing)
    chosen: list[int] = []
    first_system = next((i for i in with_content if messages[i]["role"] == "system"), None)
    if first_system is not None and budget:
        chosen.append(first_system)
    for i in reversed(with_content):
        if len(chosen) >= budget:
            break
        if i not in chosen:
            chosen.append(i)
    for i in chosen:
        message = messages[i]
        marker = message.pop("cache_control", None) or dict(CACHE_CONTROL)
        content = message["content"]
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if isinstance(parts[-1], dict):
            parts[-1].setdefault("cache_control", marker)
        message["content"] = parts
    return messages


def prepare_messages(
    messages: Sequence[Mapping[str, Any]], model: str, cache_control: bool = True
) -> list[dict[str, Any]]:
    """The messages as sent for ``model``: a deep copy, so the caller's history is never changed."""
    validate_messages(messages)
    prepared = [copy.deepcopy(dict(m)) for m in messages]
    if is_reasoning_model(model):
        prepared = fold_system_messages(prepared)
    if not cache_control:
        return prepared
    return add_cache_control(prepared, anthropic=is_anthropic_model(model))


def build_payload(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    sampling: Sampling | None = None,
    stop: str | list[str] | None = None,
    response_format: dict[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: str | dict[str, Any] | None = None,
    extra: Mapping[str, Any] | None = None,
    preset: ProviderPreset = GENERIC,
) -> dict[str, Any]:
    """The JSON body for ``POST /chat/completions``. Parameters left as None are omitted.

    Reasoning models reject sampling parameters and structured output, so those are
    dropped for them, as are the parameters the provider (``preset``) is known to refuse.
    An empty ``tools`` list is treated as "no tools": providers reject ``tools: []`` and a
    ``tool_choice`` without tools.
    """
    payload: dict[str, Any] = {
        "model": model,
        "messages": prepare_messages(messages, model, cache_control=preset.cache_control),
    }
    optional = {
        **(sampling or Sampling()).request_args(),
        "stop": stop,
        "response_format": response_format,
        **dict(extra or {}),
    }
    if preset.request_cost:
        optional.setdefault("usage", {"include": True})
    reasoning = is_reasoning_model(model)
    for key, value in optional.items():
        if value is None or key in ("model", "messages") or key in preset.unsupported_params:
            continue
        if reasoning and (key in SAMPLING_PARAMS or key == "response_format"):
            continue
        payload[key] = value
    if tools:
        validate_tool_schemas(tools)
        payload["tools"] = tools
        if tool_choice is not None:
            payload["tool_choice"] = tool_choice
    return payload


# -- structured output (pure) ------------------------------------------------------------

# A 400/422 whose message names one of these refused the structured-output form, not the request.
_FORMAT_REFUSAL = re.compile(r"response_format|json_schema|json_object|structured.output|guided", re.IGNORECASE)


def is_schema_format(response_format: Mapping[str, Any] | None) -> bool:
    """A ``{"type": "json_schema", "json_schema": {"schema": ...}}`` request: the one the client negotiates."""
    if not isinstance(response_format, Mapping) or response_format.get("type") != "json_schema":
        return False
    spec = response_format.get("json_schema")
    return isinstance(spec, Mapping) and isinstance(spec.get("schema"), Mapping)


def refuses_format(status_code: int, provider_message: str, payload: Mapping[str, Any] | None = None) -> bool:
    """True when an error reply refused the request's response_format rather than the request.

    Usually a 400/422; llama-cpp-python's server answers an unknown format type with a 500
    whose message names ``response_format``, which must not be retried five times either.
    """
    if payload is not None and "response_format" not in payload:
        return False
    return status_code in (400, 422, 500) and bool(_FORMAT_REFUSAL.search(provider_message))


def schema_instruction(schema: Mapping[str, Any]) -> str:
    return (
        "Reply with one JSON object and nothing else: no markdown fences, no text before or after it. "
        "It must validate against this JSON schema: " + json.dumps(schema, separators=(",", ":"))
    )


def with_schema_in_prompt(messages: Sequence[Mapping[str, Any]], schema: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages with the schema described at the end of the first system message.

    Not a system message of its own at the end: several chat templates (llama.cpp, Mistral)
    refuse a system message anywhere but first.
    """
    instruction = schema_instruction(schema)
    out = [dict(m) for m in messages]
    for index, message in enumerate(out):
        if message.get("role") == "system":
            content = message.get("content")
            if isinstance(content, list):
                out[index] = {**message, "content": [*content, {"type": "text", "text": instruction}]}
            else:
                text = _text_of(content)
                out[index] = {**message, "content": f"{text}\n\n{instruction}" if text else instruction}
            return out
    return [{"role": "system", "content": instruction}, *out]


def response_format_for(
    mode: StructuredMode, requested: Mapping[str, Any], preset: ProviderPreset
) -> dict[str, Any] | None:
    """The ``response_format`` sent in ``mode`` for a caller's json_schema request."""
    spec = requested["json_schema"]
    if mode is StructuredMode.JSON_SCHEMA:
        if spec.get("strict") and not preset.strict_schema:
            return {"type": "json_schema", "json_schema": {**spec, "strict": False}}
        return dict(requested)
    if mode is StructuredMode.JSON_OBJECT:
        return (
            {"type": "json_object", "schema": spec["schema"]} if preset.json_object_schema else {"type": "json_object"}
        )
    return None


def format_ignored(response: LLMResponse, mode: StructuredMode, schema: Mapping[str, Any]) -> str | None:
    """Why the reply shows the server ignored the requested form, or None.

    Ignoring looks like chat: text or a markdown fence before the JSON. A reply that starts
    as a JSON object but does not parse (cut off, a stray character) is a bad answer under a
    working format, not proof against it: stepping down would take the grammar away from
    exactly the small local models that need it. Under json_schema the object must also have
    the schema's top-level keys. Empty and cut-off (``finish_reason: length``) replies prove
    nothing.
    """
    content = (response.content or "").strip()
    if mode is StructuredMode.PROMPT or response.tool_calls or not content or response.finish_reason == "length":
        return None
    if not content.startswith("{"):
        return f"the reply is not a bare JSON object: {shorten(content, 80)!r}"
    value = _loads(content)
    if mode is StructuredMode.JSON_SCHEMA and isinstance(value, dict):
        missing = [key for key in schema.get("required", ()) if key not in value]
        if missing:
            return f"the reply lacks the schema's required keys {missing}"
        properties = schema.get("properties")
        if schema.get("additionalProperties") is False and isinstance(properties, Mapping):
            unknown = sorted(set(value) - set(properties))
            if unknown:
                return f"the reply has keys the schema forbids {unknown}"
    return None


class StructuredOutputMemory:
    """The structured-output form each endpoint and model settled on, kept for the whole run.

    Shared by every client in the process, so the refusal is paid once per endpoint and
    model, not once per role or per episode.
    """

    def __init__(self) -> None:
        self._modes: dict[tuple[str, str], StructuredMode] = {}
        self._lock = threading.Lock()

    def mode(self, base_url: str, model: str, ladder: Sequence[StructuredMode]) -> StructuredMode:
        with self._lock:
            return self._modes.get((base_url, model), ladder[0])

    def step_down(
        self, base_url: str, model: str, ladder: Sequence[StructuredMode], failed: StructuredMode
    ) -> StructuredMode | None:
        """The next form after ``failed`` (None at the bottom). A call that raced another call's
        step-down gets the already chosen form instead of stepping down twice."""
        with self._lock:
            current = self._modes.get((base_url, model), ladder[0])
            if current is not failed:
                return current
            index = ladder.index(failed) if failed in ladder else len(ladder) - 1
            if index + 1 >= len(ladder):
                return None
            self._modes[(base_url, model)] = ladder[index + 1]
            return ladder[index + 1]


RUN_STRUCTURED_OUTPUT = StructuredOutputMemory()


# -- cost (pure) -------------------------------------------------------------------------


def priced_cost(usage: Mapping[str, int] | None, price: ModelPrice | None) -> float | None:
    """USD for one call from a pricing table entry; None when the price or the token counts are unknown."""
    if price is None or not usage or "prompt_tokens" not in usage or "completion_tokens" not in usage:
        return None
    cached = min(usage.get("cached_tokens", 0), usage["prompt_tokens"])
    cached_price = price.input if price.cached_input is None else price.cached_input
    fresh = usage["prompt_tokens"] - cached
    return (fresh * price.input + cached * cached_price + usage["completion_tokens"] * price.output) / 1_000_000


# -- reply parsing (pure) ----------------------------------------------------------------


class RetryableReplyError(Exception):
    """One attempt failed in a way another attempt may fix. Internal to the retry loop."""

    def __init__(self, reason: str, status_code: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status_code = status_code
        self.retry_after = retry_after


# A tool call the client could not read (no name, broken JSON). It still goes to the agent,
# which answers it with a tool error the model sees; the arguments carry the reason.
MALFORMED_TOOL_NAME = "malformed_tool_call"

# Tool calls local models write into ``content`` when the server does not parse them:
# Hermes/Qwen ``<tool_call>{...}</tool_call>``, Llama 3.1 ``<|python_tag|>{...}``, Mistral
# ``[TOOL_CALLS] [...]``, and Llama's ``<function=name>{...}</function>``.
_TEXT_TOOL_CALL_BLOCKS: tuple[re.Pattern[str], ...] = (
    re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL),
    re.compile(r"<\|python_tag\|>\s*(.*?)\s*(?:<\|eom_id\|>|<\|eot_id\|>|$)", re.DOTALL),
    re.compile(r"\[TOOL_CALLS\]\s*(.*)$", re.DOTALL),
)
_FUNCTION_TAG = re.compile(r"<function=([^>\s]+)>\s*(.*?)\s*</function>", re.DOTALL)


def _malformed_call(reason: str, name: str | None = None) -> tuple[str, str]:
    detail = f"{reason}" if not name else f"{reason} (tool {name!r})"
    return MALFORMED_TOOL_NAME, json.dumps({"error": f"Your tool call could not be read: {detail}."})


def _arguments_text(arguments: Any) -> str | None:
    """The JSON string the agent receives; None when the value cannot be arguments."""
    if arguments is None or arguments == "":
        return "{}"  # some servers send nothing for a tool without parameters
    if isinstance(arguments, str):
        return arguments  # the agent reports broken JSON back to the model as a tool error
    if isinstance(arguments, Mapping):
        return json.dumps(arguments)
    return None


def _call_from_object(item: Any) -> tuple[str, str]:
    """(name, arguments) from one ``{"name": ..., "arguments"|"parameters": ...}`` object."""
    if not isinstance(item, Mapping):
        return _malformed_call(f"expected a JSON object, got {type(item).__name__}")
    function = item.get("function") if isinstance(item.get("function"), Mapping) else item
    name = function.get("name")
    if not isinstance(name, str) or not name.strip():
        return _malformed_call("it has no function name")
    raw = function["arguments"] if "arguments" in function else function.get("parameters")
    arguments = _arguments_text(raw)
    if arguments is None:
        return _malformed_call(f"arguments must be a JSON object, got {type(raw).__name__}", name)
    return name.strip(), arguments


def generated_call_id(message: Mapping[str, Any], index: int) -> str:
    """A stable id for a tool call the server sent without one: the same reply gives the same id,
    so the assistant message and the ``role: "tool"`` answer always match."""
    digest = hashlib.sha256(json.dumps(message, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return f"call_{digest}_{index}"


def _parse_tool_calls(raw: Any, message: Mapping[str, Any]) -> list[ToolCall]:
    """Structured ``tool_calls``; a lone object counts as a one-item list, unreadable items become
    malformed calls (answered with a tool error), never an exception."""
    items = [raw] if isinstance(raw, Mapping) else raw if isinstance(raw, list) else None
    if items is None:
        items = [None]
    calls: list[ToolCall] = []
    for index, item in enumerate(items):
        name, arguments = _call_from_object(item)
        call_id = item.get("id") if isinstance(item, Mapping) else None
        calls.append(
            ToolCall(
                id=str(call_id) if call_id else generated_call_id(message, index),
                type="function",
                function=FunctionCall(name, arguments),
            )
        )
    return calls


def _loads(text: str) -> Any:
    """Decoded JSON, or None when ``text`` is not JSON or nests deeper than ``MAX_JSON_DEPTH``."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than the reader goes
        return None
    return value if json_depth(value) <= MAX_JSON_DEPTH else None


def parse_text_tool_calls(content: str, tool_names: frozenset[str]) -> list[tuple[str, str]] | None:
    """Tool calls a model wrote as text, as (name, arguments) pairs; None when there are none.

    Tagged forms are taken whatever the name (an unknown name gets a tool error naming the
    real tools). A bare or fenced ``{"name": ..., "arguments": ...}`` object only counts when
    the name is one of the offered tools: otherwise it may simply be the model's answer.
    """
    found: list[tuple[str, str]] = []
    for match in _FUNCTION_TAG.finditer(content):
        name, body = match.group(1), match.group(2)
        arguments = _arguments_text(_loads(body) if body else None)
        found.append((name, arguments) if arguments is not None else _malformed_call("arguments are not JSON", name))
    for pattern in _TEXT_TOOL_CALL_BLOCKS:
        for match in pattern.finditer(content):
            body = match.group(1).strip()
            if not body:
                continue
            value = _loads(body)
            if value is None:
                found.append(_malformed_call(f"the text {shorten(body, 80)!r} is not JSON"))
            else:
                found.extend(_call_from_object(v) for v in (value if isinstance(value, list) else [value]))
        if found:
            break
    if found:
        return found
    for text in (content.strip(), *fenced_blocks(content)):
        value = _loads(text)
        values = value if isinstance(value, list) else [value]
        if values and all(isinstance(v, Mapping) and v.get("name") in tool_names for v in values):
            return [_call_from_object(v) for v in values]
    return None


def _usage_of(body: Mapping[str, Any]) -> dict[str, int | float] | None:
    usage = body.get("usage")
    if not isinstance(usage, Mapping):
        return None
    # Token counts, plus the price when the provider reports one (OpenRouter's ``cost``, in USD):
    # the viewer and run reports add it up. Other nested details are dropped.
    counts: dict[str, int | float] = {
        k: v
        for k, v in usage.items()
        if (isinstance(v, int) and not isinstance(v, bool)) or (k == "cost" and isinstance(v, float))
    }
    # Cached prompt tokens are priced lower; OpenAI and OpenRouter nest them in the details.
    details = usage.get("prompt_tokens_details")
    if isinstance(details, Mapping) and isinstance(details.get("cached_tokens"), int):
        counts["cached_tokens"] = details["cached_tokens"]
    return counts


def _reported_cost(body: Mapping[str, Any]) -> float | None:
    """``usage.cost`` in USD when the provider reports it (OpenRouter, when asked)."""
    usage = body.get("usage")
    cost = usage.get("cost") if isinstance(usage, Mapping) else None
    if isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost) and cost >= 0:
        return float(cost)
    return None


def parse_completion(body: Any, requested_model: str, tool_names: frozenset[str] | None = None) -> LLMResponse:
    """An ``LLMResponse`` from a decoded 2xx body; ``RetryableReplyError`` if the body is malformed.

    Content exclusivity: with tool calls the content is dropped (models often
    add a sentence of narration), without them ``tool_calls`` is None. An empty message is
    an answer (content ``""``), not a fault: retrying would bill the same silence again.
    ``tool_names`` are the tools the request offered; only then is text in ``content`` read
    as tool calls, and only when no structured ones came.
    """
    if not isinstance(body, Mapping):
        raise RetryableReplyError(f"malformed reply: body is {type(body).__name__}, expected a JSON object")
    choices = body.get("choices")
    if not choices or not isinstance(choices, list):
        error = body.get("error")
        if error:
            raise RetryableReplyError(f"provider error in a 2xx reply: {_provider_message(body, '')}")
        raise RetryableReplyError("empty reply: no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, Mapping) else None
    if not isinstance(message, Mapping):
        raise RetryableReplyError("malformed reply: choices[0] has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        content = _text_of(content)
    # The legacy functions API (finish_reason "function_call") sends one call without an id.
    raw_calls = message.get("tool_calls") or message.get("function_call")
    tool_calls = _parse_tool_calls(raw_calls, message) if raw_calls else None
    if not tool_calls and tool_names and content:
        pairs = parse_text_tool_calls(content, tool_names)
        if pairs:
            tool_calls = [
                ToolCall(generated_call_id(message, i), "function", FunctionCall(name, arguments))
                for i, (name, arguments) in enumerate(pairs)
            ]
    if tool_calls:
        content = None
    return LLMResponse(
        content=None if tool_calls else (content or ""),
        model=str(body.get("model") or requested_model),
        usage=_usage_of(body),
        tool_calls=tool_calls,
        finish_reason=choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None,
        reported_cost=_reported_cost(body),
    )


def _provider_message(body: Any, fallback_text: str) -> str:
    if isinstance(body, Mapping):
        error = body.get("error")
        if isinstance(error, Mapping):
            message = str(error.get("message") or "")
            raw = (error.get("metadata") or {}).get("raw") if isinstance(error.get("metadata"), Mapping) else None
            return f"{message} ({raw})" if raw and str(raw) not in message else message or json.dumps(error)[:500]
        if isinstance(error, str):
            return error
        for key in ("message", "detail"):
            if body.get(key):
                return str(body[key])
    return fallback_text.strip()[:500] or "(empty body)"


# -- retry timing (pure) -----------------------------------------------------------------


def backoff_delay(attempt: int, retry: RetrySection, rand: float) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (0-based).

    ``initial_delay * backoff_base ** attempt`` plus up to ``jitter`` of itself at random
    (``rand`` in [0, 1)), never more than ``max_delay``.
    """
    if retry.initial_delay == 0:
        return 0.0
    try:
        base = min(retry.max_delay, retry.initial_delay * retry.backoff_base**attempt)
    except OverflowError:  # a huge backoff_base: the cap applies
        base = retry.max_delay
    return min(retry.max_delay, base * (1.0 + retry.jitter * rand))


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After in seconds, from either form the header allows (delta-seconds or HTTP date)."""
    if not value:
        return None
    try:
        return max(0.0, float(value.strip()))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


_STATUS_HINTS: dict[int, str] = {
    400: "The provider refused the request as invalid; see its message.",
    401: "Check the API key (ZORKGPT_CLIENT_API_KEY, CLIENT_API_KEY or OPENROUTER_API_KEY).",
    402: "The account has no credits left; add credits or switch models.",
    403: "The key is not allowed to use this model or endpoint.",
    404: "Check the model name in [tool.zorkgpt.llm] and the base_url.",
}


# -- whole-request deadline ---------------------------------------------------------------


class _InFlight:
    """The connections one attempt uses, so the deadline timer can cut them."""

    def __init__(self) -> None:
        self.connections: list[Any] = []
        self.expired = False
        self._lock = threading.Lock()

    def add(self, connection: Any) -> None:
        with self._lock:
            self.connections.append(connection)

    def expire(self) -> None:
        """Runs on the timer thread: shutting the socket down wakes the blocked read at once."""
        with self._lock:
            self.expired = True
            connections = list(self.connections)
        for connection in connections:
            sock = getattr(connection, "sock", None)
            if sock is None:
                continue
            # The plain socket's shutdown, also for TLS: SSLSocket.shutdown would tear down the
            # TLS state under the reading thread. OSError: already closed, the read has ended.
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)


_current = threading.local()


def _track(connection: Any) -> Any:
    inflight: _InFlight | None = getattr(_current, "inflight", None)
    if inflight is not None:
        inflight.add(connection)
    return connection


class _TrackedHTTPPool(urllib3.HTTPConnectionPool):
    def _get_conn(self, timeout: float | None = None) -> Any:
        return _track(super()._get_conn(timeout))


class _TrackedHTTPSPool(urllib3.HTTPSConnectionPool):
    def _get_conn(self, timeout: float | None = None) -> Any:
        return _track(super()._get_conn(timeout))


_TRACKED_POOLS = {"http": _TrackedHTTPPool, "https": _TrackedHTTPSPool}


class DeadlineAdapter(HTTPAdapter):
    """An HTTPAdapter whose connections the running attempt's deadline can reach."""

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = _TRACKED_POOLS

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **proxy_kwargs)
        manager.pool_classes_by_scheme = _TRACKED_POOLS
        return manager


# -- the client --------------------------------------------------------------------------


class LLMClient:
    """Chat completions with retries, a circuit breaker, prompt caching marks and tracing.

    ``sleep``, ``clock`` and ``random`` are attributes so tests can run the backoff
    instantly and assert the delays it asked for.
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
    ) -> None:
        self.config = config
        self.base_url = (base_url or config.llm.base_url).rstrip("/")
        self.preset = preset or config.preset_for_url(self.base_url)
        self.structured_memory = structured_memory or RUN_STRUCTURED_OUTPUT
        self._api_key = api_key if api_key is not None else config.api_key
        self.langfuse = langfuse_client
        self.logger = logger or logging.getLogger("zorkgpt.llm")
        self.session = session or requests.Session()
        # Whole-request deadline: the adapter lets a timer cut a reply that trickles in.
        for prefix in ("http://", "https://"):
            self.session.mount(prefix, DeadlineAdapter())
        self.sleep: Callable[[float], None] = time.sleep
        self.clock: Callable[[], float] = time.monotonic
        self.random: Callable[[], float] = random.random
        self.usage_by_name: dict[str, UsageStats] = {}
        self._lock = threading.Lock()
        self._consecutive_failures = 0
        self._open_until: float | None = None
        self._trial_in_flight = False

    def __repr__(self) -> str:  # the default repr would not show the key, but be explicit
        return f"LLMClient(base_url={self.base_url!r})"

    # -- public API ----------------------------------------------------------------------
    def chat_completions_create(
        self,
        model: str,
        messages: list[dict[str, Any]],
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        min_p: float | None = None,
        max_tokens: int | None = None,
        stop: str | list[str] | None = None,
        response_format: dict[str, Any] | None = None,
        extra_headers: dict[str, str] | None = None,
        name: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> LLMResponse:
        """One chat completion. ``name`` labels the call for tracing and usage; it is never sent.

        A ``json_schema`` response_format is negotiated per endpoint and model: a refusal
        (HTTP 400/422 naming the format) sends the same request again as ``json_object`` with
        the schema in the prompt, then as plain prompt JSON; a reply that ignored the format is
        returned as it is and the next calls use the next form. The outcome is kept for the
        rest of the run. The caller still validates the reply against its model.

        Raises ``LLMInvalidRequestError``/``ToolsNotSupportedError`` before sending,
        ``LLMRequestError`` on a non-retryable 4xx, ``LLMRetryExhaustedError`` when every
        attempt failed and ``CircuitOpenError`` while the breaker is open.
        """
        if tools and not self._supports_tool_calling(model):
            raise ToolsNotSupportedError(
                f"Model {model} does not support tool calling. Use a tool-capable model, disable MCP "
                "([tool.zorkgpt.mcp] enabled = false) or set [tool.zorkgpt.mcp] force_tool_support = true."
            )
        build = functools.partial(
            build_payload,
            model,
            sampling=Sampling(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p, max_tokens=max_tokens),
            stop=stop,
            tools=tools,
            tool_choice=tool_choice,
            extra=kwargs,
            preset=self.preset,
        )
        headers = self._headers(extra_headers)
        label = name or model
        tool_names = frozenset(t["function"]["name"] for t in tools or () if isinstance(t.get("function"), Mapping))
        if not is_schema_format(response_format):
            return self._send(build(messages, response_format=response_format), headers, label, tool_names)
        assert response_format is not None
        schema = response_format["json_schema"]["schema"]
        ladder = self.preset.structured_modes
        while True:
            mode = StructuredMode.PROMPT if is_reasoning_model(model) else self._structured_mode(model)
            call_messages = messages if mode is StructuredMode.JSON_SCHEMA else with_schema_in_prompt(messages, schema)
            payload = build(call_messages, response_format=response_format_for(mode, response_format, self.preset))
            try:
                response = self._send(payload, headers, label, tool_names)
            except LLMRequestError as exc:
                if mode is StructuredMode.PROMPT or not refuses_format(exc.status_code, exc.provider_message):
                    raise
                cause = f"HTTP {exc.status_code}: {shorten(exc.provider_message, 200)}"
                if self._step_down(model, ladder, mode, f"refused {mode.value} ({cause})"):
                    continue
                raise
            reason = format_ignored(response, mode, schema)
            if reason is not None:
                # The reply is still an answer (the caller's parser may well read it), so it is
                # returned; the next calls use the next form down.
                self._step_down(model, ladder, mode, f"ignored {mode.value} ({reason})")
            return response

    def _structured_mode(self, model: str) -> StructuredMode:
        return self.structured_memory.mode(self.base_url, model, self.preset.structured_modes)

    def _step_down(
        self, model: str, ladder: Sequence[StructuredMode], failed: StructuredMode, what: str
    ) -> StructuredMode | None:
        """Move this endpoint and model one structured-output form down and say so once."""
        chosen = self.structured_memory.step_down(self.base_url, model, ladder, failed)
        if chosen is not None and chosen is not failed:
            how = {
                StructuredMode.JSON_OBJECT: "json_object with the schema in the prompt",
                StructuredMode.PROMPT: "JSON asked for in the prompt (no response_format)",
            }.get(chosen, chosen.value)
            self.logger.warning(
                "%s for model %s %s; using %s for the rest of the run",
                self.base_url,
                model,
                self._redact(what),
                how,
                extra={
                    "event_type": "llm_structured_output",
                    "base_url": self.base_url,
                    "model": model,
                    "failed_mode": failed.value,
                    "mode": chosen.value,
                    "reason": self._redact(what),
                },
            )
        return chosen

    def _send(
        self, payload: dict[str, Any], headers: dict[str, str], label: str, tool_names: frozenset[str]
    ) -> LLMResponse:
        """One call through the breaker and retries, traced, with its tokens and cost counted."""
        with self._generation(label, payload["model"], payload) as generation:
            response = self._call_with_breaker(payload, headers, label, tool_names)
            response.cost_usd = self._cost_of(payload["model"], response)
            if generation is not None:
                self._record_generation(generation, response)
        self._account(label, response)
        return response

    def _cost_of(self, requested_model: str, response: LLMResponse) -> float | None:
        """The provider's figure when it gave one, else the pricing table's, else unknown (None)."""
        if response.reported_cost is not None:
            return response.reported_cost
        pricing = self.config.pricing
        price = pricing.price_for(requested_model) or pricing.price_for(response.model)
        return priced_cost(response.usage, price)

    def _supports_tool_calling(self, model: str) -> bool:
        """The name patterns above; ``[tool.zorkgpt.mcp] force_tool_support`` overrides them."""
        return supports_tool_calling(model, force=self.config.mcp.force_tool_support)

    def reset_usage(self) -> None:
        with self._lock:
            self.usage_by_name.clear()

    # -- request plumbing ----------------------------------------------------------------
    def _headers(self, extra_headers: Mapping[str, str] | None) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **ATTRIBUTION_HEADERS}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        headers.update(extra_headers or {})
        return headers

    def _redact(self, text: str) -> str:
        secrets = known_secrets()
        if self._api_key:
            secrets.append(self._api_key)
        return redact(text, secrets)

    def _call_with_breaker(
        self, payload: dict[str, Any], headers: dict[str, str], label: str, tool_names: frozenset[str]
    ) -> LLMResponse:
        trial = self._enter_breaker()
        try:
            # A half-open trial is a single attempt: it only asks "is the provider back?".
            response = self._call_with_retries(payload, headers, label, tool_names, max_retries=0 if trial else None)
        except LLMRetryExhaustedError:
            self._record_failure(trial)
            raise
        except LLMRequestError:
            # A rejected request (4xx) means the provider answered: it is not a health failure.
            self._record_success(trial)
            raise
        except BaseException:
            # Interrupted (Ctrl-C) or a bug: no verdict on the provider, but free the trial slot.
            with self._lock:
                self._trial_in_flight = False
            raise
        self._record_success(trial)
        return response

    def _enter_breaker(self) -> bool:
        """True when this call is the half-open trial; raises while the breaker is open."""
        with self._lock:
            if self._open_until is None:
                return False
            now = self.clock()
            if now < self._open_until or self._trial_in_flight:
                wait = max(0.0, self._open_until - now)
                raise CircuitOpenError(
                    f"LLM circuit breaker is open after {self._consecutive_failures} consecutive failed calls "
                    f"to {self.base_url}; the next trial call is allowed in {wait:.1f}s "
                    "(circuit_breaker_reset_seconds in [tool.zorkgpt.retry]).",
                    retry_in_seconds=wait,
                )
            self._trial_in_flight = True
            return True

    def _record_failure(self, trial: bool) -> None:
        retry = self.config.retry
        with self._lock:
            self._consecutive_failures += 1
            self._trial_in_flight = False
            if trial or self._consecutive_failures >= retry.circuit_breaker_threshold:
                self._open_until = self.clock() + retry.circuit_breaker_reset_seconds
                self.logger.error(
                    "LLM circuit breaker opened after %d consecutive failed calls; retrying in %.1fs",
                    self._consecutive_failures,
                    retry.circuit_breaker_reset_seconds,
                    extra={
                        "event_type": "llm_circuit_open",
                        "consecutive_failures": self._consecutive_failures,
                        "reset_seconds": retry.circuit_breaker_reset_seconds,
                    },
                )

    def _record_success(self, trial: bool) -> None:
        with self._lock:
            if trial:
                self.logger.info(
                    "LLM circuit breaker closed: trial call succeeded", extra={"event_type": "llm_circuit_closed"}
                )
            self._consecutive_failures = 0
            self._open_until = None
            self._trial_in_flight = False

    def _call_with_retries(
        self,
        payload: dict[str, Any],
        headers: dict[str, str],
        label: str,
        tool_names: frozenset[str],
        max_retries: int | None = None,
    ) -> LLMResponse:
        retry = self.config.retry
        retries = retry.max_retries if max_retries is None else max_retries
        url = f"{self.base_url}/chat/completions"
        last: RetryableReplyError | None = None
        for attempt in range(retries + 1):
            try:
                return self._attempt(url, payload, headers, tool_names)
            except RetryableReplyError as exc:
                last = exc
            if attempt == retries:
                break
            delay = backoff_delay(attempt, retry, self.random())
            if last.retry_after is not None:
                delay = min(retry.max_delay, last.retry_after)
            reason = self._redact(last.reason)
            self.logger.warning(
                "LLM call %s failed (%s); retry %d/%d in %.2fs",
                label,
                reason,
                attempt + 1,
                retries,
                delay,
                extra={
                    "event_type": "llm_retry",
                    "call_name": label,
                    "model": payload["model"],
                    "attempt": attempt + 1,
                    "max_retries": retries,
                    "delay_seconds": delay,
                    "reason": reason,
                    "status_code": last.status_code,
                },
            )
            self.sleep(delay)
        assert last is not None  # the loop ran at least once and only breaks after a failure
        cause = self._redact(last.reason)
        attempts = retries + 1
        raise LLMRetryExhaustedError(
            f"LLM call {label} to {url} failed after {attempts} attempt(s) ({retries} retries); last cause: {cause}",
            attempts=attempts,
            last_cause=cause,
        )

    def _attempt(
        self, url: str, payload: dict[str, Any], headers: dict[str, str], tool_names: frozenset[str]
    ) -> LLMResponse:
        timeout = self.config.retry.request_timeout
        # requests' timeout bounds each socket read, so a server that trickles a byte every
        # half second never trips it; the deadline timer cuts the connection at ``timeout``.
        inflight = _InFlight()
        deadline = threading.Timer(timeout, inflight.expire)
        deadline.daemon = True
        _current.inflight = inflight
        deadline.start()
        try:
            reply = self.session.post(url, json=payload, headers=headers, timeout=timeout)
        except requests.RequestException as exc:
            if inflight.expired or isinstance(exc, requests.Timeout):
                raise RetryableReplyError(
                    f"timeout: no complete reply within request_timeout={timeout:g}s "
                    "([tool.zorkgpt.retry] request_timeout bounds the whole request)"
                ) from None
            if isinstance(exc, requests.ConnectionError | requests.exceptions.ChunkedEncodingError):
                raise RetryableReplyError(f"connection error: {exc}") from None
            # Malformed URL and the like: no attempt can succeed, so say which setting to fix.
            raise LLMInvalidRequestError(
                f"Cannot send the LLM request to {url}: {self._redact(str(exc))}. Set [tool.zorkgpt.llm] base_url "
                "to a full URL such as https://openrouter.ai/api/v1."
            ) from None
        finally:
            deadline.cancel()
            _current.inflight = None
        status = reply.status_code
        text = reply.text
        too_deep = False
        try:
            body: Any = json.loads(text) if text else None
        except ValueError:
            body = None
        except RecursionError:  # nested deeper than the reader goes
            body, too_deep = None, True
        if body is not None and json_depth(body) > MAX_JSON_DEPTH:
            # Every later step (tool-call arguments, call ids, logs) would walk it again.
            body, too_deep = None, True
        if status == 429:
            raise RetryableReplyError(
                f"HTTP 429 rate limited: {_provider_message(body, text)}",
                status_code=status,
                retry_after=parse_retry_after(reply.headers.get("Retry-After")),
            )
        if (status == 408 or status >= 500) and not refuses_format(status, _provider_message(body, text), payload):
            raise RetryableReplyError(f"HTTP {status}: {_provider_message(body, text)}", status_code=status)
        if not 200 <= status < 300:
            provider = self._redact(_provider_message(body, text))
            hint = _STATUS_HINTS.get(status, "The request was rejected; see the provider's message.")
            raise LLMRequestError(
                f"LLM request to {url} rejected with HTTP {status}: {provider}. {hint}",
                status_code=status,
                provider_message=provider,
            )
        if too_deep:
            raise RetryableReplyError(
                f"malformed reply: the body nests JSON more than {MAX_JSON_DEPTH} levels deep, which no chat "
                f"completion does ({len(text):,} characters, starting {text[:40]!r})",
                status_code=status,
            )
        if body is None:
            raise RetryableReplyError(f"malformed reply: body is not JSON ({text[:200]!r})", status_code=status)
        return parse_completion(body, payload["model"], tool_names)

    # -- bookkeeping ---------------------------------------------------------------------
    def _account(self, label: str, response: LLMResponse) -> None:
        usage = response.usage or {}
        with self._lock:
            stats = self.usage_by_name.setdefault(label, UsageStats())
            stats.calls += 1
            stats.prompt_tokens += usage.get("prompt_tokens", 0)
            stats.completion_tokens += usage.get("completion_tokens", 0)
            stats.cached_tokens += usage.get("cached_tokens", 0)
            if response.cost_usd is None:
                stats.unpriced_calls += 1
            else:
                stats.cost_usd += response.cost_usd
        self.logger.debug(
            "LLM call %s: %s tokens, cost %s",
            label,
            usage.get("total_tokens", "?"),
            "unknown" if response.cost_usd is None else f"${response.cost_usd:.6f}",
            extra={
                "event_type": "llm_call",
                "call_name": label,
                "model": response.model,
                "usage": usage,
                "cost_usd": response.cost_usd,
            },
        )

    @contextlib.contextmanager
    def _generation(self, label: str, model: str, payload: dict[str, Any]) -> Iterator[Any]:
        """A Langfuse generation around the call when a client was given, else nothing.

        Tracing must not break a game: if Langfuse itself fails, the call goes on untraced
        and the failure is logged.
        """
        if self.langfuse is None:
            yield None
            return
        parameters = {
            k: v for k, v in payload.items() if k in SAMPLING_PARAMS or k in ("max_tokens", "stop", "tool_choice")
        }
        response_format = payload.get("response_format")
        if isinstance(response_format, Mapping):
            parameters["response_format"] = str(response_format.get("type", "custom"))
        if "tools" in payload:
            parameters["tools"] = [t["function"]["name"] for t in payload["tools"]]
        with traced_observation(
            self.langfuse,
            self.logger,
            self._redact,
            as_type="generation",
            name=label,
            model=model,
            input=payload["messages"],
            model_parameters=parameters,
        ) as generation:
            yield generation

    def _record_generation(self, generation: Any, response: LLMResponse) -> None:
        usage = response.usage or {}
        details = {
            key: usage[src]
            for key, src in (("input", "prompt_tokens"), ("output", "completion_tokens"), ("total", "total_tokens"))
            if src in usage
        }
        output: Any = response.content
        if response.tool_calls:
            output = {"tool_calls": [asdict(tc) for tc in response.tool_calls]}
        try:
            generation.update(
                output=output,
                model=response.model,
                usage_details=details or None,
                metadata={"finish_reason": response.finish_reason},
            )
        except Exception as exc:  # tracing must never cost the call; logged
            self.logger.warning("Langfuse generation update failed: %s", self._redact(str(exc)), exc_info=True)


class _Completions:
    def __init__(self, client: LLMClient) -> None:
        self._client = client

    def create(self, **kwargs: Any) -> LLMResponse:
        return self._client.chat_completions_create(**kwargs)


class _Chat:
    def __init__(self, client: LLMClient) -> None:
        self.completions = _Completions(client)


class LLMClientWrapper:
    """OpenAI-SDK-shaped facade: ``wrapper.chat.completions.create(model=..., messages=...)``."""

    def __init__(
        self,
        config: GameConfiguration,
        base_url: str | None = None,
        api_key: str | None = None,
        langfuse_client: Any = None,
        logger: logging.Logger | None = None,
    ) -> None:
        self.client = LLMClient(
            config, base_url=base_url, api_key=api_key, langfuse_client=langfuse_client, logger=logger
        )
        self.chat = _Chat(self.client)

    def _supports_tool_calling(self, model: str) -> bool:
        return self.client._supports_tool_calling(model)

    @property
    def usage_by_name(self) -> dict[str, UsageStats]:
        return self.client.usage_by_name

    def reset_usage(self) -> None:
        self.client.reset_usage()
