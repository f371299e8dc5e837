"""MCP servers that ship with ZorkGPT (run each with ``python -m mcp_servers.<name>``)."""
