"""The stdio transport: a server we start, one JSON-RPC message per line on its stdin and stdout.

Why our own and not the SDK's ``stdio_client``: the SDK's reader keeps a line in memory until
its newline arrives, whatever its size, so one runaway reply (measured: a 100 MB reply cost
390 MB) or a server writing an endless line grows ZorkGPT's memory without bound before
anything of ours sees it. This reader keeps at most ``max_message_bytes`` of a line. A longer
one is skipped to its newline; when its first bytes show it is the answer to a request (a
top-level ``"id"``), that request gets an error answer naming the size and the setting, so the
call fails at once and the session goes on. Anything else over the limit is reported to the
session like any line that is not an MCP message.

Lines that are not MCP messages (a banner, a log written to stdout) reach the session as the
parse error, which the source turns into one warning per server; nothing is logged here.

The process is started as the leader of a new process group, so the source can end the server
and everything it started in one go; at exit its stdin is closed first, which is how the
protocol asks a stdio server to stop, and the source ends the group after a grace period.

A shipped server started through its launcher (``python -m mcp_servers.launch NAME``) while the
run has a warm parent is asked of that parent directly (``forked.py``): the same pipes, group
and end, without starting the launcher's interpreter every turn.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from typing import IO

import anyio
import anyio.abc
import mcp.types as types
from mcp import StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from mcp_client.config import WARM_ENV_VAR, starts_shipped_launcher
from mcp_client.forked import ForkedServer, fork_from_warm_parent
from mcp_client.runtime import stop_signals_unblocked

# The error code of the answer made up for a reply over the limit. JSON-RPC leaves -32000 to
# -32099 to implementations; the message says the rest.
REPLY_TOO_LARGE = -32099
_READ_CHUNK = 64 * 1024
# How much of an oversized line is kept to find its id: a JSON-RPC answer names it at the top level,
# and our serializers put it before the result.
_ID_PREFIX_BYTES = 4096
_EXIT_GRACE_SECONDS = 2.0
_EXIT_POLL_SECONDS = 0.02

OversizeNotice = Callable[[int], str]


@asynccontextmanager
async def stdio_transport(
    params: StdioServerParameters,
    errlog: IO[bytes],
    max_message_bytes: int,
    too_large: OversizeNotice,
    on_spawn: Callable[[int, bool], None] | None = None,
) -> AsyncIterator[TransportStreams]:
    """Start the server and yield its (read, write) streams; at exit close its stdin and wait
    (briefly) for it to end. ``too_large(size)`` words the error for a reply over the limit;
    ``on_spawn(pid, forked)`` learns the server's pid (which is also its process group id) and whether
    the run's warm parent forked it (``forked.py``) rather than this process starting it."""
    env = get_default_environment() | (params.env or {})
    process: anyio.abc.Process | ForkedServer | None = None
    if starts_shipped_launcher(params.args) and env.get(WARM_ENV_VAR):
        process = await fork_from_warm_parent(env[WARM_ENV_VAR], params, env, errlog)
    if process is None:
        # Shielded: a start given up while asyncio is still creating the process (a turn cancelled
        # mid-start) would have asyncio kill it but stop waiting for it at the next cancellation,
        # so its exit never reaches the loop; here the process always reaches the undo below.
        with anyio.CancelScope(shield=True), stop_signals_unblocked():
            process = await anyio.open_process(
                [params.command, *params.args],
                env=env,
                stderr=errlog,
                cwd=params.cwd,
                start_new_session=True,
            )
    if on_spawn is not None:
        on_spawn(process.pid, isinstance(process, ForkedServer))
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    drained = anyio.Event()  # the server's stdout was read to its end (or closed)

    async def reader() -> None:
        assert process.stdout is not None
        lines = _LineSplitter(max_message_bytes)
        ended = (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError)
        try:
            async with to_session:
                with suppress(*ended):
                    while True:
                        chunk = await process.stdout.receive(_READ_CHUNK)
                        for item in lines.feed(chunk):
                            await to_session.send(_message(item, too_large))
        finally:
            # The session stopped listening (or the start was cancelled): what the server wrote
            # since is read and dropped, to the pipe's end. asyncio lets go of a subprocess (its
            # pipes, its transport) only there; a server that flooded its stdout would otherwise
            # leave them to the garbage collector, after the event loop closed ("Event loop is
            # closed"). _stop ends the server, so the end comes (or _stop closes the pipe).
            with anyio.CancelScope(shield=True), suppress(*ended):
                while True:
                    await process.stdout.receive(_READ_CHUNK)
            drained.set()

    async def writer() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for session_message in from_session:
                    line = session_message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(line.encode(params.encoding, params.encoding_error_handler))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server stopped reading: end the session's reads too, so no request waits forever.
            await to_session.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            with anyio.CancelScope(shield=True):
                # The session's ends first: the reader drops what comes after, to the end of the pipe.
                for stream in (read_stream, write_stream):
                    await stream.aclose()
                await _stop(process, drained)
            tg.cancel_scope.cancel()


async def _stop(process: anyio.abc.Process | ForkedServer, drained: anyio.Event) -> None:
    """Close the server's stdin and give it a moment to exit on its own, and its stdout a moment
    to reach its end (``drained``); the source ends its process group after this, whatever
    happened here."""
    assert process.stdin is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    with anyio.move_on_after(_EXIT_GRACE_SECONDS):
        while process.returncode is None:
            await anyio.sleep(_EXIT_POLL_SECONDS)
    if process.returncode is None:
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        with anyio.move_on_after(_EXIT_GRACE_SECONDS):
            await process.wait()
    with anyio.move_on_after(_EXIT_GRACE_SECONDS):  # a process it started may still hold the pipe
        await drained.wait()
    assert process.stdout is not None
    with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


class _Oversized:
    """A line that went over the limit: its size and its first bytes."""

    def __init__(self, head: bytes, size: int) -> None:
        self.head = head
        self.size = size


class _LineSplitter:
    """Splits bytes into lines, keeping at most ``limit`` bytes of any one line."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = bytearray()
        self._skipping: _Oversized | None = None

    def feed(self, chunk: bytes) -> list[bytes | _Oversized]:
        out: list[bytes | _Oversized] = []
        start = 0
        while start < len(chunk):
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline == -1 else newline
            piece = chunk[start:end]
            if self._skipping is not None:
                self._skipping.size += len(piece)
            else:
                self._buffer += piece
                if len(self._buffer) > self.limit:
                    self._skipping = _Oversized(bytes(self._buffer[:_ID_PREFIX_BYTES]), len(self._buffer))
                    self._buffer.clear()
            if newline == -1:
                break
            if self._skipping is not None:
                out.append(self._skipping)
                self._skipping = None
            elif self._buffer.strip():
                out.append(bytes(self._buffer))
            self._buffer.clear()
            start = newline + 1
        return out


def _message(item: bytes | _Oversized, too_large: OversizeNotice) -> SessionMessage | Exception:
    if isinstance(item, _Oversized):
        request_id = top_level_id(item.head)
        notice = too_large(item.size)
        if request_id is None:
            return ValueError(f"A message from the server was dropped: {notice}")
        error = types.JSONRPCError(
            jsonrpc="2.0", id=request_id, error=types.ErrorData(code=REPLY_TOO_LARGE, message=notice)
        )
        return SessionMessage(error)
    try:
        # Decoded first so a line that is not a message is reported as the text the server wrote.
        line = item.decode("utf-8", "replace")
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:  # not an MCP message: the session hands it to the source's handler
        return exc


def top_level_id(head: bytes) -> str | int | None:
    """The ``"id"`` of the JSON object that ``head`` begins, if it appears at the top level in
    ``head`` (nested objects may have their own ``id`` keys, which are skipped)."""
    text = head.decode("utf-8", "replace")
    depth = 0
    i = 0
    expect_key = False
    while i < len(text):
        char = text[i]
        if char == '"':
            end = _string_end(text, i)
            if end is None:
                return None
            if depth == 1 and expect_key and text[i + 1 : end] == "id":
                return _id_value(text[end + 1 :])
            i = end + 1
            expect_key = False
            continue
        if char in "{[":
            depth += 1
            expect_key = char == "{" and depth == 1
        elif char in "}]":
            depth -= 1
        elif char == "," and depth == 1:
            expect_key = True
        i += 1
    return None


def _string_end(text: str, start: int) -> int | None:
    i = start + 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i
        i += 1
    return None


def _id_value(rest: str) -> str | int | None:
    rest = rest.lstrip()
    if not rest.startswith(":"):
        return None
    decoder = json.JSONDecoder()
    try:
        value, _ = decoder.raw_decode(rest[1:].lstrip())
    except ValueError:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return value
