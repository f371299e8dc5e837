"""The prompts an entry names, fetched for the agent's system prompt.

The prompts an entry names (``prompts``) are asked for once per episode, on its first turn, and
again after the server says its prompts changed (the toolbox's ``fetch_prompts`` chooses which);
``server_prompts`` returns their text, and a prompt that cannot be had is a warning, not a stop.
"""

from __future__ import annotations

from collections.abc import Callable

import mcp.types as types

from mcp_client.config import PromptRequest, ServerConfig
from mcp_client.source import ToolSource
from session.errors import MCPServerDiedError, MCPToolCallError
from shared_utils.text import cap_text
from shared_utils.toolset import ServerPrompt


async def server_prompts(
    server: ServerConfig,
    source: ToolSource | None,
    timeout: float,
    max_chars: int,
    config_file: str,
    deadline: float | None,
    warn: Callable[[ServerConfig, str | None, str], None],
) -> tuple[ServerPrompt, ...]:
    """The entry's prompts from its server, each cut to ``max_chars``; one that cannot be had is
    passed to ``warn`` (the entry, the prompt, why and the fix) and left out."""
    where = f'"prompts" of the entry "{server.name}" in {config_file}'
    if source is None or not source.is_alive:
        warn(server, None, f"MCP server '{server.name}' is not connected, so its prompts were not added")
        return ()
    capabilities = source.capabilities  # None: not known (see ToolSource.capabilities), so asked
    if capabilities is not None and capabilities.prompts is None:
        warn(
            server,
            None,
            f"MCP server '{server.name}' offers no prompts, so {where} adds nothing. Remove \"prompts\" from "
            "the entry, or check that it starts the server you meant",
        )
        return ()
    prompts: list[ServerPrompt] = []
    for request in server.prompts:
        try:
            result = await source.get_prompt(
                request.name, dict(request.arguments), server.timeout or timeout, deadline=deadline
            )
        except (MCPToolCallError, TimeoutError) as exc:
            why = await _prompt_failure(source, request, exc, where, server.timeout or timeout, deadline)
            warn(server, request.name, why)
            if isinstance(exc, MCPServerDiedError | TimeoutError):
                break  # gone, or not answering: its other prompts would wait as long
            continue
        text = prompt_text(result)
        if not text:
            warn(
                server,
                request.name,
                f"The prompt \"{request.name}\" of MCP server '{server.name}' has no text to add; remove it "
                f"from {where}",
            )
            continue
        prompts.append(ServerPrompt(server.name, request.name, cap_text(text, max_chars)))
    return tuple(prompts)


def prompt_text(result: types.GetPromptResult) -> str:
    """The text messages of a prompt, in order (images, audio and embedded resources left out)."""
    texts = [message.content.text for message in result.messages if isinstance(message.content, types.TextContent)]
    return "\n\n".join(text.strip() for text in texts if text.strip())


async def _prompt_failure(
    source: ToolSource, request: PromptRequest, error: Exception, where: str, timeout: float, deadline: float | None
) -> str:
    """Why a prompt could not be had, and the fix: a name the server does not have, else its arguments."""
    name = source.name
    if isinstance(error, MCPServerDiedError | TimeoutError):
        # Nothing to ask a server that is gone or did not answer.
        return f"{error}: the prompt \"{request.name}\" of MCP server '{name}' was not added"
    try:
        known = await source.list_prompts(timeout, deadline=deadline)
    except (MCPToolCallError, TimeoutError):
        known = None
    if known is not None and request.name not in {prompt.name for prompt in known}:
        offered = ", ".join(prompt.name for prompt in known) or "none"
        return (
            f"MCP server '{name}' has no prompt \"{request.name}\" (its prompts: {offered}). Fix the name in "
            f"{where}, or remove it"
        )
    prompt = next((p for p in known or [] if p.name == request.name), None)
    takes = (
        ", ".join(
            f"{argument.name}{' (required)' if argument.required else ''}" for argument in (prompt.arguments or [])
        )
        if prompt is not None
        else ""
    )
    return f"{error}. Check its arguments in {where}" + (f" (it takes: {takes})" if takes else "") + ", or remove it"
