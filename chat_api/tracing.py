"""Langfuse: the client (when tracing is configured), the observation helper every layer above
traces through, and the generation around one call: what was asked (messages, parameters) and
answered.

Tracing must not break a game: if Langfuse itself fails, the call goes on untraced and the
failure is logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any

from chat_api.payload import SAMPLING_PARAMS
from chat_api.wire import LLMResponse
from session.episode_events import emit
from session.episode_events.models import LangfuseError
from session.game_configuration import GameConfiguration


def get_langfuse_client(config: GameConfiguration, environ: dict[str, str] | None = None) -> Any:
    """A ``langfuse.Langfuse`` client when tracing is configured, else None.

    Tracing needs both LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY and
    ``[tool.zorkgpt.langfuse] enabled``; without them this returns None before touching
    the SDK, which would otherwise warn about missing keys on every start.
    ``config.langfuse.host`` wins over LANGFUSE_HOST / LANGFUSE_BASE_URL.
    """
    env = os.environ if environ is None else environ
    public_key = env.get("LANGFUSE_PUBLIC_KEY")
    secret_key = env.get("LANGFUSE_SECRET_KEY")
    if not (config.langfuse.enabled and public_key and secret_key):
        return None
    from langfuse import Langfuse  # imported lazily: the SDK and OpenTelemetry add ~1 s to start-up

    host = config.langfuse.host or env.get("LANGFUSE_BASE_URL") or env.get("LANGFUSE_HOST")
    return Langfuse(public_key=public_key, secret_key=secret_key, host=host)


@contextmanager
def traced_observation(
    langfuse_client: Any, logger: logging.Logger, redact: Callable[[str], str], **observation: Any
) -> Iterator[Any]:
    """A Langfuse observation (``start_as_current_observation(**observation)``), or None.

    Tracing must never cost the game: when no client is configured, or Langfuse itself
    fails to start the observation, the body runs untraced (the failure is logged). An
    exception from the body marks the observation as an error (message passed through
    ``redact``) and propagates.
    """
    if langfuse_client is None:
        yield None
        return
    try:
        manager = langfuse_client.start_as_current_observation(**observation)
        span = manager.__enter__()
    except Exception as exc:  # noqa: BLE001 - tracing must never cost the call; logged with its traceback
        emit(
            logger,
            LangfuseError(),
            "Langfuse observation %r not started: %s",
            observation.get("name"),
            redact(str(exc)),
            level=logging.WARNING,
            exc_info=True,
        )
        yield None
        return
    try:
        yield span
    except BaseException as exc:
        try:
            span.update(level="ERROR", status_message=redact(f"{type(exc).__name__}: {exc}"))
        finally:
            manager.__exit__(type(exc), exc, exc.__traceback__)
        raise
    manager.__exit__(None, None, None)


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
