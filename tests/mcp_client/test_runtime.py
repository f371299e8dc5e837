"""The session loop's thread and a main thread waiting on it: a stop signal reaches the main thread's
handler at once, whichever thread the kernel hands it to (the signal is sent to a thread by hand here,
as the kernel may choose one under load)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import anyio
import pytest
from mcp import StdioServerParameters

from harness.timing import scaled
from mcp_client.runtime import SessionLoop
from mcp_client.stdio import stdio_transport


class StoppedError(Exception):
    pass


@pytest.fixture
def session_loop() -> Iterator[SessionLoop]:
    loop = SessionLoop()
    yield loop
    loop.stop()


@pytest.fixture
def stop_handler() -> Iterator[None]:
    def stop(signum: int, frame: FrameType | None) -> None:
        raise StoppedError

    previous = signal.signal(signal.SIGINT, stop)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_signal_another_thread_received_ends_the_main_threads_wait_at_once(
    session_loop: SessionLoop, stop_handler: None
) -> None:
    """Before the wait woke in slices, the main thread slept on its lock until the call ended by itself
    (here: the coroutine's long sleep finished, and only then did the handler run): the handler runs only
    on the main thread, running code. Now the call is stopped mid-wait and its coroutine cancelled."""
    bystander_ready, release = threading.Event(), threading.Event()
    finished, cancelled = threading.Event(), threading.Event()

    async def long_wait() -> None:
        try:
            await asyncio.sleep(scaled(20))
            finished.set()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    def bystander() -> None:
        bystander_ready.set()
        release.wait()

    thread = threading.Thread(target=bystander, daemon=True)
    thread.start()
    bystander_ready.wait()
    timer = threading.Timer(0.5, lambda: signal.pthread_kill(thread.ident or 0, signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(StoppedError):
            session_loop.call(long_wait())
        assert cancelled.wait(scaled(10))
        assert not finished.is_set()
    finally:
        timer.cancel()
        release.set()
        thread.join()


def test_the_session_loops_thread_leaves_stop_signals_to_the_main_thread(session_loop: SessionLoop) -> None:
    async def blocked() -> set[signal.Signals]:
        return signal.pthread_sigmask(signal.SIG_BLOCK, [])

    assert {signal.SIGINT, signal.SIGTERM} <= session_loop.call(blocked())


def test_a_server_started_from_the_session_loop_still_ends_on_sigterm(
    session_loop: SessionLoop, tmp_path: Path
) -> None:
    """A process keeps the signal mask of the thread that started it: started from the session loop's
    thread (which blocks Ctrl-C and SIGTERM) a server ignored the SIGTERM that ends its process group
    and lived until SIGKILL, after the grace period. Two starts at once leave the loop's thread as it was."""
    server = StdioServerParameters(command=sys.executable, args=["-c", "import sys; sys.stdin.read()"])

    async def start_then_terminate(errlog: Path) -> None:
        pids: list[int] = []
        with errlog.open("wb") as err:
            transport = stdio_transport(server, err, 1_000, str, on_spawn=lambda pid, _: pids.append(pid))
            async with transport as (read, _):
                os.kill(pids[0], signal.SIGTERM)
                with anyio.fail_after(scaled(20)):  # the server's stdout ends with it
                    async for _ in read:
                        pass

    async def two_at_once() -> set[signal.Signals]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(start_then_terminate, tmp_path / "one.log")
            tg.start_soon(start_then_terminate, tmp_path / "two.log")
        return signal.pthread_sigmask(signal.SIG_BLOCK, [])

    assert {signal.SIGINT, signal.SIGTERM} <= session_loop.call(two_at_once(), timeout=scaled(60))


def test_a_call_past_its_bound_is_a_timeout_and_cancels_the_coroutine(session_loop: SessionLoop) -> None:
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        session_loop.call(forever(), timeout=0.3)
    assert cancelled.wait(scaled(10))


def test_a_timeout_the_coroutine_raises_is_its_own(session_loop: SessionLoop) -> None:
    async def times_out() -> None:
        raise TimeoutError("the server's own")

    with pytest.raises(TimeoutError, match="the server's own"):
        session_loop.call(times_out(), timeout=scaled(10))
