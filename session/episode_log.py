"""Episode logging: one compact human line per event and one JSON object per event.

Code writes an event as a record through the standard library
(``emit(logger, Turn(...), msg)``, ``session.episode_events``); the handlers here turn that into
- ``game_files/episodes/<episode_id>/episode_log.jsonl`` (one event per line, flushed per
  event so a killed run loses nothing), and
- ``episode.log`` beside it plus the console, human-readable.
The run's ``Redactor`` takes its secrets out of both before anything is written.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from session.episode_folder import EpisodeFolder
from session.errors import ConfigError
from session.events import Event
from session.redaction import Redactor
from shared_utils.text import CONTROL_CHARS, escape_control_chars

_TRACEBACKS = logging.Formatter()
# Attributes every LogRecord has; anything else came in through ``extra=``.
_STANDARD_ATTRS = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}

# What a start must be able to write (and then deletes): the first turns' logs, state and map
# take a few tens of kilobytes, so a disk with less free is full for an episode's purpose.
FREE_SPACE_NEEDED_BYTES = 64 * 1024

CONSOLE = "console"
"""``extra={"console": False}`` keeps a record off the console (it still reaches both files):
for an error the caller prints itself, such as the one that ends the run."""


@dataclass(frozen=True)
class ConsoleOptions:
    """What of an episode's log reaches the console, and where it goes.

    ``level``: WARNING for ``--quiet``, INFO otherwise. ``mcp_detail``: the per-call lines of
    MCP tool use (tool loop started, calling a tool, result received...), five or so per turn
    that uses tools, shown only at ``--verbose``; the episode's files always have them.
    ``handler``: where console lines go (the live terminal status prints them above itself);
    a stream handler on stderr when None.
    """

    level: int = logging.INFO
    mcp_detail: bool = False
    handler: logging.Handler | None = None


def is_progress(record: logging.LogRecord) -> bool:
    """A tool's progress notification (``mcp_tool_progress``)."""
    return getattr(record, "event_type", None) == Event.MCP_TOOL_PROGRESS


def is_mcp_detail(record: logging.LogRecord) -> bool:
    """One of the per-call lines of an MCP session: an informational ``mcp_*`` event of a turn, or
    the start of a server that lives one turn (one line a turn: 80 in an 80-turn run). Warnings (a
    tool that failed or timed out) are never detail."""
    event_type = str(getattr(record, "event_type", ""))
    if record.levelno >= logging.WARNING or not event_type.startswith("mcp_"):
        return False
    return hasattr(record, "turn") or (
        event_type == Event.MCP_SESSION_CONNECT and getattr(record, "lifetime", "") == "turn"
    )


def record_extras(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD_ATTRS and not k.startswith("_")}


class RedactingFilter(logging.Filter):
    """Removes the run's secrets from the message and extras of every record."""

    def __init__(self, *, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and not record.exc_text:
            # Formatted once here so every handler writes the same, redacted traceback.
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        if self.redactor.secrets:
            record.msg = self.redactor(record.getMessage())
            record.args = None
            if record.exc_text:
                record.exc_text = self.redactor(record.exc_text)
            for key, value in record_extras(record).items():
                if isinstance(value, str):
                    setattr(record, key, self.redactor(value))
        return True


class WorkdirError(ConfigError):
    """The episode's folder cannot be created or written (permissions, a read-only disk)."""


class _LogFile(logging.Handler):
    """One of the episode's two log files, written one whole record at a time.

    A record that does not fit (a full disk) is taken back: the file is cut to where it was,
    so it never ends in half a line, and the failure is reported once on stderr and
    remembered (the episode stops and the run's exit code reports it) instead of a
    ``--- Logging error ---`` traceback for every record. Later records are still tried:
    space may come back. Nothing is buffered, so closing has nothing left to write and
    cannot fail the way a buffered file's last flush does on a full disk.
    """

    def __init__(self, path: Path) -> None:
        # The file first: a handler that failed to open must not be registered with logging
        # (its close() would run at exit on a half-built object).
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
        super().__init__(level=logging.DEBUG)
        self.path = path
        self.write_failure: str | None = None

    def line(self, record: logging.LogRecord) -> str | None:
        """The record as one line of this file (without its newline), or None to leave it out."""
        raise NotImplementedError

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.line(record)
            if text is not None:
                self._append((text + "\n").encode("utf-8", "backslashreplace"))
        except OSError as exc:
            self._failed(exc)
        except Exception:  # noqa: BLE001 - logging must never crash the game loop (handleError reports it)
            self.handleError(record)

    def _append(self, data: bytes) -> None:
        size = os.fstat(self._fd).st_size
        try:
            rest = memoryview(data)
            while rest:
                rest = rest[os.write(self._fd, rest) :]
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)  # shrinking needs no space
            raise

    def _failed(self, error: OSError) -> None:
        if self.write_failure is None:
            self.write_failure = f"{self.path.name}: {error.strerror or error}"
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(f"[ERROR] Could not write {self.path}: {error.strerror or error}\n")

    def close(self) -> None:
        self.acquire()
        try:
            fd, self._fd = self._fd, -1
            if fd >= 0:
                os.close(fd)
        except OSError as exc:  # a network filesystem reports a lost write at close
            self._failed(exc)
        finally:
            self.release()
            super().close()


class JSONLHandler(_LogFile):
    """Writes records that carry an ``event_type`` as JSON lines, each on disk when logged."""

    def __init__(self, path: Path, *, redactor: Redactor) -> None:
        super().__init__(path)
        self.redactor = redactor

    def line(self, record: logging.LogRecord) -> str | None:
        extras = record_extras(record)
        if "event_type" not in extras:
            return None
        extras.pop(CONSOLE, None)
        event = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(),
            "level": record.levelname,
            "message": record.getMessage(),
            **extras,
        }
        if record.exc_text:
            event["traceback"] = record.exc_text
        # Scrubbed after serialising: a secret can hide in nested extras (tool arguments).
        line = self.redactor(json.dumps(event, default=str, ensure_ascii=False))
        # json.dumps escapes C0 but leaves DEL, C1 and bidi controls raw; they occur only inside
        # JSON strings, where \uXXXX is the same text, so `cat episode_log.jsonl` stays inert.
        return CONTROL_CHARS.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


class _HumanLogHandler(_LogFile):
    """``episode.log``: every record as its formatter renders it."""

    def line(self, record: logging.LogRecord) -> str | None:
        return self.format(record)


class HumanFormatter(logging.Formatter):
    """``[LEVEL] message``; with ``tracebacks`` (the log file, not the console) the traceback
    of a record logged with ``exc_info`` follows on the next lines. Messages carry text from
    the model, the provider and MCP servers: control characters are shown as escapes, never
    emitted raw."""

    def __init__(self, tracebacks: bool = False) -> None:
        super().__init__()
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        line = f"[{record.levelname}] {record.getMessage()}"
        if self.tracebacks and record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if self.tracebacks and record.exc_text:
            line = f"{line}\n{record.exc_text}"
        return escape_control_chars(line)


def setup_episode_logger(
    episode_dir: Path,
    name: str = "zorkgpt",
    console: bool = True,
    console_options: ConsoleOptions | None = None,
    *,
    redactor: Redactor,
) -> logging.Logger:
    """A logger writing to ``episode_dir`` (JSONL + human log) and optionally the console
    (as ``console_options`` say: by default INFO lines without MCP per-call detail, on stderr).

    ``redactor`` (the run's) cleans every record.
    Calling it again for a new episode replaces the previous episode's handlers.
    """
    logger = logging.getLogger(name)
    close_episode_logger(logger)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    # Filters go on the handlers, not the logger: a logger's own filters are skipped for
    # records propagated from child loggers (zorkgpt.llm, zorkgpt.mcp, ...).
    redacting = RedactingFilter(redactor=redactor)
    new_folders: list[Path] = []  # removed again when the start fails here: no empty episode folder is left
    try:
        new_folders = list(itertools.takewhile(lambda folder: not folder.exists(), (episode_dir, *episode_dir.parents)))
        episode_dir.mkdir(parents=True, exist_ok=True)
        check_free_space(episode_dir)
        jsonl = JSONLHandler(EpisodeFolder(episode_dir).log, redactor=redactor)
        logger.addHandler(jsonl)
        human = _HumanLogHandler(EpisodeFolder(episode_dir).human_log)
    except OSError as exc:
        close_episode_logger(logger)
        if new_folders:
            shutil.rmtree(episode_dir, ignore_errors=True)
            for folder in new_folders[1:]:
                with contextlib.suppress(OSError):
                    folder.rmdir()
        raise _workdir_error(episode_dir, exc) from exc
    jsonl.addFilter(redacting)
    human.setLevel(logging.DEBUG)
    human.setFormatter(HumanFormatter(tracebacks=True))
    human.addFilter(redacting)
    logger.addHandler(human)

    if console:
        options = console_options or ConsoleOptions()
        stream = options.handler or logging.StreamHandler(sys.stderr)
        stream.setLevel(options.level)
        stream.setFormatter(HumanFormatter())
        stream.addFilter(redacting)
        stream.addFilter(lambda record: getattr(record, CONSOLE, True))
        if not options.mcp_detail:
            # A live status shows a tool's progress in its own line instead of printing it.
            shows_progress = getattr(stream, "shows_progress", False)
            stream.addFilter(lambda record: not is_mcp_detail(record) or (shows_progress and is_progress(record)))
        logger.addHandler(stream)
    return logger


def check_free_space(folder: Path, size: int = FREE_SPACE_NEEDED_BYTES) -> None:
    """Write ``size`` bytes in ``folder``, make them durable, and delete them; ``OSError`` when they
    do not fit. Creating a file needs no space, so opening the logs alone would not notice a full disk."""
    fd, probe = tempfile.mkstemp(prefix=".free-space-check.", dir=folder)
    try:
        rest = memoryview(bytes(size))
        while rest:
            rest = rest[os.write(fd, rest) :]
        os.fsync(fd)
    finally:
        try:
            os.close(fd)
        finally:
            os.unlink(probe)


def _workdir_error(episode_dir: Path, exc: OSError) -> WorkdirError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        # The episode folder is gone again: name the folder that is there, on the full disk.
        where = next((folder for folder in episode_dir.parents if folder.is_dir()), episode_dir)
        return WorkdirError(
            f"Cannot record an episode in {where}: {exc.strerror} (it needs "
            f"{FREE_SPACE_NEEDED_BYTES // 1024} KiB to start). Free space on that disk, or set "
            "[tool.zorkgpt.files] game_workdir (or ZORKGPT_FILES_GAME_WORKDIR) to a folder on another one, "
            "then run again."
        )
    return WorkdirError(
        f"Cannot create or write the episode folder {episode_dir}: {exc.strerror or exc}. "
        "Set [tool.zorkgpt.files] game_workdir (or ZORKGPT_FILES_GAME_WORKDIR) to a folder you can write, "
        "or fix the permissions of this one."
    )


def log_write_failures(logger: logging.Logger) -> list[str]:
    """The episode's log files that could not be written (one line each), for the exit code."""
    return [
        handler.write_failure for handler in logger.handlers if isinstance(handler, _LogFile) and handler.write_failure
    ]


def close_episode_logger(logger: logging.Logger) -> None:
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()
