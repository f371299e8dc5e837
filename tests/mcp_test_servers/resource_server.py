"""A test MCP server with resources and prompts, for the client's resource tools and prompts.

Resources:

* ``notes://readme`` (text/plain): ``README_TEXT``;
* ``notes://long`` (text/plain): ``LONG_CHARS`` characters of ``x``, longer than a small result cap;
* ``notes://secret`` (text/plain): ``SECRET_TEXT``, what a test's ``excludeResources`` keeps out;
* ``images://lamp.png`` (image/png): ``PNG_BYTES``, a blob.

Prompts:

* ``guide(goal)``: two messages, ``Aim for {goal}.`` and ``GUIDE_TAIL`` (``goal`` is required);
* ``picture``: an image only, no text.

Tools:

* ``add_note(name, text, how)``: adds the resource ``notes://added/{name}`` and says the resource
  list changed: ``how="session"`` as a 2025-11-25 session hears it (``notifications/resources/
  list_changed``), ``"listen"`` as a 2026-07-28 client does (its ``subscriptions/listen``
  stream), ``"both"`` (the default) both ways. Over stdio a 2026-07-28 client hears the session
  notification too, so a test of the listen stream asks for ``"listen"`` alone;
* ``change_guide(tail, how)``: the ``guide`` prompt's second message becomes ``tail``, and the
  prompt list is said to have changed (``how`` as for ``add_note``);
* ``list_resources`` (only with ``RESOURCE_SERVER_OWN_LIST=1`` in its environment): the server's
  own tool of that name, answering ``OWN_LISTING``.

Run as ``python resource_server.py [--http PORT]``; over stdio it speaks both protocol revisions.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

README_TEXT = "The mailbox holds a leaflet."
SECRET_TEXT = "The combination is 12-34-56."
GUIDE_TAIL = "Read every sign you find."
LONG_CHARS = 5_000
OWN_LISTING = "the server's own listing"
# A 1x1 transparent PNG.
PNG_BYTES = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


def build_server():  # -> MCPServer
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.prompts.base import AssistantMessage, Message, UserMessage
    from mcp.server.mcpserver.resources import TextResource
    from mcp.types import ImageContent

    server = MCPServer(name="resources", log_level="WARNING")
    guide_tail = [GUIDE_TAIL]  # what change_guide sets

    @server.resource("notes://readme", name="readme", mime_type="text/plain", description="Where to start.")
    def readme() -> str:
        return README_TEXT

    @server.resource("notes://long", name="long", mime_type="text/plain")
    def long() -> str:
        return "x" * LONG_CHARS

    @server.resource("notes://secret", name="secret", mime_type="text/plain")
    def secret() -> str:
        return SECRET_TEXT

    @server.resource("images://lamp.png", name="lamp", mime_type="image/png", description="A picture of the lamp.")
    def lamp() -> bytes:
        return PNG_BYTES

    @server.prompt(description="How to play, aiming for a goal.")
    def guide(goal: str) -> list[Message]:
        return [UserMessage(f"Aim for {goal}."), AssistantMessage(guide_tail[0])]

    @server.prompt(description="A picture and no words.")
    def picture() -> list[Message]:
        return [UserMessage(ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png"))]

    @server.tool(description="Add the resource notes://added/{name} and say the resource list changed.")
    async def add_note(ctx: Context, name: str, text: str = "added", how: str = "both") -> str:
        server.add_resource(TextResource(uri=f"notes://added/{name}", name=name, text=text, mime_type="text/plain"))
        if how in ("session", "both"):
            await ctx.request_context.session.send_resource_list_changed()
        if how in ("listen", "both"):
            await ctx.notify_resources_changed()
        return f"added notes://added/{name}"

    @server.tool(description="Change the guide prompt's last message and say the prompts changed.")
    async def change_guide(ctx: Context, tail: str, how: str = "both") -> str:
        guide_tail[0] = tail
        if how in ("session", "both"):
            await ctx.request_context.session.send_prompt_list_changed()
        if how in ("listen", "both"):
            await ctx.notify_prompts_changed()
        return "changed"

    if os.environ.get("RESOURCE_SERVER_OWN_LIST") == "1":

        def own_list_resources() -> str:
            return OWN_LISTING

        server.add_tool(
            own_list_resources,
            name="list_resources",
            description="The server's own list_resources.",
            structured_output=False,
        )
    return server


def main() -> None:
    import argparse

    from mcp_servers.http_mode import add_http_arguments, run

    parser = argparse.ArgumentParser()
    add_http_arguments(parser)
    run(build_server(), parser.parse_args())


if __name__ == "__main__":
    main()
