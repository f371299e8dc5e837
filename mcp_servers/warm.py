"""The warm parent of a run's shipped MCP servers: fresh servers at the cost of a fork.

With ``session_lifetime = "turn"`` every turn starts a fresh server, and a fresh Python server
spends most of its start importing the MCP SDK (~0.75 s of CPU). For a run whose MCP config starts
a shipped server through the launcher (``python -m mcp_servers.launch thoughtbox``), ZorkGPT starts
one warm parent per run (``warm_parent``): a process that imported those servers once and then
forks one per launcher request. Each forked server is a new process, so it starts with the
state a fresh start has (nothing of any earlier turn), in its own session and process group,
on the launcher's own stdin, stdout and stderr, with the launcher's environment and folder.

What ends a forked server, besides its own exit when its stdin closes:

* its launcher's connection closing (the client ended the launcher's group, the sweeper ended
  it, or the episode that started it was killed): SIGKILL to the server's group at once;
* the warm parent ending (the run closed it, or the run died: the parent dies with the run, even
  by SIGKILL): the kernel sends each server SIGKILL (``die_with_parent``).

Linux only (``SCM_RIGHTS`` over an abstract Unix socket, ``PR_SET_PDEATHSIG``): elsewhere no warm
parent is started and the launcher starts each server the ordinary way.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mcp_servers.launch import MESSAGE_BYTES, SERVERS, WARM_ENV_VAR
from shared_utils.processes import die_with_parent, reaped

AVAILABLE = sys.platform.startswith("linux") and hasattr(socket, "send_fds")
_REPO_ROOT = Path(__file__).resolve().parent.parent
_LAUNCHER_MODULE = "mcp_servers.launch"
_CLOSE_WAIT_SECONDS = 10.0


def launched_servers(config_file: Path) -> list[str]:
    """The shipped servers that ``config_file``'s entries start through the launcher, in order.

    Read with the standard library only, so the run's parent need not import the MCP client: a
    file that does not read as such names none here, and the MCP client reports what is wrong
    with it when it loads it."""
    try:
        data = json.loads(config_file.read_text(encoding="utf-8"))
        entries = data.get("mcpServers", data.get("servers", {}))  # VS Code writes "servers"
    except (OSError, ValueError, AttributeError, RecursionError):  # RecursionError: nested too deep
        return []
    names: list[str] = []
    for entry in entries.values() if isinstance(entries, dict) else ():
        name = launcher_target(entry.get("args") if isinstance(entry, dict) else None)
        if name is not None and name not in names:
            names.append(name)
    return names


def launcher_target(args: Any) -> str | None:
    """The server a command line's arguments ask the launcher for (``-m mcp_servers.launch NAME``)."""
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        return None
    for index in range(len(args) - 2):
        if args[index] == "-m" and args[index + 1] == _LAUNCHER_MODULE:
            return args[index + 2] if args[index + 2] in SERVERS else None
    return None


@contextlib.contextmanager
def warm_parent(servers: Sequence[str]) -> Iterator[str | None]:
    """Run a warm parent for ``servers`` while the block runs; its address is in
    ``MCP_SERVERS_WARM_PARENT`` meanwhile, which every process started after (the run's episodes,
    their launchers) inherits.

    Yields None, starting nothing, when there is nothing to serve, the system cannot, or an outer
    run already has one (an episode of a parallel run uses its run's)."""
    if not servers or not AVAILABLE or os.environ.get(WARM_ENV_VAR):
        yield None
        return
    address = f"zorkgpt-mcp-{uuid.uuid4().hex}"
    # Listening before the parent starts: a launcher that comes while the parent still imports
    # waits in the backlog instead of finding nobody there.
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        listener.bind("\0" + address)
        listener.listen(128)
        process = subprocess.Popen(
            [sys.executable, "-m", "mcp_servers.warm", str(listener.fileno()), *servers],
            pass_fds=[listener.fileno()],
            stdin=subprocess.PIPE,  # our end closing (or our death) tells it to end
            stdout=subprocess.DEVNULL,
            cwd=_REPO_ROOT,
            start_new_session=True,
            preexec_fn=functools.partial(die_with_parent, os.getpid(), signal.SIGKILL),
        )
    finally:
        listener.close()
    os.environ[WARM_ENV_VAR] = address
    try:
        yield address
    finally:
        os.environ.pop(WARM_ENV_VAR, None)
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(_CLOSE_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def serve(listener_fd: int, servers: Sequence[str]) -> None:
    """The warm parent's loop (``python -m mcp_servers.warm FD SERVER...``): import the servers,
    then fork one per request until stdin reaches end-of-file; then end every server still running."""
    modules = {name: importlib.import_module(SERVERS[name]) for name in servers}
    for module in modules.values():
        # A server that imports its SDK lazily says what a session imports, so no fork pays for it.
        warm_up = getattr(module, "warm_up", None)
        if warm_up is not None:
            warm_up()
    # Frozen, the collector of a forked server never walks what was imported here, so those pages
    # stay shared with the parent and each collection is cheap.
    gc.freeze()
    listener = socket.socket(fileno=listener_fd)
    wake_r, wake_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes the loop through the pipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run's Ctrl-C is the run's
    signal.set_wakeup_fd(wake_w)
    own_uid = os.getuid()
    by_pid: dict[int, socket.socket] = {}  # each live server's launcher connection
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, "listener")
    selector.register(0, selectors.EVENT_READ, "lifeline")
    selector.register(wake_r, selectors.EVENT_READ, "children")
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "lifeline":
                    if not os.read(0, 4096):
                        return  # the run is over
                elif key.data == "children":
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
                    _report_exits(selector, by_pid)
                elif key.data == "listener":
                    with contextlib.suppress(BlockingIOError, InterruptedError):
                        channel, _ = listener.accept()
                        if _peer_uid(channel) != own_uid:  # an abstract socket is reachable by every user
                            channel.close()
                        else:
                            selector.register(channel, selectors.EVENT_READ, "request")
                elif key.data == "request":
                    channel = key.fileobj
                    assert isinstance(channel, socket.socket)
                    selector.unregister(channel)
                    pid = _fork_server(channel, modules, selector, (listener, wake_r, wake_w, *by_pid.values()))
                    if pid is None:
                        channel.close()
                    else:
                        by_pid[pid] = channel
                        selector.register(channel, selectors.EVENT_READ, pid)
                else:  # a launcher's connection closed: its server ends now
                    pid = key.data
                    channel = by_pid.pop(pid)
                    selector.unregister(channel)
                    channel.close()
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(pid, signal.SIGKILL)
    finally:
        for pid in by_pid:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)


def _peer_uid(channel: socket.socket) -> int:
    creds = channel.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


def _fork_server(
    channel: socket.socket,
    modules: dict[str, Any],
    selector: selectors.BaseSelector,
    inherited: tuple[Any, ...],
) -> int | None:
    """Fork the server one request asks for; its pid, or None for a request not served (the
    launcher then starts the server itself)."""
    try:
        message, fds, _, _ = socket.recv_fds(channel, MESSAGE_BYTES, 3)
        request = json.loads(message) if message else None
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"ZorkGPT's MCP warm parent: a launcher's request could not be read ({exc})\n")
        return None
    if request is None or len(fds) != 3 or request.get("server") not in modules:
        for fd in fds:
            os.close(fd)
        return None
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            selector.close()
            for own in inherited:
                os.close(own) if isinstance(own, int) else own.close()
            channel.close()
            _become_server(parent, fds, request, modules[request["server"]])
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except BaseException:  # noqa: BLE001 - a forked server must never return into the parent's loop
            import traceback

            traceback.print_exc()
            code = 1
        else:
            code = 0
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)
    for fd in fds:
        os.close(fd)
    channel.send(json.dumps({"pid": pid}).encode())
    return pid


def _become_server(parent: int, fds: list[int], request: dict[str, Any], module: Any) -> None:
    """In a freshly forked child: what a fresh start of the server would be, then the server."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setsid()
    die_with_parent(parent, signal.SIGKILL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.argv = [module.__file__, *request["args"]]
    module.main(list(request["args"]))


def _report_exits(selector: selectors.BaseSelector, by_pid: dict[int, socket.socket]) -> None:
    """Reap every ended server and tell its launcher how it ended (negative: the signal that killed it)."""
    for pid, code in reaped():
        channel = by_pid.pop(pid, None)
        if channel is not None:  # else its launcher is gone already
            selector.unregister(channel)
            with contextlib.suppress(OSError):
                channel.send(json.dumps({"exit": code}).encode())
            channel.close()


if __name__ == "__main__":
    serve(int(sys.argv[1]), sys.argv[2:])
