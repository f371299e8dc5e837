"""A test MCP server for the protocol's moving parts: progress, cancellation, server requests.

Tools:

* ``steady(steps, interval)``: reports progress ``steps`` times, ``interval`` seconds apart, then
  answers ``"done after N"``: longer in all than a short per-call timeout, never silent for long.
* ``stall(note)``: waits until it is cancelled; when cancelled it writes ``note`` into the file
  ``$PROTOCOL_SERVER_NOTES/cancelled`` (proof the client told the server), then lets the
  cancellation go on.
* ``ask(question)``: asks the client to fill a form (elicitation) and answers what came back.
* ``sample(prompt)``: asks the client's model (sampling) and answers what it said.
* ``ask_many(count)`` and ``sample_many(count)``: a server asking in a loop, ``count`` forms or
  completions in one call (in 2026-07-28, every form in one input-required round; completions
  only in 2025-11-25); they answer how many were accepted and how many turned away.

Both ask as each revision does: a request to the client in 2025-11-25, an input-required
result (and the client's second call with the answer) in 2026-07-28.

Run as ``python protocol_server.py [--http PORT]``; over stdio it speaks both protocol revisions.
"""

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

NOTES_ENV = "PROTOCOL_SERVER_NOTES"


def build_server():  # -> MCPServer
    import anyio
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.types import (
        CreateMessageRequest,
        CreateMessageRequestParams,
        ElicitRequest,
        ElicitRequestFormParams,
        ElicitResult,
        InputRequiredResult,
        SamplingMessage,
        TextContent,
    )
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS
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
    async def ask(ctx: Context, question: str = "What is your name?") -> Any:
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:  # 2025: a request to the client
            answered = await ctx.elicit(message=question, schema=Answer)
            return f"accepted: {answered.data.answer}" if answered.action == "accept" else answered.action
        # 2026-07-28 has no server-to-client requests: the call answers "input required", and the
        # client calls again with the answer.
        if not ctx.input_responses:
            form = ElicitRequestFormParams(message=question, requested_schema=Answer.model_json_schema())
            return InputRequiredResult(input_requests={"answer": ElicitRequest(params=form)})
        answered = ctx.input_responses["answer"]
        assert isinstance(answered, ElicitResult)
        return f"accepted: {answered.content['answer']}" if answered.action == "accept" else answered.action

    @server.tool(description="Ask the client's model through sampling.", structured_output=False)
    async def sample(ctx: Context, prompt: str = "Say hello") -> Any:
        message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            result = await ctx.session.create_message(messages=[message], max_tokens=50)
        elif not ctx.input_responses:
            request = CreateMessageRequest(params=CreateMessageRequestParams(messages=[message], max_tokens=50))
            return InputRequiredResult(input_requests={"sample": request})
        else:
            result = ctx.input_responses["sample"]
        content = result.content
        return f"model said: {content.text}" if isinstance(content, TextContent) else "model said something else"

    @server.tool(description="Ask the client count questions in one call.", structured_output=False)
    async def ask_many(ctx: Context, count: int = 300) -> Any:
        questions = [f"Question {n} of {count}: what is your name?" for n in range(1, count + 1)]
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            actions = [(await ctx.elicit(message=question, schema=Answer)).action for question in questions]
        elif not ctx.input_responses:  # every form in one round, as a server may
            forms = {
                f"q{n}": ElicitRequest(
                    params=ElicitRequestFormParams(message=question, requested_schema=Answer.model_json_schema())
                )
                for n, question in enumerate(questions)
            }
            return InputRequiredResult(input_requests=forms)
        else:
            actions = [answer.action for answer in ctx.input_responses.values()]
        return f"accepted {actions.count('accept')}, declined {actions.count('decline')}"

    @server.tool(description="Ask the client's model count times in one call.", structured_output=False)
    async def sample_many(ctx: Context, count: int = 300) -> Any:
        from mcp.shared.exceptions import MCPError

        answered = refused = 0
        for n in range(1, count + 1):
            message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Say hello ({n})"))
            try:
                await ctx.session.create_message(messages=[message], max_tokens=50)
                answered += 1
            except MCPError:
                refused += 1
        return f"answered {answered}, refused {refused}"

    return server


def main() -> None:
    import argparse

    from mcp_servers.http_mode import add_http_arguments, run

    parser = argparse.ArgumentParser()
    add_http_arguments(parser)
    run(build_server(), parser.parse_args())


if __name__ == "__main__":
    main()
