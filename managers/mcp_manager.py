"""MCPManager: one MCP stdio server per turn, its tools in OpenAI form, and tool calls.

Lifecycle. The agent connects at the start of a turn and disconnects at its end, inside
the single ``asyncio.run`` of ``get_action_with_reasoning``; a fresh subprocess per turn
gives every turn clean server state (seeds: single-tier, per-turn lifecycle).

Why a runner task. The SDK's ``stdio_client`` and ``ClientSession`` are anyio context
managers whose task groups and cancel scopes must be entered and exited in one task, in
LIFO order. Holding them open across ``connect_session()`` / ``disconnect_session()``
in the caller's task would let a failing pipe task cancel whatever the agent is doing at
that moment, and wrapping their entry in ``asyncio.wait_for`` moves the cancel scope to
another task ("cancel scope in a different task"). So one private task owns the whole
session: it enters both contexts under a cancel scope whose deadline is the startup
timeout (lifted once ``initialize`` and ``list_tools`` are done), reports readiness, waits
for the stop signal and exits both contexts itself. Tool calls are plain requests on the
session from the caller's task. The SDK's own shutdown (close stdin, wait, SIGTERM, SIGKILL
the process group, shielded) ends the subprocess, so nothing outlives the turn.

Failures. Configuration errors surface in ``__init__`` (fail fast). The first connect of
an episode that fails raises ``MCPServerStartupError`` with no retry: the configuration is
probably wrong. After a good connect, a failed connect is retried exactly once (each
time it happens); if the retry fails too, MCP is disabled for the rest of the episode and
``MCPServerDisabledError`` is raised so the agent falls back to playing without tools.
``reset_episode()`` clears all of that.

Launch decisions (see ``managers.mcp_config``): the subprocess runs in the config file's
folder; ``python``/``python3`` mean the project's own interpreter (``sys.executable``);
the environment is ours plus the entry's ``env`` minus our secrets. The server's stderr
goes to a temporary file (a real file: pytest's capture has no ``fileno``); its tail is
quoted in startup errors and logged at DEBUG when the session ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError as SDKMCPError
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT
from pydantic import ValidationError

from managers.mcp_config import (
    PROJECT_INTERPRETER_ALIASES,
    SECRET_ENV_VARS,
    MCPConfig,
    MCPServerConfig,
    build_server_environment,
    build_stdio_parameters,
)
from managers.mcp_errors import (
    MCPConfigError,
    MCPError,
    MCPServerDiedError,
    MCPServerDisabledError,
    MCPServerStartupError,
    MCPToolCallError,
)
from managers.mcp_tools import ToolCallResult, ToolNameMap, convert_call_result, translate_tool
from session.episode_log import known_secrets, redact
from session.game_configuration import GameConfiguration
from shared_utils import traced_observation

__all__ = [
    "SECRET_ENV_VARS",
    "MCPConfig",
    "MCPConfigError",
    "MCPError",
    "MCPManager",
    "MCPServerConfig",
    "MCPServerDiedError",
    "MCPServerDisabledError",
    "MCPServerStartupError",
    "MCPToolCallError",
    "ToolCallResult",
    "build_server_environment",
]

_STDERR_TAIL_CHARS = 2000
_INSTALL_HINTS = {
    "npx": "Install Node.js 22 or newer (https://nodejs.org), which provides npx, and make sure it is on PATH.",
    "node": "Install Node.js 22 or newer (https://nodejs.org) and make sure it is on PATH.",
    "uvx": "Install uv (https://docs.astral.sh/uv/), which provides uvx, and make sure it is on PATH.",
    "docker": "Install Docker and make sure the docker command is on PATH.",
}


class _StartupTimeoutError(Exception):
    """The server did not finish initialize + list_tools before the startup deadline."""


@dataclass
class _LiveSession:
    """One running server, owned by its runner task (see the module docstring)."""

    loop: asyncio.AbstractEventLoop
    stop: asyncio.Event
    errlog: IO[bytes]
    task: asyncio.Task[None] = field(init=False)
    startup_scope: anyio.CancelScope | None = None
    session: ClientSession | None = None
    tools: list[types.Tool] = field(default_factory=list)
    names: ToolNameMap | None = None
    instructions: str | None = None  # what the server says it is for (MCP initialize)
    died: str | None = None  # why the session is unusable, once it is


class MCPManager:
    """Connects the configured MCP server per turn and runs its tools (see the module docstring)."""

    def __init__(
        self,
        config: GameConfiguration,
        logger: logging.Logger,
        langfuse_client: Any | None = None,
    ) -> None:
        self.config = config
        self.logger = logger
        self.langfuse_client = langfuse_client
        self.config_path = config.resolve_path(config.mcp.config_file)
        self.mcp_config = MCPConfig.from_file(self.config_path)
        self.server_name, self.server_config = self.mcp_config.get_server_config()
        ignored = list(self.mcp_config.mcpServers)[1:]
        self.logger.info(
            "MCP server '%s' configured from %s%s",
            self.server_name,
            self.config_path,
            f" (only the first server is used; ignoring {', '.join(ignored)})" if ignored else "",
            extra={
                "event_type": "mcp_config_loaded",
                "server_name": self.server_name,
                "config_file": str(self.config_path),
                "ignored_servers": ignored,
            },
        )
        self._live: _LiveSession | None = None
        self._names: ToolNameMap | None = None
        self._disabled = False
        self._ever_connected = False

    # -- state ---------------------------------------------------------------------------

    @property
    def is_disabled(self) -> bool:
        """True once a later-turn connect and its retry both failed; cleared by ``reset_episode``."""
        return self._disabled

    @property
    def is_connected(self) -> bool:
        live = self._live
        return live is not None and live.session is not None and live.died is None and not live.task.done()

    def reset_episode(self) -> None:
        """Forget the previous episode's failures: the next connect is a first connect again."""
        self._disabled = False
        self._ever_connected = False

    def server_parameters(self) -> StdioServerParameters:
        """How the server is launched (command, args, env, cwd), after every launch decision."""
        return build_stdio_parameters(self.server_config, self.mcp_config.base_dir)

    # -- connect / disconnect --------------------------------------------------------------

    async def connect_session(self) -> None:
        """Spawn the server, initialize the session and list its tools for this turn.

        Raises:
            MCPServerStartupError: the first connect of the episode failed.
            MCPServerDisabledError: the retry of a later connect failed (MCP is then
                disabled), or MCP is already disabled.
        """
        if self._disabled:
            raise MCPServerDisabledError(
                f"MCP server '{self.server_name}' is disabled for the rest of this episode after repeated "
                "connection failures."
            )
        live = self._live
        if live is not None:
            if live.loop is asyncio.get_running_loop() and self.is_connected:
                return
            await self.disconnect_session()
        try:
            await self._connect_once()
        except MCPServerStartupError as first:
            if not self._ever_connected:
                # Off the console: the error ends the run and main.py prints it once.
                self._log_event(
                    logging.ERROR, "mcp_session_connect_failed", "%s", first, attempt=1, retry=False, console=False
                )
                raise
            self._log_event(
                logging.WARNING,
                "mcp_session_connect_failed",
                "MCP session connect failed, retrying once: %s",
                first,
                attempt=1,
                retry=True,
            )
            self._log_event(logging.WARNING, "mcp_session_retry", "Retrying MCP session connect", attempt=2)
            try:
                await self._connect_once()
            except MCPServerStartupError as second:
                self._disabled = True
                self._log_event(
                    logging.WARNING,
                    "mcp_disabled",
                    "MCP retry failed, disabling MCP for the rest of the episode: %s",
                    second,
                    error=str(second),
                )
                raise MCPServerDisabledError(
                    f"{second}\nThe retry failed too: MCP is disabled for the rest of this episode."
                ) from second
            self._log_event(logging.INFO, "mcp_session_retry_ok", "MCP session connected on retry", attempt=2)

    async def _connect_once(self) -> None:
        """One attempt: start the runner task and wait until it is ready or has failed."""
        try:
            params = self.server_parameters()
        except (OSError, ValueError) as exc:  # an unusable cwd or env in the config
            raise MCPServerStartupError(self._startup_message(str(exc), None)) from exc
        if not Path(params.cwd or ".").is_dir():
            # Checked here: the OS would report a missing cwd as a missing command.
            raise MCPServerStartupError(
                self._startup_message(f"working directory not found: {params.cwd} ('cwd' in {self.config_path})", None)
            )
        loop = asyncio.get_running_loop()
        # A real file: the subprocess writes to its descriptor directly (closed at disconnect).
        errlog = tempfile.TemporaryFile(mode="w+b", prefix="zorkgpt-mcp-stderr-")  # noqa: SIM115
        live = _LiveSession(loop=loop, stop=asyncio.Event(), errlog=errlog)
        ready: asyncio.Future[None] = loop.create_future()
        timeout = self.config.mcp.server_startup_timeout_seconds
        started = time.perf_counter()
        live.task = loop.create_task(self._run_session(live, params, ready, timeout), name=f"mcp-{self.server_name}")
        self._live = live
        try:
            # Shielded so a cancelled caller leaves the future for the runner to settle.
            await asyncio.shield(ready)
        except BaseException as exc:
            # Failed, or the caller was cancelled: unwind the runner so the process is gone.
            if live.startup_scope is not None:
                live.startup_scope.cancel()
            live.stop.set()
            await asyncio.wait({live.task})
            self._live = None
            stderr_tail = _read_tail(errlog)
            errlog.close()
            if not isinstance(exc, Exception):
                raise
            cause = _root_cause(exc)
            message = self._startup_message(self._describe_failure(cause, timeout), stderr_tail)
            raise MCPServerStartupError(message) from cause
        self._ever_connected = True
        self._names = live.names
        self.logger.info(
            "MCP session connected to '%s' with %s tools",
            self.server_name,
            len(live.tools),
            extra={
                "event_type": "mcp_session_connect",
                "server_name": self.server_name,
                "tool_count": len(live.tools),
                "tools": [route.dotted for route in live.names.routes] if live.names else [],
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
            },
        )

    async def _run_session(
        self, live: _LiveSession, params: StdioServerParameters, ready: asyncio.Future[None], timeout: float
    ) -> None:
        """Own the transport and the session from spawn to exit, all in this one task."""
        startup = anyio.CancelScope(deadline=anyio.current_time() + timeout)
        live.startup_scope = startup
        try:
            with startup:
                async with (
                    stdio_client(params, errlog=live.errlog) as (read, write),  # type: ignore[arg-type]
                    ClientSession(read, write) as session,
                ):
                    initialized = await session.initialize()
                    live.instructions = initialized.instructions
                    tools = await _list_all_tools(session)
                    startup.deadline = math.inf  # started: from now on only the stop signal ends it
                    live.startup_scope = None
                    live.session = session
                    live.tools = tools
                    live.names = ToolNameMap(self.server_name, [tool.name for tool in tools])
                    ready.set_result(None)
                    await live.stop.wait()
            if not ready.done():
                ready.set_exception(_StartupTimeoutError() if startup.cancel_called else RuntimeError("session closed"))
        except Exception as exc:  # noqa: BLE001 - handed to the waiting connect, or logged below
            if not ready.done():
                # A deadline cancel can surface as a transport error; report the real reason.
                ready.set_exception(_StartupTimeoutError() if startup.cancel_called else exc)
            else:
                live.died = f"the session ended unexpectedly: {_root_cause(exc)!r}"
                self.logger.warning(
                    "MCP session for '%s' ended with an error: %r",
                    self.server_name,
                    _root_cause(exc),
                    extra={"event_type": "mcp_session_error", "server_name": self.server_name},
                )
        finally:
            live.session = None
            if not ready.done():  # cancelled from outside before the session was ready
                ready.set_exception(RuntimeError("the MCP session task was cancelled during startup"))
            if live.died is None and not live.stop.is_set():
                live.died = "the session closed before the turn ended"

    async def disconnect_session(self) -> None:
        """End the session and the subprocess. Idempotent; failures are logged, never raised."""
        live, self._live = self._live, None
        if live is None:
            return
        try:
            if live.loop is not asyncio.get_running_loop():
                # The turn's event loop ended without a disconnect; asyncio.run cancelled the
                # runner then, and the SDK's shielded shutdown stopped the process.
                self.logger.warning(
                    "MCP session from an earlier event loop dropped without a clean disconnect",
                    extra={"event_type": "mcp_session_stale", "server_name": self.server_name},
                )
                return
            live.stop.set()
            await asyncio.wait({live.task})
            if not live.task.cancelled() and live.task.exception() is not None:
                exc = live.task.exception()
                self.logger.warning(
                    "MCP session for '%s' failed while disconnecting: %r",
                    self.server_name,
                    _root_cause(exc),
                    extra={"event_type": "mcp_disconnect_error", "server_name": self.server_name},
                )
        except Exception as exc:  # disconnect must never raise; the failure is logged
            self.logger.warning(
                "MCP disconnect failed: %r",
                exc,
                exc_info=True,
                extra={"event_type": "mcp_disconnect_error", "server_name": self.server_name},
            )
        finally:
            tail = self._redact(_read_tail(live.errlog))
            live.errlog.close()
            if tail:
                self.logger.debug(
                    "MCP server '%s' stderr:\n%s",
                    self.server_name,
                    tail,
                    extra={"event_type": "mcp_server_stderr", "server_name": self.server_name},
                )
            self.logger.debug(
                "MCP session disconnected",
                extra={"event_type": "mcp_session_disconnect", "server_name": self.server_name},
            )

    # -- tools -----------------------------------------------------------------------------

    async def get_tool_schemas(self) -> list[dict[str, Any]]:
        """The server's tools as OpenAI function tools, under their wire names."""
        live = self._require_session()
        assert live.names is not None
        return [translate_tool(tool, live.names) for tool in live.tools]

    def server_instructions(self) -> dict[str, str]:
        """Each connected server's own account of its purpose (its MCP ``instructions``), by server name."""
        live = self._live
        return {self.server_name: live.instructions} if live is not None and live.instructions else {}

    def display_name(self, name: str) -> str:
        """The dotted ``server.tool`` form of a wire or dotted name, for logs and traces."""
        # The last listing's names: still valid between turns (the same server lists the same tools).
        if self._names is not None:
            return self._names.display_name(name)
        prefix = f"{self.server_name}__"
        if name.startswith(prefix):
            return f"{self.server_name}.{name[len(prefix) :]}"
        return name

    async def call_tool(
        self, tool_name: str, arguments: dict[str, Any], timeout_seconds: float | None = None
    ) -> ToolCallResult:
        """Run one tool, by wire name or dotted name.

        Raises:
            TimeoutError: the call took longer than ``timeout_seconds``
                (default ``[tool.zorkgpt.mcp] tool_call_timeout_seconds``).
            MCPServerDiedError: the server process or session is gone.
            MCPToolCallError: unknown tool, bad arguments, or a protocol error.
        """
        timeout = self.config.mcp.tool_call_timeout_seconds if timeout_seconds is None else timeout_seconds
        display = self.display_name(tool_name)
        with traced_observation(
            self.langfuse_client,
            self.logger,
            self._redact,
            as_type="tool",
            name=f"mcp-tool-{display}",
            input=arguments,
            metadata={"tool_name": display, "server_name": self.server_name, "timeout_seconds": timeout},
        ) as observation:
            result, duration_ms = await self._call_tool(tool_name, arguments, timeout)
            if observation is not None:
                observation.update(
                    output=result.to_dict(),
                    metadata={"is_error": result.is_error, "duration_ms": duration_ms},
                    **({"level": "WARNING", "status_message": result.error_message} if result.is_error else {}),
                )
            return result

    async def _call_tool(
        self, tool_name: str, arguments: dict[str, Any], timeout: float
    ) -> tuple[ToolCallResult, float]:
        live = self._require_session()
        assert live.names is not None and live.session is not None
        route = live.names.resolve(tool_name)
        if route is None:
            known = ", ".join(f"{r.wire_name} ({r.dotted})" for r in live.names.routes) or "none"
            raise MCPToolCallError(f"Unknown tool '{tool_name}' on MCP server '{self.server_name}'. Known: {known}.")
        if not isinstance(arguments, dict):
            raise MCPToolCallError(
                f"Arguments for {route.dotted} must be a JSON object, got {type(arguments).__name__}."
            )
        session = live.session
        started = time.perf_counter()
        try:
            raw = await session.call_tool(route.tool_name, arguments, read_timeout_seconds=timeout)
        except SDKMCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                raise TimeoutError(f"MCP tool {route.dotted} timed out after {timeout:g}s") from None
            if exc.code == CONNECTION_CLOSED:
                live.died = f"connection closed during {route.dotted}"
                raise MCPServerDiedError(self._died_message(route.dotted, live)) from None
            raise MCPToolCallError(f"MCP tool {route.dotted} failed: {exc.message} (code {exc.code})") from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            live.died = f"transport closed during {route.dotted}"
            raise MCPServerDiedError(self._died_message(route.dotted, live)) from exc
        except ValidationError as exc:
            raise MCPToolCallError(f"MCP tool {route.dotted} returned a malformed result: {exc}") from None
        except RuntimeError as exc:  # e.g. an input_required result, which ZorkGPT cannot answer
            raise MCPToolCallError(f"MCP tool {route.dotted} failed: {exc}") from None
        duration_ms = round((time.perf_counter() - started) * 1000, 1)
        if not isinstance(raw, types.CallToolResult):
            raise MCPToolCallError(f"MCP tool {route.dotted} returned an unsupported result type {type(raw).__name__}.")
        return convert_call_result(raw, self.config.mcp.max_tool_result_chars), duration_ms

    def _require_session(self) -> _LiveSession:
        live = self._live
        if live is None:
            raise MCPToolCallError(f"No MCP session for '{self.server_name}': call connect_session() first.")
        if live.died is not None or live.session is None:
            raise MCPServerDiedError(self._died_message(None, live))
        return live

    # -- messages --------------------------------------------------------------------------

    def _died_message(self, dotted: str | None, live: _LiveSession) -> str:
        during = f" during {dotted}" if dotted else ""
        reason = live.died or "the session is closed"
        return f"MCP server '{self.server_name}' is no longer available{during} ({reason})."

    def _describe_failure(self, cause: BaseException, timeout: float) -> str:
        if isinstance(cause, _StartupTimeoutError):
            return (
                f"it did not finish initialize + list_tools within {timeout:g}s "
                "([tool.zorkgpt.mcp] server_startup_timeout_seconds)"
            )
        if isinstance(cause, FileNotFoundError) and cause.filename in (
            None,
            self.server_config.command,
            self.server_parameters().command,
        ):
            return f"command not found: {self.server_config.command!r}"
        if isinstance(cause, SDKMCPError) and cause.code == CONNECTION_CLOSED:
            return "the server exited or closed its stdout before the MCP handshake completed"
        return f"{type(cause).__name__}: {cause}"

    def _startup_message(self, details: str, stderr_tail: str | None) -> str:
        command = self.server_config.command
        if details.startswith("command not found"):
            hint = _INSTALL_HINTS.get(
                command,
                f"Install '{command}' or put its folder on PATH, or use an absolute path in {self.config_path}.",
            )
        elif command in PROJECT_INTERPRETER_ALIASES:
            hint = (
                f"'{command}' runs this project's interpreter; check that the module or script in 'args' exists "
                f"relative to {self.mcp_config.base_dir} and starts on its own."
            )
        else:
            hint = f"Check that the command runs on its own from {self.mcp_config.base_dir} and speaks MCP over stdio."
        message = (
            f"Failed to start MCP server '{self.server_name}': {details}\n"
            f"Command: {self.server_config.command_line()}\n"
            f"{hint}\n"
            f"To play without tools, set enabled = false under [tool.zorkgpt.mcp]."
        )
        if stderr_tail:
            message += f"\nServer stderr (last lines):\n{stderr_tail}"
        return self._redact(message)

    def _redact(self, text: str) -> str:
        """Our secrets out of text: the environment's, and a key that came from .env or code."""
        return redact(text, known_secrets() + ([self.config.api_key] if self.config.api_key else []))

    def _log_event(self, level: int, event_type: str, message: str, *args: Any, **extra: Any) -> None:
        self.logger.log(
            level,
            message,
            *args,
            extra={"event_type": event_type, "server_name": self.server_name, **extra},
        )


async def _list_all_tools(session: ClientSession) -> list[types.Tool]:
    """Every tool, following pagination cursors; a repeated name keeps its first definition.

    Providers reject two functions with one name, so a server listing a name twice must
    not turn into a request the model API refuses.
    """
    result = await session.list_tools()
    tools = list(result.tools)
    while result.next_cursor:
        result = await session.list_tools(params=types.PaginatedRequestParams(cursor=result.next_cursor))
        tools.extend(result.tools)
    unique: dict[str, types.Tool] = {}
    for tool in tools:
        unique.setdefault(tool.name, tool)
    return list(unique.values())


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


def _root_cause(exc: BaseException) -> BaseException:
    """The real error inside anyio's exception groups (cancellations last)."""
    leaves = list(_leaves(exc))
    for leaf in leaves:
        if not isinstance(leaf, asyncio.CancelledError):
            return leaf
    return leaves[0] if leaves else exc


def _read_tail(file: IO[bytes]) -> str:
    """The last lines the server wrote to stderr (read only after it has exited)."""
    with contextlib.suppress(OSError, ValueError):
        file.seek(0)
        text = file.read().decode("utf-8", "replace").strip()
        return text[-_STDERR_TAIL_CHARS:]
    return ""
