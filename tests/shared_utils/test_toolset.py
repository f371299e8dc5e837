"""What a turn's toolset says of a tool before it is called (``tool_loop/toolset.py``), from the
hints a server's MCP annotations give (converted by ``mcp_client.tools.tool_hints``)."""

from __future__ import annotations

import pytest
from mcp.types import ToolAnnotations

from mcp_client.tools import tool_hints
from shared_utils.toolset import ToolHints, ToolInfo


@pytest.mark.parametrize(
    ("annotations", "read_only", "destructive"),
    [
        (None, False, False),  # most servers annotate nothing
        (ToolAnnotations(), False, False),
        (ToolAnnotations(read_only_hint=False), False, False),  # MCP's default says destructive: not applied
        (ToolAnnotations(destructive_hint=True), False, True),
        (ToolAnnotations(read_only_hint=False, destructive_hint=True), False, True),
        (ToolAnnotations(read_only_hint=True, destructive_hint=True), True, False),  # read-only wins
        (ToolAnnotations(read_only_hint=True), True, False),
        (ToolAnnotations(destructive_hint=False), False, False),
    ],
)
def test_which_annotations_mean_read_only_and_which_destructive(
    annotations: ToolAnnotations | None, read_only: bool, destructive: bool
) -> None:
    tool = ToolInfo("server__tool", "server.tool", "server", 30.0, tool_hints(annotations))
    assert tool.read_only is read_only
    assert tool.destructive is destructive


def test_the_hints_keep_what_the_server_left_unsaid() -> None:
    assert tool_hints(None) is None
    assert tool_hints(ToolAnnotations()) == ToolHints(read_only=None, destructive=None)
    assert tool_hints(ToolAnnotations(read_only_hint=False, destructive_hint=True)) == ToolHints(False, True)
