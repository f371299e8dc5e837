"""Our stdio transport: lines kept up to a limit, the id of an oversized answer found, memory bounded.

The end-to-end behaviour through the manager (refused call, session lives on) is in
tests/managers/test_mcp_manager.py; here are the pieces and the memory a runaway reply costs, measured
in a child process with a real server.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.scripted_llm import ScriptedLLMServer, agent_reply
from harness.timing import scaled
from mcp_client.stdio import _LineSplitter, _Oversized, top_level_id
from tests.main_support import NO_LEARNING, run_main, scripted_env
from tests.mcp_test_servers.helpers import MISBEHAVING_SERVER, REPO_ROOT, write_mcp_config


def test_lines_split_across_chunks_are_joined_and_blank_lines_skipped() -> None:
    splitter = _LineSplitter(limit=100)
    assert splitter.feed(b'{"a"') == []
    assert splitter.feed(b":1}\n\n") == [b'{"a":1}']
    assert splitter.feed(b'{"b":2}\n{"c"') == [b'{"b":2}']
    assert splitter.feed(b":3}\n") == [b'{"c":3}']


def test_a_line_over_the_limit_is_skipped_to_its_newline_keeping_only_its_head() -> None:
    splitter = _LineSplitter(limit=10)
    head = b'{"id":7,"result":"'
    first = splitter.feed(head + b"x" * 5000)
    assert first == []
    assert len(splitter._buffer) == 0  # nothing of the runaway line is buffered past the limit
    (oversized, after) = splitter.feed(b"x" * 5000 + b'"}\n{"ok":1}\n')
    assert isinstance(oversized, _Oversized)
    assert oversized.size == len(head) + 10_000 + 2
    assert oversized.head.startswith(head)
    assert after == b'{"ok":1}'


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":12,"result":{"content":[', 12),
        (b'{"jsonrpc": "2.0", "id": "req-9", "result": ', "req-9"),
        # A nested "id" before the top-level one is not the request's.
        (b'{"result":{"id":99,"content":[{"id":1}]},"id":"outer","jsonrpc"', "outer"),
        (b'{"result":{"id":99,"text":"an \\"id\\": 5 inside a string', None),
        (b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":3', None),
        (b'{"id":true}', None),
        (b"not json at all", None),
    ],
)
def test_the_top_level_id_is_found_in_the_head_of_a_message(head: bytes, expected: object) -> None:
    assert top_level_id(head) == expected


_MEASURE = """
import asyncio, json, logging, resource, sys, tempfile
from pathlib import Path
from mcp_client.config import ServerConfig
from mcp_client.source import SourceSettings
from mcp_client.transport_sources import StdioSource
from session.errors import MCPToolCallError
from session.redaction import Redactor

async def main():
    server = ServerConfig(name="big", transport="stdio", command=sys.executable, args=(sys.argv[1],))
    settings = SourceSettings(
        startup_timeout=60, max_reply_bytes=1_000_000, config_dir=Path.cwd(), config_file="mcp_config.json",
        redactor=Redactor(), logger=logging.getLogger("measure"),
    )
    async with StdioSource(server, settings) as source:
        await source.call_tool("echo", {"text": "warm"}, timeout=60)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            await source.call_tool("huge", {"chars": int(sys.argv[2])}, timeout=120)
            outcome = "answered"
        except MCPToolCallError as exc:
            outcome = str(exc)
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        echo = await source.call_tool("echo", {"text": "still here"}, timeout=60)
    print(json.dumps({"grew_kib": after - before, "outcome": outcome, "echo": echo.content[0].text}))

asyncio.run(main())
"""


@pytest.mark.e2e
def test_a_runaway_reply_costs_no_more_memory_than_the_limit() -> None:
    """40 MB on one line with a 1 MB limit: the client's peak memory grows by far less than the
    reply (the SDK's reader held it whole, and more: 390 MB for a 100 MB reply)."""
    reply_chars = 40_000_000
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(MISBEHAVING_SERVER), str(reply_chars)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=scaled(300),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert "over the limit of 1,000,000; the reply was dropped" in figures["outcome"]
    assert figures["echo"] == "still here"
    assert figures["grew_kib"] * 1024 < reply_chars / 4, figures


@pytest.mark.e2e
def test_a_server_announcing_tool_changes_without_end_leaves_no_event_loop_noise(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path
) -> None:
    """Each turn's session closes on a pipe full of announcements nobody read: the pipe is read to
    its end as the server is ended, so no "Exception ignored ... Event loop is closed" follows."""
    llm_server.respond_with(lambda body, index: agent_reply("look"))
    server = REPO_ROOT / "tests" / "mcp_test_servers" / "announcing_server.py"
    config = write_mcp_config(tmp_path, {"announcing": {"command": sys.executable, "args": [str(server)]}})
    env = scripted_env(
        llm_server,
        tmp_path,
        game_file,
        **NO_LEARNING,
        ZORKGPT_MCP_ENABLED="true",
        ZORKGPT_MCP_CONFIG_FILE=str(config),
        ZORKGPT_MCP_SESSION_LIFETIME="turn",
    )
    proc = run_main(["--max-turns", "4", "--config", str(REPO_ROOT / "pyproject.toml")], env, tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Event loop is closed" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr[-3000:]
