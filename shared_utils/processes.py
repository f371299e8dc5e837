"""Child processes that end with the process that started them, even when it is killed outright."""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable, Iterator

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_PR_SET_CHILD_SUBREAPER = 36


def _load_prctl() -> Callable[..., int] | None:
    # Looked up once in the parent: after fork, only the call itself runs (no dlopen, no locks).
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None  # not Linux: the parent's signal handlers and finally-block still stop children


_PRCTL = _load_prctl()


def die_with_parent(parent: int, signum: int = signal.SIGKILL) -> None:
    """A ``preexec_fn``: runs in the child between fork and exec, so the kernel sends it ``signum``
    when the parent dies, even by SIGKILL (Linux). ``functools.partial(die_with_parent, os.getpid())``.
    SIGKILL by default: a child that handles SIGTERM (an episode finishing its turn) could wait on a
    model for minutes, for an owner that is gone."""
    if _PRCTL is None:
        return
    _PRCTL(_PR_SET_PDEATHSIG, int(signum))
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def set_child_subreaper(on: bool) -> None:
    """This process becomes (or stops being) the reaper of its orphaned descendants (Linux): their
    exit statuses come to it when the process between them dies."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_CHILD_SUBREAPER, int(on))


def reaped() -> Iterator[tuple[int, int]]:
    """Every child that has ended, reaped without waiting: (pid, exit code), negative for the signal
    that killed it. Ends when no ended child is left (or there is no child at all)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, os.waitstatus_to_exitcode(status)
