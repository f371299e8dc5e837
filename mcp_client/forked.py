"""A shipped server forked by the run's warm parent, asked for directly instead of through its launcher.

The shipped servers are configured as ``python -m mcp_servers.launch NAME``: that launcher hands
its stdin, stdout and stderr to the run's warm parent (``mcp_servers/warm.py``), which forks a
fresh server onto them. Starting the launcher is an interpreter start every turn (~20 ms of CPU,
as much as the forked server's whole session), so the stdio transport does what the launcher
would do itself: it makes the server's pipes, sends them with the launcher's request (the same
arguments, environment and folder it would have had), and reads the server's pid and, later, its
exit status from the same connection. The server is what the launcher would have got: a new
process in its own session and process group, on pipes of its own, ended by its group as any
stdio server is. Keeping the connection open is what keeps it alive: the warm parent ends the
server the moment the connection closes, which the kernel does when this process dies, however
it dies.

When the warm parent does not take the request (gone, or refusing it), the transport starts the
launcher as configured, which starts the server the ordinary way.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
from typing import IO

import anyio
from mcp import StdioServerParameters

from mcp_client.config import LAUNCHER_MODULE

# mcp_servers/launch.py's request size: the server's arguments, environment and folder.
_MESSAGE_BYTES = 1 << 20


class _Pipe:
    """One end of a pipe to the server, closed as the transport closes a process's streams."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    async def aclose(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            anyio.notify_closing(fd)  # wakes a task waiting on it, which then finds it closed
            os.close(fd)


class _PipeReader(_Pipe):
    """The server's stdout, as the transport reads a process's: ``receive`` and ``aclose``."""

    async def receive(self, max_bytes: int) -> bytes:
        while True:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            return data


class _PipeWriter(_Pipe):
    """The server's stdin, as the transport writes a process's: ``send`` and ``aclose``."""

    async def send(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._fd)


class ForkedServer:
    """A server the warm parent forked for us, read like the process the transport would have started."""

    def __init__(self, pid: int, channel: socket.socket, stdin: int, stdout: int) -> None:
        self.pid = pid  # also its process group's id: it leads a session of its own
        self.stdin = _PipeWriter(stdin)
        self.stdout = _PipeReader(stdout)
        self._channel = channel
        self._returncode: int | None = None

    @property
    def returncode(self) -> int | None:
        if self._returncode is None and self._channel.fileno() >= 0:
            try:
                reply = self._channel.recv(_MESSAGE_BYTES)
            except BlockingIOError:
                return None
            except OSError:
                reply = b""
            # No status and the connection gone: the warm parent died, and the server with it.
            self._returncode = int(json.loads(reply)["exit"]) if reply else -signal.SIGKILL
            self._channel.close()
        return self._returncode

    async def wait(self) -> int:
        while self.returncode is None:
            await anyio.wait_readable(self._channel)
        assert self._returncode is not None
        return self._returncode


async def fork_from_warm_parent(
    address: str, params: StdioServerParameters, env: dict[str, str], errlog: IO[bytes]
) -> ForkedServer | None:
    """Ask the warm parent at ``address`` for the server ``params`` would launch; None when it
    does not take the request (the caller then runs the launcher as configured)."""
    args = list(params.args)
    start = next(i for i in range(len(args) - 1) if args[i : i + 2] == ["-m", LAUNCHER_MODULE]) + 2
    if start >= len(args):
        return None  # the launcher will say what it lacks
    request = {"server": args[start], "args": args[start + 1 :], "env": env, "cwd": str(params.cwd or os.getcwd())}
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    reply = b""
    try:
        with contextlib.suppress(OSError):  # not taken: the launcher runs, and says why on stderr if it fails too
            channel.connect("\0" + address)
            socket.send_fds(channel, [json.dumps(request).encode()], [stdin_r, stdout_w, errlog.fileno()])
            channel.setblocking(False)
            reply = await _reply(channel)
    finally:
        for fd in (stdin_r, stdout_w):
            os.close(fd)  # the server holds its own copies
        if not reply:
            channel.close()
            for fd in (stdin_w, stdout_r):
                os.close(fd)
    if not reply:
        return None
    for fd in (stdin_w, stdout_r):
        os.set_blocking(fd, False)
    return ForkedServer(int(json.loads(reply)["pid"]), channel, stdin_w, stdout_r)


async def _reply(channel: socket.socket) -> bytes:
    while True:
        try:
            return channel.recv(_MESSAGE_BYTES)
        except BlockingIOError:
            # The parent may still be importing the server (a run's first turn).
            await anyio.wait_readable(channel)
