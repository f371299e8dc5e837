"""An MCP stdio server whose tools carry annotations (``ToolAnnotations``), for the tool loop's tests.

Tools:
    ``read_sign``, ``read_map`` (``readOnlyHint: true``): each arrives at ``meeting`` and waits
        until ``expected`` calls are there at once, then answers ``{"met": true, ...}``. A call
        that is alone when ``give_up_seconds`` run out answers ``{"met": false, ...}``. So two
        calls meet only if the client ran them concurrently: a client that runs them one after
        the other gets two lonely answers, whatever the timing.
    ``burn_leaflet`` (``destructiveHint: true``): appends ``burn_leaflet`` to the ``--record`` file.
    ``write_note`` (``readOnlyHint: false``, no ``destructiveHint``, which MCP reads as
        destructive): appends ``write_note <text>`` to the ``--record`` file.
    ``peek_box`` (``readOnlyHint: true`` and ``destructiveHint: true``: read-only wins).
    ``plain`` (no annotations at all).

Run: ``python tests/mcp_test_servers/annotated_server.py --record PATH``.
"""

# No "from __future__ import annotations": MCPServer evaluates the tools' annotations.
import argparse
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True)


class Meeting:
    """Calls present at one meeting point; the event is set once ``expected`` are there together."""

    def __init__(self) -> None:
        self.present = 0
        self.everyone_here = anyio.Event()


def build_server(record: Path) -> MCPServer:
    server = MCPServer(name="annotated", log_level="WARNING")
    meetings: dict[str, Meeting] = {}

    async def meet(tool: str, meeting: str, expected: int, give_up_seconds: float) -> dict[str, object]:
        place = meetings.setdefault(meeting, Meeting())
        place.present += 1
        if place.present >= expected:
            place.everyone_here.set()
        try:
            with anyio.move_on_after(give_up_seconds):
                await place.everyone_here.wait()
            return {"tool": tool, "met": place.everyone_here.is_set()}
        finally:
            place.present -= 1
            if place.present == 0 and meetings.get(meeting) is place:
                del meetings[meeting]  # the next call to this meeting starts a new one

    def write(line: str) -> None:
        with record.open("a", encoding="utf-8") as file:
            file.write(line + "\n")

    @server.tool(description="Read the sign (waits for its partner call).", annotations=READ_ONLY)
    async def read_sign(meeting: str = "here", expected: int = 2, give_up_seconds: float = 20.0) -> dict[str, object]:
        return await meet("read_sign", meeting, expected, give_up_seconds)

    @server.tool(description="Read the map (waits for its partner call).", annotations=READ_ONLY)
    async def read_map(meeting: str = "here", expected: int = 2, give_up_seconds: float = 20.0) -> dict[str, object]:
        return await meet("read_map", meeting, expected, give_up_seconds)

    @server.tool(description="Burn the leaflet for good.", annotations=DESTRUCTIVE, structured_output=False)
    def burn_leaflet() -> str:
        write("burn_leaflet")
        return "the leaflet is ashes"

    @server.tool(
        description="Write a note.", annotations=ToolAnnotations(read_only_hint=False), structured_output=False
    )
    def write_note(text: str) -> str:
        write(f"write_note {text}")
        return "noted"

    @server.tool(
        description="Peek into the box.",
        annotations=ToolAnnotations(read_only_hint=True, destructive_hint=True),
        structured_output=False,
    )
    def peek_box() -> str:
        return "a jewel"

    @server.tool(description="A tool without annotations.", structured_output=False)
    def plain() -> str:
        return "plain"

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--record", type=Path, required=True, help="file the writing tools append to")
    args = parser.parse_args(sys.argv[1:])
    build_server(args.record).run("stdio")


if __name__ == "__main__":
    main()
