"""Serving our MCP servers over HTTP: ``--http PORT`` (streamable HTTP) or ``--sse PORT`` (HTTP+SSE).

The socket is bound before anything else, so ``--http 0`` picks a free port, and the line
``MCP server '<name>' listening on <url>`` on stderr means clients can connect now. The
server binds 127.0.0.1 unless ``--host`` says otherwise: it has no authentication, so
exposing it beyond this machine is a deliberate choice, and it says so on stderr. Wherever it is
bound it answers only requests addressed to the names ``host_check`` allows (``--allow-host`` adds
more), so a web page cannot reach it through DNS rebinding.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from typing import Any

from mcp_servers.host_check import HostCheck, HostCheckMiddleware, add_allow_host_argument

DEFAULT_HOST = "127.0.0.1"


def add_http_arguments(parser: argparse.ArgumentParser) -> None:
    """``--http PORT``, ``--sse PORT`` and ``--host HOST`` (stdio when neither port is given)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT (0: any free port)")
    group.add_argument("--sse", type=int, metavar="PORT", help="serve the older HTTP+SSE transport on PORT")
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"address to bind with --http/--sse (default {DEFAULT_HOST}: this machine only; there is no password)",
    )
    add_allow_host_argument(parser)


def run(server: Any, args: argparse.Namespace) -> None:
    """Serve ``server`` (an MCPServer) as the arguments say: stdio, streamable HTTP or SSE."""
    if args.http is None and args.sse is None:
        server.run("stdio")
        return
    port = args.http if args.http is not None else args.sse
    asyncio.run(_serve_http(server, HostCheck.for_bind(args.host, args.allow_host), port, args.sse is not None))


async def _serve_http(server: Any, check: HostCheck, port: int, sse: bool) -> None:
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    host = check.bind
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sys.exit(f"error: cannot listen on {host}:{port}: {exc.strerror}. Choose another port with --http/--sse.")
    sock.listen(128)
    sock.setblocking(False)
    bound = sock.getsockname()[1]
    # The SDK checks Host only on loopback binds, and then only for the loopback names: HostCheckMiddleware
    # checks every bind (with the names this one is reached by), so the SDK's own check is off.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    if sse:
        app = server.sse_app(host=host, transport_security=security)
        path = "/sse"
    else:
        app = server.streamable_http_app(host=host, transport_security=security)
        path = "/mcp"
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    config = uvicorn.Config(HostCheckMiddleware(app, check), log_level="warning", lifespan="on")
    if check.beyond_loopback:
        warning = check.exposure_warning(f"MCP server '{server.name}'", bound, "call its tools")
        print(warning, file=sys.stderr, flush=True)
    # Said only now: the socket listens, so a client connecting after this line is queued, not refused.
    print(f"MCP server '{server.name}' listening on http://{shown}:{bound}{path}", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])
