"""The npm reference server ``@modelcontextprotocol/server-sequential-thinking`` through mcp_config.json.

This is the alternative entry the README documents for users with Node.js. It needs npx
and the npm registry, so it skips (saying why) when npx is missing or the package cannot
be fetched; once the package runs, any failure to speak MCP with it is a real failure.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from managers.mcp_manager import MCPManager, ToolCallResult
from managers.mcp_tools import WIRE_NAME_PATTERN
from tests.mcp_test_servers.helpers import (
    assert_clean,
    async_hygiene,
    capture_logger,
    child_pids,
    make_config,
    wait_gone,
    write_mcp_config,
)

PACKAGE = "@modelcontextprotocol/server-sequential-thinking"
FETCH_TIMEOUT_SECONDS = 180  # only once the registry has answered a ping
CACHED_START_SECONDS = 60  # node's start-up on a loaded machine, no network involved
PING_SECONDS = 20
READY_LINE = "running on stdio"


def _start_once(npx: str, *options: str, timeout: float) -> subprocess.CompletedProcess[str] | None:
    """Run the package with stdin closed: it starts, reports itself on stderr and exits.
    None when it did not finish within ``timeout``."""
    try:
        return subprocess.run(
            [npx, *options, "-y", PACKAGE],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None


@pytest.fixture(scope="module")
def npx() -> str:
    """npx, with the package in its cache; skips quickly when either is unavailable."""
    path = shutil.which("npx")
    if path is None:
        pytest.skip("npx is not on PATH: install Node.js 22+ to run the npm sequential-thinking server test")
    # From npx's cache alone first: offline with the package cached, no network is needed.
    cached = _start_once(path, "--offline", timeout=CACHED_START_SECONDS)
    if cached is not None and READY_LINE in cached.stderr:
        return path
    # Not cached: ask the registry once, with no retries, before a fetch that may take minutes.
    npm = shutil.which("npm")
    try:
        ping = subprocess.run(
            [npm or "npm", "ping", "--fetch-retries=0", "--fetch-timeout=10000"],
            capture_output=True,
            text=True,
            timeout=PING_SECONDS,
            check=False,
        )
        reachable = ping.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        reachable = False
    if not reachable:
        pytest.skip(f"{PACKAGE} is not in npx's cache and the npm registry is unreachable (offline?)")
    fetched = _start_once(path, timeout=FETCH_TIMEOUT_SECONDS)
    if fetched is None:
        pytest.skip(f"npx could not fetch and start {PACKAGE} within {FETCH_TIMEOUT_SECONDS}s (registry too slow?)")
    if READY_LINE not in fetched.stderr:
        tail = "\n".join(fetched.stderr.strip().splitlines()[-5:])
        pytest.skip(f"npx could not fetch {PACKAGE} (exit {fetched.returncode}): {tail}")
    return path


def test_npm_sequential_thinking_server_through_mcp_config(npx: str, tmp_path: Path) -> None:
    config_path = write_mcp_config(
        tmp_path,
        {
            "sequential-thinking": {
                "command": "npx",
                "args": ["-y", PACKAGE],
                "env": {"DISABLE_THOUGHT_LOGGING": "true"},
            }
        },
    )
    logger, handler = capture_logger("test.mcp.npx.sequential")
    manager = MCPManager(make_config(config_path, tmp_path, server_startup_timeout_seconds=60), logger)
    before = child_pids()
    spawned: set[int] = set()

    async def turn() -> tuple[list[dict[str, Any]], ToolCallResult]:
        await manager.connect_session()
        spawned.update(child_pids() - before)
        try:
            schemas = await manager.get_tool_schemas()
            (schema,) = [s for s in schemas if s["function"]["name"].endswith("__sequentialthinking")]
            result = await manager.call_tool(
                schema["function"]["name"],
                {
                    "thought": "Open the mailbox first.",
                    "thoughtNumber": 1,
                    "totalThoughts": 2,
                    "nextThoughtNeeded": True,
                },
            )
            return schemas, result
        finally:
            await manager.disconnect_session()

    with async_hygiene(handler) as report:
        schemas, result = asyncio.run(turn())
    assert_clean(report)
    assert spawned and not wait_gone(spawned, 5.0)

    names = [s["function"]["name"] for s in schemas]
    assert "sequential-thinking__sequentialthinking" in names
    assert all(WIRE_NAME_PATTERN.match(name) for name in names)
    (think,) = [s for s in schemas if s["function"]["name"] == "sequential-thinking__sequentialthinking"]
    properties = think["function"]["parameters"]["properties"]
    assert {"thought", "thoughtNumber", "totalThoughts", "nextThoughtNeeded"} <= set(properties)
    assert manager.display_name("sequential-thinking__sequentialthinking") == "sequential-thinking.sequentialthinking"

    assert result.is_error is False, result.error_message
    content = json.loads(result.content) if isinstance(result.content, str) else result.content
    assert content["thoughtNumber"] == 1
    assert content["thoughtHistoryLength"] == 1
    assert content["nextThoughtNeeded"] is True
