"""A result without ``resultType`` is complete, as the 2026-07-28 revision says.

A real server (tests/mcp_test_servers/raw_server.py) speaking 2026-07-28 leaves the field out of
its listing and every tool result; ZorkGPT lists its tools and calls them through MCPManager.
The HTTP side is judged by the conformance suite (``sep-2322-client-request-state``).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import ErrorData, JSONRPCError, JSONRPCRequest, JSONRPCResponse

from managers.mcp_manager import MCPManager
from mcp_client.results import with_result_type
from session.redaction import Redactor
from tests.mcp_test_servers.helpers import Scenario, capture_logger, make_config, raw_entry, write_mcp_config


def raw_scenario(tmp_path: Path, protocol: str) -> Scenario:
    config_path = write_mcp_config(tmp_path / "cfg", {"raw": {**raw_entry(), "protocol": protocol}})
    logger, handler = capture_logger(f"test.mcp.results.{uuid.uuid4().hex}")
    return Scenario(
        MCPManager(make_config(config_path, tmp_path, session_lifetime="episode"), logger, redactor=Redactor()), handler
    )


@pytest.mark.e2e
@pytest.mark.parametrize("protocol", ["2026-07-28", "2025-11-25"])
def test_a_server_that_leaves_result_type_out_is_listed_and_called(tmp_path: Path, protocol: str) -> None:
    scenario = raw_scenario(tmp_path, protocol)

    async def body(m: MCPManager) -> Any:
        return await m.call_tool("raw__echo", {"text": "the brass lantern"})

    result = scenario.run(body)
    assert (result.is_error, result.content) == (False, "the brass lantern")
    offered = sorted(schema["function"]["name"] for schema in scenario.schemas)
    assert offered == ["raw__echo", "raw__methods", "raw__pid"]
    (connect,) = [r for r in scenario.handler.records if getattr(r, "event_type", None) == "mcp_session_connect"]
    assert connect.protocol_version == protocol


def _response(result: dict[str, Any]) -> SessionMessage:
    return SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=7, result=result))


def test_only_a_result_without_the_field_is_changed() -> None:
    missing = with_result_type(_response({"content": []}))
    assert isinstance(missing, SessionMessage) and isinstance(missing.message, JSONRPCResponse)
    assert missing.message.result == {"content": [], "resultType": "complete"}
    asking = _response({"resultType": "input_required", "inputRequests": {}})
    assert with_result_type(asking) is asking
    request = SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=1, method="ping"))
    error = SessionMessage(JSONRPCError(jsonrpc="2.0", id=1, error=ErrorData(code=-1, message="no")))
    broken = ValueError("not JSON")
    assert [with_result_type(item) for item in (request, error, broken)] == [request, error, broken]
