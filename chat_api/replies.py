"""A provider's reply body read into an ``LLMResponse``: content, tool calls, usage and cost.

Pure functions. Tool calls come in many shapes: structured ``tool_calls``, the legacy
``function_call``, and the text forms local models write into ``content`` when the server does
not parse them. None of them raises: an unreadable call becomes a ``malformed_tool_call`` the
agent answers with a tool error, and a malformed body is a ``RetryableReplyError``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from chat_api.payload import text_of
from chat_api.wire import FunctionCall, LLMResponse, ToolCall
from shared_utils.model_json import fenced_blocks, loads_json
from shared_utils.text import shorten


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


def parse_text_tool_calls(content: str, tool_names: frozenset[str]) -> list[tuple[str, str]] | None:
    """Tool calls a model wrote as text, as (name, arguments) pairs; None when there are none.

    Tagged forms are taken whatever the name (an unknown name gets a tool error naming the
    real tools). A bare or fenced ``{"name": ..., "arguments": ...}`` object only counts when
    the name is one of the offered tools: otherwise it may simply be the model's answer.
    """
    found: list[tuple[str, str]] = []
    for match in _FUNCTION_TAG.finditer(content):
        name, body = match.group(1), match.group(2)
        arguments = _arguments_text(loads_json(body) if body else None)
        found.append((name, arguments) if arguments is not None else _malformed_call("arguments are not JSON", name))
    for pattern in _TEXT_TOOL_CALL_BLOCKS:
        for match in pattern.finditer(content):
            body = match.group(1).strip()
            if not body:
                continue
            value = loads_json(body)
            if value is None:
                found.append(_malformed_call(f"the text {shorten(body, 80)!r} is not JSON"))
            else:
                found.extend(_call_from_object(v) for v in (value if isinstance(value, list) else [value]))
        if found:
            break
    if found:
        return found
    for text in (content.strip(), *fenced_blocks(content)):
        value = loads_json(text)
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
            raise RetryableReplyError(f"provider error in a 2xx reply: {provider_message(body, '')}")
        raise RetryableReplyError("empty reply: no choices")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, Mapping) else None
    if not isinstance(message, Mapping):
        raise RetryableReplyError("malformed reply: choices[0] has no message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        content = text_of(content)
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
    served = body.get("model")
    served = served.strip() if isinstance(served, str) and served.strip() else None
    return LLMResponse(
        content=None if tool_calls else (content or ""),
        model=served or requested_model,
        usage=_usage_of(body),
        tool_calls=tool_calls,
        finish_reason=choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None,
        reported_cost=_reported_cost(body),
        served_model=served,
    )


def provider_message(body: Any, fallback_text: str) -> str:
    """What the provider said went wrong, from the body's error fields, else the start of the raw text."""
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
