"""The sweeper: every process our stdio servers started ends with ZorkGPT, however ZorkGPT ends.

A closing session ends its server's whole process group (``transport_sources.py``). A ZorkGPT killed
outright (SIGKILL, the OOM killer) closes nothing: its servers see their stdin close and
usually exit, but what they started themselves (helpers in their group, or ones that left it)
runs on with nobody left to end it.

So while MCP sessions run, a small watcher process runs beside ZorkGPT: ``processes.py`` run as a
script, in the interpreter's isolated mode without site-packages, so it imports nothing of ours or the
SDK's (its start is about 15 ms of CPU, paid beside every MCP session). It holds the
read end of a pipe whose only write end ZorkGPT holds, and does nothing until that pipe
reports end-of-file, which the kernel does as soon as ZorkGPT is gone, however it went (or
when ``close()`` closes it on purpose, saying so first). Then it ends every process whose
environment carries ZorkGPT's owner marker (every server and everything they started
inherits it: ``transport_sources.py`` sets it), and the process group of each marked group leader (a
server, with helpers that dropped the variable), SIGTERM first and SIGKILL after a grace
period, and exits. After a death it keeps scanning until it has found nothing for a moment,
for a server ZorkGPT was forking just then; after ``close()`` one scan (normally empty) is enough.

Why a watcher rather than other ways:
- ``PR_SET_PDEATHSIG`` on the server kills only the server, not the helpers it started;
- recording the servers in a file for the next start to end leaves them running until a
  next start, which may never come.
The marker is a random token per MCP manager, so only processes of this ZorkGPT match, and a
recycled pid never does. It runs in its own session, so a terminal's Ctrl-C or hang-up, which
goes to ZorkGPT's whole process group, does not end it before ZorkGPT's own clean-up ran.
Linux only (it reads ``/proc``); elsewhere no watcher is started.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

from mcp_client import processes

OWNER_ENV_VAR = "ZORKGPT_MCP_OWNER"
_STOP_WAIT_SECONDS = 30.0


class Sweeper:
    """The watcher process for one owner marker (see the module docstring)."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @staticmethod
    def available() -> bool:
        return Path("/proc/self/environ").exists()

    def start(self) -> None:
        """Start the watcher (once); nothing happens on a system without ``/proc``."""
        if self._process is not None or not self.available():
            return
        env = {key: value for key, value in os.environ.items() if key != OWNER_ENV_VAR}
        self._process = subprocess.Popen(
            # Isolated and without site-packages: the watcher needs only the standard library.
            [sys.executable, "-I", "-S", processes.__file__, OWNER_ENV_VAR, self.owner],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )

    def stop(self) -> None:
        """Close the pipe (the watcher ends whatever is still marked, normally nothing) and wait for it."""
        process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None
        # A watcher already gone makes these fail; wait() below says so.
        with contextlib.suppress(BrokenPipeError):
            process.stdin.write(processes.CLOSING)
        with contextlib.suppress(BrokenPipeError):
            process.stdin.close()  # the pipe closes even when the flush fails
        try:
            process.wait(_STOP_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
