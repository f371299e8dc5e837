"""Each transport's source: ``StdioSource`` (a server we start), ``StreamableHTTPSource`` and
``SSESource`` (remote servers), and ``make_source``, which picks one for an entry. What every
source does (connect, list, call, close) is ``source.py``'s; here is what differs: how a
server is reached, what is cleaned up after it, and how its failures are explained.

Processes. A stdio server is started by the SDK in a new process group. The SDK kills the
group only when the server does not exit on its own after its stdin closes, so a server
that starts a helper and then exits cleanly would leave the helper behind. A stdio source
therefore ends the whole group at close, always (SIGTERM, then SIGKILL after a grace
period). The server's pid is found among this process's children by a marker variable in
its environment, which everything it starts inherits: any process still carrying the marker
after that (one that left the group) is ended too. (This needs Linux ``/proc``; elsewhere
only the SDK's own clean-up applies.) Every server also carries its manager's owner marker,
with which the sweeper (``sweeper.py``) ends them all when ZorkGPT is killed outright.

Stray output. A stdio server that prints a banner or its log on stdout breaks the protocol's
rule that stdout carries only MCP messages. Our stdio transport (``stdio.py``) hands each such
line to the session's message handler as the parse error; the source warns once per server
(with the first line, cut short) and counts the rest at debug level.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import os
import signal
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import IO, Any

import httpx2
from mcp import StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError as SDKMCPError
from mcp.types import CONNECTION_CLOSED
from pydantic import ValidationError

from mcp_client.config import PROJECT_INTERPRETER_ALIASES, ServerConfig, build_stdio_parameters, safe_url
from mcp_client.http import bounded_http_client
from mcp_client.oauth import episode_auth
from mcp_client.processes import end_process_group, marked_processes, signal_group
from mcp_client.source import SourceSettings, ToolSource
from mcp_client.stdio import stdio_transport
from mcp_client.sweeper import OWNER_ENV_VAR
from session.episode_events import emit
from session.episode_events.mcp import MCPServerStderr, MCPServerStrayLines, MCPServerStrayOutput
from session.errors import MCPAuthError

MARKER_ENV_VAR = "ZORKGPT_MCP_SERVER_ID"
_STDERR_TAIL_CHARS = 2000


def closest_command(command: str) -> str | None:
    """The program on PATH whose name is closest to a command that was not found ("pyhton" ->
    "python"), or None: a typo gets its fix, a missing program the install hint."""
    if not command or "/" in command:
        return None
    names = set()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        with contextlib.suppress(OSError):
            names |= {
                entry.name for entry in os.scandir(folder or ".") if entry.is_file() and os.access(entry, os.X_OK)
            }
    close = difflib.get_close_matches(command, names, n=1, cutoff=0.8)
    return close[0] if close else None


_INSTALL_HINTS = {
    "npx": "Install Node.js 22 or newer (https://nodejs.org), which provides npx, and make sure it is on PATH.",
    "node": "Install Node.js 22 or newer (https://nodejs.org) and make sure it is on PATH.",
    "uvx": "Install uv (https://docs.astral.sh/uv/), which provides uvx, and make sure it is on PATH.",
    "docker": "Install Docker and make sure the docker command is on PATH.",
}

_STRAY_LINE_CHARS = 120


class StdioSource(ToolSource):
    """A server we start as a subprocess and talk to over its stdin/stdout."""

    def __init__(self, server: ServerConfig, settings: SourceSettings) -> None:
        super().__init__(server, settings)
        self.pid: int | None = None
        self._forked = False  # forked by the run's warm parent (mcp_client/forked.py), not started here
        self._start_aborted = False
        self._marker = uuid.uuid4().hex
        # A real file: the subprocess writes to its descriptor directly (closed at close).
        self._errlog: IO[bytes] = tempfile.TemporaryFile(mode="w+b", prefix="zorkgpt-mcp-stderr-")  # noqa: SIM115
        self._stderr_tail: str | None = None
        self._stray_lines = 0

    def parameters(self) -> StdioServerParameters:
        """How the server is launched (command, args, env, cwd), after every launch decision."""
        params = build_stdio_parameters(self.server)
        params.env = {**(params.env or {}), MARKER_ENV_VAR: self._marker}
        if self.settings.owner is not None:
            params.env[OWNER_ENV_VAR] = self.settings.owner
        return params

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        params = self.parameters()
        if params.cwd is not None and not Path(params.cwd).is_dir():
            # Checked here: the OS would report a missing cwd as a missing command.
            raise FileNotFoundError(
                f"working directory not found: {params.cwd} ('cwd' of '{self.name}' in {self.settings.config_file})"
            )
        async with stdio_transport(
            params, self._errlog, self.settings.max_reply_bytes, self._too_large, on_spawn=self._spawned
        ) as streams:
            yield streams

    def _spawned(self, pid: int, forked: bool) -> None:
        self.pid = pid
        self._forked = forked
        if self._start_aborted:  # given up while the process was being created: no grace period either
            signal_group(pid, signal.SIGTERM)

    def _too_large(self, size: int) -> str:
        limit = self.settings.max_reply_bytes
        return (
            f"replied with {size:,} bytes, over the limit of {limit:,}; the reply was dropped. Ask for less "
            "(a narrower query, a smaller page). The limit is [tool.zorkgpt.mcp] max_tool_reply_bytes."
        )

    def _abort_start(self) -> None:
        # A server that never finished its handshake has nothing to lose: it does not get the
        # SDK's grace period for a clean exit (seconds, for a server still importing).
        self._start_aborted = True
        if self.pid is not None:
            signal_group(self.pid, signal.SIGTERM)

    async def _after_close(self) -> None:
        if self.pid is not None:
            await end_process_group(self.pid)
        # Anything the server started that left its group (or a group we never learned) still
        # carries the server's marker in its environment. A forked server carries none (its
        # environment is its warm parent's), and the scan reads every process's: with 64 episodes
        # at once it cost each turn more than the forked server's whole life.
        if not self._forked:
            for pid in marked_processes(MARKER_ENV_VAR, self._marker):
                await end_process_group(pid, group=False)
        if self._stray_lines:
            emit(
                self.settings.logger,
                MCPServerStrayLines(server_name=self.name, lines=self._stray_lines),
                "MCP server '%s' wrote %d line(s) on stdout that were not MCP messages (ignored)",
                self.name,
                self._stray_lines,
                level=logging.DEBUG,
            )
            self._stray_lines = 0
        if self._stderr_tail is None:
            self._stderr_tail = self.settings.redactor(read_tail(self._errlog))
            self._errlog.close()
            if self._stderr_tail and self.connect_ms is not None:
                emit(
                    self.settings.logger,
                    MCPServerStderr(server_name=self.name),
                    "MCP server '%s' stderr:\n%s",
                    self.name,
                    self._stderr_tail,
                    level=logging.DEBUG,
                )

    def stderr_tail(self) -> str:
        return self._stderr_tail if self._stderr_tail is not None else ""

    def _on_transport_error(self, error: Exception) -> None:
        if not isinstance(error, ValidationError):
            super()._on_transport_error(error)
            return
        # A line on stdout that is not an MCP message: a banner, a print(), a log line.
        self._stray_lines += 1
        if not self.settings.stray_output.count(self.name):
            return
        emit(
            self.settings.logger,
            MCPServerStrayOutput(server_name=self.name),
            "MCP server '%s' wrote a line on stdout that is not an MCP message (ignored): %s. A stdio server "
            "must write only MCP messages on stdout (logs go to stderr); further such lines are ignored quietly.",
            self.name,
            self.settings.redactor(_stray_line(error)),
            level=logging.WARNING,
        )

    def _describe_failure(self, cause: BaseException) -> str:
        command = self.server.command or ""
        if isinstance(cause, FileNotFoundError) and str(cause).startswith("working directory not found"):
            return str(cause)
        if isinstance(cause, FileNotFoundError) and cause.filename in (None, command, self.parameters().command):
            return f"command not found: {command!r}"
        if isinstance(cause, SDKMCPError) and cause.code == CONNECTION_CLOSED:
            return "the server exited or closed its stdout before the MCP handshake completed"
        return super()._describe_failure(cause)

    def _hint(self, details: str) -> str:
        command = self.server.command or ""
        if details.startswith("command not found"):
            if command not in _INSTALL_HINTS and (close := closest_command(command)):
                return f"Did you mean '{close}'? Correct 'command' in {self.settings.config_file}."
            return _INSTALL_HINTS.get(
                command,
                f"Install '{command}' or put its folder on PATH, or use an absolute path in "
                f"{self.settings.config_file}.",
            )
        if command in PROJECT_INTERPRETER_ALIASES:
            return (
                f"'{command}' runs this project's interpreter; check that the module or script in 'args' exists "
                f"relative to {self.server.cwd or self.settings.config_dir} and starts on its own."
            )
        return (
            f"Check that the command runs on its own from {self.server.cwd or self.settings.config_dir} "
            "and speaks MCP over stdio."
        )


class _HTTPSource(ToolSource):
    """Shared by the remote transports: headers, and messages that never show them."""

    _login_needed = False

    def _hint(self, details: str) -> str:
        if self._login_needed:
            return "Then start again."
        return (
            f"Check that the server is running and reachable at {safe_url(self.server.url or '')}, "
            f"and that its type ({self.server.transport}) and headers are right."
        )

    def _describe_failure(self, cause: BaseException) -> str:
        # Its OAuth login (oauth.py): the message says which command a person must run.
        self._login_needed = isinstance(cause, MCPAuthError)
        if self._login_needed:
            return str(cause)
        if isinstance(cause, httpx2.ConnectError):
            return f"could not connect to {safe_url(self.server.url or '')} ({cause})"
        if isinstance(cause, httpx2.HTTPStatusError):
            return f"the server answered HTTP {cause.response.status_code}"
        return super()._describe_failure(cause)


class StreamableHTTPSource(_HTTPSource):
    """A remote server over streamable HTTP (``type: "http"``, or any ``url`` by default)."""

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        assert self.server.url is not None
        async with (
            bounded_http_client(dict(self.server.headers), self._event_limit(), episode_auth(self.server)) as client,
            streamable_http_client(
                self.server.url,
                http_client=client,
                max_sse_event_size=self._event_limit(),
            ) as streams,
        ):
            yield streams

    def _event_limit(self) -> int:
        return self.settings.max_reply_bytes


class SSESource(_HTTPSource):
    """A remote server over the older HTTP+SSE transport (``type: "sse"``)."""

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        assert self.server.url is not None
        return sse_client(
            self.server.url,
            headers=dict(self.server.headers),
            timeout=self.settings.startup_timeout,
            auth=episode_auth(self.server),
        )


def make_source(server: ServerConfig, settings: SourceSettings) -> ToolSource:
    """The source for one server entry, by its transport."""
    if server.transport == "stdio":
        return StdioSource(server, settings)
    if server.transport == "sse":
        return SSESource(server, settings)
    return StreamableHTTPSource(server, settings)


def _stray_line(error: ValidationError) -> str:
    """The line that failed to parse as an MCP message, cut short and quoted (control characters escaped)."""
    errors = error.errors()
    line = errors[0].get("input") if errors else None
    text = line if isinstance(line, str) else repr(line)
    if len(text) > _STRAY_LINE_CHARS:
        return f"{text[:_STRAY_LINE_CHARS]!r}... ({len(text)} characters)"
    return repr(text)


def read_tail(file: IO[bytes]) -> str:
    """The last lines the server wrote to stderr (read only after it has exited)."""
    with contextlib.suppress(OSError, ValueError):
        file.seek(0)
        text = file.read().decode("utf-8", "replace").strip()
        return text[-_STDERR_TAIL_CHARS:]
    return ""
