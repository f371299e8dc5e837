"""The per-server rules of the toolbox (``toolbox.py``), one server at a time.

``connect_by_rules``: the first connect of an episode that fails stops the run with the server's
command named (the configuration is probably wrong). After a good connect, a failed connect is
retried once; when the retry fails too, that server alone is disabled for the rest of the
episode. The other servers never notice. A remote server that was reached before gets a few
tries 1, 2 and 4 s apart before a connect counts as failed: a dropped HTTP connection (a
restarted server, a network blip) usually comes back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from mcp_client.config import ServerConfig
from mcp_client.source import ServerStartupTimeoutError, ToolSource
from session.episode_events import EpisodeEvent
from session.episode_events.mcp import (
    MCPReconnectBackoff,
    MCPServerDisabled,
    MCPSessionConnectFailed,
    MCPSessionRetryOk,
)
from session.errors import MCPServerStartupError

RECONNECT_BACKOFF_SECONDS: tuple[float, ...] = (1.0, 2.0, 4.0)
Outcome = Literal["connected", "retried", "disabled", "skipped"]


@dataclass
class ServerHealth:
    """What the rules remember about one server during one episode."""

    ever_connected: bool = False
    disabled: bool = False
    slow_start_warned: bool = False  # once an episode: a turn-lifetime server starts every turn


class EventLog(Protocol):
    """Where the rules write their events: the toolbox's log (``Toolbox._log``)."""

    def __call__(self, level: int, record: EpisodeEvent, message: str, *args: Any, console: bool = True) -> None: ...


async def connect_by_rules(
    name: str,
    health: ServerHealth,
    attempt: Callable[[], Awaitable[ToolSource]],
    log: EventLog,
    backoff: tuple[float, ...] = (),
    turn: int | None = None,
) -> tuple[Outcome, ToolSource | None]:
    """Connect one server under the per-server rules (see the module docstring). ``backoff``:
    the waits between tries of a server that was reached before in this episode (a remote one
    whose connection dropped comes back by itself more often than not) before a failure counts.
    ``turn``: the turn being readied, recorded with a disabled server (the run reports say when).

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
            log(logging.ERROR, MCPSessionConnectFailed(server_name=name, retry=False), "%s", str(first), console=False)
            raise
        return await _retry_once(name, health, attempt, log, first, turn)
    health.ever_connected = True
    return "connected", source


async def _retry_once(
    name: str,
    health: ServerHealth,
    attempt: Callable[[], Awaitable[ToolSource]],
    log: EventLog,
    first: MCPServerStartupError,
    turn: int | None,
) -> tuple[Outcome, ToolSource | None]:
    """A server reached before in this episode failed to connect: one more try, then it is
    disabled for the rest of the episode."""
    log(
        logging.WARNING,
        MCPSessionConnectFailed(server_name=name, retry=True),
        "MCP server '%s' failed to connect, retrying once: %s",
        name,
        str(first),
    )
    try:
        source = await attempt()
    except MCPServerStartupError as second:
        health.disabled = True
        record = MCPServerDisabled(
            server_name=name,
            error=str(second),
            turn=turn,
            # The run reports' words for why: a start that ran out of time is the machine's
            # load as often as the server's fault, and a reader should see which it was.
            reason="start timeout" if isinstance(second, ServerStartupTimeoutError) else "start failed",
        )
        log(
            logging.WARNING,
            record,
            "MCP server '%s' failed again and is disabled for the rest of this episode: %s",
            name,
            str(second),
        )
        return "disabled", None
    health.ever_connected = True
    log(logging.INFO, MCPSessionRetryOk(server_name=name), "MCP server '%s' connected on retry", name)
    return "retried", source


def _with_backoff(
    name: str, attempt: Callable[[], Awaitable[ToolSource]], log: EventLog, waits: tuple[float, ...]
) -> Callable[[], Awaitable[ToolSource]]:
    async def patient() -> ToolSource:
        for wait in waits:
            try:
                return await attempt()
            except MCPServerStartupError as exc:
                log(
                    logging.INFO,
                    MCPReconnectBackoff(server_name=name, wait_seconds=wait),
                    "MCP server '%s' is not reachable; trying again in %gs: %s",
                    name,
                    wait,
                    str(exc).splitlines()[0],
                )
                await asyncio.sleep(wait)
        return await attempt()

    return patient


def backoff_for(server: ServerConfig) -> tuple[float, ...]:
    """A remote server gets a few tries, 1, 2 and 4 s apart, before a failed connect counts; a
    local one is started afresh, and waiting would not bring a broken command back."""
    return RECONNECT_BACKOFF_SECONDS if server.is_remote else ()
