"""The MCP client: every server of mcp_config.json (stdio or remote) as one set of tools.

Importing the package imports none of its modules (and not the MCP SDK): each is imported where
it is used, so what needs one module (the config's secrets, the sweeper) loads only that one.

- ``config``: the config file in the shapes the common MCP clients write, validated;
- ``processes``: process hygiene: the owner-marker scan, group signals, the sweep (standard library only);
- ``sweeper``: the watcher that ends every server when ZorkGPT is killed outright;
- ``runtime``: the background event loop that owns every session;
- ``server_requests``: answers to what a server asks (forms, completions), capped per turn;
- ``http``: the bounded HTTP client of remote servers;
- ``results``: a tool result without ``resultType`` read as complete;
- ``tokens``: where logins live: one token file per remote server, checked before it is trusted;
- ``oauth``: a remote server's OAuth as an episode uses it, unattended (the providers, https unless loopback);
- ``login``: ``main.py --mcp-login NAME``, the one place a person logs in;
- ``forked``: a shipped server asked of the run's warm parent, without starting its launcher;
- ``stdio``: our bounded stdio transport;
- ``source``: one server behind one transport: connect, list, call, close, whatever the transport;
- ``transport_sources``: each transport's source (stdio, streamable HTTP, SSE) and ``make_source``;
- ``tools``: names, schemas and results between MCP and the chat API, converted into the tool loop's shapes;
- ``resources``: a server's resources offered as two read-only tools;
- ``prompts``: the prompts an entry names, fetched for the agent's system prompt;
- ``server_rules``: the per-server rules: the first start fails the run, later one retry, then disabled;
- ``toolbox``: all servers together: lifetimes, health rules, names routed, the cap on tools offered.
"""
