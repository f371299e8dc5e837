"""MCP: the manager's set-up, each server's life, the requests servers make, and a turn's tools.

Each record has exactly the keys its writer puts in the file. A server's events name it
(``server_name``); those of a turn name the turn. A turn of None: the event came between turns.
A field the first versions did not write defaults to None (not known), never to a made-up value.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from session.episode_events.base import EpisodeEvent, record
from session.events import Event

# -- the manager -------------------------------------------------------------------------------


@record
class MCPManagerInit(EpisodeEvent):
    """MCP set up for the episode."""

    EVENT = Event.MCP_MANAGER_INIT


@record
class MCPConfigLoaded(EpisodeEvent):
    """The servers file read: every server it names, and those disabled in it."""

    EVENT = Event.MCP_CONFIG_LOADED

    config_file: str
    # Not written before the servers file could name several: None, not "none".
    servers: list[str] | None = None
    disabled_servers: list[str] | None = None


@record
class MCPConfigIgnoredKeys(EpisodeEvent):
    """Keys of the servers file ZorkGPT does not use."""

    EVENT = Event.MCP_CONFIG_IGNORED_KEYS

    ignored: list[str]


@record
class MCPTurnReady(EpisodeEvent):
    """The servers and tools a turn offers the model, and how long readying them took."""

    EVENT = Event.MCP_TURN_READY

    turn: int
    servers: list[str]
    tool_count: int
    duration_ms: float


@record
class TurnWithoutTools(EpisodeEvent):
    """A turn played without tools, with the servers configured."""

    turn: int
    server_names: list[str] | None = None  # not written by the first versions


@record
class MCPNoTools(TurnWithoutTools):
    """A turn whose servers offer no tools."""

    EVENT = Event.MCP_NO_TOOLS


@record
class MCPDisabledFallback(TurnWithoutTools):
    """A turn played without tools: every server is disabled."""

    EVENT = Event.MCP_DISABLED_FALLBACK


@record
class MCPToolProgress(EpisodeEvent):
    """A server's progress notice during a tool call (the first, then at most one every few seconds)."""

    EVENT = Event.MCP_TOOL_PROGRESS

    turn: int | None
    tool_name: str
    server_name: str | None
    progress: float
    total: float | None
    progress_message: str | None
    notifications: int  # received so far in the call, logged or not


# -- each server -------------------------------------------------------------------------------


@record
class ServerEvent(EpisodeEvent):
    """Something that happened to one server."""

    server_name: str


@record
class MCPSessionConnect(ServerEvent):
    """A server connected: its tools, the time it took, the protocol agreed and its lifetime."""

    EVENT = Event.MCP_SESSION_CONNECT

    protocol_version: str | None
    lifetime: str | None = None  # "episode" or "turn"; None: a log from before servers had lifetimes
    tool_count: int
    tools: list[str]  # dotted names, ``server.tool``
    duration_ms: float | None


@record
class MCPSessionConnectFailed(ServerEvent):
    """A server did not connect; ``retry``: it connected before this episode and is tried once more."""

    EVENT = Event.MCP_SESSION_CONNECT_FAILED

    retry: bool


@record
class MCPSessionRetryOk(ServerEvent):
    """A server that failed to connect connected on the retry."""

    EVENT = Event.MCP_SESSION_RETRY_OK


@record
class MCPServerDisabled(ServerEvent):
    """A server failed twice: disabled for the rest of the episode."""

    EVENT = Event.MCP_SERVER_DISABLED

    error: str
    turn: int | None
    reason: str | None = None  # "start timeout" or "start failed"; None: not written by the first versions


@record
class MCPServerUnhealthy(ServerEvent):
    """A server stopped answering (or could not list its changed tools): reconnected."""

    EVENT = Event.MCP_SERVER_UNHEALTHY

    reason: str | None = None  # None: not written by the first versions


@record
class MCPReconnectBackoff(ServerEvent):
    """A remote server not reachable: tried again after ``wait_seconds``."""

    EVENT = Event.MCP_RECONNECT_BACKOFF

    wait_seconds: float


@record
class MCPServerSlowStart(ServerEvent):
    """A start that took more than half the time allowed."""

    EVENT = Event.MCP_SERVER_SLOW_START

    start_seconds: float
    timeout_seconds: float


@record
class MCPServerStartWaited(ServerEvent):
    """The turn waited for a server started ahead of it."""

    EVENT = Event.MCP_SERVER_START_WAITED

    wait_ms: float


@record
class MCPToolsChanged(ServerEvent):
    """A server changed its tools (listed again)."""

    EVENT = Event.MCP_TOOLS_CHANGED


@record
class MCPToolsCapped(EpisodeEvent):
    """More tools than ``max_tools_offered``: the ones left out, by dotted name and counted by server."""

    EVENT = Event.MCP_TOOLS_CAPPED

    max_tools_offered: int
    tools_listed: int
    left_out: list[str]
    left_out_by_server: dict[str, Any]  # server name -> how many of its tools were left out


@record
class MCPResourcesChanged(ServerEvent):
    """A server changed its resources (listed again)."""

    EVENT = Event.MCP_RESOURCES_CHANGED

    resource_count: int


@record
class MCPResourceListingFailed(ServerEvent):
    """A server's resources could not be listed: its resource tools are left out."""

    EVENT = Event.MCP_RESOURCE_LISTING_FAILED


@record
class MCPResourceToolShadowed(ServerEvent):
    """A server's own tool has a resource tool's name: the resource tool is not offered."""

    EVENT = Event.MCP_RESOURCE_TOOL_SHADOWED


@record
class MCPPromptUnavailable(ServerEvent):
    """A prompt an entry asks for could not be had (``prompt_name`` None: the server's prompts at all)."""

    EVENT = Event.MCP_PROMPT_UNAVAILABLE

    prompt_name: str | None


@record
class MCPListenUnacknowledged(ServerEvent):
    """A server did not acknowledge the subscription to change notices."""

    EVENT = Event.MCP_LISTEN_UNACKNOWLEDGED


@record
class MCPListenUnavailable(ServerEvent):
    """A server sends no change notices."""

    EVENT = Event.MCP_LISTEN_UNAVAILABLE


@record
class MCPTransportError(ServerEvent):
    """The transport reported something it could not read (the message says what)."""

    EVENT = Event.MCP_TRANSPORT_ERROR


@record
class MCPServerStderr(ServerEvent):
    """What a server wrote on stderr (in the message)."""

    EVENT = Event.MCP_SERVER_STDERR


@record
class MCPServerStrayLines(ServerEvent):
    """How many lines on a server's stdout were not MCP messages."""

    EVENT = Event.MCP_SERVER_STRAY_LINES

    lines: int


@record
class MCPServerStrayOutput(ServerEvent):
    """The first stray line on a server's stdout, cut (in the message)."""

    EVENT = Event.MCP_SERVER_STRAY_OUTPUT


@record
class MCPLoginNeeded(ServerEvent):
    """A server needs an OAuth login first."""

    EVENT = Event.MCP_LOGIN_NEEDED


# -- requests from a server --------------------------------------------------------------------


@record
class ServerRequestEvent(EpisodeEvent):
    """A request a server made during a turn (None: between turns)."""

    turn: int | None
    server_name: str


@record
class MCPElicitationAnswered(ServerRequestEvent):
    """A server's form filled by the agent's model: the names of the fields filled."""

    EVENT = Event.MCP_ELICITATION_ANSWERED

    # The file's key is ``fields``, which would hide the record's own ``fields()``.
    form_fields: list[str] = field(metadata={"key": "fields"})


@record
class MCPElicitationDeclined(ServerRequestEvent):
    """A server's form declined, and why."""

    EVENT = Event.MCP_ELICITATION_DECLINED

    reason: str


@record
class MCPElicitationRefused(ServerRequestEvent):
    """More forms in a turn than the entry allows: this one and the rest of the turn's declined."""

    EVENT = Event.MCP_ELICITATION_REFUSED

    max_per_turn: int


@record
class MCPSamplingAnswered(ServerRequestEvent):
    """A server's completion request answered by the model of ``role``."""

    EVENT = Event.MCP_SAMPLING_ANSWERED

    role: str
    max_tokens: int


@record
class MCPSamplingRefused(ServerRequestEvent):
    """More completion requests in a turn than the entry allows: this one and the rest refused."""

    EVENT = Event.MCP_SAMPLING_REFUSED

    max_per_turn: int | None = None  # None: not written by the first versions


@record
class MCPServerRequestsRefused(ServerRequestEvent):
    """At a turn's end: how many requests of each kind a server made in vain (past the first of each)."""

    EVENT = Event.MCP_SERVER_REQUESTS_REFUSED

    elicitation_declined: int
    elicitation_refused: int
    sampling_refused: int
