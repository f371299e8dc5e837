"""The npm reference servers through mcp_config.json, beside each other in one toolbox:
``@modelcontextprotocol/server-sequential-thinking`` (stdio) and ``@modelcontextprotocol/server-everything``
over stdio and over streamable HTTP (its ``streamableHttp`` argument).

They need Node.js and the packages in npx's cache. The check runs npx with ``--offline`` first
(seconds, no network); a package not cached is fetched only after one ping of the registry
answers, so an offline machine skips quickly, saying why. Once the servers run, any failure
to speak MCP with them is a real failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chat_api.wire import TOOL_NAME_PATTERN
from managers.mcp_manager import MCPManager
from session.redaction import Redactor
from tests.mcp_test_servers.helpers import (
    assert_clean,
    async_hygiene,
    capture_logger,
    child_pids,
    free_port,
    make_config,
    wait_gone,
    write_mcp_config,
)

pytestmark = pytest.mark.e2e

SEQUENTIAL = "@modelcontextprotocol/server-sequential-thinking"
EVERYTHING = "@modelcontextprotocol/server-everything"
CHECK_TIMEOUT_SECONDS = 60  # a cached package starts in seconds; offline, a missing one fails at once
PING_SECONDS = 20
FETCH_TIMEOUT_SECONDS = 180  # only once the registry has answered a ping


def npx_offline(npx: str, package: str, *args: str) -> list[str]:
    return [npx, "--offline", "-y", package, *args]


def start_once(npx: str, package: str, *options: str, timeout: float) -> subprocess.CompletedProcess[str] | None:
    """Run a stdio server package with stdin closed: it starts, says so on stderr and exits (None: timed out)."""
    try:
        return subprocess.run(
            [npx, *options, "-y", package],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None


def registry_reachable() -> bool:
    """One ping of the npm registry, no retries: a fetch that may take minutes is tried only then."""
    try:
        ping = subprocess.run(
            [shutil.which("npm") or "npm", "ping", "--fetch-retries=0", "--fetch-timeout=10000"],
            capture_output=True,
            timeout=PING_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return ping.returncode == 0


@pytest.fixture(scope="module")
def npx() -> str:
    """npx, with both packages in its cache (fetched once if the registry answers); else a quick skip."""
    path = shutil.which("npx")
    if path is None:
        pytest.skip("npx is not on PATH: install Node.js 22+ to run the npm MCP server tests")
    for package in (SEQUENTIAL, EVERYTHING):
        cached = start_once(path, package, "--offline", timeout=CHECK_TIMEOUT_SECONDS)
        if cached is not None and cached.returncode == 0:
            continue
        if not registry_reachable():
            pytest.skip(f"{package} is not in npx's cache and the npm registry is unreachable (offline?)")
        fetched = start_once(path, package, timeout=FETCH_TIMEOUT_SECONDS)
        if fetched is None or fetched.returncode != 0:
            tail = "" if fetched is None else "\n".join(fetched.stderr.strip().splitlines()[-3:])
            pytest.skip(f"npx could not fetch {package} within {FETCH_TIMEOUT_SECONDS}s: {tail}")
    return path


@pytest.fixture
def everything_http(npx: str) -> Iterator[str]:
    """server-everything in streamableHttp mode on a free port; its URL once it listens."""
    port = free_port()
    process = subprocess.Popen(
        npx_offline(npx, EVERYTHING, "streamableHttp"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PORT": str(port)},
        start_new_session=True,  # npx starts node as a child: end the whole group afterwards
    )
    watchdog = threading.Timer(CHECK_TIMEOUT_SECONDS, lambda: os.killpg(process.pid, 9))
    watchdog.start()
    try:
        assert process.stderr is not None
        seen = []
        for line in process.stderr:
            seen.append(line)
            if "listening on port" in line:
                break
        watchdog.cancel()
        assert seen and "listening on port" in seen[-1], "".join(seen)
        threading.Thread(target=lambda: [None for _ in process.stderr or ()], daemon=True).start()
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        watchdog.cancel()
        os.killpg(process.pid, 15)
        process.wait(10)


def test_npm_servers_over_stdio_and_http_in_one_toolbox(npx: str, everything_http: str, tmp_path: Path) -> None:
    config_path = write_mcp_config(
        tmp_path,
        {
            "sequential-thinking": {"command": "npx", "args": ["--offline", "-y", SEQUENTIAL]},
            "everything": {"command": "npx", "args": ["--offline", "-y", EVERYTHING], "includeTools": ["echo"]},
            "everything-http": {"type": "http", "url": everything_http, "includeTools": ["echo", "get-sum"]},
        },
    )
    logger, handler = capture_logger(f"test.mcp.npm.{uuid.uuid4().hex}")
    manager = MCPManager(make_config(config_path, tmp_path, session_lifetime="episode"), logger, redactor=Redactor())
    before = child_pids()
    spawned: set[int] = set()
    thought = {"thought": "Open the mailbox.", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False}

    async def turn() -> tuple[list[dict[str, Any]], list[Any]]:
        schemas = (await manager.open_turn(1)).schemas
        spawned.update(child_pids() - before - {manager.sweeper_pid})  # the sweeper: checked after close
        results = [
            await manager.call_tool("sequential-thinking__sequentialthinking", thought),
            await manager.call_tool("everything__echo", {"message": "from stdio"}),
            await manager.call_tool("everything-http.echo", {"message": "from http"}),
        ]
        return schemas, results

    with async_hygiene(handler) as report:
        try:
            schemas, (thinking, stdio_echo, http_echo) = asyncio.run(turn())
        finally:
            manager.close()
    assert_clean(report)

    names = [schema["function"]["name"] for schema in schemas]
    assert names[0] == "sequential-thinking__sequentialthinking"
    assert names[1:] == ["everything__echo", "everything-http__echo", "everything-http__get-sum"]
    assert all(TOOL_NAME_PATTERN.match(name) for name in names)
    assert not thinking.is_error and "thoughtHistoryLength" in str(thinking.content)
    assert stdio_echo.content == "Echo: from stdio" and http_echo.content == "Echo: from http"
    # npx runs node as its child: the whole group of each stdio server is gone.
    assert len(spawned) == 2 and not wait_gone(spawned, 5.0)
    assert not (child_pids() - before)
