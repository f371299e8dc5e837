"""A source of tools: one MCP server behind one transport (stdio, streamable HTTP or SSE).

Every source has the same small interface: ``connect()``, ``tools`` (the last listing),
``list_tools()``, ``call_tool()``, ``ping()``, ``close()``, and ``async with source:``.

Protocol. Each source connects with the SDK's ``Client`` in auto mode: it asks the server for
the 2026-07-28 revision (``server/discover``) and falls back to the 2025-11-25 handshake when
the server does not offer it; an entry's ``protocol`` pins either, and SSE always speaks 2025.
``protocol_version`` says what was agreed. Tool calls go through the ``Client`` so that a
server's input-required rounds and a stale tool listing are handled as the SDK specifies.

Timeouts and progress. A call's own timeout runs from its last sign of life: each progress
notification the server sends moves it on, never past the hard deadline the caller gives (the
turn's budget). A call cut by either is cancelled at the server too (the SDK sends
``notifications/cancelled``, or closes the request's HTTP stream).

Why a runner task. The SDK's transports and ``ClientSession`` are anyio context managers
whose task groups and cancel scopes must be entered and exited in one task, in LIFO order.
So one private task per source owns the whole connection: it enters the transport and the
session under a cancel scope whose deadline is the startup timeout (lifted once
``initialize`` and the tool listing are done), reports readiness, waits for the stop
signal and exits both contexts itself. Tool calls are plain requests on the session from
any task of the same event loop.

Each transport's own source (how it starts, what it cleans up, how its failures read) is
``transport_sources.py``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

import anyio
import anyio.abc
import mcp.types as types
from mcp import Client, ClientSession
from mcp.client.subscriptions import (
    ListenNotSupportedError,
    PromptsListChanged,
    ResourcesListChanged,
    SubscriptionLost,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError as SDKMCPError
from mcp.types import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from mcp_client.config import ServerConfig
from mcp_client.http import TOO_LARGE_MARKER
from mcp_client.results import assume_complete
from mcp_client.server_requests import ServerRequestAnswers
from mcp_client.stdio import REPLY_TOO_LARGE
from mcp_client.tokens import interrupted_lock_wait
from session.episode_events import emit
from session.episode_events.mcp import MCPListenUnacknowledged, MCPListenUnavailable, MCPTransportError
from session.errors import MCPServerDiedError, MCPServerStartupError, MCPToolCallError, root_cause
from shared_utils.version import project_version

# A server acknowledges subscriptions/listen in milliseconds; without it within this, it is used unheard.
LISTEN_ACK_SECONDS = 5.0
_MAX_PAGES = 1000  # pages of one tool, resource or prompt listing: beyond them, the server is paging in circles
_T = TypeVar("_T")


class _Page(Protocol):
    """A page of an MCP listing (tools, resources, prompts)."""

    next_cursor: str | None


_R = TypeVar("_R", bound=_Page)

Redactor = Callable[[str], str]
# What the caller learns of a call's progress: (progress, total, message), as the server sent them.
ProgressReport = Callable[[float, float | None, str | None], None]

# The words of the error the SDK ends a reply's stream with when one event is over its limit.
_EVENT_TOO_LARGE = "Server-sent event exceeded the"


@dataclass
class PerServerCount:
    """Per server name, how often something happened (a stdout line that was not an MCP message, a
    start without notice of changes): warned about once per server for the whole run, however many
    times a turn-lifetime server is started."""

    counts: dict[str, int] = field(default_factory=dict)

    def count(self, name: str) -> bool:
        """Count one of ``name``; True for the server's first."""
        seen = self.counts.get(name, 0)
        self.counts[name] = seen + 1
        return seen == 0


@dataclass(frozen=True)
class SourceSettings:
    """What every source of one episode shares: timeouts, where relative paths start, redaction."""

    startup_timeout: float
    # Our stdio transport skips a line beyond this many bytes and the SDK's streamable HTTP
    # transport stops reading a server-sent event beyond it (by itself at 1 MiB); SSE and plain
    # JSON bodies are read whole by the SDK and bounded only after (``tools.convert_call_result``).
    max_reply_bytes: int
    config_dir: Path
    config_file: str
    redactor: Redactor
    logger: logging.Logger
    stray_output: PerServerCount = field(default_factory=PerServerCount)
    # The starts that went without notice of changes (no listen acknowledgement).
    unheard: PerServerCount = field(default_factory=PerServerCount)
    owner: str | None = None  # the manager's marker, for the sweeper (``sweeper.py``)
    # How servers' requests are answered (elicitation, sampling); None: the SDK's defaults (refused).
    answers: ServerRequestAnswers | None = None


class _StartupTimeoutError(Exception):
    """The server did not finish initialize + list_tools before the startup deadline."""


class ServerStartupTimeoutError(MCPServerStartupError):
    """A server's start ran out of time: what a toolbox needs to tell one slow server from a
    machine starting too many at once."""

    def __init__(self, message: str, server_name: str, timeout: float, config_file: str) -> None:
        super().__init__(message, server_name)
        self.timeout = timeout
        self.config_file = config_file


class ToolSource(ABC):
    """One MCP server: connect, list tools, call tools, close (see the module docstring)."""

    def __init__(self, server: ServerConfig, settings: SourceSettings) -> None:
        self.server = server
        self.settings = settings
        self.tools: list[types.Tool] = []
        self.instructions: str | None = None  # what the server says it is for (MCP initialize)
        self.tools_changed = False  # the server sent notifications/tools/list_changed
        self.protocol_version: str | None = None  # the revision agreed at connect
        self.connect_ms: float | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._startup_scope: anyio.CancelScope | None = None
        self._session: ClientSession | None = None
        self._client: Client | None = None
        self._died: str | None = None
        self._closed = False

    @property
    def name(self) -> str:
        return self.server.name

    @property
    def is_alive(self) -> bool:
        task = self._task
        return self._session is not None and self._died is None and task is not None and not task.done()

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- connect / close -------------------------------------------------------------------

    async def connect(self) -> None:
        """Start the connection and wait until the session is initialized and its tools listed.

        Raises:
            MCPServerStartupError: it failed or the startup timeout passed; everything it
                started is gone again.
        """
        if self._task is not None:
            raise RuntimeError(f"MCP source '{self.name}' is connected already; make a new one to reconnect.")
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        # The runner may fail the start after its waiter is gone (the caller cancelled, a second
        # Ctrl-C stopping the session loop); the cancellation is then what happened, and the
        # failure must not surface later as "Future exception was never retrieved".
        ready.add_done_callback(_consume)
        started = time.perf_counter()
        self._task = loop.create_task(self._run(ready), name=f"mcp-{self.name}")
        try:
            # Shielded so a cancelled caller leaves the future for the runner to settle.
            await asyncio.shield(ready)
        except BaseException as exc:
            # Failed, or the caller was cancelled: unwind the runner so nothing is left running.
            self._abort_start()
            if self._startup_scope is not None:
                self._startup_scope.cancel()
            self._stop.set()
            await asyncio.wait({self._task})
            await self._after_close()
            if not isinstance(exc, Exception):
                raise
            cause = root_cause(exc)
            # A start that ran out of time waiting for another process's refresh of its login: that
            # process is the cause, not the server (the lock's own deadline is longer than a start's).
            waited = interrupted_lock_wait(self.name) if isinstance(cause, _StartupTimeoutError) else None
            if waited is not None:
                raise MCPServerStartupError(
                    self.settings.redactor(f"Failed to start MCP server '{self.name}': {waited}"), server_name=self.name
                ) from cause
            message = self._startup_message(self._describe_failure(cause))
            if isinstance(cause, _StartupTimeoutError):
                raise ServerStartupTimeoutError(
                    message, self.name, self.settings.startup_timeout, self.settings.config_file
                ) from cause
            raise MCPServerStartupError(message, server_name=self.name) from cause
        self.connect_ms = round((time.perf_counter() - started) * 1000, 1)

    async def close(self) -> None:
        """End the session (and the server, for stdio). Idempotent; never raises."""
        if self._closed:
            return
        self._closed = True
        task = self._task
        if task is not None:
            self._stop.set()
            await asyncio.wait({task})
        await self._after_close()

    async def _run(self, ready: asyncio.Future[None]) -> None:
        """Own the transport and the session from start to exit, all in this one task."""
        startup = anyio.CancelScope(deadline=anyio.current_time() + self.settings.startup_timeout)
        self._startup_scope = startup
        try:
            with startup:
                async with self._new_client() as client:
                    session = client.session
                    self.protocol_version = client.protocol_version
                    self.instructions = client.instructions
                    self.tools = await list_all_tools(session)
                    async with anyio.create_task_group() as changes:
                        if self._listens_for_changes(client):
                            # Listening before the first call, so no change it makes goes unheard.
                            await changes.start(self._listen, client)
                        startup.deadline = math.inf  # started: from now on only the stop signal ends it
                        self._startup_scope = None
                        self._client = client
                        self._session = session
                        ready.set_result(None)
                        await self._stop.wait()
                        changes.cancel_scope.cancel()
            if not ready.done():
                ready.set_exception(_StartupTimeoutError() if startup.cancel_called else RuntimeError("session closed"))
        except Exception as exc:  # noqa: BLE001 - handed to the waiting connect, or kept as the reason it died
            if not ready.done():
                # A deadline cancel can surface as a transport error; report the real reason.
                ready.set_exception(_StartupTimeoutError() if startup.cancel_called else exc)
            else:
                self._died = f"the session ended unexpectedly: {self.settings.redactor(repr(root_cause(exc)))}"
        finally:
            self._session = None
            self._client = None
            if not ready.done():  # cancelled from outside before the session was ready
                ready.set_exception(RuntimeError("the MCP session task was cancelled during startup"))
            if self._died is None and not self._stop.is_set():
                self._died = "the session closed by itself"

    def _new_client(self) -> Client:
        answers = self.settings.answers
        return Client(
            assume_complete(self._transport()),
            mode=self._mode(),
            message_handler=self._on_message,
            client_info=types.Implementation(name="ZorkGPT", version=project_version()),
            elicitation_callback=answers.elicitation(self.server) if answers is not None else None,
            sampling_callback=answers.sampling(self.server) if answers is not None else None,
            # Tools are listed once per connection and again on list_changed; nothing to cache.
            cache=None,
        )

    def _listens_for_changes(self, client: Client) -> bool:
        """A 2026-07-28 server has no session to send list_changed on: its changes come through a
        ``subscriptions/listen`` stream, opened when it says its tools, resources or prompts can change."""
        return client.protocol_version in MODERN_PROTOCOL_VERSIONS and any(self._changing(client).values())

    def _changing(self, client: Client) -> dict[str, bool]:
        """Which of its lists the server says can change, as ``Client.listen`` filters. Where the
        entry pins 2026-07-28 the SDK connects without asking the server what it offers: then every
        change is asked for, and the server's answer says which it honours."""
        if self._mode() in MODERN_PROTOCOL_VERSIONS:
            return dict.fromkeys(("tools_list_changed", "resources_list_changed", "prompts_list_changed"), True)
        capabilities = client.server_capabilities
        return {
            "tools_list_changed": bool(capabilities.tools and capabilities.tools.list_changed),
            "resources_list_changed": bool(capabilities.resources and capabilities.resources.list_changed),
            "prompts_list_changed": bool(capabilities.prompts and capabilities.prompts.list_changed),
        }

    async def _listen(
        self, client: Client, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                # The SDK waits for the acknowledgement as long as the session's read timeout (none):
                # a server that never gives it would hold the start until its timeout and fail it.
                with anyio.fail_after(self._listen_ack_seconds()):
                    # Only what the server says can change: a server may refuse a filter it cannot honour.
                    subscription = await stack.enter_async_context(client.listen(**self._changing(client)))
                task_status.started()
                # The SDK hands each event's notification to _on_message as well; either marks the change.
                async for event in subscription:
                    if isinstance(event, ToolsListChanged):
                        self.tools_changed = True
                    elif isinstance(event, ResourcesListChanged):
                        self.resources_changed = True
                    elif isinstance(event, PromptsListChanged):
                        self.prompts_changed = True
        except TimeoutError:
            # Listening is optional: the server is used as listed at connect, and told about once a run.
            if self.settings.unheard.count(self.name):
                emit(
                    self.settings.logger,
                    MCPListenUnacknowledged(server_name=self.name),
                    "MCP server '%s' did not acknowledge subscriptions/listen within %gs: it is used without "
                    "notice of changes to its tools, resources or prompts (they stay as listed when it started).",
                    self.name,
                    self._listen_ack_seconds(),
                    level=logging.WARNING,
                )
            with contextlib.suppress(RuntimeError):
                task_status.started()
        except (SDKMCPError, SubscriptionLost, ListenNotSupportedError) as exc:
            # What was listed at connect stays offered; only later changes go unseen.
            emit(
                self.settings.logger,
                MCPListenUnavailable(server_name=self.name),
                "MCP server '%s': no notice of tool, resource or prompt changes (%s)",
                self.name,
                self.settings.redactor(repr(exc)),
                level=logging.DEBUG,
            )
            with contextlib.suppress(RuntimeError):  # started already: the stream was lost later
                task_status.started()

    def _listen_ack_seconds(self) -> float:
        """How long a server has to acknowledge ``subscriptions/listen``: a working one does so at
        once, and half the startup timeout leaves the other half for the start itself."""
        return min(LISTEN_ACK_SECONDS, self.settings.startup_timeout / 2)

    def _mode(self) -> str:
        if self.server.transport == "sse" or self.server.protocol == "2025-11-25":
            return "legacy"
        return self.server.protocol

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools_changed = True
        elif isinstance(message, types.ResourceListChangedNotification):
            self.resources_changed = True
        elif isinstance(message, types.PromptListChangedNotification):
            self.prompts_changed = True
        elif isinstance(message, Exception):
            self._on_transport_error(message)

    def _on_transport_error(self, error: Exception) -> None:
        """Something the transport could not read; the session goes on (the request it
        belonged to, if any, times out or fails on its own)."""
        emit(
            self.settings.logger,
            MCPTransportError(server_name=self.name),
            "MCP server '%s': the transport reported %s",
            self.name,
            self.settings.redactor(repr(error)),
            level=logging.DEBUG,
        )

    # -- requests --------------------------------------------------------------------------

    async def list_tools(self, timeout: float, *, deadline: float | None = None) -> list[types.Tool]:
        """List the tools again (after a list_changed notification). Errors and ``deadline`` as for
        ``call_tool``; a server that lists nothing in time keeps its last listing."""
        session = self._require_session("listing its tools")
        # Cleared first, as in list_resources: a change announced meanwhile is heard next turn.
        self.tools_changed = False
        try:
            self.tools = await self._request("listing its tools", lambda: list_all_tools(session), timeout, deadline)
        except BaseException:
            self.tools_changed = True  # still to be listed
            raise
        return self.tools

    async def ping(self, timeout: float) -> bool:
        """Whether the server answers a ping within ``timeout`` seconds (a dead one is marked so)."""
        if not self.is_alive:
            return False
        session = self._session
        assert session is not None
        try:
            with anyio.fail_after(timeout):
                if self.protocol_version in MODERN_PROTOCOL_VERSIONS:
                    # 2026-07-28 has no ping; asking what the server offers is its cheapest request.
                    await session.send_discover(self.protocol_version)
                else:
                    await session.send_ping()
        except (TimeoutError, SDKMCPError, anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            self._died = f"it did not answer a ping ({type(exc).__name__})"
            return False
        return True

    async def call_tool(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        timeout: float,
        *,
        deadline: float | None = None,
        on_progress: ProgressReport | None = None,
    ) -> types.CallToolResult:
        """Run one tool by its own (unprefixed) name.

        ``timeout`` runs from the call's start and again from each progress notification;
        ``deadline`` (``time.monotonic()``) is a hard end no progress moves.

        Raises:
            TimeoutError: the call went ``timeout`` seconds without a sign of life, or passed ``deadline``.
            MCPServerDiedError: the server or its session is gone.
            MCPToolCallError: a protocol error or a malformed result.
        """
        dotted = f"{self.name}.{tool_name}"
        client = self._live_client(dotted)
        scope, hard_end = _deadline_scope(timeout, deadline)

        async def progressed(progress: float, total: float | None, message: str | None) -> None:
            scope.deadline = min(anyio.current_time() + timeout, hard_end)
            if on_progress is not None:
                on_progress(progress, total, self.settings.redactor(message) if message else message)

        try:
            with scope:
                raw = await client.call_tool(tool_name, arguments, progress_callback=progressed)
            if scope.cancelled_caught:
                if anyio.current_time() >= hard_end:
                    raise TimeoutError(
                        f"MCP tool {dotted} ran past the turn's time budget; the call was cancelled at the server"
                    )
                raise TimeoutError(
                    f"MCP tool {dotted} timed out after {timeout:g}s without progress; "
                    "the call was cancelled at the server"
                )
        except (SDKMCPError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            raise self._call_failure(exc, dotted) from (exc if not isinstance(exc, SDKMCPError) else None)
        except ValidationError as exc:
            raise MCPToolCallError(
                f"MCP tool {dotted} returned a malformed result: {exc}", server_name=self.name
            ) from None
        except RuntimeError as exc:  # e.g. an input_required result, which ZorkGPT cannot answer
            raise MCPToolCallError(
                f"MCP tool {dotted} failed: {self.settings.redactor(str(exc))}", server_name=self.name
            ) from None
        if not isinstance(raw, types.CallToolResult):
            raise MCPToolCallError(
                f"MCP tool {dotted} returned an unsupported result type {type(raw).__name__}.", server_name=self.name
            )
        return raw

    def _call_failure(self, exc: Exception, dotted: str) -> MCPToolCallError:
        """What a failed tool call means: a reply too large (the session is fine), the session gone
        (``MCPServerDiedError``, and the source marked dead), or the server's own error."""
        if not isinstance(exc, SDKMCPError):
            self._died = f"transport closed during {dotted}"
            return MCPServerDiedError(self._died_message(dotted), server_name=self.name)
        limit = self._event_limit()
        if exc.code == REPLY_TOO_LARGE:
            return MCPToolCallError(f"MCP tool {dotted} {exc.message}", server_name=self.name)
        if limit is not None and (
            (exc.code == CONNECTION_CLOSED and _EVENT_TOO_LARGE in exc.message) or TOO_LARGE_MARKER in exc.message
        ):
            # Only this reply's stream was cut; the session is fine.
            return MCPToolCallError(
                f"MCP tool {dotted} replied with more than {limit:,} bytes; the reply was dropped. Ask for less "
                "(a narrower query, a smaller page). The limit is [tool.zorkgpt.mcp] max_tool_reply_bytes.",
                server_name=self.name,
            )
        if exc.code == CONNECTION_CLOSED:
            self._died = f"connection closed during {dotted}"
            return MCPServerDiedError(self._died_message(dotted), server_name=self.name)
        message = self.settings.redactor(exc.message)
        return MCPToolCallError(f"MCP tool {dotted} failed: {message} (code {exc.code})", server_name=self.name)

    def _require_session(self, dotted: str | None) -> ClientSession:
        session = self._session
        if session is None or self._died is not None:
            raise MCPServerDiedError(self._died_message(dotted), server_name=self.name)
        return session

    # -- per transport ---------------------------------------------------------------------

    @abstractmethod
    def _transport(self) -> AbstractAsyncContextManager[Any]:
        """The SDK transport context, yielding ``(read_stream, write_stream)``."""

    def _abort_start(self) -> None:  # noqa: B027 - optional hook; only stdio has a process to stop
        """A start that failed or was given up: stop whatever it started without ceremony."""

    async def _after_close(self) -> None:  # noqa: B027 - optional hook; only stdio has clean-up to do
        """Clean-up once the transport has exited (the stdio source ends its process group)."""

    def stderr_tail(self) -> str:
        """What the server wrote to stderr, for messages (stdio only)."""
        return ""

    def _event_limit(self) -> int | None:
        """Bytes after which the SDK cuts one reply's stream, leaving the session up (streamable HTTP only)."""
        return None

    def _hint(self, details: str) -> str:
        return "Check the server's address and that it is running."

    def _describe_failure(self, cause: BaseException) -> str:
        if isinstance(cause, _StartupTimeoutError):
            return (
                f"it did not finish initialize + list_tools within {self.settings.startup_timeout:g}s "
                "([tool.zorkgpt.mcp] server_startup_timeout_seconds)"
            )
        if isinstance(cause, SDKMCPError) and cause.code == CONNECTION_CLOSED:
            return "the server closed the connection before the MCP handshake completed"
        return f"{type(cause).__name__}: {cause}"

    def _startup_message(self, details: str) -> str:
        message = (
            f"Failed to start MCP server '{self.name}': {details}\n"
            f"{'Command' if not self.server.is_remote else 'Server'}: {self.server.command_line()}\n"
            f"{self._hint(details)}\n"
            f'To play without it, set "disabled": true in its entry of {self.settings.config_file}, '
            "or enabled = false under [tool.zorkgpt.mcp] to play without tools."
        )
        tail = self.stderr_tail()
        if tail:
            message += f"\nServer stderr (last lines):\n{tail}"
        return self.settings.redactor(message)

    def _died_message(self, dotted: str | None) -> str:
        during = f" during {dotted}" if dotted else ""
        reason = self._died or "the session is closed"
        return f"MCP server '{self.name}' is no longer available{during} ({reason})."

    # -- resources and prompts -------------------------------------------------------------
    # Class-level defaults (replaced per instance when they change): what the server listed of
    # its resources, and whether it has said since that its resources or prompts changed.
    resources: tuple[types.Resource, ...] = ()
    resources_changed: bool = False  # notifications/resources/list_changed, or its listen event
    prompts_changed: bool = False  # notifications/prompts/list_changed, or its listen event

    @property
    def capabilities(self) -> types.ServerCapabilities | None:
        """What the server said it offers at connect; None when that is unknown: where the entry pins
        2026-07-28 the SDK connects without asking (no ``server/discover``), so what the server offers
        is found by asking for it."""
        client = self._client
        if client is None or self._mode() in MODERN_PROTOCOL_VERSIONS:
            return None
        return client.server_capabilities

    async def list_resources(self, timeout: float, *, deadline: float | None = None) -> tuple[types.Resource, ...]:
        """Every resource, following pagination cursors (kept as ``resources``); a repeated URI keeps
        its first entry. Errors and ``deadline`` as for ``call_tool``."""
        client = self._live_client("listing resources")
        # Cleared first: a change announced while this listing runs is heard on the next turn.
        self.resources_changed = False

        async def every_page() -> list[types.Resource]:
            return await all_pages(
                lambda cursor: client.list_resources(cursor=cursor) if cursor else client.list_resources(),
                lambda result: result.resources,
            )

        unique: dict[str, types.Resource] = {}
        for resource in await self._request("listing its resources", every_page, timeout, deadline):
            unique.setdefault(resource.uri, resource)
        self.resources = tuple(unique.values())
        return self.resources

    async def read_resource(
        self, uri: str, timeout: float, *, deadline: float | None = None
    ) -> types.ReadResourceResult:
        """The contents of one resource. Errors and ``deadline`` as for ``call_tool``."""
        client = self._live_client(f"reading {uri}")
        return await self._request(f"reading {uri}", lambda: client.read_resource(uri), timeout, deadline)

    async def list_prompts(self, timeout: float, *, deadline: float | None = None) -> list[types.Prompt]:
        """Every prompt, following pagination cursors (as ``list_resources``)."""
        client = self._live_client("listing prompts")

        async def every_page() -> list[types.Prompt]:
            return await all_pages(
                lambda cursor: client.list_prompts(cursor=cursor) if cursor else client.list_prompts(),
                lambda result: result.prompts,
            )

        return await self._request("listing its prompts", every_page, timeout, deadline)

    async def get_prompt(
        self, name: str, arguments: dict[str, str], timeout: float, *, deadline: float | None = None
    ) -> types.GetPromptResult:
        """One prompt's messages (MCP ``prompts/get``). Errors and ``deadline`` as for ``call_tool``."""
        client = self._live_client(f"getting the prompt {name!r}")
        # Cleared first, as in list_resources.
        self.prompts_changed = False
        return await self._request(
            f"getting the prompt {name!r}", lambda: client.get_prompt(name, arguments or None), timeout, deadline
        )

    def _live_client(self, doing: str) -> Client:
        self._require_session(doing)
        client = self._client
        assert client is not None  # set together with the session
        return client

    async def _request(
        self, doing: str, send: Callable[[], Awaitable[_T]], timeout: float, deadline: float | None
    ) -> _T:
        """One request that is not a tool call, under ``timeout`` and the hard ``deadline``
        (``time.monotonic()``); its failures in the words ``call_tool`` uses."""
        scope, hard_end = _deadline_scope(timeout, deadline)
        what = f"MCP server '{self.name}'"
        try:
            with scope:
                result = await send()
            if scope.cancelled_caught:
                raise TimeoutError(
                    f"{what} ran past the turn's time budget while {doing}"
                    if anyio.current_time() >= hard_end
                    else f"{what} did not finish {doing} within {timeout:g}s"
                )
        except SDKMCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._died = f"connection closed while {doing}"
                raise MCPServerDiedError(self._died_message(doing), server_name=self.name) from None
            message = self.settings.redactor(exc.message)
            raise MCPToolCallError(
                f"{what} failed {doing}: {message} (code {exc.code})", server_name=self.name
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream) as exc:
            self._died = f"transport closed while {doing}"
            raise MCPServerDiedError(self._died_message(doing), server_name=self.name) from exc
        except ValidationError as exc:
            raise MCPToolCallError(f"{what} answered malformed while {doing}: {exc}", server_name=self.name) from None
        except RuntimeError as exc:  # e.g. an input_required result, which ZorkGPT cannot answer
            raise MCPToolCallError(
                f"{what} failed {doing}: {self.settings.redactor(str(exc))}", server_name=self.name
            ) from None
        return result


# -- helpers ------------------------------------------------------------------------------


def _deadline_scope(timeout: float, deadline: float | None) -> tuple[anyio.CancelScope, float]:
    """A cancel scope ending ``timeout`` seconds from now, or at ``deadline`` (``time.monotonic()``)
    if sooner; and that hard end in anyio's clock (``math.inf`` without one), for moving it later."""
    hard_end = math.inf if deadline is None else anyio.current_time() + (deadline - time.monotonic())
    return anyio.CancelScope(deadline=min(anyio.current_time() + timeout, hard_end)), hard_end


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def all_pages(fetch: Callable[[str | None], Awaitable[_R]], items: Callable[[_R], Sequence[_T]]) -> list[_T]:
    """Every item of a paginated MCP listing: ``fetch(None)`` for the first page, ``fetch(cursor)``
    for the next. A server repeating a cursor would page forever: what it listed so far is kept."""
    result = await fetch(None)
    found = list(items(result))
    cursors: set[str] = set()
    while result.next_cursor and result.next_cursor not in cursors and len(cursors) < _MAX_PAGES:
        cursors.add(result.next_cursor)
        result = await fetch(result.next_cursor)
        found.extend(items(result))
    return found


async def list_all_tools(session: ClientSession) -> list[types.Tool]:
    """Every tool, following pagination cursors; a repeated name keeps its first definition.

    Providers reject two functions with one name, so a server listing a name twice must
    not turn into a request the model API refuses.
    """
    tools = await all_pages(
        lambda cursor: (
            session.list_tools(params=types.PaginatedRequestParams(cursor=cursor)) if cursor else session.list_tools()
        ),
        lambda result: result.tools,
    )
    unique: dict[str, types.Tool] = {}
    for tool in tools:
        unique.setdefault(tool.name, tool)
    return list(unique.values())
