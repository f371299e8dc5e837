"""Serving our MCP servers over HTTP: ``--http PORT`` (streamable HTTP) or ``--sse PORT`` (HTTP+SSE).

The socket is bound before anything else, so ``--http 0`` picks a free port, and the line
``MCP server '<name>' listening on <url>`` on stderr means clients can connect now. The
server binds 127.0.0.1 unless ``--host`` says otherwise: it has no authentication, so
exposing it beyond this machine is a deliberate choice.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from typing import Any

DEFAULT_HOST = "127.0.0.1"


def add_http_arguments(parser: argparse.ArgumentParser) -> None:
    """``--http PORT``, ``--sse PORT`` and ``--host HOST`` (stdio when neither port is given)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--http", type=int, metavar="PORT", help="serve streamable HTTP on PORT (0: any free port)")
    group.add_argument("--sse", type=int, metavar="PORT", help="serve the older HTTP+SSE transport on PORT")
    parser.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to bind with --http/--sse (default {DEFAULT_HOST})"
    )


def run(server: Any, args: argparse.Namespace) -> None:
    """Serve ``server`` (an MCPServer) as the arguments say: stdio, streamable HTTP or SSE."""
    if args.http is None and args.sse is None:
        server.run("stdio")
        return
    asyncio.run(_serve_http(server, args.host, args.http if args.http is not None else args.sse, args.sse is not None))


async def _serve_http(server: Any, host: str, port: int, sse: bool) -> None:
    import uvicorn

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
    if sse:
        app = server.sse_app(host=host)
        path = "/sse"
    else:
        app = server.streamable_http_app(host=host)
        path = "/mcp"
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    # Said only now: the socket listens, so a client connecting after this line is queued, not refused.
    print(f"MCP server '{server.name}' listening on http://{shown}:{bound}{path}", file=sys.stderr, flush=True)
    await uvicorn.Server(config).serve(sockets=[sock])
