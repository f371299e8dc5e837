"""Error types of the MCP client side.

The agent's tool loop decides what to do by error type, so each failure mode has one:
configuration mistakes fail fast (``MCPConfigError``), a server that cannot start fails
the first turn or disables MCP later (``MCPServerStartupError``), and a failing tool call
becomes an error result the model can see (``MCPToolCallError``). A server that vanished
mid-turn is a tool-call failure too, but a distinct one (``MCPServerDiedError``): every
later call in that turn would fail the same way, so the agent should stop calling tools.

Timeouts are deliberately *not* an MCP error: ``call_tool`` raises the builtin
``TimeoutError`` (``asyncio.TimeoutError`` is the same class on Python 3.11+), which the
agent handles by aborting the rest of the batch.
"""

from __future__ import annotations


class MCPError(Exception):
    """Base class of every MCP-related error raised by ZorkGPT."""


class MCPConfigError(MCPError):
    """mcp_config.json is missing, unreadable, malformed or names no server."""


class MCPServerStartupError(MCPError):
    """The server could not be spawned, initialized or listed within the startup timeout."""


class MCPToolCallError(MCPError):
    """A tool call could not be made or the server answered with a protocol error."""


class MCPServerDiedError(MCPToolCallError):
    """The server process or its session went away during the turn."""
