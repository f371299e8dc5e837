"""MCP servers that ship with ZorkGPT (run each with ``python -m mcp_servers.<name>``).

- ``host_check``: the Host and Origin names our HTTP servers answer to;
- ``http_mode``: serving a server over streamable HTTP or SSE;
- ``launch``: starts a shipped server, forked from the run's warm parent when there is one;
- ``thoughtbox_server``: one ``think`` tool for step-by-step reasoning;
- ``zork_game``: the Zork server's one game, its checkpoints, transcript and map;
- ``warm``: the run's warm parent, which forks a fresh shipped server per request;
- ``zork_server``: Zork I, II or III as an MCP server.
"""
