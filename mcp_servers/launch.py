"""Start one of the servers ZorkGPT ships, forked from the run's warm parent when there is one.

``python -m mcp_servers.launch thoughtbox [ARGS...]`` (or ``zork``) is an ordinary stdio command: an
MCP client starts it like any server and talks MCP on its stdin and stdout. When the environment
names a warm parent (``MCP_SERVERS_WARM_PARENT``, set by ZorkGPT for its run: ``mcp_servers/warm.py``),
this launcher hands its own stdin, stdout and stderr to that parent over a Unix socket
(``SCM_RIGHTS``); the parent, which imported the server once, forks a fresh server onto them, and
the launcher waits for the server to end and exits with its exit code. Without a warm parent (run
by hand, by another MCP client, by ``main.py --check``), or when the parent does not answer, it
becomes the server itself (``python -m mcp_servers.<server>``): slower, never different.

Why a launcher on the config's ``command``: the entry stays an ordinary stdio command that any
MCP client can run (and that starts the server the ordinary way wherever there is no warm
parent), and turning the forking off is writing ``-m mcp_servers.thoughtbox_server`` instead.
ZorkGPT's own client does not start this launcher when the run has a warm parent: it sends the
parent the same request itself (``mcp_client/forked.py``), saving an interpreter start per turn.
A server forked for this launcher is not in the launcher's process group, so it is bound to the
launcher instead: the warm parent ends it the moment the launcher's connection closes (the
launcher ended, was signalled or was killed), and it dies with the warm parent, which dies with
ZorkGPT.

Only the standard library is imported here: where the launcher runs, its start is paid every turn.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

WARM_ENV_VAR = "MCP_SERVERS_WARM_PARENT"
# The servers a warm parent can fork: the name in the launcher's arguments, and its module.
SERVERS = {"thoughtbox": "mcp_servers.thoughtbox_server", "zork": "mcp_servers.zork_server"}
MESSAGE_BYTES = 1 << 20  # one request: the server's arguments, environment and folder


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in SERVERS:
        sys.stderr.write(
            f"usage: python -m mcp_servers.launch {{{','.join(SERVERS)}}} [ARGS...]: the server to start "
            f"(got {argv[0] if argv else 'nothing'!r})\n"
        )
        return 2
    name, args = argv[0], argv[1:]
    channel = _ask_warm_parent(name, args)
    if channel is None:
        # No warm parent, or one that did not take the request: this process becomes the server.
        os.execv(sys.executable, [sys.executable, "-m", SERVERS[name], *args])
    # The server holds its own copies now: its stdout must reach end-of-file when it ends, not when we do.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    with channel:
        reply = channel.recv(MESSAGE_BYTES)
    if not reply:
        sys.stderr.write(f"mcp_servers.launch: the warm parent ended before the '{name}' server did\n")
        return 1
    code = int(json.loads(reply)["exit"])
    # Killed by a signal: exit as a shell reports it (128 + its number).
    return 128 - code if code < 0 else code


def _ask_warm_parent(name: str, args: list[str]) -> socket.socket | None:
    """Hand our stdio to the warm parent; the connection once it forked the server, else None."""
    address = os.environ.get(WARM_ENV_VAR)
    if not address:
        return None
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        channel.connect("\0" + address)
        request = {"server": name, "args": args, "env": dict(os.environ), "cwd": os.getcwd()}
        socket.send_fds(channel, [json.dumps(request).encode()], [0, 1, 2])
        reply = channel.recv(MESSAGE_BYTES)
    except OSError as exc:
        sys.stderr.write(f"mcp_servers.launch: the warm parent did not answer ({exc}); starting '{name}' here\n")
        channel.close()
        return None
    if not reply:  # it refused the request before forking: the server is ours to start
        channel.close()
        return None
    return channel


if __name__ == "__main__":
    # The client ends a server by signalling its group: the default actions apply (the warm parent
    # then ends the forked server, whose connection closed).
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(main(sys.argv[1:]))
