"""The event loop that owns every MCP session, on its own thread.

Sessions must outlive one turn (``episode`` lifetime, servers started ahead for the coming
turns), but the agent runs each turn inside its own ``asyncio.run``, whose loop closes at
the end of the turn. So one daemon thread runs one event loop for the whole episode; every
source is connected, used and closed on it, and the agent's code hands it coroutines
(``submit`` from sync code, ``run`` from another event loop). The model's blocking HTTP
call runs on the agent's thread, so server notifications, pings and servers starting for
the coming turns never wait for the model.

Stop signals (Ctrl-C, SIGTERM) belong to the program's main thread: Python runs their handlers
there, and only when it runs code. The kernel hands a signal sent to the process to any thread
that does not block it, so this thread blocks them (and the threads it starts, asyncio's process
watchers among them, inherit that), and ``call`` waits in short slices: a main thread waiting on
a server that never answers still sees Ctrl-C at once, whichever thread the kernel chose. A process
keeps its starting thread's mask across exec, so a server is started inside ``stop_signals_unblocked``:
started with them blocked, it would ignore the SIGTERM that ends its process group.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
import threading
import time
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from session.stop_signals import STOP_SIGNALS

T = TypeVar("T")

# How often a waiting main thread wakes to run a stop signal's handler that another thread received.
_WAKE_SECONDS = 0.2
# Per thread: how many starts are under way inside ``stop_signals_unblocked``, and whether the
# thread blocked the stop signals before the first (the session loop's does; another caller's may not).
_unblocking = threading.local()


@contextmanager
def stop_signals_unblocked() -> Iterator[None]:
    """Ctrl-C and SIGTERM unblocked on this thread while a process starts, so the process gets them.

    Starts on one event loop may overlap (a start suspends between unblocking and returning), so the
    thread's mask is put back only when the last one ends, and only if it blocked them before."""
    depth = getattr(_unblocking, "depth", 0)
    if depth == 0:
        before = signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        _unblocking.blocked = set(STOP_SIGNALS) & set(before)
    _unblocking.depth = depth + 1
    try:
        yield
    finally:
        _unblocking.depth -= 1
        if _unblocking.depth == 0 and _unblocking.blocked:
            signal.pthread_sigmask(signal.SIG_BLOCK, _unblocking.blocked)


class SessionLoop:
    """One background thread running one event loop (see the module docstring)."""

    def __init__(self, name: str = "zorkgpt-mcp") -> None:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def is_running(self) -> bool:
        return self._thread.is_alive() and not self._loop.is_closed()

    def _serve(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        asyncio.set_event_loop(self._loop)
        self._loop.call_soon(self._ready.set)
        try:
            self._loop.run_forever()
        finally:
            # Whatever is still pending was abandoned by stop(); cancel it and let it unwind.
            pending = [task for task in asyncio.all_tasks(self._loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the session loop; the future settles when it has run."""
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("SessionLoop.submit() called from the session loop itself; await the coroutine.")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the session loop and wait for its result (from sync code). An interrupt
        (Ctrl-C) or the timeout cancels the coroutine there too: nothing goes on unwatched."""
        future = self.submit(coro)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while not future.done():
                remaining = _WAKE_SECONDS if deadline is None else min(_WAKE_SECONDS, deadline - time.monotonic())
                if remaining <= 0:
                    raise TimeoutError(f"the session loop's call took over {timeout} s")
                concurrent.futures.wait((future,), timeout=remaining)
            return future.result()
        except BaseException:
            future.cancel()
            raise

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the session loop and await it from another event loop.

        Cancelling the awaiting task cancels the coroutine on the session loop too.
        """
        return await asyncio.wrap_future(self.submit(coro))

    def stop(self) -> None:
        """Stop the loop and join the thread. Close the sessions first (with ``call``)."""
        if self._loop.is_closed():
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
