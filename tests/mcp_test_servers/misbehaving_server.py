"""An MCP stdio server that misbehaves on request, so the client's failure handling meets real faults.

Start modes (``--start``):
    ok      serve normally (default)
    crash   write a reason to stderr and exit 3 before speaking MCP
    hang    read stdin until EOF without ever answering (never completes initialize)
    flaky   crash while the integer in ``--counter-file`` is > 0 (decrementing it), else serve
    late-hang  count this start in ``--counter-file`` (one integer, under a lock: servers started
            ahead start together); hang as ``hang`` does when it is start number ``--serve-first``
            + 1 up to ``--serve-first`` + ``--hang-next``, else serve: a server that starts in
            time at first and then misses its start timeout, and is well again afterwards

Every start appends one line to ``--attempts-file`` when given, so tests can count spawns.
``--banner N`` prints N lines that are not MCP messages on stdout before serving (the first
one 300 characters long, the last a JSON object), as a server printing a banner or its log there does.
``--spawn-helper PIDFILE`` starts a helper child in the server's process group (its pid
appended to PIDFILE) that would outlive a server exiting cleanly unless the client ends
the group.

Tools (when serving): ``echo``, ``pid``, ``env``, ``cwd``, ``hang`` (sleeps), ``exit_now``
(the process exits mid-call), ``fail`` (an ``is_error`` result), ``image``, ``audio``,
``resource``, ``resource_link``, ``structured``, ``mixed``, ``huge``, ``grow`` (adds a tool
and sends ``notifications/tools/list_changed``), plus a dotted and an over-long tool name
for the wire-name scheme.

Run: ``python tests/mcp_test_servers/misbehaving_server.py [--start MODE] ...``; ``--http 0`` (or
``--sse 0``) serves the same tools over HTTP, as the shipped servers do.
"""

# No "from __future__ import annotations": the tools below are defined after a lazy import
# (so crash/hang start modes skip the SDK's import cost), and MCPServer must be able to
# evaluate their annotations.
import argparse
import base64
import os
import sys
import time
from pathlib import Path
from typing import TypedDict

# Run as a script, the repository is not on the path; its HTTP mode is the shipped servers' own.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))
from mcp_servers.http_mode import add_http_arguments, run

LONG_TOOL_NAME = "a_deliberately_long_tool_name_that_pushes_the_wire_name_past_the_provider_limit"
DOTTED_TOOL_NAME = "weird.name with spaces"
PNG_BYTES = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
WAV_BYTES = b"RIFF$\x00\x00\x00WAVEfmt " + bytes(28)


class Status(TypedDict):
    ok: bool
    count: int


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    add_http_arguments(parser)
    parser.add_argument("--start", choices=["ok", "crash", "hang", "flaky", "late-hang"], default="ok")
    parser.add_argument("--counter-file", type=Path)
    parser.add_argument("--serve-first", type=int, default=0, metavar="N")
    parser.add_argument("--hang-next", type=int, default=0, metavar="K")
    parser.add_argument("--attempts-file", type=Path)
    parser.add_argument("--spawn-helper", type=Path, metavar="PIDFILE")
    parser.add_argument("--banner", type=int, default=0, metavar="N")
    return parser.parse_args(argv)


def refuse(reason: str) -> None:
    sys.stderr.write(f"misbehaving_server: refusing to start: {reason}\n")
    sys.stderr.flush()
    sys.exit(3)


def count_start(counter: Path) -> int:
    """This start's number (1 for the first), counted in ``counter`` under an exclusive lock."""
    import fcntl

    with counter.open("a+", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        number = int(fh.read().strip() or 0) + 1
        fh.seek(0)
        fh.truncate()
        fh.write(str(number))
    return number


def start_checks(args: argparse.Namespace) -> None:
    if args.attempts_file is not None:
        with args.attempts_file.open("a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
    if args.start == "crash":
        refuse("start mode is crash")
    if args.start == "late-hang":
        start = count_start(args.counter_file)
        args.start = "hang" if args.serve_first < start <= args.serve_first + args.hang_next else "ok"
    if args.start == "hang":
        sys.stdin.read()  # never answer; leave as soon as the client closes our stdin
        sys.exit(0)
    if args.start == "flaky":
        remaining = int(args.counter_file.read_text(encoding="utf-8").strip() or 0)
        if remaining > 0:
            args.counter_file.write_text(str(remaining - 1), encoding="utf-8")
            refuse(f"flaky start, {remaining - 1} failures left")
    if args.spawn_helper is not None:
        import subprocess

        # Same process group, no pipes of ours: only ending the group stops it.
        helper = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        with args.spawn_helper.open("a", encoding="utf-8") as pids:
            pids.write(f"{helper.pid}\n")


def print_banner(lines: int) -> None:
    """``lines`` lines on stdout: a 300-character banner, log lines, and last a JSON object that is not JSON-RPC."""
    for number in range(1, lines + 1):
        if number == 1:
            sys.stdout.write(f"Welcome to misbehaving_server {'=' * 270}\n")
        elif number == lines:
            sys.stdout.write('{"not": "a JSON-RPC message"}\n')
        else:
            sys.stdout.write(f"log line {number}\n")
    sys.stdout.flush()


def build_server():  # -> MCPServer
    import anyio
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.types import (
        AudioContent,
        BlobResourceContents,
        CallToolResult,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    server = MCPServer(name="misbehaving", log_level="WARNING")

    @server.tool(description="Return the text unchanged.", structured_output=False)
    def echo(text: str) -> str:
        return text

    @server.tool(description="This process's pid.", structured_output=False)
    def pid() -> int:
        return os.getpid()

    @server.tool(description="Values of the named environment variables (null when unset).")
    def env(names: list[str]) -> dict[str, str | None]:
        return {name: os.environ.get(name) for name in names}

    @server.tool(description="The working directory.", structured_output=False)
    def cwd() -> str:
        return os.getcwd()

    @server.tool(description="Sleep, then answer.", structured_output=False)
    async def hang(seconds: float = 3600.0) -> str:
        await anyio.sleep(seconds)
        return "woke up"

    @server.tool(description="Exit the process in the middle of the call.")
    def exit_now(code: int = 1) -> str:
        sys.stderr.write("misbehaving_server: exiting mid-call\n")
        sys.stderr.flush()
        os._exit(code)

    @server.tool(description="Answer with an is_error result.")
    def fail(message: str = "the tool failed on purpose") -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)

    @server.tool(description="A 1x1 PNG.")
    def image() -> CallToolResult:
        data = base64.b64encode(PNG_BYTES).decode()
        return CallToolResult(content=[ImageContent(type="image", data=data, mime_type="image/png")])

    @server.tool(description="A short WAV header.")
    def audio() -> CallToolResult:
        data = base64.b64encode(WAV_BYTES).decode()
        return CallToolResult(content=[AudioContent(type="audio", data=data, mime_type="audio/wav")])

    @server.tool(description="Embedded text and blob resources.")
    def resource() -> CallToolResult:
        return CallToolResult(
            content=[
                EmbeddedResource(
                    type="resource",
                    resource=TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="the notes"),
                ),
                EmbeddedResource(
                    type="resource",
                    resource=BlobResourceContents(
                        uri="file:///blob.bin",
                        mime_type="application/octet-stream",
                        blob=base64.b64encode(b"1234").decode(),
                    ),
                ),
            ]
        )

    @server.tool(description="A link to a resource.")
    def resource_link() -> CallToolResult:
        link = ResourceLink(
            type="resource_link", uri="file:///map.txt", name="map", description="the map", mime_type="text/plain"
        )
        return CallToolResult(content=[link])

    @server.tool(description="Structured content (and its JSON text echo).")
    def structured(count: int = 2) -> Status:
        return Status(ok=True, count=count)

    @server.tool(description="Structured content plus an image and a text note.")
    def mixed() -> CallToolResult:
        data = base64.b64encode(PNG_BYTES).decode()
        return CallToolResult(
            content=[
                TextContent(type="text", text="a note"),
                ImageContent(type="image", data=data, mime_type="image/png"),
            ],
            structured_content={"ok": True},
        )

    @server.tool(description="A very long text.", structured_output=False)
    def huge(chars: int = 100_000) -> str:
        return "x" * chars

    @server.tool(description="Add the tool 'grown' and tell the client the tool list changed.")
    async def grow(ctx: Context) -> str:
        def grown() -> str:
            return "grown"

        server.add_tool(grown, name="grown", description="Added at run time.", structured_output=False)
        # Both revisions: a 2025 session hears the notification, a 2026 client its listen stream.
        await ctx.request_context.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return "grew"

    @server.tool(description="Return nothing.")
    def empty() -> CallToolResult:
        return CallToolResult(content=[])

    def long_named() -> str:
        return "long"

    def dotted() -> str:
        return "dotted"

    @server.tool(description="A plain value, which MCPServer wraps as {'result': value}.")
    def wrapped(value: int = 3) -> int:
        return value

    server.add_tool(long_named, name=LONG_TOOL_NAME, description="A tool with a long name.", structured_output=False)
    server.add_tool(dotted, name=DOTTED_TOOL_NAME, structured_output=False)
    return server


def main(argv: list[str] | None = None) -> None:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    start_checks(args)
    print_banner(args.banner)
    started = time.perf_counter()
    server = build_server()
    sys.stderr.write(f"misbehaving_server: serving (built in {time.perf_counter() - started:.2f}s)\n")
    sys.stderr.flush()
    run(server, args)


if __name__ == "__main__":
    main()
