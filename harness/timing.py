"""One time scale for every wait the tests and benchmarks make.

A busy or slow machine (a shared CI runner, a laptop on battery) needs longer to start a process
or a server than the machine a bound was measured on. Rather than each test guessing, every bound
is written for an ordinary machine and multiplied by ``HARNESS_TIME_SCALE`` (default 1):
``HARNESS_TIME_SCALE=3`` triples every timeout at once: a slow machine gets longer before a
wait is called a failure, and a test that passes takes no longer for it (waits end as soon as
what they wait for happens). The name stays outside ``ZORKGPT_``, which main.py reserves for its
own settings and checks.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

TIME_SCALE_ENV = "HARNESS_TIME_SCALE"


def time_scale() -> float:
    """The factor from ``HARNESS_TIME_SCALE``; read on each call, so a test can set it."""
    text = os.environ.get(TIME_SCALE_ENV, "").strip()
    if not text:
        return 1.0
    try:
        scale = float(text)
    except ValueError:
        scale = 0.0
    if not scale > 0 or scale == float("inf"):
        raise ValueError(
            f"{TIME_SCALE_ENV}={text!r} is not a positive number: set it to how many times slower than "
            "an ordinary machine this one is (e.g. 2 or 3), or unset it for 1"
        )
    return scale


def scaled(seconds: float) -> float:
    """``seconds`` on this machine: the bound times the time scale."""
    return seconds * time_scale()


def wait_until(
    condition: Callable[[], T], timeout: float, interval: float = 0.05, stop_if: Callable[[], object] | None = None
) -> T:
    """Poll ``condition`` until it returns something truthy, for up to ``timeout`` seconds (scaled).

    Returns the condition's last value: truthy when it came, falsy when the time ran out or
    ``stop_if()`` held first (say, the process that should bring it about has exited), so the
    caller asserts on it with what it knows (a process's stderr, the pids left).
    """
    deadline = time.monotonic() + scaled(timeout)
    while not (result := condition()) and time.monotonic() < deadline and not (stop_if and stop_if()):
        time.sleep(interval)
    return result


async def wait_until_async(condition: Callable[[], Awaitable[T]], timeout: float, interval: float = 0.05) -> T:
    """``wait_until`` inside an event loop: ``condition`` is awaited, and the loop sleeps without blocking."""
    deadline = time.monotonic() + scaled(timeout)
    while not (result := await condition()) and time.monotonic() < deadline:
        await asyncio.sleep(interval)
    return result
