"""Stopping a run from outside: Ctrl-C (SIGINT) and SIGTERM (systemd, ``docker stop``, CI).

The first signal asks the episode to stop after the turn it is playing: the turn finishes,
the summary is written, and ``main.py`` exits 0. The same signal again within
``REPEAT_WINDOW_SECONDS`` is the same request: ``uv run`` forwards a terminal's Ctrl-C to
its child a second time a moment later, and a hurried double press means the same thing.
A signal after that window aborts at once: ``UserAbort`` is raised wherever the program
is (a model call, a tool server starting), the episode is still recorded as stopped, and
``main.py`` exits 128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM).

Except while the episode waits on a tool server (its tools being readied, a tool call): a
server that never answers would make "after the turn" never come, so the first signal then
aborts at once, as a second would.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from types import FrameType

REPEAT_WINDOW_SECONDS = 1.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class UserAbort(KeyboardInterrupt):
    """A second stop signal: leave now. A ``KeyboardInterrupt``, so code that already cleans
    up after Ctrl-C (``finally`` blocks, asyncio's shutdown of a turn's tasks) does so here."""

    def __init__(self, signum: int, waiting: str | None = None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.waiting = waiting  # what the first signal interrupted (a tool server), None for a second signal

    @property
    def description(self) -> str:
        """What ended the run, for the user."""
        name = signal.Signals(self.signum).name
        return f"{name} while waiting on {self.waiting}" if self.waiting else f"a second {name}"

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number."""
        return 128 + self.signum


class StopSignals:
    """Handles SIGINT and SIGTERM for one run of ``main.py`` (see the module docstring).

    ``on_stop`` runs once, at the first signal: it tells the episode being played to stop
    after its turn. ``stop_requested`` stays true, so an episode that has not started yet
    learns it too.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.signum: int | None = None
        self.on_stop: Callable[[], None] | None = None
        # Where the acknowledgement goes when the terminal has a live status, which would redraw
        # over a line written under it; it must only store the text (it runs in the handler).
        self.on_notice: Callable[[str], None] | None = None
        # What the episode waits on now that a signal should not wait for (a tool server), or None.
        self.waiting: Callable[[], str | None] | None = None
        self._acted_at = 0.0
        self._previous: dict[int, object] = {}

    @property
    def stop_requested(self) -> bool:
        return self.signum is not None

    def install(self) -> None:
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        now = self.clock()
        if self.signum is not None and now - self._acted_at < REPEAT_WINDOW_SECONDS:
            return  # the same request, repeated (uv's forward, a double press)
        self._acted_at = now
        if self.signum is None:
            self.signum = signum
            waiting = self.waiting() if self.waiting is not None else None
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            notice = (
                f"{name}: stopping now (the turn was waiting on {waiting})..."
                if waiting
                else f"{name}: stopping after this turn (send it again to abort now)..."
            )
            if self.on_notice is not None:
                self.on_notice(notice)
            else:
                _say(f"\n{notice}\n")
            if self.on_stop is not None:
                self.on_stop()
            if waiting:
                raise UserAbort(signum, waiting)
            return
        raise UserAbort(signum)

    def ignore(self) -> None:
        """After an abort has been handled: later signals must not interrupt the exit."""
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


class _StopSignalError(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def wait_for_stop(block: Callable[[], object], announce: Callable[[], None] = lambda: None) -> int | None:
    """Run ``block``, something that waits (a server's thread), until Ctrl-C or SIGTERM ends the
    wait; the signal's number, or None when ``block`` returned by itself. For the end of a process
    that outlives its work, such as ``main.py --view`` serving after its run: the first signal ends
    the wait, and every later one is ignored, so a repeat (uv forwards a terminal's Ctrl-C a second
    time) cannot interrupt the exit. ``announce`` tells the user how to stop it, once a signal
    would do so (said earlier, a quick Ctrl-C would reach the previous handler instead)."""

    def stop(signum: int, frame: FrameType | None) -> None:
        for each in STOP_SIGNALS:
            signal.signal(each, signal.SIG_IGN)
        raise _StopSignalError(signum)

    try:
        for signum in STOP_SIGNALS:
            signal.signal(signum, stop)
        announce()
        block()
    except _StopSignalError as stopped:
        return stopped.signum
    return None


def _say(text: str) -> None:
    """Write to stderr without Python's buffered stream: the handler may run while the main
    code is inside a write to ``sys.stderr``, and a reentrant write there raises."""
    with contextlib.suppress(OSError):  # stderr closed (a detached run): stop without the message
        os.write(2, text.encode("utf-8", "replace"))
