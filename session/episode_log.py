"""Episode logging: one compact human line per event and one JSON object per event.

Code logs with the standard library (``logger.info(msg, extra={"event_type": ...})``);
the handlers here turn that into
- ``game_files/episodes/<episode_id>/episode_log.jsonl`` (one event per line, flushed per
  event so a killed run loses nothing), and
- ``episode.log`` beside it plus the console, human-readable.
Known secrets are redacted from both before anything is written.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from session.game_configuration import API_KEY_ENV_VARS

_TRACEBACKS = logging.Formatter()
# Attributes every LogRecord has; anything else came in through ``extra=``.
_STANDARD_ATTRS = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
# Our secrets: the LLM keys and Langfuse's. One list for redaction here and for what the
# MCP server subprocess must not inherit (managers.mcp_config).
SECRET_ENV_VARS: tuple[str, ...] = (*API_KEY_ENV_VARS, "LANGFUSE_SECRET_KEY", "LANGFUSE_PUBLIC_KEY")


def known_secrets() -> list[str]:
    """Secret values present in this process's environment (long enough to be real)."""
    return [v for k in SECRET_ENV_VARS if len(v := os.environ.get(k, "")) >= 8]


def redact(text: str, secrets: list[str] | None = None) -> str:
    for secret in known_secrets() if secrets is None else secrets:
        if secret:
            text = text.replace(secret, "[REDACTED]")
    return text


def record_extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS and not k.startswith("_")}


class RedactingFilter(logging.Filter):
    """Removes secret values from the message and extras of every record.

    ``extra_secrets`` covers keys that never were in the environment (a ``.env`` file, a
    config passed in code).
    """

    def __init__(self, extra_secrets: list[str] | None = None) -> None:
        super().__init__()
        self.extra_secrets = [s for s in extra_secrets or [] if s and len(s) >= 8]

    def scrub(self, text: str) -> str:
        return redact(text, known_secrets() + self.extra_secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and not record.exc_text:
            # Formatted once here so every handler writes the same, redacted traceback.
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        secrets = known_secrets() + self.extra_secrets
        if secrets:
            record.msg = redact(record.getMessage(), secrets)
            record.args = None
            if record.exc_text:
                record.exc_text = redact(record.exc_text, secrets)
            for key, value in record_extras(record).items():
                if isinstance(value, str):
                    setattr(record, key, redact(value, secrets))
        return True


class JSONLHandler(logging.Handler):
    """Writes records that carry an ``event_type`` as JSON lines, flushed per event."""

    def __init__(self, path: Path, redactor: RedactingFilter | None = None) -> None:
        super().__init__(level=logging.DEBUG)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.redactor = redactor or RedactingFilter()
        self._fh = path.open("a", encoding="utf-8")

    def emit(self, record: logging.LogRecord) -> None:
        extras = record_extras(record)
        if "event_type" not in extras:
            return
        event = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "message": record.getMessage(),
            **extras,
        }
        if record.exc_text:
            event["traceback"] = record.exc_text
        try:
            # Scrubbed after serialising: a secret can hide in nested extras (tool arguments).
            self._fh.write(self.redactor.scrub(json.dumps(event, default=str, ensure_ascii=False)) + "\n")
            self._fh.flush()
        except Exception:  # noqa: BLE001 - logging must never crash the game loop
            self.handleError(record)

    def close(self) -> None:
        try:
            self._fh.close()
        finally:
            super().close()


class HumanFormatter(logging.Formatter):
    """``[LEVEL] message``; with ``tracebacks`` (the log file, not the console) the traceback
    of a record logged with ``exc_info`` follows on the next lines."""

    def __init__(self, tracebacks: bool = False) -> None:
        super().__init__()
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        line = f"[{record.levelname}] {record.getMessage()}"
        if self.tracebacks and record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if self.tracebacks and record.exc_text:
            line = f"{line}\n{record.exc_text}"
        return line


def setup_episode_logger(
    episode_dir: Path,
    name: str = "zorkgpt",
    console: bool = True,
    console_level: int = logging.INFO,
    secrets: list[str] | None = None,
) -> logging.Logger:
    """A logger writing to ``episode_dir`` (JSONL + human log) and optionally the console.

    Calling it again for a new episode replaces the previous episode's handlers.
    """
    logger = logging.getLogger(name)
    close_episode_logger(logger)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    # Filters go on the handlers, not the logger: a logger's own filters are skipped for
    # records propagated from child loggers (zorkgpt.llm, zorkgpt.mcp, ...).
    redactor = RedactingFilter(secrets)

    jsonl = JSONLHandler(episode_dir / "episode_log.jsonl", redactor)
    jsonl.addFilter(redactor)
    logger.addHandler(jsonl)

    human = logging.FileHandler(episode_dir / "episode.log", encoding="utf-8")
    human.setLevel(logging.DEBUG)
    human.setFormatter(HumanFormatter(tracebacks=True))
    human.addFilter(redactor)
    logger.addHandler(human)

    if console:
        stream = logging.StreamHandler(sys.stderr)
        stream.setLevel(console_level)
        stream.setFormatter(HumanFormatter())
        stream.addFilter(redactor)
        logger.addHandler(stream)
    return logger


def close_episode_logger(logger: logging.Logger) -> None:
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
