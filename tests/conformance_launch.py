"""The conformance suite's client, forked from a parent that imported it once.

``conformance client --command CMD`` runs ``CMD <server-url>`` once per scenario, some seventy times
a suite run, and each start of a client script imports the project and the MCP SDK: about a second
of CPU before the scenario's first byte, most of what a scenario costs. So the tests give the suite
this launcher as the command. ``--serve ADDRESS SCRIPT`` is the warm parent (started once per test
module by ``conformance_support.warm_client``): it imports ``SCRIPT`` as a module and waits on a Unix
socket. Run as ``python -I conformance_launch.py ADDRESS SCRIPT <server-url>``, the launcher hands
its stdin, stdout, stderr, arguments, environment and folder to that parent (``SCM_RIGHTS``), which
forks a child that calls ``SCRIPT``'s ``main(argv)`` on them: what the suite would have got from
``python SCRIPT <server-url>``, but the imports. The launcher exits with the child's exit status.
When the parent does not answer, the launcher runs ``SCRIPT`` itself, as the suite would have.

The child leads a process group of its own, which the parent kills when the launcher's connection
closes (the suite gave up on the client and killed it). The parent ends, killing what it forked,
when its stdin closes: the test module is done, or the test process died.

Only the standard library is imported at the top: the launcher's start is paid every scenario.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys

_MESSAGE_BYTES = 1 << 20  # one request: the arguments, the environment and the folder
_REAP_SECONDS = 0.05


def launch(address: str, script: str, args: list[str]) -> int:
    """The launcher: the client's run through the warm parent at ``address``, its exit status."""
    request = {"argv": [script, *args], "env": dict(os.environ), "cwd": os.getcwd()}
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        channel.connect("\0" + address)
        socket.send_fds(channel, [json.dumps(request).encode()], [0, 1, 2])
    except OSError:
        channel.close()
        os.execv(sys.executable, [sys.executable, script, *args])  # no warm parent: as the suite would run it
    reply = b""
    while chunk := channel.recv(4096):
        reply += chunk
    return int(json.loads(reply)["exit"]) if reply else 1


def serve(address: str, script: str) -> None:
    """The warm parent: import ``script`` once, then fork a child per launcher (see the module docstring)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("conformance_client", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import would: dataclasses look their module up there
    spec.loader.exec_module(module)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + address)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(sys.stdin, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        for key, _ in selector.select(timeout=_REAP_SECONDS):
            if key.fileobj is sys.stdin:
                if not os.read(0, 4096):  # the tests are done with it, or gone
                    for pid in children:
                        _kill_group(pid)
                    return
            elif key.fileobj is listener:
                connection, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(connection, _MESSAGE_BYTES, 3)
                pid = os.fork()
                if pid == 0:
                    _child(module, json.loads(message), fds)
                for fd in fds:
                    os.close(fd)
                children[pid] = connection
                selector.register(connection, selectors.EVENT_READ, pid)
            else:  # a launcher never writes after its request: this is its end, before its client's
                selector.unregister(key.fileobj)
                _kill_group(key.data)
        _reap(children, selector)


def _child(module: object, request: dict[str, object], fds: list[int]) -> None:
    """In the forked child: become the client the suite started, on the launcher's stdio, and exit."""
    import atexit
    import logging
    import traceback

    os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    code = 1
    try:
        os.chdir(str(request["cwd"]))
        environment = request["env"]
        assert isinstance(environment, dict)
        os.environ.clear()
        os.environ.update(environment)
        argv = request["argv"]
        assert isinstance(argv, list)
        sys.argv = argv
        code = module.main(argv)  # type: ignore[attr-defined]
        atexit._run_exitfuncs()  # what the interpreter's own exit would have run
        logging.shutdown()
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001 - reported as the interpreter would, on the client's stderr
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _reap(children: dict[int, socket.socket], selector: selectors.BaseSelector) -> None:
    """Tell each launcher whose child has exited its exit status."""
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        connection = children.pop(pid, None)
        if connection is None:
            continue
        if _registered(selector, connection):
            selector.unregister(connection)
        with contextlib.suppress(OSError):  # the launcher is gone already: nobody to tell
            connection.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
        connection.close()


def _registered(selector: selectors.BaseSelector, connection: socket.socket) -> bool:
    try:
        selector.get_key(connection)
    except KeyError:
        return False
    return True


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # gone already
        os.killpg(pid, signal.SIGKILL)


if __name__ == "__main__":
    if sys.argv[1] == "--serve":
        serve(sys.argv[2], sys.argv[3])
    else:
        sys.exit(launch(sys.argv[1], sys.argv[2], sys.argv[3:]))
