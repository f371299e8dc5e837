"""The shipped thoughtbox server: its thought logic in-process, its protocol and logging over real stdio."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from harness.timing import scaled, wait_until_async
from managers.mcp_manager import MCPManager
from mcp_servers.thoughtbox_server import (
    MAX_HISTORY_CHARS,
    SessionBoxes,
    Thought,
    ThoughtBox,
    ThoughtError,
    format_thought,
    thought_logging_enabled,
)
from session.redaction import Redactor
from shared_utils.toolset import ToolCallResult
from tests.mcp_test_servers.helpers import (
    REPO_ROOT,
    assert_clean,
    async_hygiene,
    capture_logger,
    child_pids,
    http_server,
    make_config,
    wait_gone,
    write_mcp_config,
)


def thought(n: int, total: int = 3, more: bool = True, **extra: Any) -> Thought:
    return Thought(thought=f"step {n}", thought_number=n, total_thoughts=total, next_thought_needed=more, **extra)


# -- the thought logic ---------------------------------------------------------------------------


def test_history_grows_and_result_has_the_contract_fields() -> None:
    box = ThoughtBox()
    assert box.think(thought(1)) == {
        "thoughtNumber": 1,
        "totalThoughts": 3,
        "nextThoughtNeeded": True,
        "branches": [],
        "thoughtHistoryLength": 1,
    }
    result = box.think(thought(2, more=False))
    assert result["thoughtHistoryLength"] == 2 and result["nextThoughtNeeded"] is False
    assert [t.thought_number for t in box.history] == [1, 2]


def test_total_thoughts_is_raised_to_the_thought_number() -> None:
    box = ThoughtBox()
    assert box.think(thought(5, total=3))["totalThoughts"] == 5
    assert box.history[-1].total_thoughts == 5


def test_branches_are_recorded_by_id() -> None:
    box = ThoughtBox()
    box.think(thought(1))
    box.think(thought(2, branch_from_thought=1, branch_id="window"))
    box.think(thought(3, branch_from_thought=1, branch_id="chimney"))
    result = box.think(thought(4, branch_from_thought=1, branch_id="window"))
    assert result["branches"] == ["window", "chimney"]
    assert [t.thought_number for t in box.branches["window"]] == [2, 4]


def test_revision_is_recorded() -> None:
    box = ThoughtBox()
    box.think(thought(1))
    result = box.think(thought(2, is_revision=True, revises_thought=1))
    assert result["thoughtHistoryLength"] == 2
    assert box.history[-1].revises_thought == 1


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (thought(0), "thoughtNumber and totalThoughts must be >= 1"),
        (thought(1, total=0), "thoughtNumber and totalThoughts must be >= 1"),
        (Thought("   ", 1, 1, False), "thought is empty"),
        (thought(2, revises_thought=1), "set isRevision=true"),
        (thought(2, is_revision=True), "revisesThought is missing"),
        (thought(2, is_revision=True, revises_thought=2), "must name an earlier thought (1..1)"),
        (thought(2, branch_id="b"), "branchFromThought and branchId go together"),
        (thought(2, branch_from_thought=1), "branchFromThought and branchId go together"),
        (thought(2, branch_from_thought=1, branch_id=" "), "branchId is empty"),
        (thought(2, branch_from_thought=3, branch_id="b"), "branchFromThought=3 must name an earlier thought"),
    ],
)
def test_inconsistent_thoughts_are_rejected_with_the_fix(bad: Thought, message: str) -> None:
    box = ThoughtBox()
    with pytest.raises(ThoughtError) as caught:
        box.think(bad)
    assert message in str(caught.value)
    assert box.history == []  # a rejected thought is not recorded


def test_thoughts_are_logged_to_the_stream_in_order() -> None:
    stream = io.StringIO()
    box = ThoughtBox(log_stream=stream)
    box.think(thought(1))
    box.think(thought(2, is_revision=True, revises_thought=1))
    box.think(thought(3, branch_from_thought=1, branch_id="alt"))
    assert stream.getvalue().splitlines() == [
        "[thoughtbox] Thought 1/3: step 1",
        "[thoughtbox] Revision (of thought 1) 2/3: step 2",
        "[thoughtbox] Branch 'alt' (from thought 1) 3/3: step 3",
    ]
    assert format_thought(thought(7, total=9)) == "[thoughtbox] Thought 7/9: step 7"


def test_logged_thoughts_show_control_characters_as_escapes() -> None:
    hostile = Thought(thought="a\x1b[2Jb\x07\u202ec", thought_number=1, total_thoughts=1, next_thought_needed=False)
    assert format_thought(hostile) == "[thoughtbox] Thought 1/1: a\\x1b[2Jb\\x07\\u202ec"


@pytest.mark.parametrize(
    ("value", "enabled"),
    [(None, True), ("", True), ("false", True), ("1", True), ("true", False), ("TRUE", False), (" True ", False)],
)
def test_disable_thought_logging_flag(value: str | None, enabled: bool) -> None:
    env = {} if value is None else {"DISABLE_THOUGHT_LOGGING": value}
    assert thought_logging_enabled(env) is enabled


# -- over real stdio -------------------------------------------------------------------------------


def run_thoughtbox_turn(tmp_path: Path, env: dict[str, str], calls: list[dict[str, Any]]) -> tuple[list[Any], str]:
    """One turn against ``python -m mcp_servers.thoughtbox_server``; returns results and the server's stderr."""
    config_path = write_mcp_config(
        tmp_path,
        {
            "thoughtbox": {
                "command": "python",
                "args": ["-m", "mcp_servers.thoughtbox_server"],
                "env": env,
                "cwd": str(REPO_ROOT),
            }
        },
    )
    logger, handler = capture_logger(f"test.thoughtbox.{uuid.uuid4().hex}")
    manager = MCPManager(make_config(config_path, tmp_path, session_lifetime="episode"), logger, redactor=Redactor())
    before = child_pids()
    spawned: set[int] = set()

    async def turn() -> list[Any]:
        schemas = (await manager.open_turn(1)).schemas
        spawned.update(child_pids() - before - {manager.sweeper_pid})  # the server, not the sweeper
        return [schemas] + [await manager.call_tool("thoughtbox__think", call) for call in calls]

    with async_hygiene(handler) as report:
        try:
            results = asyncio.run(turn())
        finally:
            manager.close()
    assert_clean(report)
    assert len(spawned) == 1 and not wait_gone(spawned | {manager.sweeper_pid}, 3.0)
    stderr = "\n".join(r.getMessage() for r in handler.by_event("mcp_server_stderr"))
    return results, stderr


@pytest.mark.e2e
def test_real_server_logs_thoughts_to_stderr_and_validates(tmp_path: Path) -> None:
    calls = [
        {"thought": "The grating is locked.", "thoughtNumber": 1, "totalThoughts": 2, "nextThoughtNeeded": True},
        {
            "thought": "Maybe the skeleton key.",
            "thoughtNumber": 2,
            "totalThoughts": 2,
            "nextThoughtNeeded": True,
            "branchFromThought": 1,
            "branchId": "key",
        },
        {
            "thought": "Rethink.",
            "thoughtNumber": 3,
            "totalThoughts": 3,
            "nextThoughtNeeded": False,
            "revisesThought": 1,
        },
        {"thought": "Zero.", "thoughtNumber": 0, "totalThoughts": 3, "nextThoughtNeeded": False},
        {"thought": "No flag.", "thoughtNumber": "three", "totalThoughts": 3, "nextThoughtNeeded": False},
    ]
    (schemas, first, branched, revision_error, zero_error, type_error), stderr = run_thoughtbox_turn(
        tmp_path, {}, calls
    )

    assert [s["function"]["name"] for s in schemas] == ["thoughtbox__think"]
    assert first == ToolCallResult(
        content={
            "thoughtNumber": 1,
            "totalThoughts": 2,
            "nextThoughtNeeded": True,
            "branches": [],
            "thoughtHistoryLength": 1,
        }
    )
    assert branched.content["branches"] == ["key"] and branched.content["thoughtHistoryLength"] == 2
    assert revision_error.is_error and "set isRevision=true" in revision_error.error_message
    assert zero_error.is_error and "must be >= 1" in zero_error.error_message
    assert type_error.is_error and "thoughtNumber" in type_error.error_message
    assert "[thoughtbox] Thought 1/2: The grating is locked." in stderr
    assert "[thoughtbox] Branch 'key' (from thought 1) 2/2: Maybe the skeleton key." in stderr
    assert "Rethink." not in stderr  # rejected thoughts are not logged


@pytest.mark.e2e
def test_real_server_is_silent_with_thought_logging_disabled(tmp_path: Path) -> None:
    calls = [{"thought": "Quietly.", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False}]
    (_, result), stderr = run_thoughtbox_turn(tmp_path, {"DISABLE_THOUGHT_LOGGING": "true"}, calls)
    assert result.content["thoughtHistoryLength"] == 1
    assert "[thoughtbox]" not in stderr


# -- start cost -----------------------------------------------------------------------------------

# Run as the real stdio server, then tell (on stderr, as it ends) which rich modules were imported
# and which handlers the SDK's logging set-up left on the root logger.
_WATCHED_START = """
import json, logging, sys
import mcp_servers.thoughtbox_server as thoughtbox
end = thoughtbox.end_without_teardown
def report():
    rich = sorted(name for name in sys.modules if name == "rich" or name.startswith("rich."))
    handlers = [type(handler).__name__ for handler in logging.getLogger().handlers]
    print("WATCHED " + json.dumps({"rich": rich, "handlers": handlers}), file=sys.stderr)
    end()
thoughtbox.end_without_teardown = report
thoughtbox.main([])
"""
# The real stdio server, with an exit handler that says whether the interpreter's teardown ran.
_TEARDOWN_WATCHED = """
import atexit, runpy, sys
atexit.register(lambda: print("TEARDOWN RAN", file=sys.stderr, flush=True))
runpy.run_module("mcp_servers.thoughtbox_server", run_name="__main__")
"""
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
}


@pytest.mark.e2e
def test_a_stdio_start_imports_no_rich_and_the_sdk_logs_plainly() -> None:
    """The SDK's rich log handler cost about a tenth of every start (benchmarks/thoughtbox_startup.py):
    the server answers initialize without importing rich, and the SDK logs with a plain handler."""
    done = subprocess.run(
        [sys.executable, "-c", _WATCHED_START],
        cwd=REPO_ROOT,
        input=json.dumps(_INITIALIZE) + "\n",
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["result"]["serverInfo"]["name"] == "thoughtbox"
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("WATCHED ")]
    watched = json.loads(line.removeprefix("WATCHED "))
    assert watched == {"rich": [], "handlers": ["StreamHandler"]}


@pytest.mark.e2e
def test_a_stdio_session_that_ends_skips_the_teardown_but_flushes_what_it_wrote() -> None:
    """The client closing stdin ends the server at once (the teardown is a fifth of a fresh
    server's CPU, paid every turn-lifetime turn), after the last reply and thought log are out."""
    messages = [
        _INITIALIZE,
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "think", "arguments": THOUGHT}},
    ]
    server = subprocess.Popen(
        [sys.executable, "-c", _TEARDOWN_WATCHED],
        cwd=REPO_ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "DISABLE_THOUGHT_LOGGING": "false"},
    )
    try:
        assert server.stdin is not None and server.stdout is not None
        for message in messages:
            server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()
        replies = [json.loads(server.stdout.readline()) for _ in range(2)]  # then the session ends
        _, stderr = server.communicate(timeout=scaled(120))
    finally:
        server.kill()
    assert server.returncode == 0, stderr
    assert [reply["id"] for reply in replies] == [1, 2] and replies[1]["result"]["isError"] is False
    assert "[thoughtbox] Thought 1/1: The last thought." in stderr
    assert "TEARDOWN RAN" not in stderr


THOUGHT = {"thought": "The last thought.", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": False}


@pytest.mark.e2e
def test_rich_stays_importable_after_the_server_is_built() -> None:
    """Rich is kept out only while MCPServer is built: afterwards the process can import it, and
    where it was imported already, it is left as it was."""
    code = (
        "import sys\n"
        "from mcp_servers.thoughtbox_server import build_server\n"
        "build_server()\n"
        "import rich.console\n"
        "loaded = sys.modules['rich.console']\n"
        "build_server()\n"
        "assert sys.modules['rich.console'] is loaded\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=scaled(120), check=False
    )
    assert (done.returncode, done.stdout.strip()) == (0, "ok"), done.stderr


# -- bounds ---------------------------------------------------------------------------------------


def test_the_history_is_bounded_and_says_what_it_dropped() -> None:
    stream = io.StringIO()
    box = ThoughtBox(log_stream=stream, max_thoughts=3)
    box.think(thought(1))
    box.think(thought(2, branch_from_thought=1, branch_id="window"))
    assert "droppedThoughts" not in box.think(thought(3))
    result = box.think(thought(4))
    assert result["thoughtHistoryLength"] == 3 and result["droppedThoughts"] == 1
    result = box.think(thought(5))
    assert [t.thought_number for t in box.history] == [3, 4, 5] and result["droppedThoughts"] == 2
    assert result["branches"] == [] and box.branches == {}  # the branch's only thought went
    assert "dropped the oldest 1 (2 so far)" in stream.getvalue()
    # By size: the oldest go until the rest fits; the newest stays even when it alone is over.
    sized = ThoughtBox(max_chars=10)
    sized.think(Thought("abcd", 1, 3, True))
    sized.think(Thought("efgh", 2, 3, True))
    assert sized.think(Thought("ijkl", 3, 3, True))["thoughtHistoryLength"] == 2 and sized.chars == 8
    assert sized.think(Thought("x" * 50, 4, 4, False))["thoughtHistoryLength"] == 1 and sized.chars == 50


def test_sessions_are_freed_when_they_end_and_bounded_together() -> None:
    ends: dict[str, Any] = {}
    boxes = SessionBoxes(None, max_sessions=2, max_total_chars=20)
    for name in ("a", "b"):
        boxes.for_session(name, lambda end, name=name: ends.setdefault(name, end)).think(
            Thought("12345678", 1, 1, False)
        )
    assert boxes.status()["sessions"] == 2 and boxes.status()["characters"] == 16
    ends["a"]()  # session a ended
    assert boxes.status()["sessions"] == 1 and boxes.status()["thoughts"] == 1
    boxes.for_session("c", lambda end: None).think(Thought("x" * 15, 1, 1, False))
    boxes.trim()  # over 20 characters together: b, the least recently used, goes; c stays
    assert boxes.status()["sessions"] == 1 and boxes.status()["characters"] == 15


def test_a_long_thought_is_logged_as_one_short_line() -> None:
    long = Thought(
        thought="The troll\nblocks the way. " * 100_000, thought_number=2, total_thoughts=3, next_thought_needed=True
    )
    line = format_thought(long)
    assert line.startswith("[thoughtbox] Thought 2/3: The troll blocks the way.")
    assert len(line) < 200 and "\n" not in line and f"({len(long.thought)} characters)" in line


# -- over real HTTP ---------------------------------------------------------------------------------


async def read_status(session: ClientSession) -> dict[str, Any]:
    result = await session.read_resource("thoughtbox://status")
    return json.loads(result.contents[0].text)


def think_call(n: int, text: str) -> dict[str, Any]:
    return {"thought": text, "thoughtNumber": n, "totalThoughts": 3, "nextThoughtNeeded": True}


@pytest.mark.e2e
def test_over_http_a_closed_sessions_history_is_freed_and_each_is_bounded() -> None:
    big = "x" * (MAX_HISTORY_CHARS * 2 // 5)  # three of these are over one session's bound

    async def scenario(url: str) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
        async with streamable_http_client(url) as (read, write), ClientSession(read, write) as observer:
            await observer.initialize()
            async with streamable_http_client(url) as (read2, write2), ClientSession(read2, write2) as thinker:
                await thinker.initialize()
                results = []
                for n in (1, 2, 3):
                    result = await thinker.call_tool("think", think_call(n, big))
                    assert not result.is_error, result
                    results.append(result.structured_content)
                while_open = await read_status(observer)
            # The thinker closed its session (its client sent DELETE): its history goes with it. The
            # server frees it as the session's task winds down, just after answering the DELETE.
            after: dict[str, Any] = {}

            async def freed() -> bool:
                nonlocal after
                after = await read_status(observer)
                return not after["sessions"]

            await wait_until_async(freed, 30)
        return results, while_open, after

    with http_server("mcp_servers.thoughtbox_server", env={"DISABLE_THOUGHT_LOGGING": "true"}) as server:
        results, while_open, after = asyncio.run(scenario(server.url))
    assert [r["thoughtHistoryLength"] for r in results] == [1, 2, 2]
    assert "droppedThoughts" not in results[1] and results[2]["droppedThoughts"] == 1
    assert while_open["sessions"] == 1 and while_open["thoughts"] == 2
    assert while_open["characters"] == 2 * len(big)
    assert after["sessions"] == 0 and after["thoughts"] == 0 and after["characters"] == 0


@pytest.mark.e2e
def test_real_server_logs_a_long_thought_as_one_short_line(tmp_path: Path) -> None:
    text = "Try the window. " + "w" * 300_000
    (_, result), stderr = run_thoughtbox_turn(tmp_path, {}, [think_call(1, text)])
    assert result.content["thoughtHistoryLength"] == 1
    assert "[thoughtbox] Thought 1/3: Try the window." in stderr
    assert f"({len(text)} characters)" in stderr and "w" * 1000 not in stderr


# -- the two protocol revisions -------------------------------------------------------------------


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
def test_over_stdio_the_history_holds_in_both_revisions(mode: str) -> None:
    """One process serves one client: the 2026-07-28 revision has no session, and the history still
    grows from call to call (it was one thought long per call before: keyed by a per-request connection)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_servers.thoughtbox_server"],
        cwd=str(REPO_ROOT),
        env={"DISABLE_THOUGHT_LOGGING": "true"},
    )

    async def scenario() -> tuple[str, list[int]]:
        async with Client(params, mode=mode) as client:
            lengths = []
            for n in (1, 2, 3):
                result = await client.call_tool("think", think_call(n, f"step {n}"))
                lengths.append(result.structured_content["thoughtHistoryLength"])
            return client.protocol_version, lengths

    version, lengths = asyncio.run(scenario())
    assert version == ("2026-07-28" if mode != "legacy" else "2025-11-25")
    assert lengths == [1, 2, 3]


@pytest.mark.e2e
@pytest.mark.parametrize("mode", ["auto", "legacy"])  # auto asks the server, and speaks 2026-07-28 with it
def test_over_stdio_it_declares_no_change_notifications_so_no_listen_stream_is_opened(mode: str) -> None:
    """Its lists never change: at 2026-07-28 a server that serves ``subscriptions/listen`` says they can,
    and a client listening to each turn's fresh server would pay a round trip every turn for nothing."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_servers.thoughtbox_server"], cwd=str(REPO_ROOT)
    )

    async def scenario() -> Any:
        async with Client(params, mode=mode) as client:
            return client.server_capabilities

    capabilities = asyncio.run(scenario())
    assert capabilities.tools is not None and capabilities.tools.list_changed is False
    assert capabilities.resources is not None and capabilities.resources.list_changed is False
    assert not capabilities.resources.subscribe
    assert capabilities.prompts is None or capabilities.prompts.list_changed is False


@pytest.mark.e2e
def test_over_http_thoughtbox_offers_only_the_2025_revision_and_says_why() -> None:
    """Over HTTP a history belongs to a session, which 2026-07-28 does not have: a client in auto mode
    falls back to 2025-11-25 and keeps its history; one pinned to 2026-07-28 is told what to do."""

    async def scenario(url: str) -> tuple[str, list[int], Any]:
        async with Client(url, mode="auto") as auto:
            lengths = []
            for n in (1, 2):
                result = await auto.call_tool("think", think_call(n, f"step {n}"))
                lengths.append(result.structured_content["thoughtHistoryLength"])
            version = auto.protocol_version
        async with Client(url, mode="2026-07-28") as pinned:
            refused = await pinned.call_tool("think", think_call(1, "alone"))
        return version, lengths, refused

    with http_server("mcp_servers.thoughtbox_server", env={"DISABLE_THOUGHT_LOGGING": "true"}) as server:
        version, lengths, refused = asyncio.run(scenario(server.url))
    assert version == "2025-11-25"
    assert lengths == [1, 2]
    assert refused.is_error
    assert "2026-07-28 revision is stateless" in refused.content[0].text
    assert "Connect with the 2025-11-25 revision" in refused.content[0].text
