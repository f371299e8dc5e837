"""The Langfuse client and the observation helper."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from session.events import Event


def get_langfuse_client(config: Any, environ: dict[str, str] | None = None) -> Any:
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
    except Exception as exc:  # tracing must never cost the call; logged
        logger.warning(
            "Langfuse observation %r not started: %s",
            observation.get("name"),
            redact(str(exc)),
            exc_info=True,
            extra={"event_type": Event.LANGFUSE_ERROR},
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
