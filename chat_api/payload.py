"""The request as sent: validated messages and tool schemas, caching marks, the JSON body and headers.

Pure functions, so every rule can be tested without a network. Reasoning models get their
system text folded into the first user message and no sampling parameters; prompt-caching marks
go where each provider reads them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from chat_api.models import is_anthropic_model, is_reasoning_model
from chat_api.wire import TOOL_NAME_PATTERN
from session.errors import LLMInvalidRequestError
from session.game_configuration import Sampling
from session.providers import GENERIC, ProviderPreset

SAMPLING_PARAMS: frozenset[str] = frozenset(
    {"temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty"}
)
CACHE_CONTROL: dict[str, str] = {"type": "ephemeral"}
# Anthropic rejects requests with more than four cache breakpoints.
ANTHROPIC_MAX_CACHE_BREAKPOINTS = 4
ATTRIBUTION_HEADERS: dict[str, str] = {"HTTP-Referer": "https://zorkgpt.com", "X-Title": "ZorkGPT"}


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


def text_of(content: Any) -> str:
    """A message content's text: the string itself, or the text parts of a list joined by newlines."""
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
    texts = [text_of(m.get("content")) for m in messages if m["role"] in ("system", "developer")]
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
                merged = f"{system_text}\n\n{text_of(content)}" if content else system_text
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
    prepared = prepare_messages(messages, model, cache_control=preset.cache_control)
    if preset.string_assistant_content:
        for message in prepared:
            if message["role"] == "assistant" and message.get("content") is None:
                message["content"] = ""
    payload: dict[str, Any] = {"model": model, "messages": prepared}
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


def request_headers(api_key: str | None, extra_headers: Mapping[str, str] | None = None) -> dict[str, str]:
    """JSON, OpenRouter's attribution, the key when there is one, then the caller's own headers."""
    headers = {"Content-Type": "application/json", **ATTRIBUTION_HEADERS}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    headers.update(extra_headers or {})
    return headers
