"""MCPManager: every configured MCP server, as one set of tools per turn.

The episode runner holds each turn's tools with ``with manager.turn(n) as tools:``: entering
connects (or reuses) every server and gives the turn's ``Toolset`` (``shared_utils.toolset``),
which the agent and the critic's re-asks of that turn use; leaving ends the turn, and
turn-lifetime sessions close in the background. ``close()`` ends everything when the episode
ends. Code that already runs an event loop awaits ``open_turn(n)`` and says ``end_turn()``.

Everything MCP happens on one background event loop (``runtime.SessionLoop``) that lives
as long as the episode: the agent's own ``asyncio.run`` per ask only awaits results from it.
Which servers, how they are reached and the per-server rules are the toolbox's
(``mcp_client.toolbox``); how each transport works is the sources' (``mcp_client.source``).

The servers' resources reach the model as two more tools per server (the toolbox offers them;
they run through ``call_tool`` like any other). The prompts an entry names are asked for on the
episode's first turn and whenever their server says they changed; ``server_prompts()`` has
their text for the agent's system prompt.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from chat_api.tracing import traced_observation
from mcp_client.config import Lifetime, MCPConfig, ServerConfig
from mcp_client.runtime import SessionLoop
from mcp_client.server_requests import ServerRequestAnswers
from mcp_client.source import SourceSettings, ToolSource
from mcp_client.sweeper import Sweeper
from mcp_client.toolbox import Toolbox, TurnTools
from mcp_client.tools import ResultLimits
from mcp_client.transport_sources import make_source
from session.episode_events import emit
from session.episode_events.mcp import (
    MCPConfigIgnoredKeys,
    MCPConfigLoaded,
    MCPDisabledFallback,
    MCPNoTools,
    MCPToolProgress,
    MCPTurnReady,
)
from session.errors import MCPToolCallError
from session.game_configuration import GameConfiguration, process_environ
from session.redaction import Redactor
from shared_utils.toolset import ServerPrompt, ToolCallResult, ToolInfo, Toolset

# A tool may report progress hundreds of times a second; the log gets at most this often one line of it.
PROGRESS_LOG_INTERVAL_SECONDS = 0.25


class MCPManager:
    """Every enabled server of mcp_config.json, as one set of tools per turn (see the module docstring)."""

    def __init__(
        self,
        config: GameConfiguration,
        logger: logging.Logger,
        langfuse_client: Any | None = None,
        models: Mapping[str, Any] | None = None,
        *,
        redactor: Redactor,
    ) -> None:
        """``models``: each role's LLM client (agent, critic, extractor, memory), for the servers
        whose entries let them ask for a form to be filled or a completion (``server_requests.py``);
        without them every such request is declined. ``redactor``: the run's (``Redactor.for_run``
        with the entries' secrets, ``mcp_client.config.configured_secrets``): it knows the servers'
        header, env and OAuth values too."""
        self.config = config
        self.logger = logger
        self.langfuse_client = langfuse_client
        self.config_path = config.resolve_path(config.mcp.config_file)
        # ${VAR} in the file comes from the environment and .env, as the API key does.
        self.mcp_config = MCPConfig.from_file(self.config_path, environ=process_environ())
        self.redactor = redactor
        self._sweeper = Sweeper(owner=uuid.uuid4().hex)
        # Always there: without the roles' models every form is declined (and said so), and
        # sampling is not offered.
        self.answers = ServerRequestAnswers(
            {role: config.model_for(role) for role in models or {}},
            models or {},
            logger,
            turn=lambda: self._turn,
            redactor=self.redactor,
        )
        self.settings = SourceSettings(
            startup_timeout=config.mcp.server_startup_timeout_seconds,
            max_reply_bytes=config.mcp.max_tool_reply_bytes,
            config_dir=self.mcp_config.base_dir,
            config_file=str(self.config_path),
            redactor=self.redactor,
            logger=logger,
            owner=self._sweeper.owner,
            answers=self.answers,
        )
        # Each server with the lifetime it runs under (its own, else the run's), for the toolbox and the log alike.
        served = [(server, server.lifetime or config.mcp.session_lifetime) for server in self.mcp_config.servers]
        self.toolbox = Toolbox(
            served,
            self.make_source,
            logger,
            ahead=config.mcp.servers_started_ahead,
            max_tools=config.mcp.max_tools_offered,
            config_file=self.config_path.name,
        )
        self._log_loaded(served)
        self._runtime: SessionLoop | None = None
        self._runtime_lock = threading.Lock()
        self._turn: int | None = None
        # The waits on servers in progress (read by a stop signal's handler: see ``waiting_on``).
        self._waits: dict[object, str] = {}
        # The configured prompts' text by server; None until the episode's first turn asked for them.
        self._prompts: dict[str, tuple[ServerPrompt, ...]] | None = None

    def _log_loaded(self, served: Sequence[tuple[ServerConfig, Lifetime]]) -> None:
        config = self.mcp_config
        servers = [f"{server.name} ({server.transport}, {lifetime})" for server, lifetime in served]
        record = MCPConfigLoaded(
            config_file=str(self.config_path),
            servers=[server.name for server in config.servers],
            disabled_servers=list(config.disabled),
        )
        emit(
            self.logger,
            record,
            "MCP servers configured from %s: %s%s",
            self.config_path,
            ", ".join(servers) or "none enabled",
            f"; disabled: {', '.join(config.disabled)}" if config.disabled else "",
        )
        if config.ignored_keys:
            emit(
                self.logger,
                MCPConfigIgnoredKeys(ignored=list(config.ignored_keys)),
                "%s: ignoring %s",
                self.config_path,
                ", ".join(config.ignored_keys),
                level=logging.WARNING,
            )

    # -- state ---------------------------------------------------------------------------

    @property
    def server_names(self) -> list[str]:
        return [server.name for server in self.mcp_config.servers]

    @property
    def is_disabled(self) -> bool:
        """True when no server can offer tools this episode (all disabled, or none enabled)."""
        return self.toolbox.all_disabled

    def disabled_servers(self) -> list[str]:
        """Servers disabled for the rest of the episode after repeated failures."""
        return self.toolbox.disabled_servers()

    @property
    def sweeper_pid(self) -> int | None:
        """The watcher process that ends the servers if ZorkGPT is killed (while sessions run)."""
        return self._sweeper.pid

    def make_source(self, server: ServerConfig) -> ToolSource:
        """A new, unconnected source for one server entry."""
        return make_source(server, self.settings)

    def reset_episode(self) -> None:
        """A new episode: sessions of the last one closed, every server's next connect a first one."""
        self.close()
        self.toolbox.reset_episode()
        self._prompts = None

    # -- waits -----------------------------------------------------------------------------

    def waiting_on(self) -> str | None:
        """What the episode waits on right now, when that is a server (a turn's tools being readied, a
        tool call): a stop signal then ends the wait at once instead of after the turn."""
        return next(iter(self._waits.values()), None)

    @contextmanager
    def _waiting_on(self, what: str) -> Iterator[None]:
        key = object()
        self._waits[key] = what
        try:
            yield
        finally:
            del self._waits[key]

    # -- turns -----------------------------------------------------------------------------

    @property
    def runtime(self) -> SessionLoop:
        with self._runtime_lock:
            if self._runtime is None or not self._runtime.is_running:
                # Started before any server: whatever ZorkGPT's end, the servers end with it.
                self._sweeper.start()
                self._runtime = SessionLoop()
                # Sessions end even when the program stops without reaching close().
                atexit.register(self.close)
            return self._runtime

    @contextmanager
    def turn(self, turn: int) -> Iterator[TurnToolset]:
        """The episode runner's hold on one turn's tools: opened on entry (every server connected or
        reused), closed on exit, once the turn's action is chosen and the critic's re-asks are over.

        Raises:
            MCPServerStartupError: a server's first connect of the episode failed.
        """
        with self._waiting_on("MCP servers readying the turn's tools"):
            toolset = self.runtime.call(self._begin_turn(turn))
        try:
            yield toolset
        finally:
            self.end_turn()

    async def open_turn(self, turn: int) -> TurnToolset:
        """``turn``'s opening, awaited from another event loop (tests, benchmarks, the conformance
        client); whoever opens it says ``end_turn()``."""
        return await self.runtime.run(self._begin_turn(turn))

    async def _begin_turn(self, turn: int) -> TurnToolset:
        """On the session loop: the turn's tools from every server, and its prompts on the
        episode's first turn. A server that fails later in the episode only loses its own tools
        (see the toolbox). When there are none, the turn plays without tools and the log says why."""
        self._turn = self.toolbox.turn = turn
        if self.toolbox.all_disabled:
            self._log_disabled(turn)
            return TurnToolset(self, None)
        started = time.perf_counter()
        mcp = self.config.mcp
        # Readying the turn is bounded as its tool calls are: each request by the call timeout, all of
        # them by the turn's budget (a server that never answers must not hold the episode).
        deadline = time.monotonic() + mcp.turn_timeout_seconds
        tools = await self.toolbox.begin_turn(mcp.tool_call_timeout_seconds, deadline)
        if any(server.prompts for server in self.mcp_config.servers):
            await self._update_prompts(deadline)
        duration_ms = round((time.perf_counter() - started) * 1000, 2)
        ready = MCPTurnReady(
            turn=turn, servers=list(tools.servers), tool_count=len(tools.schemas), duration_ms=duration_ms
        )
        emit(
            self.logger,
            ready,
            "Turn %d: MCP tools ready from %d servers in %.1f ms",
            turn,
            len(tools.servers),
            duration_ms,
            level=logging.DEBUG,
        )
        if self.toolbox.all_disabled:  # every server disabled after repeated failures
            self._log_disabled(turn)
        elif not tools.schemas:  # working servers that offer no tools: nothing is disabled
            emit(
                self.logger,
                MCPNoTools(turn=turn, server_names=self.server_names),
                "Turn %s: no MCP tools offered (servers: %s), continuing without tools",
                turn,
                ", ".join(self.server_names),
                level=logging.WARNING,
            )
        return TurnToolset(self, tools)

    def _log_disabled(self, turn: int) -> None:
        record = MCPDisabledFallback(turn=turn, server_names=self.server_names)
        emit(self.logger, record, "Turn %s: MCP disabled, continuing without tools", turn, level=logging.WARNING)

    def end_turn(self) -> None:
        """The turn's action is chosen: turn-lifetime sessions close in the background."""
        self.answers.end_turn()  # what servers asked for in vain this turn, counted
        self._turn = None
        runtime = self._runtime
        if runtime is not None and runtime.is_running:
            runtime.submit(_end_turn(self.toolbox))

    def close(self) -> None:
        """Close every session, end every server and stop the background loop. Idempotent."""
        self.answers.end_turn()  # a turn cut short still says what it turned away
        self._turn = None
        with self._runtime_lock:
            runtime, self._runtime = self._runtime, None
        if runtime is None:
            return
        atexit.unregister(self.close)
        try:
            if runtime.is_running:
                try:
                    runtime.call(self.toolbox.close())
                finally:
                    runtime.stop()
        finally:
            self._sweeper.stop()  # ends whatever is somehow still running, then exits itself

    async def _update_prompts(self, deadline: float) -> None:
        """Ask for the configured prompts: all of them on the episode's first turn, later only those
        of servers that said their prompts changed; none waited for past ``deadline``."""
        mcp = self.config.mcp
        fetch = self.toolbox.fetch_prompts(
            everything=self._prompts is None,
            timeout=mcp.tool_call_timeout_seconds,
            max_chars=mcp.max_tool_result_chars,
            config_file=str(self.config_path),
            deadline=deadline,
        )
        fetched = await fetch
        self._prompts = {**(self._prompts or {}), **fetched}

    def server_prompts(self) -> list[ServerPrompt]:
        """The text of every prompt the config names that its server gave, in config order."""
        prompts = self._prompts or {}
        return [prompt for server in self.server_names for prompt in prompts.get(server, ())]

    # -- tools -----------------------------------------------------------------------------

    def server_instructions(self) -> dict[str, str]:
        """Each connected server's own account of its purpose (its MCP ``instructions``), by server name."""
        return self.toolbox.instructions()

    def display_name(self, name: str) -> str:
        """The dotted ``server.tool`` form of a wire or dotted name, for logs and traces."""
        return self.toolbox.known_names.display_name(name)

    def server_of(self, name: str) -> str | None:
        route = self.toolbox.route(name)
        return route.server_name if route else None

    def tool(self, name: str) -> ToolInfo:
        """What is known of the tool offered under ``name`` (wire or dotted) before it is called."""
        route = self.toolbox.route(name)
        server = route.server_name if route else None
        wire = route.wire_name if route else name
        info = ToolInfo(wire, self.display_name(name), server, self.timeout_for(name), self.toolbox.hints(name))
        if server is None or not info.destructive or self.mcp_config.server(server).allow_destructive:
            return info
        refusal = (
            f"{info.name} is marked destructive; ZorkGPT plays alone with nobody to confirm it. To allow it, set "
            f'"allowDestructive": true in its entry of {self.config_path.name}'
        )
        return replace(info, refusal=refusal)

    def timeout_for(self, name: str) -> float:
        """Seconds allowed for one call of ``name``: the server's ``timeout``, else the configured default."""
        route = self.toolbox.route(name)
        if route is not None:
            timeout = self.toolbox.server(route.server_name).timeout
            if timeout is not None:
                return timeout
        return self.config.mcp.tool_call_timeout_seconds

    async def call_tool(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        timeout_seconds: float | None = None,
        deadline: float | None = None,
    ) -> ToolCallResult:
        """Run one tool, by wire name or dotted name. ``timeout_seconds`` (default: ``timeout_for``)
        runs from the start and again from each progress notification the server sends;
        ``deadline`` (``time.monotonic()``, the turn's budget) is an end no progress moves. Progress
        goes to the log as ``mcp_tool_progress``, at most a few lines a second.

        Raises:
            TimeoutError: the call went ``timeout_seconds`` without progress, or passed ``deadline``.
            MCPServerDiedError: the tool's server or its session is gone.
            MCPToolCallError: unknown tool, bad arguments, or a protocol error.
        """
        timeout = self.timeout_for(tool_name) if timeout_seconds is None else timeout_seconds
        display = self.display_name(tool_name)
        if not isinstance(arguments, dict):
            raise MCPToolCallError(f"Arguments for {display} must be a JSON object, got {type(arguments).__name__}.")
        with traced_observation(
            self.langfuse_client,
            self.logger,
            self.redactor,
            as_type="tool",
            name=f"mcp-tool-{display}",
            input=arguments,
            metadata={"tool_name": display, "server_name": self.server_of(tool_name), "timeout_seconds": timeout},
        ) as observation:
            result, duration_ms = await self._call_tool(tool_name, arguments, timeout, deadline)
            if observation is not None:
                observation.update(
                    output=result.to_dict(),
                    metadata={"is_error": result.is_error, "duration_ms": duration_ms},
                    **({"level": "WARNING", "status_message": result.error_message} if result.is_error else {}),
                )
            return result

    async def _call_tool(
        self, tool_name: str, arguments: dict[str, Any], timeout: float, deadline: float | None
    ) -> tuple[ToolCallResult, float]:
        """The call itself, on the session loop: the result and how long it took (ms)."""
        started = time.perf_counter()
        progress = _ProgressLog(self.logger, self.display_name(tool_name), self.server_of(tool_name), self._turn)
        limits = ResultLimits(self.config.mcp.max_tool_result_chars, self.config.mcp.max_tool_reply_bytes)
        call = self.toolbox.call(tool_name, arguments, timeout, limits, deadline=deadline, on_progress=progress)
        with self._waiting_on(f"the MCP tool {self.display_name(tool_name)}"):
            result = await self.runtime.run(call)
        return result, round((time.perf_counter() - started) * 1000, 1)


class _ProgressLog:
    """One call's progress notifications as ``mcp_tool_progress`` events: the first, then at most
    one per ``PROGRESS_LOG_INTERVAL_SECONDS`` (a server may send hundreds a second)."""

    def __init__(self, logger: logging.Logger, tool: str, server: str | None, turn: int | None) -> None:
        self.logger = logger
        self.tool = tool
        self.server = server
        self.turn = turn
        self._last: float | None = None
        self.received = 0

    def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.received += 1
        now = time.monotonic()
        if self._last is not None and now - self._last < PROGRESS_LOG_INTERVAL_SECONDS:
            return
        self._last = now
        amount = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
        record = MCPToolProgress(
            turn=self.turn,
            tool_name=self.tool,
            server_name=self.server,
            progress=progress,
            total=total,
            progress_message=message,
            notifications=self.received,
        )
        emit(self.logger, record, "MCP tool %s: %s%s", self.tool, amount, f" · {message}" if message else "")


async def _end_turn(toolbox: Toolbox) -> None:
    toolbox.end_turn()


class TurnToolset(Toolset):
    """One turn's tools from every configured server (``MCPManager.turn``); ``None`` tools: the
    turn plays without any."""

    def __init__(self, manager: MCPManager, tools: TurnTools | None) -> None:
        self._manager = manager
        self._tools = tools

    @property
    def schemas(self) -> list[dict[str, Any]]:
        return self._tools.schemas if self._tools is not None else []

    @property
    def instructions(self) -> Mapping[str, str]:
        return self._manager.server_instructions()

    @property
    def prompts(self) -> Sequence[ServerPrompt]:
        return self._manager.server_prompts()

    def tool(self, name: str) -> ToolInfo:
        return self._manager.tool(name)

    async def call(
        self, name: str, arguments: dict[str, Any], *, timeout_seconds: float, deadline: float | None = None
    ) -> ToolCallResult:
        return await self._manager.call_tool(name, arguments, timeout_seconds=timeout_seconds, deadline=deadline)

    async def drop_lost_servers(self) -> None:
        self._tools = await self._manager.runtime.run(_refresh(self._manager.toolbox))


async def _refresh(toolbox: Toolbox) -> TurnTools:
    return toolbox.refresh_tools()
