"""The toolbox: every configured server's tools as one set, routed by name, failures kept per server.

Each enabled server has a slot: its lifetime, its health (has it ever connected this
episode, is it disabled) and its live source. ``begin_turn`` readies every slot at once
(``asyncio.gather``: startup costs the slowest server, not the sum) and returns the tools
of all of them; ``call`` routes a wire or dotted name back to its server.

Rules, per server (``connect_by_rules``): the first connect of an episode that fails stops
the run with the server's command named (the configuration is probably wrong). After a
good connect, a failed connect is retried once; when the retry fails too, that server
alone is disabled for the rest of the episode. The other servers never notice. A remote
server that was reached before gets a few tries 1, 2 and 4 s apart before a connect counts
as failed: a dropped HTTP connection (a restarted server, a network blip) usually comes back.
In the 2026-07-28 revision, which has no ping, the check asks ``server/discover`` instead.

Lifetimes, per server:

* ``episode``: connected on the first turn that needs tools and kept. At the start of each
  turn a ping checks it, beside the turn rather than before it: a server that looks up
  (its session open, its process running) has its tools offered at once while the ping
  runs, and a call to it waits for the answer. A dead one (found either way) is reconnected
  under the rules above before any call reaches it. A ping round trip through the SDK costs
  a few milliseconds, which would otherwise be the whole per-turn cost of a kept session.
  A ``tools/list_changed`` notification makes the next turn list its tools again first.
* ``turn``: every turn gets a freshly started server, but fresh servers are started ahead
  (``ahead`` of them; two by default in the settings) as soon as this turn's is ready, so they start while the
  model is thinking and a turn only takes over the oldest. Two rather than one because a
  server written with the Python SDK spends about a second importing it: with one started
  ahead, a model answering in a second still waits for it. A spare that died or failed to
  start counts as a failed connect, and the retry takes the next spare. Sessions of a
  finished turn close in the background.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp.types as types

from managers.mcp.config import Lifetime, ServerConfig
from managers.mcp.source import ProgressReport, ServerStartupTimeoutError, ToolSource
from managers.mcp.tools import ToolNameMap, ToolRoute, translate_tool
from session.errors import MCPServerDiedError, MCPServerStartupError, MCPToolCallError

PING_TIMEOUT_SECONDS = 5.0
CHECK_GRACE_SECONDS = 1.0  # at close, for a health check still under way
_NAMES_SHOWN = 10  # servers named in a message about many; the rest are counted

SourceFactory = Callable[[ServerConfig], ToolSource]
RECONNECT_BACKOFF_SECONDS: tuple[float, ...] = (1.0, 2.0, 4.0)
Outcome = Literal["connected", "retried", "disabled", "skipped"]


@dataclass
class ServerHealth:
    """What the rules remember about one server during one episode."""

    ever_connected: bool = False
    disabled: bool = False


async def connect_by_rules(
    name: str,
    health: ServerHealth,
    attempt: Callable[[], Awaitable[ToolSource]],
    log: Callable[..., None],
    backoff: tuple[float, ...] = (),
) -> tuple[Outcome, ToolSource | None]:
    """Connect one server under the per-server rules (see the module docstring). ``backoff``:
    the waits between tries of a server that was reached before in this episode (a remote one
    whose connection dropped comes back by itself more often than not) before a failure counts.

    Raises:
        MCPServerStartupError: the episode's first connect of this server failed.
    """
    if health.disabled:
        return "skipped", None
    if health.ever_connected and backoff:
        attempt = _with_backoff(name, attempt, log, backoff)
    try:
        source = await attempt()
    except MCPServerStartupError as first:
        if not health.ever_connected:
            # Off the console: the error ends the run and main.py prints it once.
            log(
                logging.ERROR,
                "mcp_session_connect_failed",
                "%s",
                str(first),
                server_name=name,
                retry=False,
                console=False,
            )
            raise
        log(
            logging.WARNING,
            "mcp_session_connect_failed",
            "MCP server '%s' failed to connect, retrying once: %s",
            name,
            str(first),
            server_name=name,
            retry=True,
        )
        try:
            source = await attempt()
        except MCPServerStartupError as second:
            health.disabled = True
            log(
                logging.WARNING,
                "mcp_server_disabled",
                "MCP server '%s' failed again and is disabled for the rest of this episode: %s",
                name,
                str(second),
                server_name=name,
                error=str(second),
            )
            return "disabled", None
        health.ever_connected = True
        log(logging.INFO, "mcp_session_retry_ok", "MCP server '%s' connected on retry", name, server_name=name)
        return "retried", source
    health.ever_connected = True
    return "connected", source


def _with_backoff(
    name: str, attempt: Callable[[], Awaitable[ToolSource]], log: Callable[..., None], waits: tuple[float, ...]
) -> Callable[[], Awaitable[ToolSource]]:
    async def patient() -> ToolSource:
        for wait in waits:
            try:
                return await attempt()
            except MCPServerStartupError as exc:
                log(
                    logging.INFO,
                    "mcp_reconnect_backoff",
                    "MCP server '%s' is not reachable; trying again in %gs: %s",
                    name,
                    wait,
                    str(exc).splitlines()[0],
                    server_name=name,
                    wait_seconds=wait,
                )
                await asyncio.sleep(wait)
        return await attempt()

    return patient


@dataclass
class _Slot:
    server: ServerConfig
    lifetime: Lifetime
    health: ServerHealth = field(default_factory=ServerHealth)
    source: ToolSource | None = None
    # Episode lifetime: this turn's health check, running beside the turn.
    check: asyncio.Task[None] | None = None
    # Turn lifetime: fresh servers started ahead for the coming turns, oldest first.
    spares: deque[asyncio.Task[ToolSource]] = field(default_factory=deque)


@dataclass(frozen=True)
class TurnTools:
    """The tools offered this turn: OpenAI schemas and the name map that routes them."""

    schemas: list[dict[str, Any]]
    names: ToolNameMap
    servers: tuple[str, ...]  # the servers whose tools are offered


class Toolbox:
    """Every enabled server of the config as one set of tools (see the module docstring)."""

    def __init__(
        self,
        servers: list[tuple[ServerConfig, Lifetime]],
        make_source: SourceFactory,
        logger: logging.Logger,
        ahead: int,
    ) -> None:
        """``ahead``: how many fresh servers a turn-lifetime server keeps started ahead of its turns."""
        self.logger = logger
        self._make_source = make_source
        self._ahead = ahead
        self._slots = {server.name: _Slot(server, lifetime) for server, lifetime in servers}
        self._closing: set[asyncio.Task[None]] = set()
        # Turns being readied; close() waits for them (see there).
        self._turns: set[asyncio.Task[Any]] = set()
        self.turn_tools = TurnTools([], ToolNameMap([]), ())
        # The last names offered, kept after the sessions close: logs still show dotted names.
        self.known_names = ToolNameMap([])

    @property
    def all_disabled(self) -> bool:
        return all(slot.health.disabled for slot in self._slots.values())

    def disabled_servers(self) -> list[str]:
        return [name for name, slot in self._slots.items() if slot.health.disabled]

    def server(self, name: str) -> ServerConfig:
        return self._slots[name].server

    def reset_episode(self) -> None:
        """Forget the rules' memory: the next connect of every server is a first connect again."""
        for slot in self._slots.values():
            slot.health = ServerHealth()

    # -- turns -----------------------------------------------------------------------------

    def instructions(self) -> dict[str, str]:
        """Each live server's own account of its purpose (its MCP ``instructions``), by server name."""
        return {
            name: slot.source.instructions
            for name, slot in self._slots.items()
            if slot.source is not None and slot.source.instructions
        }

    async def begin_turn(self) -> TurnTools:
        """Ready every server for a new turn, at once; the tools of all that are up.

        Raises:
            MCPServerStartupError: a server's first connect of the episode failed (the
                other servers are closed again first).
        """
        task = asyncio.current_task()
        assert task is not None  # a coroutine on the session loop always runs in a task
        self._turns.add(task)
        try:
            results = await asyncio.gather(
                *(self._ready(slot) for slot in self._slots.values()), return_exceptions=True
            )
        finally:
            self._turns.discard(task)
        failures = [r for r in results if isinstance(r, BaseException)]
        if failures:
            await self.close()
            startup = [f for f in failures if isinstance(f, MCPServerStartupError)]
            timeouts = [f for f in startup if isinstance(f, ServerStartupTimeoutError)]
            # A server that failed for a reason of its own says more than any timeout; several
            # timing out together point at the load of starting them all at once, not at one of them.
            if len(timeouts) > 1 and len(timeouts) == len(startup):
                raise MCPServerStartupError(startup_timeouts_message(timeouts, len(self._slots))) from timeouts[0]
            raise ([f for f in startup if f not in timeouts] or startup or failures)[0]
        return self.refresh_tools()

    async def _ready(self, slot: _Slot) -> None:
        if slot.health.disabled:
            return
        if slot.lifetime == "episode":
            await self._ready_episode(slot)
        else:
            await self._ready_turn(slot)

    async def _ready_episode(self, slot: _Slot) -> None:
        await self._checked(slot)
        source = slot.source
        if source is not None and source.is_alive and not source.tools_changed:
            slot.check = asyncio.get_running_loop().create_task(self._check(slot), name=f"mcp-check-{slot.server.name}")
            return
        await self._check(slot)

    async def _check(self, slot: _Slot) -> None:
        """Ping the server (and list changed tools); a dead or missing one is connected by the rules."""
        source = slot.source
        if source is not None:
            if await source.ping(PING_TIMEOUT_SECONDS):
                if source.tools_changed:
                    await self._relist(slot, source)
                return
            self._log(
                logging.WARNING,
                "mcp_server_unhealthy",
                "MCP server '%s' is not answering; reconnecting",
                slot.server.name,
                server_name=slot.server.name,
            )
            slot.source = None
            self._close_later(source)
        _, slot.source = await connect_by_rules(
            slot.server.name, slot.health, self._connector(slot), self._log, _backoff_for(slot.server)
        )

    async def _checked(self, slot: _Slot) -> None:
        """Wait for the slot's health check, if one runs. Cancelling the waiter leaves the check be."""
        task = slot.check
        if task is None:
            return
        await asyncio.wait([task])
        if slot.check is task:
            slot.check = None
        error = None if task.cancelled() else task.exception()
        if error is not None:
            raise error

    async def _relist(self, slot: _Slot, source: ToolSource) -> None:
        try:
            tools = await source.list_tools()
        except MCPServerDiedError as exc:
            self._log(logging.WARNING, "mcp_tool_listing_failed", "%s", str(exc), server_name=slot.server.name)
            return
        self._log(
            logging.INFO,
            "mcp_tools_changed",
            "MCP server '%s' changed its tools; it now offers %d",
            slot.server.name,
            len(tools),
            server_name=slot.server.name,
        )

    async def _ready_turn(self, slot: _Slot) -> None:
        old, slot.source = slot.source, None
        if old is not None:
            self._close_later(old)
        outcome, slot.source = await connect_by_rules(
            slot.server.name, slot.health, self._connector(slot), self._log, _backoff_for(slot.server)
        )
        if outcome == "disabled":
            while slot.spares:
                self._track(_close_spare(slot.spares.popleft()), slot.server.name)
            return
        # The coming turns' servers start now, while this turn's model call runs.
        loop = asyncio.get_running_loop()
        while len(slot.spares) < self._ahead:
            slot.spares.append(loop.create_task(self._connect_new(slot), name=f"mcp-start-{slot.server.name}"))

    def _connector(self, slot: _Slot) -> Callable[[], Awaitable[ToolSource]]:
        """Each call is one attempt: the oldest server started ahead if any, else a fresh start."""

        def attempt() -> Awaitable[ToolSource]:
            return self._take_spare(slot) if slot.spares else self._connect_new(slot)

        return attempt

    async def _take_spare(self, slot: _Slot) -> ToolSource:
        """The oldest server started ahead, if it is still up (else a failed attempt).

        It leaves ``spares`` only once its start is over, so a turn interrupted while waiting
        for it leaves it where ``close()`` finds it.
        """
        task = slot.spares[0]
        if not task.done():
            # Worth knowing when tuning servers_started_ahead: the model was faster than a start.
            loop = asyncio.get_running_loop()
            began = loop.time()
            await asyncio.wait([task])
            waited_ms = (loop.time() - began) * 1000
            self._log(
                logging.DEBUG,
                "mcp_server_start_waited",
                "Waited %.0f ms for MCP server '%s' started ahead",
                waited_ms,
                slot.server.name,
                server_name=slot.server.name,
                wait_ms=waited_ms,
            )
        if slot.spares and slot.spares[0] is task:  # close() may have taken it meanwhile
            slot.spares.popleft()
        source = task.result()
        if not source.is_alive:
            await source.close()
            raise MCPServerStartupError(
                f"MCP server '{source.name}' was started for this turn but exited before the turn began."
            )
        return source

    async def _connect_new(self, slot: _Slot) -> ToolSource:
        source = self._make_source(slot.server)
        await source.connect()
        self._log(
            logging.INFO,
            "mcp_session_connect",
            "MCP server '%s' connected with %d tools (%.0f ms, protocol %s)",
            slot.server.name,
            len(source.tools),
            source.connect_ms or 0.0,
            source.protocol_version,
            server_name=slot.server.name,
            protocol_version=source.protocol_version,
            tool_count=len(source.tools),
            tools=[f"{slot.server.name}.{tool.name}" for tool in source.tools],
            duration_ms=source.connect_ms,
        )
        return source

    def refresh_tools(self) -> TurnTools:
        """The offered tools of every live server, in config order (filters applied)."""
        offered: list[tuple[str, types.Tool]] = []
        servers: list[str] = []
        for name, slot in self._slots.items():
            source = slot.source
            if source is None or not source.is_alive:
                continue
            servers.append(name)
            offered.extend((name, tool) for tool in source.tools if slot.server.offers(tool.name))
        names = ToolNameMap((server, tool.name) for server, tool in offered)
        schemas = [translate_tool(server, tool, names) for server, tool in offered]
        self.turn_tools = TurnTools(schemas, names, tuple(servers))
        if names.routes:
            self.known_names = names
        return self.turn_tools

    def end_turn(self) -> None:
        """Turn-lifetime servers are done with this turn: close them in the background."""
        for slot in self._slots.values():
            if slot.lifetime == "turn" and slot.source is not None:
                self._close_later(slot.source)
                slot.source = None

    def _close_later(self, source: ToolSource) -> None:
        self._track(source.close(), source.name)

    def _track(self, closing: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(closing, name=f"mcp-close-{name}")
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def close(self) -> None:
        """Close every session and end every server this toolbox started; waits for all of it."""
        await self._end_turns_in_progress()
        await self._end_checks()
        closing: list[Awaitable[Any]] = []
        for slot in self._slots.values():
            if slot.source is not None:
                closing.append(slot.source.close())
                slot.source = None
            while slot.spares:
                closing.append(_close_spare(slot.spares.popleft()))
        closing.extend(list(self._closing))
        if closing:
            await asyncio.gather(*closing, return_exceptions=True)
        self.turn_tools = TurnTools([], ToolNameMap([]), ())

    async def _end_turns_in_progress(self) -> None:
        """Cancel any turn still readying its servers and wait until it has undone its starts.

        A second Ctrl-C cancels the turn while a server is starting, and the episode's end
        closes the toolbox right after: without this wait the session loop would stop while
        the start is still being undone, cancelling the undoing itself and leaving the server
        running (and asyncio warning that its loop is closed). A turn already being cancelled
        is not cancelled again, for the same reason.
        """
        turns = [task for task in self._turns if task is not asyncio.current_task()]
        for task in turns:
            if not task.cancelling():
                task.cancel()
        if turns:
            await asyncio.wait(turns)

    async def _end_checks(self) -> None:
        """Let running health checks finish (briefly) before their sessions close.

        A ping normally answers in milliseconds; cutting one off mid-answer makes the SDK's
        HTTP client log a traceback. A check still running after the grace period is cancelled.
        """
        checks = [slot.check for slot in self._slots.values() if slot.check is not None]
        for slot in self._slots.values():
            slot.check = None
        if not checks:
            return
        _, pending = await asyncio.wait(checks, timeout=CHECK_GRACE_SECONDS)
        for task in pending:
            task.cancel()
        await asyncio.gather(*checks, return_exceptions=True)

    # -- calls -----------------------------------------------------------------------------

    def route(self, name: str) -> ToolRoute | None:
        return self.turn_tools.names.resolve(name)

    def annotations(self, name: str) -> types.ToolAnnotations | None:
        """The annotations of the tool offered under ``name``, from its server's latest listing."""
        route = self.route(name)
        source = self._slots[route.server_name].source if route is not None else None
        if route is None or source is None:
            return None
        for tool in source.tools:
            if tool.name == route.tool_name:
                return tool.annotations
        return None

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        timeout: float,
        *,
        deadline: float | None = None,
        on_progress: ProgressReport | None = None,
    ) -> tuple[ToolRoute, Any]:
        """Run the tool offered under ``name`` (wire or dotted); see ``ToolSource.call_tool`` for the
        timeout, ``deadline`` and ``on_progress``, and for errors."""
        route = self.route(name)
        if route is None:
            known = ", ".join(f"{r.wire_name} ({r.dotted})" for r in self.turn_tools.names.routes) or "none"
            raise MCPToolCallError(f"Unknown tool '{name}'. Tools offered this turn: {known}.")
        slot = self._slots[route.server_name]
        await self._checked(slot)
        source = slot.source
        if source is None:
            raise MCPServerDiedError(f"MCP server '{route.server_name}' is not connected.")
        return route, await source.call_tool(
            route.tool_name, arguments, timeout, deadline=deadline, on_progress=on_progress
        )

    def _log(self, level: int, event_type: str, message: str, *args: Any, **extra: Any) -> None:
        self.logger.log(level, message, *args, extra={"event_type": event_type, **extra})


def _backoff_for(server: ServerConfig) -> tuple[float, ...]:
    """A remote server gets a few tries, 1, 2 and 4 s apart, before a failed connect counts; a
    local one is started afresh, and waiting would not bring a broken command back."""
    return RECONNECT_BACKOFF_SECONDS if server.is_remote else ()


def startup_timeouts_message(timeouts: list[ServerStartupTimeoutError], total: int) -> str:
    """Why several servers starting together all ran out of time, naming every one of them."""
    names = [error.server_name for error in timeouts]
    shown = ", ".join(names[:_NAMES_SHOWN]) + (
        f" and {len(names) - _NAMES_SHOWN} more" if len(names) > _NAMES_SHOWN else ""
    )
    first = timeouts[0]
    which = (
        f"None of the {total} MCP servers had finished starting"
        if len(names) == total
        else f"{len(names)} of the {total} MCP servers had not finished starting"
    )
    return (
        f"{which} when the startup timeout ({first.timeout:g}s) ran out: {shown}.\n"
        f"All {total} start at once, and starting them together takes longer than starting one: raise "
        "server_startup_timeout_seconds under [tool.zorkgpt.mcp], or start fewer servers at once "
        f'("disabled": true on some entries of {first.config_file}; enabled = false plays without tools).'
    )


async def _close_spare(task: asyncio.Task[ToolSource]) -> None:
    """Close a server started ahead for a turn that will not come (or cancel its start)."""
    if not task.done():
        task.cancel()
    try:
        source = await task
    except (asyncio.CancelledError, MCPServerStartupError):
        return  # its start was undone by connect() itself
    await source.close()
