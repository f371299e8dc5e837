"""The MCP client: every server of mcp_config.json (stdio or remote) as one set of tools.

* ``config``: the config file in the shapes the common MCP clients write;
* ``source``: one server behind one transport (stdio, streamable HTTP, SSE);
* ``toolbox``: all servers together, names routed, failures kept per server;
* ``runtime``: the background event loop that owns every session;
* ``manager``: ``MCPManager``, what the agent and the orchestrator use;
* ``tools``: names, schemas and results between MCP and the chat API;
* ``tool_loop``: ``ToolLoop``, the agent's tool-calling loop over the manager;
* ``sweeper``: the watcher that ends every server when ZorkGPT is killed outright.
"""

from managers.mcp.config import MCPConfig, ServerConfig, ServerEntry, build_server_environment
from managers.mcp.manager import MCPManager
from managers.mcp.source import SSESource, StdioSource, StreamableHTTPSource, ToolSource
from managers.mcp.toolbox import Toolbox
from managers.mcp.tools import ToolCallResult
from session.errors import (
    MCPConfigError,
    MCPError,
    MCPServerDiedError,
    MCPServerStartupError,
    MCPToolCallError,
)

__all__ = [
    "MCPConfig",
    "MCPConfigError",
    "MCPError",
    "MCPManager",
    "MCPServerDiedError",
    "MCPServerStartupError",
    "MCPToolCallError",
    "SSESource",
    "ServerConfig",
    "ServerEntry",
    "StdioSource",
    "StreamableHTTPSource",
    "ToolCallResult",
    "ToolSource",
    "Toolbox",
    "build_server_environment",
]
