"""The MCP client's error types, under the names the MCP modules have always used.

They are defined with the rest of ZorkGPT's errors, and their policy, in ``session.errors``.
"""

from __future__ import annotations

from session.errors import (
    MCPConfigError,
    MCPError,
    MCPServerDiedError,
    MCPServerDisabledError,
    MCPServerStartupError,
    MCPToolCallError,
)

__all__ = [
    "MCPConfigError",
    "MCPError",
    "MCPServerDiedError",
    "MCPServerDisabledError",
    "MCPServerStartupError",
    "MCPToolCallError",
]
