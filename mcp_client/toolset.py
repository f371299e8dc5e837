"""One turn's tools, as the agent and its tool loop see them.

The episode runner opens a turn's tools (``MCPManager.turn``) before the agent's first ask and
closes them once the turn's action is chosen; in between, the agent and the critic's re-asks of
the same turn use them only through ``Toolset``: what is offered (OpenAI function schemas), the
servers' own words about it (instructions, configured prompts), what is known of one tool
(``ToolInfo``), and one call. Nothing in the agent needs to know there is an MCP manager behind
it: a test, a benchmark or another tool provider can hand it any ``Toolset``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import mcp.types as types

from mcp_client.tools import ToolCallResult


@dataclass(frozen=True)
class ServerPrompt:
    """The text of one configured prompt of one server, for the agent's system prompt."""

    server: str
    name: str
    text: str


@dataclass(frozen=True)
class ToolInfo:
    """What is known of one tool before it is called."""

    wire_name: str  # the name the model calls it by
    name: str  # ``server.tool``, for logs and traces (a name nobody offers is shown as given)
    server: str | None  # None: no server offers a tool of that name
    timeout_seconds: float  # for one call: the server's ``timeout``, else the configured default
    annotations: types.ToolAnnotations | None = None  # the server's hints (read-only, destructive...)
    refusal: str | None = None  # why it must not run (a destructive tool its entry does not allow)

    @property
    def read_only(self) -> bool:
        """Marked ``readOnlyHint: true``: it changes nothing, so its calls may run at once."""
        return self.annotations is not None and self.annotations.read_only_hint is True

    @property
    def destructive(self) -> bool:
        """Marked ``destructiveHint: true`` explicitly, and not read-only. MCP's default for an
        absent hint is true, but most servers annotate nothing: refusing every unannotated tool
        would refuse nearly every tool there is."""
        hints = self.annotations
        return hints is not None and hints.destructive_hint is True and hints.read_only_hint is not True


class Toolset(ABC):
    """The tools of one turn (see the module docstring)."""

    @property
    @abstractmethod
    def schemas(self) -> list[dict[str, Any]]:
        """The tools offered now, as OpenAI function tools; empty when the turn plays without tools."""

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

    async def drop_lost_servers(self) -> None:  # noqa: B027 - a toolset without servers loses none
        """After a server went away mid-turn: ``schemas`` offers only the live servers' tools."""
