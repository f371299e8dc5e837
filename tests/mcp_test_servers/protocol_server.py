"""A test MCP server for the protocol's moving parts: progress, cancellation, server requests.

Tools:

* ``steady(steps, interval)``: reports progress ``steps`` times, ``interval`` seconds apart, then
  answers ``"done after N"``: longer in all than a short per-call timeout, never silent for long.
* ``stall(note)``: waits until it is cancelled; when cancelled it writes ``note`` into the file
  ``$PROTOCOL_SERVER_NOTES/cancelled`` (proof the client told the server), then lets the
  cancellation go on.
* ``ask(question)``: asks the client to fill a form (elicitation) and answers what came back.
* ``sample(prompt)``: asks the client's model (sampling) and answers what it said.

Run as ``python protocol_server.py [--http PORT]``; over stdio it speaks both protocol revisions.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

NOTES_ENV = "PROTOCOL_SERVER_NOTES"


def build_server():  # -> MCPServer
    import anyio
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.types import SamplingMessage, TextContent
    from pydantic import BaseModel, Field

    server = MCPServer(name="protocol", log_level="WARNING")

    @server.tool(
        description="Report progress steps times, interval seconds apart, then answer.", structured_output=False
    )
    async def steady(ctx: Context, steps: int = 10, interval: float = 0.1) -> str:
        for step in range(1, steps + 1):
            await anyio.sleep(interval)
            await ctx.report_progress(step, steps, f"step {step}")
        return f"done after {steps}"

    @server.tool(description="Wait until cancelled, and note that it was.", structured_output=False)
    async def stall(note: str = "cancelled") -> str:
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            folder = Path(os.environ[NOTES_ENV])
            (folder / "cancelled.tmp").write_text(note)
            (folder / "cancelled.tmp").rename(folder / "cancelled")
            raise
        return "never"

    class Answer(BaseModel):
        answer: str = Field(description="The answer to the question")

    @server.tool(description="Ask the client a question through elicitation.", structured_output=False)
    async def ask(ctx: Context, question: str = "What is your name?") -> str:
        result = await ctx.elicit(message=question, schema=Answer)
        if result.action == "accept":
            return f"accepted: {result.data.answer}"
        return result.action

    @server.tool(description="Ask the client's model through sampling.", structured_output=False)
    async def sample(ctx: Context, prompt: str = "Say hello") -> str:
        result = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
            max_tokens=50,
        )
        content = result.content
        return f"model said: {content.text}" if isinstance(content, TextContent) else "model said something else"

    return server


def main() -> None:
    import argparse

    from mcp_servers.http_mode import add_http_arguments, run

    parser = argparse.ArgumentParser()
    add_http_arguments(parser)
    run(build_server(), parser.parse_args())


if __name__ == "__main__":
    main()
