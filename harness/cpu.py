"""CPU time as the benchmarks count it, in seconds: a live process's from ``/proc/<pid>/stat``, this
process's and its reaped children's from ``getrusage``. One reader, so every benchmark counts the same way.

``/proc/<pid>/stat`` gives four times: the process's own user and system time (``process_cpu``) and
those of the children it has reaped (``reaped_cpu``); ``family_cpu`` is all four. A forked server's
parent reaps every child it forks, so its family's time is what the children cost, gone or not.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

# The unit of /proc/<pid>/stat's times; where sysconf is missing there is no /proc to read either.
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_times(pid: int) -> list[float]:
    """utime, stime, cutime and cstime of ``pid``, in seconds. The fields are counted after the
    command's closing parenthesis, since a command's name may hold spaces or parentheses itself."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return [int(value) / TICKS for value in fields[11:15]]


def process_cpu(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used itself; ``OSError`` once it is gone."""
    return sum(_stat_times(pid)[:2])


def reaped_cpu(pid: int) -> float:
    """CPU seconds of the children ``pid`` has reaped (cutime + cstime)."""
    return sum(_stat_times(pid)[2:])


def family_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and of the children it has reaped."""
    return sum(_stat_times(pid))


def cpu_while_alive(pid: int, *, with_reaped: bool = False) -> float | None:
    """``process_cpu`` (``with_reaped``: ``family_cpu``) of a process that may have ended, or where
    ``/proc`` is not there: None then, for a sampler that keeps the last figure it read."""
    try:
        return family_cpu(pid) if with_reaped else process_cpu(pid)
    except OSError:
        return None


def usage_cpu(usage: resource.struct_rusage) -> float:
    """User + system CPU seconds of a ``getrusage`` or ``os.wait4`` answer."""
    return usage.ru_utime + usage.ru_stime


def self_cpu() -> float:
    """CPU seconds this process has used."""
    return usage_cpu(resource.getrusage(resource.RUSAGE_SELF))


def children_cpu() -> float:
    """CPU seconds of every child of this process reaped so far."""
    return usage_cpu(resource.getrusage(resource.RUSAGE_CHILDREN))


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
