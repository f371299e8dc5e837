"""One turn's tools, as the agent and its tool loop see them: the contract, with no MCP in it.

The episode runner opens a turn's tools (``MCPManager.turn``) before the agent's first ask and
closes them once the turn's action is chosen; in between, the agent and the critic's re-asks of
the same turn use them only through ``Toolset``: what is offered (OpenAI function schemas), the
servers' own words about it (instructions, configured prompts), what is known of one tool
(``ToolInfo``), and one call, whose answer is a ``ToolCallResult``. Nothing in the agent needs to
know there is an MCP manager behind it: a test, a benchmark or another tool provider can hand it
any ``Toolset``.

The shapes are plain frozen dataclasses, and this module imports nothing of the MCP SDK: the MCP
client (``mcp_client``) converts the SDK's types into them where it receives them, so the agent,
the tool loop and a run with MCP off never load the SDK. It lives in the bottom layer, below both
the MCP client that fills it and the tool loop that reads it.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel


@dataclass(frozen=True)
class ServerPrompt:
    """The text of one configured prompt of one server, for the agent's system prompt."""

    server: str
    name: str
    text: str


@dataclass(frozen=True)
class ToolHints:
    """A server's hints about one tool, as MCP names them; None where the server said nothing."""

    read_only: bool | None = None  # ``readOnlyHint``
    destructive: bool | None = None  # ``destructiveHint``


@dataclass(frozen=True)
class ToolInfo:
    """What is known of one tool before it is called."""

    wire_name: str  # the name the model calls it by
    name: str  # ``server.tool``, for logs and traces (a name nobody offers is shown as given)
    server: str | None  # None: no server offers a tool of that name
    timeout_seconds: float  # for one call: the server's ``timeout``, else the configured default
    hints: ToolHints | None = None  # the server's hints (read-only, destructive...)
    refusal: str | None = None  # why it must not run (a destructive tool its entry does not allow)

    @property
    def read_only(self) -> bool:
        """Marked ``readOnlyHint: true``: it changes nothing, so its calls may run at once."""
        return self.hints is not None and self.hints.read_only is True

    @property
    def destructive(self) -> bool:
        """Marked ``destructiveHint: true`` explicitly, and not read-only. MCP's default for an
        absent hint is true, but most servers annotate nothing: refusing every unannotated tool
        would refuse nearly every tool there is."""
        hints = self.hints
        return hints is not None and hints.destructive is True and hints.read_only is not True


@dataclass(frozen=True)
class ToolCallResult:
    """What one tool call produced, in the shape the ``role: "tool"`` message carries."""

    content: Any
    is_error: bool = False
    error_message: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"content": ...}`` or ``{"error": ..., "content": ...}``; always ``json.dumps``-able."""
        content = to_jsonable(self.content)
        if self.is_error:
            return {"error": self.error_message or "Tool call failed", "content": content}
        return {"content": content}


def to_jsonable(value: Any) -> Any:
    """``value`` as plain JSON data: anything unknown becomes a string, never an exception."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, dict):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(item) for item in value]
    if isinstance(value, BaseModel):
        return to_jsonable(value.model_dump(mode="json", by_alias=True, exclude_none=True))
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes of binary data>"
    return str(value)


class Toolset(Protocol):
    """The tools of one turn (see the module docstring). A provider may subclass it for the
    defaults of ``instructions``, ``prompts`` and ``drop_lost_servers``."""

    @property
    @abstractmethod
    def schemas(self) -> list[dict[str, Any]]:
        """The tools offered now, as OpenAI function tools; empty when the turn plays without tools."""
        ...

    @property
    def instructions(self) -> Mapping[str, str]:
        """Each server's own account of its purpose (its MCP ``instructions``), by server name."""
        return {}

    @property
    def prompts(self) -> Sequence[ServerPrompt]:
        """The prompts the configuration names, in the servers' own words, for the system prompt."""
        return ()

    @abstractmethod
    def tool(self, name: str) -> ToolInfo:
        """What is known of the tool offered under ``name`` (a wire or ``server.tool`` name)."""
        ...

    @abstractmethod
    async def call(
        self, name: str, arguments: dict[str, Any], *, timeout_seconds: float, deadline: float | None = None
    ) -> ToolCallResult:
        """Run one tool. ``timeout_seconds`` runs from the start and again from each progress
        report; ``deadline`` (``time.monotonic()``) is an end nothing moves.

        Raises:
            TimeoutError: the call went ``timeout_seconds`` without progress, or passed ``deadline``.
            MCPServerDiedError: the tool's server went away; ``server_name`` says which.
            MCPToolCallError: unknown tool, bad arguments, or a protocol error.
        """
        ...

    async def drop_lost_servers(self) -> None:
        """After a server went away mid-turn: ``schemas`` offers only the live servers' tools."""
