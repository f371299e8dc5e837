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

# Attributes every LogRecord has; anything else came in through ``extra=``.
_STANDARD_ATTRS = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}
_SECRET_ENV_VARS = (
    "ZORKGPT_CLIENT_API_KEY",
    "CLIENT_API_KEY",
    "OPENROUTER_API_KEY",
    "LANGFUSE_SECRET_KEY",
    "LANGFUSE_PUBLIC_KEY",
)


def known_secrets() -> list[str]:
    """Secret values present in this process's environment (long enough to be real)."""
    return [v for k in _SECRET_ENV_VARS if len(v := os.environ.get(k, "")) >= 8]


def redact(text: str, secrets: list[str] | None = None) -> str:
    for secret in known_secrets() if secrets is None else secrets:
        if secret:
            text = text.replace(secret, "[REDACTED]")
    return text


def record_extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS and not k.startswith("_")}


class RedactingFilter(logging.Filter):
    """Removes secret values from the message and extras of every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = known_secrets()
        if secrets:
            record.msg = redact(record.getMessage(), secrets)
            record.args = None
            for key, value in record_extras(record).items():
                if isinstance(value, str):
                    setattr(record, key, redact(value, secrets))
        return True


class JSONLHandler(logging.Handler):
    """Writes records that carry an ``event_type`` as JSON lines, flushed per event."""

    def __init__(self, path: Path) -> None:
        super().__init__(level=logging.DEBUG)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
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
        try:
            self._fh.write(json.dumps(event, default=str, ensure_ascii=False) + "\n")
            self._fh.flush()
        except Exception:  # noqa: BLE001 - logging must never crash the game loop
            self.handleError(record)

    def close(self) -> None:
        try:
            self._fh.close()
        finally:
            super().close()


class HumanFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"[{record.levelname}] {record.getMessage()}"


def setup_episode_logger(
    episode_dir: Path, name: str = "zorkgpt", console: bool = True, console_level: int = logging.INFO
) -> logging.Logger:
    """A logger writing to ``episode_dir`` (JSONL + human log) and optionally the console.

    Calling it again for a new episode replaces the previous episode's handlers.
    """
    logger = logging.getLogger(name)
    close_episode_logger(logger)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    redactor = RedactingFilter()
    logger.addFilter(redactor)

    jsonl = JSONLHandler(episode_dir / "episode_log.jsonl")
    logger.addHandler(jsonl)

    human = logging.FileHandler(episode_dir / "episode.log", encoding="utf-8")
    human.setLevel(logging.DEBUG)
    human.setFormatter(HumanFormatter())
    logger.addHandler(human)

    if console:
        stream = logging.StreamHandler(sys.stderr)
        stream.setLevel(console_level)
        stream.setFormatter(HumanFormatter())
        logger.addHandler(stream)
    return logger


def close_episode_logger(logger: logging.Logger) -> None:
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
    for flt in list(logger.filters):
        logger.removeFilter(flt)
