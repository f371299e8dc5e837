"""The Langfuse generation around one call: what was asked (messages, parameters) and answered.

Tracing must not break a game: if Langfuse itself fails, the call goes on untraced and the
failure is logged.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict
from typing import Any

from chat_api.payload import SAMPLING_PARAMS
from chat_api.wire import LLMResponse
from shared_utils.tracing import traced_observation


def traced_parameters(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The request's parameters as a trace shows them: sampling as sent, the format's type, tool names."""
    parameters = {
        k: v for k, v in payload.items() if k in SAMPLING_PARAMS or k in ("max_tokens", "stop", "tool_choice")
    }
    response_format = payload.get("response_format")
    if isinstance(response_format, Mapping):
        parameters["response_format"] = str(response_format.get("type", "custom"))
    if "tools" in payload:
        parameters["tools"] = [t["function"]["name"] for t in payload["tools"]]
    return parameters


@contextlib.contextmanager
def generation(
    langfuse: Any,
    logger: logging.Logger,
    redact: Callable[[str], str],
    label: str,
    payload: Mapping[str, Any],
) -> Iterator[Any]:
    """A Langfuse generation around the call when a client was given, else nothing (None)."""
    if langfuse is None:
        yield None
        return
    with traced_observation(
        langfuse,
        logger,
        redact,
        as_type="generation",
        name=label,
        model=payload["model"],
        input=payload["messages"],
        model_parameters=traced_parameters(payload),
    ) as observation:
        yield observation


def record_generation(
    observation: Any, response: LLMResponse, logger: logging.Logger, redact: Callable[[str], str]
) -> None:
    """The answer, the model that gave it and its tokens, onto the call's generation."""
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
        observation.update(
            output=output,
            model=response.model,
            usage_details=details or None,
            metadata={"finish_reason": response.finish_reason},
        )
    except Exception as exc:  # tracing must never cost the call; logged
        logger.warning("Langfuse generation update failed: %s", redact(str(exc)), exc_info=True)
