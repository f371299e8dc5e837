"""MCP servers and helpers used only by the MCP tests: real subprocesses that misbehave on purpose."""
