"""One source, one server, both protocol revisions: the revision agreed, progress, cancellation.

Real servers (tests/mcp_test_servers/protocol_server.py, and the misbehaving one for a server
that speaks only the 2025 handshake) over stdio and streamable HTTP, through MCPManager.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness.timing import wait_until
from managers.mcp_manager import MCPManager
from session.redaction import Redactor
from tests.mcp_test_servers.helpers import (
    SERVERS_DIR,
    Scenario,
    capture_logger,
    http_server,
    make_config,
    write_mcp_config,
)
from tests.mcp_test_servers.protocol_server import NOTES_ENV

pytestmark = pytest.mark.e2e

PROTOCOL_SERVER = SERVERS_DIR / "protocol_server.py"
# How each way of reaching the protocol server is written in mcp_config.json, and the revision it gets.
REVISIONS = {
    "stdio-auto": ({"protocol": "auto"}, "2026-07-28"),
    "stdio-2025": ({"protocol": "2025-11-25"}, "2025-11-25"),
    "stdio-2026": ({"protocol": "2026-07-28"}, "2026-07-28"),
}


def protocol_scenario(tmp_path: Path, entry: dict[str, Any], **mcp: Any) -> Scenario:
    notes = tmp_path / "notes"
    notes.mkdir(exist_ok=True)
    server = {"command": "python", "args": [str(PROTOCOL_SERVER)], "env": {NOTES_ENV: str(notes)}, **entry}
    config_path = write_mcp_config(tmp_path / "cfg", {"p": server})
    mcp.setdefault("session_lifetime", "episode")
    logger, handler = capture_logger(f"test.mcp.source.{uuid.uuid4().hex}")
    return Scenario(MCPManager(make_config(config_path, tmp_path, **mcp), logger, redactor=Redactor()), handler)


def events(scenario: Scenario, kind: str) -> list[Any]:
    return [r for r in scenario.handler.records if getattr(r, "event_type", None) == kind]


@pytest.mark.parametrize("way", sorted(REVISIONS))
def test_the_agreed_revision_is_logged_per_server(tmp_path: Path, way: str) -> None:
    entry, revision = REVISIONS[way]
    scenario = protocol_scenario(tmp_path, entry)

    async def body(m: MCPManager) -> str:
        return (await m.call_tool("p__steady", {"steps": 1, "interval": 0})).content

    assert scenario.run(body) == "done after 1"
    (connect,) = events(scenario, "mcp_session_connect")
    assert connect.protocol_version == revision
    assert f"protocol {revision}" in connect.getMessage()


def test_a_server_that_speaks_only_2025_is_reached_in_auto_mode(tmp_path: Path) -> None:
    config_path = write_mcp_config(
        tmp_path / "cfg", {"old": {"command": "python", "args": [str(SERVERS_DIR / "raw_server.py")]}}
    )
    logger, handler = capture_logger(f"test.mcp.source.{uuid.uuid4().hex}")
    scenario = Scenario(
        MCPManager(make_config(config_path, tmp_path, session_lifetime="episode"), logger, redactor=Redactor()), handler
    )

    async def body(m: MCPManager) -> Any:
        return (await m.call_tool("old__echo", {"text": "hi"})).content

    assert scenario.run(body) == "hi"
    (connect,) = events(scenario, "mcp_session_connect")
    assert connect.protocol_version == "2025-11-25"


@pytest.mark.parametrize("way", sorted(REVISIONS))
def test_progress_keeps_a_long_call_alive_past_its_timeout_and_is_logged(tmp_path: Path, way: str) -> None:
    """The call runs ~2 s with a 1 s timeout: it ends only because each progress notification
    (one every 0.1 s, ten to the timeout) moves the timeout on. The log gets the first
    notification and then at most four a second."""
    scenario = protocol_scenario(tmp_path, REVISIONS[way][0], tool_call_timeout_seconds=1)

    async def body(m: MCPManager) -> Any:
        return (await m.call_tool("p__steady", {"steps": 20, "interval": 0.1})).content

    assert scenario.run(body) == "done after 20"
    progress = events(scenario, "mcp_tool_progress")
    assert progress, "no progress was logged"
    assert progress[0].progress == 1 and progress[0].total == 20 and progress[0].progress_message == "step 1"
    assert progress[0].tool_name == "p.steady" and progress[0].server_name == "p"
    assert len(progress) < 20  # not one line per notification
    assert progress[-1].notifications <= 20


@pytest.mark.parametrize("way", sorted(REVISIONS))
def test_a_call_cut_by_its_timeout_is_cancelled_at_the_server(tmp_path: Path, way: str) -> None:
    scenario = protocol_scenario(tmp_path, REVISIONS[way][0], tool_call_timeout_seconds=0.5)
    note = f"told-{uuid.uuid4().hex[:8]}"

    async def body(m: MCPManager) -> str:
        with pytest.raises(TimeoutError) as cut:
            await m.call_tool("p__stall", {"note": note})
        return str(cut.value)

    message = scenario.run(body, close=False)
    assert message == "MCP tool p.stall timed out after 0.5s without progress; the call was cancelled at the server"
    marker = tmp_path / "notes" / "cancelled"
    wait_until(marker.exists, 30)  # the server writes it when the cancellation reaches it
    scenario.manager.close()
    assert marker.read_text() == note


def test_the_turn_budget_cuts_a_call_that_keeps_reporting_progress(tmp_path: Path) -> None:
    scenario = protocol_scenario(tmp_path, {}, tool_call_timeout_seconds=30)

    async def body(m: MCPManager) -> str:
        with pytest.raises(TimeoutError) as cut:
            await m.call_tool("p__steady", {"steps": 10_000, "interval": 0.05}, deadline=time.monotonic() + 1.0)
        return str(cut.value)

    assert scenario.run(body) == (
        "MCP tool p.steady ran past the turn's time budget; the call was cancelled at the server"
    )


def test_over_http_the_revision_is_agreed_and_progress_flows(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    with http_server("tests.mcp_test_servers.protocol_server", env={NOTES_ENV: str(notes)}) as server:
        config_path = write_mcp_config(tmp_path / "cfg", {"p": {"url": server.url}})
        logger, handler = capture_logger(f"test.mcp.source.{uuid.uuid4().hex}")
        config = make_config(config_path, tmp_path, session_lifetime="episode", tool_call_timeout_seconds=1)
        scenario = Scenario(MCPManager(config, logger, redactor=Redactor()), handler)

        async def body(m: MCPManager) -> Any:
            return (await m.call_tool("p__steady", {"steps": 15, "interval": 0.1})).content

        assert scenario.run(body) == "done after 15"
    (connect,) = events(scenario, "mcp_session_connect")
    assert connect.protocol_version == "2026-07-28"
    assert events(scenario, "mcp_tool_progress")
