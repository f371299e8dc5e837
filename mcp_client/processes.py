"""Process hygiene: finding the processes our servers left and ending them, in one place.

Every stdio server is started as the leader of a new process group, with ZorkGPT's owner marker in
its environment (``VAR=token``), which everything it starts inherits. Two users end what is left:
a closing stdio source (``transport_sources.py``: the server's group, then any marked process that left it) and the
sweeper's watcher (``sweeper.py``), which runs this file as a script when ZorkGPT dies outright.

The watcher runs with the interpreter's isolated mode and no site-packages, so this module imports
only the standard library: nothing of ours, nothing of the SDK's. Linux only (it reads ``/proc``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

GRACE_SECONDS = 2.0  # after SIGTERM, before SIGKILL
GIVE_UP_SECONDS = 10.0  # a process that survives SIGKILL this long is stuck in the kernel
# After ZorkGPT died: how long scans must find nothing before the watcher is done, so a server
# ZorkGPT was starting at that moment (forked, not yet running with its marker) is caught too.
SETTLE_SECONDS = 0.5
CLOSING = b"closing\n"  # what the sweeper's stop() writes before closing the pipe: nothing died
_SWEEP_POLL_SECONDS = 0.05
_GROUP_POLL_SECONDS = 0.02


def marked_processes(variable: str, marker: str) -> list[int]:
    """Live processes (not this one) whose environment holds ``variable=marker``."""
    needle = f"{variable}={marker}".encode()
    own = os.getpid()
    try:
        entries = [entry.name for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    except OSError:
        return []
    found: list[int] = []
    for name in entries:
        if int(name) == own:
            continue
        try:
            environ = Path(f"/proc/{name}/environ").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        if needle in environ.split(b"\0"):
            found.append(int(name))
    return found


def signal_group(pgid: int, signum: int, group: bool = True) -> bool:
    """Send ``signum`` to the group ``pgid`` (``group=False``: the one process); False once nothing
    is left to signal, or what is left is not ours to signal."""
    try:
        if group:
            os.killpg(pgid, signum)
        else:
            os.kill(pgid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True


async def end_process_group(pgid: int, group: bool = True) -> None:
    """SIGTERM every process left in group ``pgid``, then SIGKILL what is still there after the grace
    period (``group=False``: the one process ``pgid``).

    The server was started as the leader of a new group (pgid == its pid); a group id cannot be
    reused while any member lives, so this reaches only what the server left behind.
    """
    # Imported here, not at the top: the watcher runs this file as a script beside every MCP
    # session, never needs it, and importing it was two thirds of the watcher's start (45 ms of CPU).
    import asyncio

    if not signal_group(pgid, signal.SIGTERM, group):
        return
    deadline = time.monotonic() + GRACE_SECONDS
    while time.monotonic() < deadline:
        await asyncio.sleep(_GROUP_POLL_SECONDS)
        if not signal_group(pgid, 0, group):
            return
    signal_group(pgid, signal.SIGKILL, group)


def sweep(variable: str, owner: str, settle: float = 0.0) -> int:
    """End every process marked ``variable=owner`` (and the groups they lead); how many were found.

    Done once scans have found nothing for ``settle`` seconds.
    """
    ended: set[int] = set()
    started = last_found = time.monotonic()
    while time.monotonic() - started < GIVE_UP_SECONDS:
        marked = marked_processes(variable, owner)
        if not marked:
            if time.monotonic() - last_found >= settle:
                break
            time.sleep(_SWEEP_POLL_SECONDS)
            continue
        last_found = time.monotonic()
        signum = signal.SIGTERM if time.monotonic() - started < GRACE_SECONDS else signal.SIGKILL
        for pid in marked:
            if pid not in ended or signum == signal.SIGKILL:
                _end(pid, signum)
            ended.add(pid)
        time.sleep(_SWEEP_POLL_SECONDS)
    return len(ended)


def _end(pid: int, signum: int) -> None:
    """A group leader (a server) gets the signal with its whole group; any other process alone."""
    try:
        leader = os.getpgid(pid) == pid
    except ProcessLookupError:  # gone meanwhile
        return
    signal_group(pid, signum, group=leader)


def watch(variable: str, owner: str) -> int:
    """The watcher: wait for the pipe from ZorkGPT to close, then sweep (see ``sweeper.py``)."""
    # Only end-of-file counts: the owner's whole group may get a Ctrl-C or hang-up meant for it.
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_IGN)
    received = b""
    while chunk := sys.stdin.buffer.read(65536):
        received += chunk
    # Closed by stop(): every session has ended, one scan is enough. Else ZorkGPT died.
    count = sweep(variable, owner, settle=0.0 if received.endswith(CLOSING) else SETTLE_SECONDS)
    if count:
        sys.stderr.write(f"ZorkGPT: ended {count} MCP server process(es) left running when ZorkGPT stopped.\n")
    return 0


if __name__ == "__main__":
    sys.exit(watch(*sys.argv[1:]))
