"""The toolbox: every configured server's tools as one set, routed by name, failures kept per server.

Each enabled server has a slot: its lifetime, its health (has it ever connected this
episode, is it disabled) and its live source. ``begin_turn`` readies every slot at once
(``asyncio.gather``: startup costs the slowest server, not the sum) and returns the tools
of all of them; ``call`` routes a wire or dotted name back to its server.

Rules, per server, are ``server_rules.py``'s (``connect_by_rules``): the first connect of an
episode that fails stops the run; later, one retry, then that server alone is disabled.
In the 2026-07-28 revision, which has no ping, the health check asks ``server/discover`` instead.
A server whose start took more than half its startup timeout is named in a warning once an
episode (``mcp_server_slow_start``): on a loaded machine the next start may miss the timeout.

Lifetimes, per server:

* ``episode``: connected on the first turn that needs tools and kept. At the start of each
  turn a ping checks it, beside the turn rather than before it: a server that looks up
  (its session open, its process running) has its tools offered at once while the ping
  runs, and a call to it waits for the answer. A dead one (found either way) is reconnected
  under the rules above before any call reaches it. A ping round trip through the SDK costs
  a few milliseconds, which would otherwise be the whole per-turn cost of a kept session.
  A ``tools/list_changed`` notification makes the next turn list its tools again first (within the
  call timeout and the turn's budget: a server that leaves it unanswered is reconnected under the
  rules), and a ``resources/list_changed`` its resources.
* ``turn``: every turn gets a freshly started server, but fresh servers are started ahead
  (``ahead`` of them; two by default in the settings) as soon as this turn's is ready, so they start while the
  model is thinking and a turn only takes over the oldest. Two rather than one because a
  server written with the Python SDK spends about a second importing it: with one started
  ahead, a model answering in a second still waits for it. A spare that died or failed to
  start counts as a failed connect, and the retry takes the next spare. Sessions of a
  finished turn close in the background.

How many. A turn offers at most ``max_tools`` tools (``max_tools_offered``): the servers in config
order, each server's own tools in the order it lists them, then the resource tools; the rest are
named in one warning an episode. Providers refuse long tool lists (OpenAI's beyond 128), and the
entries' ``includeTools`` / ``excludeTools`` are how a user chooses.

Resources offered as tools live in ``resources.py``, the entries' prompts in ``prompts.py``.

"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import mcp.types as types

from mcp_client.config import Lifetime, ServerConfig
from mcp_client.prompts import server_prompts
from mcp_client.resources import (
    RESOURCE_TOOL_ANNOTATIONS,
    RESOURCE_TOOLS,
    for_model,
    resource_call,
    resource_tool_definitions,
)
from mcp_client.server_rules import ServerHealth, backoff_for, connect_by_rules
from mcp_client.source import ProgressReport, ServerStartupTimeoutError, ToolSource
from mcp_client.tools import ResultLimits, ToolNameMap, ToolRoute, convert_call_result, tool_hints, translate_tool
from session.episode_events import EpisodeEvent, emit
from session.episode_events.mcp import (
    MCPPromptUnavailable,
    MCPResourceListingFailed,
    MCPResourcesChanged,
    MCPResourceToolShadowed,
    MCPServerSlowStart,
    MCPServerStartWaited,
    MCPServerUnhealthy,
    MCPSessionConnect,
    MCPToolsCapped,
    MCPToolsChanged,
)
from session.errors import MCPServerDiedError, MCPServerStartupError, MCPToolCallError
from shared_utils.toolset import ServerPrompt, ToolCallResult, ToolHints

PING_TIMEOUT_SECONDS = 5.0
CHECK_GRACE_SECONDS = 1.0  # at close, for a health check still under way
_NAMES_SHOWN = 10  # servers named in a message about many; the rest are counted

SourceFactory = Callable[[ServerConfig], ToolSource]
# A start that took more than this share of the startup timeout is warned about: on a busier
# moment of the same machine the next start may miss the timeout, and the server be disabled.
SLOW_START_SHARE = 0.5


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
    # A closed turn's server said its prompts changed: the next turn asks for them again.
    prompts_changed: bool = False
    # Its own tool of a resource tool's name was already reported (debug, once per episode).
    shadowed: bool = False


@dataclass(frozen=True)
class TurnTools:
    """The tools offered this turn: OpenAI schemas and the name map that routes them."""

    schemas: list[dict[str, Any]]
    names: ToolNameMap
    servers: tuple[str, ...]  # the servers whose tools are offered
    resource_tools: frozenset[str] = frozenset()  # wire names of the offered resource tools


class Toolbox:
    """Every enabled server of the config as one set of tools (see the module docstring)."""

    def __init__(
        self,
        servers: list[tuple[ServerConfig, Lifetime]],
        make_source: SourceFactory,
        logger: logging.Logger,
        ahead: int,
        max_tools: int,
        config_file: str,
    ) -> None:
        """``ahead``: how many fresh servers a turn-lifetime server keeps started ahead of its turns;
        ``max_tools``: how many tools a turn offers at most (the first, in ``refresh_tools``'s order);
        ``config_file``: the MCP config's name, for messages."""
        self.logger = logger
        self._make_source = make_source
        self._ahead = ahead
        self._max_tools = max_tools
        self._config_file = config_file
        self._cap_warned = False  # once an episode: the same surplus is left out every turn
        self._slots = {server.name: _Slot(server, lifetime) for server, lifetime in servers}
        self._closing: set[asyncio.Task[None]] = set()
        # Turns being readied; close() waits for them (see there).
        self._turns: set[asyncio.Task[Any]] = set()
        self.turn_tools = TurnTools([], ToolNameMap([]), ())
        # The last names offered, kept after the sessions close: logs still show dotted names.
        self.known_names = ToolNameMap([])
        self._prompt_warnings: set[str] = set()  # given this episode
        # The turn being readied: each request's timeout and the turn's end (``begin_turn``).
        self._bounds: tuple[float, float | None] = (PING_TIMEOUT_SECONDS, None)
        self.turn: int | None = None  # the turn being readied or played (the manager says which)

    @property
    def all_disabled(self) -> bool:
        return all(slot.health.disabled for slot in self._slots.values())

    def disabled_servers(self) -> list[str]:
        return [name for name, slot in self._slots.items() if slot.health.disabled]

    def server(self, name: str) -> ServerConfig:
        return self._slots[name].server

    def reset_episode(self) -> None:
        """Forget the rules' memory: the next connect of every server is a first connect again."""
        self._prompt_warnings.clear()
        self._cap_warned = False
        for slot in self._slots.values():
            slot.health = ServerHealth()
            slot.prompts_changed = False
            slot.shadowed = False

    # -- turns -----------------------------------------------------------------------------

    def instructions(self) -> dict[str, str]:
        """Each live server's own account of its purpose (its MCP ``instructions``), by server name."""
        return {
            name: slot.source.instructions
            for name, slot in self._slots.items()
            if slot.source is not None and slot.source.instructions
        }

    async def begin_turn(self, timeout: float, deadline: float) -> TurnTools:
        """Ready every server for a new turn, at once; the tools of all that are up. A request made on
        the way (a new tool listing) gets ``timeout`` seconds (the entry's own ``timeout`` wins), and
        none goes past ``deadline`` (``time.monotonic()``: the turn's budget).

        Raises:
            MCPServerStartupError: a server's first connect of the episode failed (the
                other servers are closed again first).
        """
        task = asyncio.current_task()
        assert task is not None  # a coroutine on the session loop always runs in a task
        self._turns.add(task)
        self._bounds = (timeout, deadline)
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
        if source is not None and source.is_alive and not (source.tools_changed or source.resources_changed):
            slot.check = asyncio.get_running_loop().create_task(self._check(slot), name=f"mcp-check-{slot.server.name}")
            return
        await self._check(slot)

    async def _check(self, slot: _Slot) -> None:
        """Ping the server (and list changed tools); a dead or missing one is connected by the rules."""
        source = slot.source
        if source is not None:
            if not await source.ping(PING_TIMEOUT_SECONDS):
                reason: str | None = "it is not answering"
            else:
                reason = await self._relist(slot, source) if source.tools_changed else None
                if reason is None:
                    if source.resources_changed:
                        await self._list_resources(slot, source, changed=True)
                    return
            self._log(
                logging.WARNING,
                MCPServerUnhealthy(server_name=slot.server.name, reason=reason),
                "MCP server '%s': %s; reconnecting",
                slot.server.name,
                reason,
            )
            slot.source = None
            self._close_later(source)
        _, slot.source = await connect_by_rules(
            slot.server.name, slot.health, self._connector(slot), self._log, backoff_for(slot.server), self.turn
        )
        self._warn_if_slow(slot)

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

    async def _relist(self, slot: _Slot, source: ToolSource) -> str | None:
        """List the tools of a server that said they changed; None when that went well, else why not
        (the caller reconnects it: a server that leaves a request unanswered is not to be waited on)."""
        timeout, deadline = self._bounds
        try:
            tools = await source.list_tools(slot.server.timeout or timeout, deadline=deadline)
        except MCPServerDiedError as exc:
            return str(exc)
        except (MCPToolCallError, TimeoutError) as exc:
            return f"it said its tools changed, then {exc}"
        self._log(
            logging.INFO,
            MCPToolsChanged(server_name=slot.server.name),
            "MCP server '%s' changed its tools; it now offers %d",
            slot.server.name,
            len(tools),
        )
        return None

    async def _list_resources(self, slot: _Slot, source: ToolSource, changed: bool = False) -> None:
        """List the server's resources (kept on the source), if it declares any; a failure leaves
        its resource tools out until the next listing, and its own tools offered."""
        capabilities = source.capabilities
        if capabilities is not None and capabilities.resources is None:
            return  # None: not known (see ToolSource.capabilities), so asked
        name = slot.server.name
        try:
            # A healthy server lists in milliseconds; one that hangs here must not hold up its start for long.
            resources = await source.list_resources(min(source.settings.startup_timeout, PING_TIMEOUT_SECONDS))
        except (MCPToolCallError, TimeoutError) as exc:  # MCPServerDiedError included: the next check sees it
            self._log(
                logging.DEBUG,
                MCPResourceListingFailed(server_name=name),
                "MCP server '%s': its resources are not offered (%s)",
                name,
                str(exc),
            )
            return
        if changed:
            self._log(
                logging.INFO,
                MCPResourcesChanged(server_name=name, resource_count=len(resources)),
                "MCP server '%s' changed its resources; it now lists %d",
                name,
                len(resources),
            )

    async def _ready_turn(self, slot: _Slot) -> None:
        old, slot.source = slot.source, None
        if old is not None:
            slot.prompts_changed |= old.prompts_changed
            self._close_later(old)
        outcome, slot.source = await connect_by_rules(
            slot.server.name, slot.health, self._connector(slot), self._log, backoff_for(slot.server), self.turn
        )
        self._warn_if_slow(slot)
        if outcome == "disabled":
            while slot.spares:
                self._track(_close_spare(slot.spares.popleft()), slot.server.name)
            return
        # The coming turns' servers start now, while this turn's model call runs.
        loop = asyncio.get_running_loop()
        while len(slot.spares) < self._ahead:
            slot.spares.append(loop.create_task(self._connect_new(slot), name=f"mcp-start-{slot.server.name}"))

    def _warn_if_slow(self, slot: _Slot) -> None:
        """Warn (once an episode) when the server just connected took more than ``SLOW_START_SHARE`` of
        the startup timeout to start (a server started ahead: its start in the background)."""
        source = slot.source
        if source is None or slot.health.slow_start_warned:
            return
        timeout = source.settings.startup_timeout
        seconds = (source.connect_ms or 0.0) / 1000
        if seconds <= SLOW_START_SHARE * timeout:
            return
        slot.health.slow_start_warned = True
        name = slot.server.name
        self._log(
            logging.WARNING,
            MCPServerSlowStart(server_name=name, start_seconds=round(seconds, 3), timeout_seconds=timeout),
            "MCP server '%s' took %.1f s to start, more than %.0f%% of the %g s allowed: a slower start would "
            "disable it. Raise server_startup_timeout_seconds under [tool.zorkgpt.mcp] (or make the machine less busy)",
            name,
            seconds,
            SLOW_START_SHARE * 100,
            timeout,
        )

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
                MCPServerStartWaited(server_name=slot.server.name, wait_ms=waited_ms),
                "Waited %.0f ms for MCP server '%s' started ahead",
                waited_ms,
                slot.server.name,
            )
        if slot.spares and slot.spares[0] is task:  # close() may have taken it meanwhile
            slot.spares.popleft()
        source = task.result()
        if not source.is_alive:
            await source.close()
            raise MCPServerStartupError(
                f"MCP server '{source.name}' was started for this turn but exited before the turn began.",
                server_name=source.name,
            )
        return source

    async def _connect_new(self, slot: _Slot) -> ToolSource:
        source = self._make_source(slot.server)
        await source.connect()
        try:
            await self._list_resources(slot, source)
        except BaseException:
            # Cancelled (a server started ahead for a turn that will not come): connect() undoes
            # only its own start, so a server cancelled after it is closed here.
            await source.close()
            raise
        record = MCPSessionConnect(
            server_name=slot.server.name,
            protocol_version=source.protocol_version,
            lifetime=slot.lifetime,
            tool_count=len(source.tools),
            tools=[f"{slot.server.name}.{tool.name}" for tool in source.tools],
            duration_ms=source.connect_ms,
        )
        self._log(
            logging.INFO,
            record,
            "MCP server '%s' connected with %d tools (%.0f ms, protocol %s)",
            slot.server.name,
            len(source.tools),
            source.connect_ms or 0.0,
            source.protocol_version,
        )
        return source

    def refresh_tools(self) -> TurnTools:
        """The offered tools of every live server, in config order (filters applied): each server's own
        tools in the order it lists them, then the resource tools; the first ``max_tools`` of them."""
        offered: list[tuple[str, types.Tool]] = []
        resource_tools: list[tuple[str, types.Tool]] = []  # after every server's own tools
        servers: list[str] = []
        for name, slot in self._slots.items():
            source = slot.source
            if source is None or not source.is_alive:
                continue
            servers.append(name)
            offered.extend((name, tool) for tool in source.tools if slot.server.offers(tool.name))
            resource_tools.extend((name, tool) for tool in self._resource_tools(slot, source))
        offered.extend(resource_tools)
        if len(offered) > self._max_tools:
            left_out = offered[self._max_tools :]
            offered = offered[: self._max_tools]
            self._warn_left_out(left_out, len(offered) + len(left_out))
            resource_tools = [tool for tool in resource_tools if tool in offered]
            # A server all of whose tools were left out offers none this turn (the run reports count it so).
            kept = {server for server, _ in offered}
            servers = [name for name in servers if name in kept or not self._offered_any(name, left_out)]
        names = ToolNameMap((server, tool.name) for server, tool in offered)
        schemas = [translate_tool(server, tool, names) for server, tool in offered]
        wire = frozenset(names.wire_for(server, tool.name) for server, tool in resource_tools)
        self.turn_tools = TurnTools(schemas, names, tuple(servers), wire)
        if names.routes:
            self.known_names = names
        return self.turn_tools

    @staticmethod
    def _offered_any(server: str, tools: list[tuple[str, types.Tool]]) -> bool:
        return any(name == server for name, _ in tools)

    def _warn_left_out(self, left_out: list[tuple[str, types.Tool]], listed: int) -> None:
        """Name the tools beyond ``max_tools_offered`` (once an episode): which, and how to choose."""
        if self._cap_warned:
            return
        self._cap_warned = True
        dotted = [f"{server}.{tool.name}" for server, tool in left_out]
        per_server = Counter(server for server, _ in left_out)
        shown = ", ".join(dotted[:_NAMES_SHOWN]) + (
            f" and {len(dotted) - _NAMES_SHOWN:,} more" if len(dotted) > _NAMES_SHOWN else ""
        )
        record = MCPToolsCapped(
            max_tools_offered=self._max_tools,
            tools_listed=listed,
            left_out=dotted,
            left_out_by_server=dict(per_server),
        )
        self._log(
            logging.WARNING,
            record,
            "MCP servers offer %s tools, more than max_tools_offered (%d) under [tool.zorkgpt.mcp]: the first %d "
            "are offered (servers in %s order, each server's tools in its own order, resource tools last) and "
            '%s left out (%s): %s. Choose which with "includeTools" / "excludeTools" in the entries of %s, '
            "or raise max_tools_offered if your model's provider takes more (OpenAI's takes 128).",
            f"{listed:,}",
            self._max_tools,
            self._max_tools,
            self._config_file,
            f"{len(dotted):,}",
            ", ".join(f"{server}: {count:,}" for server, count in per_server.items()),
            shown,
            self._config_file,
        )

    def _resource_tools(self, slot: _Slot, source: ToolSource) -> list[types.Tool]:
        """``list_resources`` and ``read_resource`` for this server, where they are offered (see the
        module docstring)."""
        server = slot.server
        shown = [resource for resource in source.resources if for_model(server, resource)]
        if not shown:
            return []
        own = {tool.name for tool in source.tools}.intersection(RESOURCE_TOOLS)
        if own and not slot.shadowed:
            slot.shadowed = True
            self._log(
                logging.DEBUG,
                MCPResourceToolShadowed(server_name=server.name),
                "MCP server '%s' has its own %s tool; ZorkGPT's resource tool of that name is not offered",
                server.name,
                " and ".join(sorted(own)),
            )
        return [
            tool
            for tool in resource_tool_definitions(server.name, shown)
            if tool.name not in own and server.offers(tool.name)
        ]

    def end_turn(self) -> None:
        """Turn-lifetime servers are done with this turn: close them in the background."""
        for slot in self._slots.values():
            if slot.lifetime == "turn" and slot.source is not None:
                slot.prompts_changed |= slot.source.prompts_changed
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

    def hints(self, name: str) -> ToolHints | None:
        """The hints (annotations) of the tool offered under ``name``, from its server's latest listing."""
        route = self.route(name)
        source = self._slots[route.server_name].source if route is not None else None
        if route is None or source is None:
            return None
        if route.wire_name in self.turn_tools.resource_tools:
            return tool_hints(RESOURCE_TOOL_ANNOTATIONS)
        for tool in source.tools:
            if tool.name == route.tool_name:
                return tool_hints(tool.annotations)
        return None

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        timeout: float,
        limits: ResultLimits,
        *,
        deadline: float | None = None,
        on_progress: ProgressReport | None = None,
    ) -> ToolCallResult:
        """Run the tool offered under ``name`` (wire or dotted); see ``ToolSource.call_tool`` for the
        timeout, ``deadline`` and ``on_progress``, and for errors. The server's answer is converted
        here, where it arrives, into the contract's ``ToolCallResult``, cut to ``limits``."""
        route = self.route(name)
        if route is None:
            known = ", ".join(f"{r.wire_name} ({r.dotted})" for r in self.turn_tools.names.routes) or "none"
            raise MCPToolCallError(f"Unknown tool '{name}'. Tools offered this turn: {known}.")
        slot = self._slots[route.server_name]
        await self._checked(slot)
        source = slot.source
        if source is None:
            raise MCPServerDiedError(f"MCP server '{route.server_name}' is not connected.", route.server_name)
        if route.wire_name in self.turn_tools.resource_tools:
            raw = await resource_call(slot.server, source, route.tool_name, arguments, timeout, deadline)
        else:
            raw = await source.call_tool(
                route.tool_name, arguments, timeout, deadline=deadline, on_progress=on_progress
            )
        return convert_call_result(raw, limits.max_chars, limits.max_reply_bytes)

    # -- prompts ---------------------------------------------------------------------------

    async def fetch_prompts(
        self, everything: bool, timeout: float, max_chars: int, config_file: str, deadline: float | None = None
    ) -> dict[str, tuple[ServerPrompt, ...]]:
        """The configured prompts, by server: of every server that has some (``everything``: the
        episode's first turn), else only of those that said their prompts changed. A prompt that
        cannot be had is logged as a warning (naming the entry and the fix) and left out; the
        texts are cut to ``max_chars`` each, as tool results are. None is waited for past ``deadline``."""
        wanted = []
        for slot in self._slots.values():
            source = slot.source
            changed = slot.prompts_changed or (source is not None and source.prompts_changed)
            if slot.server.prompts and (everything or changed) and not slot.health.disabled:
                slot.prompts_changed = False
                wanted.append(slot)
        fetched = await asyncio.gather(
            *(
                server_prompts(
                    slot.server, slot.source, timeout, max_chars, config_file, deadline, self._prompt_warning
                )
                for slot in wanted
            )
        )
        return {slot.server.name: prompts for slot, prompts in zip(wanted, fetched, strict=True)}

    def _prompt_warning(self, server: ServerConfig, prompt: str | None, message: str) -> None:
        """Warn once per episode: a prompt asked for again after a change fails the same way."""
        if message in self._prompt_warnings:
            return
        self._prompt_warnings.add(message)
        self._log(
            logging.WARNING,
            MCPPromptUnavailable(server_name=server.name, prompt_name=prompt),
            "%s; the game goes on without it.",
            message,
        )

    def _log(self, level: int, record: EpisodeEvent, message: str, *args: Any, console: bool = True) -> None:
        """Write one event (the connect rules write theirs through this too: ``server_rules.EventLog``)."""
        emit(self.logger, record, message, *args, level=level, console=console)


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
